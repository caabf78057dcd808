// padconv_cli.kernels._native: the Python entry points of the native Conv.
//
// conv(x, w, b, y, strides, dilations, pads_begin, group, threads, isa[, x_kind]) computes ONNX
// Conv of the C-contiguous float32 or float64 arrays x (N, C, *in) and w (M, C/group, *k), with
// the optional bias b (M,), into the preallocated y (N, M, *out), without the GIL, on `threads`
// threads.  With x_kind "float16" or "bfloat16", x holds those 2-byte values (any 2-byte buffer
// format) and w, b, y are float32: X is read as float32 on the fly.  Shapes and attributes must
// already be validated (padconv's plan_conv): this module only re-checks what keeps its memory
// accesses inside the buffers.
//
// conv_scratch_bytes(x_shape, w_shape, y_shape, strides, dilations, pads_begin, group, threads,
// isa, itemsize[, x_kind]) is what such a call allocates besides x, w, b and y (packed W and
// every working thread's buffer), from plan_job, the sizing the run itself uses; the resource
// gate and the tiler ask it.  last_conv_bytes() is what the latest conv asked for.
//
// Stopping early: a running conv takes no new task once request_stop() was called (by the
// command's signal handler, from any thread), and, on the main thread, once a Python signal
// handler raised (stop.h).  The call then raises that exception, or RuntimeError (on a thread
// of a dask worker, say, where a KeyboardInterrupt would stop the worker's own machinery), and
// y is garbage.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "conv_job.h"
#include "pool.h"
#include "stop.h"

using padconv::Stop;

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

#ifndef _WIN32
#include <pthread.h>
#include <unistd.h>
#endif
#ifdef __linux__
#include <sched.h>
#endif

PyObject* padconv_py_qconv(PyObject*, PyObject* args);       // qconv_module.cpp
PyObject* padconv_py_requantize(PyObject*, PyObject* args);  // qconv_module.cpp
padconv::Pool& padconv_shared_pool();  // Conv's pool, lent to the integer Conv (below)
PyObject* padconv_py_interleave_phases(PyObject*, PyObject* args);  // conv_transpose_phases.cpp
PyObject* padconv_py_phase_convs(PyObject*, PyObject* args);        // conv_transpose_run.cpp
PyObject* padconv_py_phase_convs_bytes(PyObject*, PyObject* args);  // conv_transpose_run.cpp
PyObject* padconv_py_pad_into(PyObject*, PyObject* args);           // pad.cpp

namespace {

const long PANEL_BYTES = 512 * 1024;  // GEMM panel per thread: C/G * prod(k) * nb elements
const long ROW_BYTES = 256 * 1024;  // row kernel: padded input rows of one task
const long DW_BLOCK_BYTES = 128 * 1024;  // depthwise: padded input rows of one task
const long DW_TASK_OUTPUTS = 1 << 16;  // depthwise read in place: most outputs of one task
const long W_ROWS_BYTES = 256 * 1024;  // pointwise: W from which it is read in place
const long TASKS_PER_THREAD = 8;      // enough tasks that the threads finish together
const long PLANE_TASKS_PER_THREAD = 2;  // the plane kernel's (plan_plane says why)
const size_t KEPT_SCRATCH_BYTES = 4 << 20;  // per-thread scratch kept from one call to the next

padconv::Pool* the_pool = 0;  // started on first use; forgotten in a child after fork
std::atomic<long> stop_requests{0};  // request_stop() calls so far
unsigned long main_thread = 0;  // the thread Python runs signal handlers in

padconv::Pool& pool() {
    if (!the_pool) the_pool = new padconv::Pool();
    return *the_pool;
}

#ifndef _WIN32
void forget_pool_in_child() { the_pool = 0; }  // its threads did not follow the fork
#endif

thread_local KeptBuffer t_scratch;  // each thread's Conv scratch (conv_job.h)
// the calling thread's packed W, kept like the scratch: a W above the allocator's mmap
// threshold would otherwise be asked of the system, and its pages faulted in, on any call
// where the allocator had handed it back
thread_local KeptBuffer t_packed;

struct CpuFeatures {
    bool avx2 = false, avx512 = false, intel = false;
    CpuFeatures() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
        if (!padconv_have_x86_kernels) return;
        __builtin_cpu_init();
        unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
        const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
        avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
        avx512 = avx2 && __builtin_cpu_supports("avx512f");
        intel = __builtin_cpu_is("intel");
#endif
    }
};

const CpuFeatures& cpu_features() {
    static const CpuFeatures features;
    return features;
}

// Asked once per process: under a hypervisor every cpuid traps, about 10 us each time.
bool cpu_has(const std::string& isa) {
    const CpuFeatures& features = cpu_features();
    if (isa == "avx512") return features.avx512;
    if (isa == "avx2") return features.avx2;
    return isa == "generic";
}

const KernelSet* kernel_set(const std::string& isa) {
    if (isa == "avx512") return &padconv_avx512_kernels;
    if (isa == "avx2") return &padconv_avx2_kernels;
    if (isa == "generic") return &padconv_generic_kernels;
    return 0;
}

long round_up(long value, long step) { return (value + step - 1) / step * step; }
long ceil_div(long a, long b) { return (a + b - 1) / b; }

struct Buffers {
    Py_buffer x, w, b, y;
    bool have_x = false, have_w = false, have_b = false, have_y = false;
    ~Buffers() {
        if (have_x) PyBuffer_Release(&x);
        if (have_w) PyBuffer_Release(&w);
        if (have_b) PyBuffer_Release(&b);
        if (have_y) PyBuffer_Release(&y);
    }
};

// 4 for float32, 8 for float64, 0 for anything else.
int element_size(const Py_buffer& view) {
    if (!view.format) return 0;
    std::string format(view.format);
    if (!format.empty() && (format[0] == '@' || format[0] == '=')) format = format.substr(1);
    if (format == "f" && view.itemsize == 4) return 4;
    if (format == "d" && view.itemsize == 8) return 8;
    return 0;
}

bool int_list(PyObject* seq, int rank, long* out, const char* name, long minimum) {
    PyObject* fast = PySequence_Fast(seq, name);
    if (!fast) return false;
    bool ok = PySequence_Fast_GET_SIZE(fast) == rank;
    for (int i = 0; ok && i < rank; ++i) {
        out[i] = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
        if (out[i] == -1 && PyErr_Occurred()) ok = false;
        else if (out[i] < minimum) ok = false;
    }
    Py_DECREF(fast);
    if (!ok && !PyErr_Occurred())
        PyErr_Format(PyExc_ValueError, "%s needs %d values >= %ld", name, rank, minimum);
    return ok;
}

// The shapes of X (N, C, *in), W (M, C/G, *k) and Y (N, M, *out), each `ndim` long, and
// the group into the job; false (a ValueError set) when they do not fit together.
bool fill_shapes(ConvJob& job, int ndim, const long* x, const long* w, const long* y,
                 long group) {
    const int rank = ndim - 2;
    job.rank = rank;
    job.n = x[0];
    job.c = x[1];
    job.m = w[0];
    job.cg = w[1];
    job.group = group;
    if (group < 1 || job.cg * group != job.c || job.m % group != 0 || y[0] != job.n ||
        y[1] != job.m) {
        PyErr_SetString(PyExc_ValueError, "channels of x, w, y and group do not match");
        return false;
    }
    job.mg = job.m / group;
    job.in_plane = job.out_plane = job.taps = job.outer_out = job.outer_taps = 1;
    for (int i = 0; i < rank; ++i) {
        job.in[i] = x[i + 2];
        job.out[i] = y[i + 2];
        job.k[i] = w[i + 2];
        if (job.k[i] < 1) {
            PyErr_SetString(PyExc_ValueError, "kernel dimensions must be >= 1");
            return false;
        }
        job.in_plane *= job.in[i];
        job.out_plane *= job.out[i];
        job.taps *= job.k[i];
        if (i < rank - 1) {
            job.outer_out *= job.out[i];
            job.outer_taps *= job.k[i];
        }
    }
    job.ck = job.cg * job.taps;
    return true;
}

bool valid_rank(int x, int w, int y) {
    if (x < 3 || x - 2 > PADCONV_MAX_RANK || w != x || y != x) {
        PyErr_SetString(PyExc_ValueError, "x, w and y need one rank, 3 to 18");
        return false;
    }
    return true;
}

bool fill_job(ConvJob& job, const Buffers& bufs, long group) {
    const Py_buffer &x = bufs.x, &w = bufs.w, &y = bufs.y;
    if (!valid_rank(x.ndim, w.ndim, y.ndim)) return false;
    long xs[PADCONV_MAX_RANK + 2], ws[PADCONV_MAX_RANK + 2], ys[PADCONV_MAX_RANK + 2];
    for (int i = 0; i < x.ndim; ++i) {
        xs[i] = x.shape[i];
        ws[i] = w.shape[i];
        ys[i] = y.shape[i];
    }
    if (!fill_shapes(job, x.ndim, xs, ws, ys, group)) return false;
    if (bufs.have_b && (bufs.b.ndim != 1 || bufs.b.shape[0] != job.m)) {
        PyErr_SetString(PyExc_ValueError, "b must have shape (M,)");
        return false;
    }
    return true;
}

// A 1x1 kernel with stride 1 and no padding (the GEMM kernel reads X in place).
bool is_pointwise(const ConvJob& job) {
    for (int i = 0; i < job.rank; ++i)
        if (job.k[i] != 1 || job.s[i] != 1 || job.pb[i] != 0 || job.in[i] != job.out[i])
            return false;
    return true;
}

// Whether tasks of these costs, each taken in turn by whichever of `threads` threads is free
// first, leave some thread none or the busiest more than 1/10 above an even share.  (A thread
// left idle counts as uneven so that a job's threads at work, each with its buffer, never
// outnumber those of a larger job of the same kind: the tiled engine sizes its edge tiles'
// memory by its whole tiles'.)
bool uneven(const std::vector<long>& costs, long threads) {
    if ((long)costs.size() < threads) return true;
    std::vector<long> load(threads, 0);
    long total = 0;
    for (long cost : costs) {
        *std::min_element(load.begin(), load.end()) += cost;
        total += cost;
    }
    return *std::max_element(load.begin(), load.end()) * threads * 10 > total * 11;
}

// Blocks of the GEMM kernel: a panel near PANEL_BYTES, and enough blocks for the threads.
// Pointwise with X read in place, the threads split W's rows (each block of positions is one
// task per thread, on its share of the rows, and every thread packs the block's strips of X)
// when that share is at least 32 row blocks and the positions make fewer than 32 strips per
// thread or W is large (W_ROWS_BYTES); also, as before, when the positions make fewer than
// TASKS_PER_THREAD strips per thread.  Otherwise the threads share the positions and each
// packs only its own strips.  Measured with AVX2 (AMD EPYC, 2 threads, single calls of each
// way alternated): splitting the rows is 6-8% faster on 256 -> 512 and 128 -> 512 channels
// on 28 x 28 (33 strips), 4-5% on 64 -> 256 on 28 x 28 and on 32 x 32, 3% on 256 -> 512 on
// 56 x 56 (131 strips, W 512 KB); it is 2-4% slower on 64 -> 256 on 56 x 56 and 48 x 48 (W
// 64 KB) and 2-9% slower for 64 output channels (8 row blocks per thread: the packing is
// shared by too few rows), which the rule leaves to the positions.  (Measured in blocks of
// calls, 256 -> 512 on 28 x 28 once seemed 5-7% faster with the positions shared; measured
// both ways again, blocks and alternated single calls, the row split is 5-8% faster.)
// Any other job (other kernel sizes, a pointwise X read as float32 on the fly) splits W's
// rows into one range per thread when it has at least 4 row blocks per thread and its blocks
// of positions, fewer than 4 per thread, cannot be shared evenly (uneven), each task building
// its panel: ResNet's last 3x3s, 512 channels of 7 x 7 and 256 of 14 x 14 at stride 2, are a
// block of one register tile and one of 1 position, 27-29% faster so (AMD EPYC Zen 4, 2
// threads, blocks of calls of each build taking turns); 128 channels of 28 x 28 at stride 2,
// 4 blocks of a tile and one of 4 positions, are even (split, they were 4-5% slower).
void plan_gemm(ConvJob& job, const KernelSet& ks, int item, long threads) {
    const long nr = item == 4 ? ks.nr_f32 : ks.nr_f64;
    long nb = PANEL_BYTES / (job.ck * item) / nr * nr;
    nb = std::max(nr, std::min(nb, round_up(job.out_plane, nr)));
    const bool direct = is_pointwise(job) && job.x_type == X_SAME;
    const long strips = job.n * job.group * ceil_div(job.out_plane, nr);
    const long row_blocks = ceil_div(job.mg, ks.mr);
    const bool large_w = job.m * job.ck * item >= W_ROWS_BYTES;
    const bool few_strips = row_blocks >= 4 * threads && strips < TASKS_PER_THREAD * threads;
    const bool many_rows = row_blocks >= 32 * threads && (strips < 32 * threads || large_w);
    job.mparts = direct && threads > 1 && (few_strips || many_rows) ? threads : 1;
    // pointwise, X read in place, a large W: W read in place too; every strip of X reads the
    // same few rows of W from near the core, and packing W (512 x 256) took 30 us of a 1 ms
    // Conv.  A smaller W is packed: read in place, the tiles ran slower on its short rows
    // (measured: 128 x 64, a U-Net's stacked ConvTranspose phases, 8% slower)
    job.w_rows = direct && large_w;
    const long wanted =
        ceil_div(TASKS_PER_THREAD * threads, job.n * job.group * job.mparts);
    if (threads > 1 && wanted > 1)
        nb = std::min(nb, std::max(nr, round_up(ceil_div(job.out_plane, wanted), nr)));
    job.nb = nb;
    job.blocks = ceil_div(job.out_plane, nb);
    const long position_tasks = job.n * job.group * job.blocks;
    if (!direct && threads > 1 && row_blocks >= 4 * threads && position_tasks < 4 * threads) {
        // a block's positions, those of a partial tile rounded up to 64 bytes' worth (about
        // the vectors its tile computes)
        std::vector<long> costs;
        for (long t = 0; t < position_tasks; ++t) {
            const long block = t % job.blocks;
            costs.push_back(round_up(std::min(nb, job.out_plane - block * nb), 64 / item));
        }
        if (uneven(costs, threads)) job.mparts = threads;
    }
}

// The row kernel when it applies (C/G > 1, not pointwise, at most PADCONV_DW_TAPS taps on the
// last axis, output rows filling the register tiles): tasks of `nb` positions of `rows` output rows, whose padded input rows (C/G *
// outer taps * stride of them per output row, row_len elements each) stay near ROW_BYTES,
// with enough tasks for the threads.  False when it does not apply.
bool plan_rows(ConvJob& job, const KernelSet& ks, int item, long threads) {
    const int last = job.rank - 1;
    const bool pointwise = is_pointwise(job);
    const long nr = item == 4 ? ks.nr_f32 : ks.nr_f64;
    const long L = job.out[last], per_row = job.cg * job.outer_taps * job.s[last];
    // register tiles never span two output rows: rows that leave part of a tile idle
    // (measured: 56 or 112 positions with 32-position tiles, 10-25% slower) take the panel
    if (pointwise || job.k[last] > PADCONV_DW_TAPS || (round_up(L, nr) - L) * 32 > L)
        return false;
    const long reach = (job.k[last] - 1) * job.d[last] / job.s[last];
    long nb = std::max(nr, ROW_BYTES / (per_row * item) / nr * nr);
    nb = std::min(nb, round_up(L, nr));
    const long row_bytes = per_row * round_up(reach + nb, 64 / item) * item;
    long rows = std::max(1L, std::min(job.outer_out, ROW_BYTES / row_bytes));
    const long images = job.n * job.group;
    const long wanted = ceil_div(TASKS_PER_THREAD * threads, images);  // tasks per image
    if (threads > 1 && wanted > 1) {
        rows = std::min(rows, std::max(1L, ceil_div(job.outer_out, wanted)));
        const long row_tasks = ceil_div(job.outer_out, rows);
        if (row_tasks < wanted)
            nb = std::min(nb, std::max(nr, round_up(ceil_div(L, ceil_div(wanted, row_tasks)), nr)));
    }
    job.row_kernel = 1;
    job.nb = nb;
    job.blocks = ceil_div(L, nb);
    job.rows = rows;
    job.row_blocks = ceil_div(job.outer_out, rows);
    job.row_len = round_up(reach + nb, 64 / item);  // every slot 64-byte aligned
    return true;
}

// Ranges of W's row blocks the plane kernel's tasks split into: 1, unless the positions make
// fewer than 4 tasks per thread that cannot be shared evenly (uneven), when each range of
// position tasks is split over W's rows too, up to TASKS_PER_THREAD tasks per thread with at
// least 2 row blocks each.  A small plane with many channels, 256 of 14 x 14, made 5 tasks of
// one tile on 2 threads, one thread doing 3; split so, it is 11-12% faster (AMD EPYC Zen 4,
// blocks of calls of each build taking turns), each task copying its positions' plane again
// (a small part of its sums).
long plane_row_parts(const ConvJob& job, long units, const KernelSet& ks, long threads) {
    const long position_tasks = job.n * job.group * job.blocks;
    if (threads <= 1 || position_tasks >= 4 * threads) return 1;
    std::vector<long> costs;  // register tiles, shared out as plane_task_units does
    for (long t = 0; t < position_tasks; ++t) {
        const long block = t % job.blocks;
        costs.push_back((block + 1) * units / job.blocks - block * units / job.blocks);
    }
    if (!uneven(costs, threads)) return 1;
    const long row_blocks = ceil_div(job.mg, ks.mr);
    const long parts = ceil_div(TASKS_PER_THREAD * threads, position_tasks);
    return std::max(1L, std::min(parts, row_blocks / 2));
}

// The plane kernel with channel-lane tiles (plane_kernel 2; conv_impl.h, lanes_plane_task)
// when the set has them and the job is 2-D, C/G > 1, not pointwise, with at most
// PADCONV_PLANE_TAPS taps, output rows shorter than a position tile (of any length with a set
// that has lanes_long_rows, on an Intel CPU: below), at most 1/10 more output
// channels computed than by the position tiles (vectors of channels against row blocks), and
// a slab of every channel's copy within the panel.  Tasks are as many whole output rows as
// fit the panel, each on a range of the blocks of lane_rows channels (mparts): one range per
// thread, the rows split only when there are too few blocks or images for the threads.  Each
// task copies its rows' plane: on 2 threads a range per thread was 8-25% faster than 2 or 4
// per thread.  Measured against the position tiles (AMD EPYC Zen 4, AVX-512, blocks of calls
// of each taking turns in one process), 2 threads: 256 ch 14x14 23% faster, 256 -> 512
// stride 2 from 14x14 19%, 128 -> 256 stride 2 from 28x28 11%, 128 ch 28x28 8%, 8 images of
// 128 ch 14x14 16%, 64 ch 40x40 7%, 16 ch 32x32 28%, a 3-channel 7x7 stride 2 to 32x32 9%;
// one thread 5-22% faster but the 3-channel 7x7 (2% slower); float64 (rows under 24) 8-23%
// faster.  With rows of 7 or fewer two rows a tile: 512 ch 7x7 46% faster (21% on one
// thread), 512 -> 512 stride 2 from 14x14 43%, 768 -> 256 on 7x7 57%, 1024 ch 7x7 8% (its
// blocks of W, 1.2 MB, leave L2).  Rows of 48 or more stay on the position tiles on that
// CPU: with rows of 56 (ResNet's 64 ch) these were 4% slower, with 112 2%.  On an Intel Xeon
// with AVX-512 (AMX, 2 cores; builds taking turns in fresh processes, 2 threads), W loaded
// in whole vectors (pack_w_lanes), rows of any length: ResNet's 3x3 (64 ch 56x56) 10.6%
// faster, 8 images of it 3.8%, 128 ch 56x56 8%, the dilated 32 ch 64x64 13%, 32 ch 64x64 7%,
// the 3-channel 7x7 stride-2 stem (rows of 112) 6%, 64 ch 112x112 2%, 64 -> 48 and 96 on
// 60x60 level, 16 ch 100x100 3% slower.  There, on long rows, the blocks of channels are
// split between threads only into equal ranges, the rows otherwise: 32 -> 96 ch on 60x60 ran
// 31% slower on ranges of one block and two.  AVX2's tiles take no long rows (on the same
// Xeon, with AVX2: ResNet's 3x3 2% slower, 128 ch 28x28 9% faster, the dilated case 14%).
// AVX2's tiles, 16 channels x 6 positions (rows under 24 float32, 12 float64), against its
// position tiles (the Zen 4), 2 threads: 256
// ch 14x14 13% faster, 512 ch 7x7 23%, 256 -> 512 stride 2 from 14x14 14%, 768 -> 256 on 7x7
// 30%, 8 images of 128 ch 14x14 5%; float64 512 ch 7x7 43%.  With one image-group and one
// block of rows, every block of W is read by one task, which packs it itself as it reaches
// it (w_rows): the blocks packed for all before the run went out to L3 and came back (512 ch
// 7x7, W 9.4 MB: 3-4% faster so on 2 threads, 6% on one; 256 ch 14x14 1%).
bool plan_lanes(ConvJob& job, const KernelSet& ks, int item, long threads) {
    const long lane_rows = item == 4 ? ks.lane_rows_f32 : ks.lane_rows_f64;
    const long nr = item == 4 ? ks.nr_f32 : ks.nr_f64;
    if (!lane_rows || job.rank != 2 || is_pointwise(job) || job.taps > PADCONV_PLANE_TAPS ||
        job.cg < 2 || (job.out[1] >= nr && !(ks.lanes_long_rows && cpu_features().intel)) ||
        round_up(job.mg, lane_rows / 2) * 10 > plane_tile_rows(job.mg, ks.mr) * 11)
        return false;
    const long rows = job.out[0], phases = job.s[0] * job.s[1];
    const long slab = job.out[1] + (job.k[1] - 1) * job.d[1] / job.s[1];
    const long reach0 = (job.k[0] - 1) * job.d[0] / job.s[0];
    const long rows_fit = std::min(rows, PANEL_BYTES / (job.cg * phases * slab * item) - reach0);
    if (rows_fit < 1) return false;
    const long images = job.n * job.group, fewest = ceil_div(rows, rows_fit);
    long mparts = std::max(
        1L, std::min(ceil_div(threads, images * fewest), ceil_div(job.mg, lane_rows)));
    if (job.out[1] >= nr && (job.mg % lane_rows || job.mg / lane_rows % mparts))
        mparts = 1;  // rows split rather than unequal ranges of blocks
    const long blocks = std::min(rows, std::max(fewest, ceil_div(threads, images * mparts)));
    const long per_task = ceil_div(rows, blocks);
    job.plane_kernel = 2;
    job.plane_width = slab;
    job.plane_rows = reach0 + per_task;
    job.plane_end = job.out_plane;
    job.plane_aligned = 1;
    job.nb = per_task * job.out[1];
    job.blocks = blocks;
    job.mparts = mparts;
    job.w_rows = images * blocks == 1;
    return true;
}

// The plane kernel when it applies (rank >= 2, C/G > 1, not pointwise, at most
// PADCONV_PLANE_TAPS taps, at most 1/8 of the virtual positions dropped, strided only with
// C/G * prod(strides) <= 16): tasks of `nb`
// virtual positions whose copy (every stride phase's slabs) fits in the panel the GEMM kernel
// would hold (so the working memory stays within that of plan_gemm), with
// PLANE_TASKS_PER_THREAD tasks per thread (or fewer, larger ones: one per image-group when
// there are enough of them).  Each task copies the rows its taps reach beyond its own (a
// 3x3's two more; a 3-D 3x3x3's two more planes), and each sweeps W's row blocks anew: 8
// tasks a thread, the last image-group's ending in a tail of tasks halving in size, cost
// more than they balanced.  Measured against that (Intel Xeon, 2 threads, builds taking
// turns in fresh processes), AVX2: ResNet's 3x3 5.5% faster, the dilated 3x3 on 32 channels
// of 64 x 64 8%, 16 channels of 100 x 100 8.5%, 64 of 28 x 28 4.4%, the stem 1.7%, a 3-D
// 3x3x3 on 8 channels of 32^3 11% (17% with AVX-512); 8 tasks a thread with no tail got
// about half of that, one task a thread about as much (on one thread, 16 tasks of ResNet's
// 3x3 instead of 1 took 3-5% longer).  2-D rows of whole register tiles take the real
// positions only, each tile inside a row; with the set's split_rows so do rows of at least
// one tile, a tile running on into the next row (rows of whole tiles measured with AVX2, 2
// threads, each way in turn: the 7x7 stride-2 stem 4-6% faster, a 3x3 dilation 2 on 32
// channels of 64 x 64 10%, 3x3s on 64 channels of 32 x 32 and 128 of 16 x 16 9% and 7%, 64 of
// 112 x 112 4%, a 5x5 on 32 channels of 48 x 48 10%).  False when it does not apply.
bool plan_plane(ConvJob& job, const KernelSet& ks, int item, long threads) {
    if (job.rank < 2 || is_pointwise(job) || job.taps > PADCONV_PLANE_TAPS) return false;
    // S = prod(P[1:]), prod(out[1:]), the inner taps' reach, the last real position of a slab
    long slab = 1, real = 1, reach = 0, last_real = 0, phases = job.s[0];
    for (int i = job.rank - 1; i >= 1; --i) {
        const long shift = (job.k[i] - 1) * job.d[i] / job.s[i];
        reach += shift * slab;
        last_real += (job.out[i] - 1) * slab;
        slab *= job.out[i] + shift;
        real *= job.out[i];
        phases *= job.s[i];
    }
    if ((slab - real) * 8 > slab) return false;
    // strided, with many channels, the phase copies take more than the panel (measured: a
    // 3x3 stride-2 on 64 channels, rows of 28, 8-20% slower with AVX2; the 7x7 stride-2
    // stem on 3 channels 3% faster with AVX-512)
    if (phases > 1 && job.cg * phases > 16) return false;
    const long nr = item == 4 ? ks.nr_f32 : ks.nr_f64;
    // 2-D rows of whole register tiles: the tiles start at the rows' starts and skip the
    // padded columns (no positions computed in vain, no tile stored in pieces); with the set's
    // split_rows, rows of at least one tile: a tile runs on from one row into the next, its
    // vectors from there on reading past the padded columns (conv_impl.h, RowSplit; measured
    // on an AMD EPYC Zen 4, single calls alternated: AVX-512's 8 x 48 tiles on ResNet's rows
    // of 56 5% faster, batch 8 3%, the 7x7 stride-2 stem 2.5%, a 3x3 dilation 2 on rows of 64
    // 4-5%; AVX2's 6 x 16 tiles 2% on ResNet's 3x3, whose stem and dilated 3x3 rows are
    // whole tiles already)
    const bool aligned =
        job.rank == 2 && (job.out[1] % nr == 0 || (ks.split_rows && job.out[1] >= nr));
    const long row = job.out[1];
    const long virtual_end = aligned ? job.out_plane : (job.out[0] - 1) * slab + last_real + 1;
    const long panel_positions = std::min(std::max(nr, PANEL_BYTES / (job.ck * item)),
                                          job.out_plane);
    const long budget = job.ck * round_up(panel_positions, nr) * item;
    const long reach0 = (job.k[0] - 1) * job.d[0] / job.s[0];
    // slabs read by nb virtual positions starting anywhere in a slab (aligned: nb positions
    // starting anywhere in an output row, each tile's reach inside its own slab; a partial last
    // tile of the plane reads on into the slab after the last output row, which this counts:
    // nb covers the tile's whole nr positions, the tasks being whole tiles)
    auto slabs_for = [&](long nb) {
        return reach0 + (aligned ? ceil_div(row + nb - 1, row)
                                 : ceil_div(slab + nb - 1 + reach, slab));
    };
    auto bytes_for = [&](long nb) { return job.cg * phases * slabs_for(nb) * slab * item; };
    if (bytes_for(nr) > budget) return false;
    long nb = round_up(virtual_end, nr);
    const long wanted = ceil_div(PLANE_TASKS_PER_THREAD * threads, job.n * job.group);
    if (threads > 1 && wanted > 1)
        nb = std::min(nb, std::max(nr, round_up(ceil_div(virtual_end, wanted), nr)));
    const long slabs_fit = budget / (job.cg * phases * slab * item) - reach0 - 1;
    const long fit = aligned ? slabs_fit * row + 1 : slabs_fit * slab - reach + 1;
    nb = std::max(nr, std::min(nb, fit / nr * nr));  // about the most nb whose copy fits
    while (nb > nr && bytes_for(nb) > budget) nb -= nr;
    long blocks = ceil_div(virtual_end, nb);
    // as many tasks on every thread, of one size within a register tile (15 tasks, the last
    // a half, left one thread 4% more on ResNet's 3x3)
    const long images = job.n * job.group;
    while (threads > 1 && images * blocks % threads != 0 && blocks * nr < virtual_end) ++blocks;
    nb = ceil_div(ceil_div(virtual_end, nr), blocks) * nr;  // the largest block
    job.plane_kernel = 1;
    job.plane_width = slab;
    job.plane_rows = slabs_for(nb);
    job.plane_end = virtual_end;
    job.plane_aligned = aligned;
    job.nb = nb;
    job.blocks = blocks;
    job.mparts = plane_row_parts(job, ceil_div(virtual_end, nr), ks, threads);
    return true;
}

// Blocks of the depthwise kernel: output rows, and the length of one padded-row phase.
void plan_depthwise(ConvJob& job, const KernelSet& ks, int item, long threads) {
    const int last = job.rank - 1;
    const long width = item == 4 ? ks.dw_f32 : ks.dw_f64;
    const long reach = (job.k[last] - 1) * job.d[last] / job.s[last];
    job.row_len = reach + round_up(job.out[last], width);
    job.dw_slots = job.outer_taps <= PADCONV_DW_CACHED_TAPS ? 2 * job.outer_taps + 1
                                                            : job.outer_taps;
    job.rows = job.outer_out;
    const long wanted = ceil_div(TASKS_PER_THREAD * threads, job.n * job.group);
    if (threads > 1 && wanted > 1) job.rows = std::max(1L, ceil_div(job.outer_out, wanted));
    // 2-D with stride 1 along rows: X of the sums' type is read in place (no buffer); a
    // float16/bfloat16 X has a task's padded input rows widened once (at most about
    // DW_BLOCK_BYTES, one output row's at least)
    job.dw_block = DW_ROWS;
    if (job.rank == 2 && job.s[1] == 1)
        job.dw_block = job.x_type == X_SAME && job.k[1] <= PADCONV_DW_TAPS ? DW_DIRECT : DW_BLOCK;
    if (job.dw_block == DW_BLOCK) {
        const long reach = (job.k[0] - 1) * job.d[0] + 1;  // input rows under one output row
        const long fit = (DW_BLOCK_BYTES / item / job.row_len - reach) / job.s[0] + 1;
        job.rows = std::max(1L, std::min(job.rows, fit));
    }
    if (job.dw_block == DW_DIRECT)  // short tasks: a stop request is seen soon
        job.rows = std::max(1L, std::min(job.rows, DW_TASK_OUTPUTS / job.out[1]));
    job.row_blocks = ceil_div(job.outer_out, job.rows);
}

// Elements of the depthwise kernel's per-thread buffer.
long depthwise_scratch(const ConvJob& job) {
    if (job.dw_block == DW_DIRECT) return 0;
    if (job.dw_block == DW_BLOCK)
        return ((job.rows - 1) * job.s[0] + (job.k[0] - 1) * job.d[0] + 1) * job.row_len;
    return job.dw_slots * job.s[job.rank - 1] * job.row_len;
}

// W's row blocks packed for the position tiles, or for the channel-lane tiles when `lanes`.
bool pack(const KernelSet& ks, bool lanes, const float* w, long m, long ck, float* p) {
    return (lanes ? ks.pack_lanes_f32 : ks.pack_w_f32)(w, m, ck, p);
}
bool pack(const KernelSet& ks, bool lanes, const double* w, long m, long ck, double* p) {
    return (lanes ? ks.pack_lanes_f64 : ks.pack_w_f64)(w, m, ck, p);
}

// Rows of a packed block of W for the job's kernel: a vector's for the channel-lane tiles
// (half their lane_rows), else the register tile's.
long packed_block_rows(const ConvJob& job, const KernelSet& ks, int item) {
    if (job.plane_kernel != 2) return ks.mr;
    return (item == 4 ? ks.lane_rows_f32 : ks.lane_rows_f64) / 2;
}

// What one conv allocates besides X, W, B and Y: W packed in row blocks of the register tile
// (GEMM kernels; packed_elems), and one buffer per thread at work (scratch_elems each); and
// its tasks, shared out in a range per thread (TaskRanges).
struct Sizing {
    bool depthwise = false;
    long tasks = 0, packed_elems = 0, scratch_elems = 0;
};

const long SHARED_PACK_BYTES = 64 * 1024;  // packed W from which the threads share packing

// W packed by the threads of the run, a row block of the register tile per share, before
// their first task: packing a large W on the calling thread alone held the helpers idle
// (512 x 256 weights: about 30 us of a 1 ms pointwise Conv).  A small W is packed by the
// calling thread before the run (execute), so that no thread waits on a helper the system
// took off its core in the middle of a share.
template <typename T>
struct Packing {
    const T* w = 0;  // W as given; null: nothing to pack
    T* packed = 0;
    long mg = 0, ck = 0, mr = 1, blocks = 0, shares = 0;  // blocks per group, shares in all
    bool lanes = false;  // blocks for the channel-lane tiles (pack)
    std::atomic<long> next{0}, done{0};
    std::atomic<bool> finite{true};  // no share found an infinite or NaN weight

    // Packs shares while any is left, then waits for those other threads are packing.
    void take_part(const KernelSet& ks) {
        for (long share = next++; share < shares; share = next++) {
            const long g = share / blocks, b = share % blocks;
            if (!pack(ks, lanes, w + (g * mg + b * mr) * ck, std::min(mr, mg - b * mr), ck,
                      packed + (g * blocks + b) * mr * ck))
                finite.store(false, std::memory_order_relaxed);
            done.fetch_add(1, std::memory_order_release);
        }
        for (long i = 1; done.load(std::memory_order_acquire) < shares; ++i) {
            // a packer the system took off its core gets this one after a while
            if (i % 1024 == 0) std::this_thread::yield();
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
    }
};

template <typename T>
struct Run {
    const ConvJob& job;
    const KernelSet& ks;
    bool depthwise;
    padconv::TaskRanges tasks;
    long scratch_elems;
    Stop& stop;
    Packing<T>& packing;
    std::atomic<bool> failed{false};
    std::atomic<long> asked{0};  // bytes the threads' buffers were asked for, alignment included

    Run(const ConvJob& j, const KernelSet& k, const Sizing& size, long threads, Stop& st,
        Packing<T>& p)
        : job(j), ks(k), depthwise(size.depthwise), tasks(size.tasks, threads),
          scratch_elems(size.scratch_elems), stop(st), packing(p) {}

    void work(long slot) {
        packing.take_part(ks);
        T* scratch = static_cast<T*>(t_scratch.at_least(scratch_elems * sizeof(T)));
        asked += long(scratch_elems * sizeof(T)) + 64;
        if (!scratch) {
            failed = true;
            return;
        }
        long step = 0;
        for (long task = tasks.take(slot, step); task >= 0 && !failed && !stop.now();
             task = tasks.take(slot, step))
            run_task(task, scratch);
        t_scratch.trim(KEPT_SCRATCH_BYTES);
    }

    static void work_of(void* run, long slot) { static_cast<Run*>(run)->work(slot); }

    void run_task(long task, T* scratch);
};

template <>
void Run<float>::run_task(long task, float* scratch) {
    if (depthwise) ks.depthwise_task_x[job.x_type](job, task, scratch);
    else ks.gemm_task_x[job.x_type](job, task, scratch);
}

template <>
void Run<double>::run_task(long task, double* scratch) {
    if (depthwise) ks.depthwise_task_f64(job, task, scratch);
    else ks.gemm_task_f64(job, task, scratch);
}

// Plans the job on `threads` threads for elements of `item` bytes -- picks the kernel and
// fills its fields -- and returns what the run allocates: the one place the sizes are worked
// out, for the run (execute) and for the query (conv_scratch_bytes).  `rows_when_wasteful`:
// the row kernel takes 2-D jobs whose plane drops many positions (below).
Sizing plan_job(ConvJob& job, const KernelSet& ks, int item, long threads,
                bool rows_when_wasteful = true, bool lanes = true) {
    Sizing size;
    if (job.ck == 0 || job.n == 0 || job.out_plane == 0 || job.m == 0) return size;  // no tasks
    size.depthwise = job.cg == 1;
    if (size.depthwise) {
        plan_depthwise(job, ks, item, threads);
        size.tasks = job.n * job.group * job.row_blocks;
        size.scratch_elems = depthwise_scratch(job);
        return size;
    }
    job.row_kernel = job.plane_kernel = 0;
    job.mparts = 1;
    job.w_rows = 0;
    // the plane kernel copies every input element about once, the row kernel once per
    // outer tap and the GEMM kernel's panel once per tap: the plane kernel first, but for
    // 2-D rows where it drops more than 1/20 of its positions (none when its tiles are
    // aligned to the rows) and the row kernel applies
    // (measured: a dilated 3x3 on rows of 64 is 3% faster by rows, a GAN generator's 2x2
    // ConvTranspose phases on rows of 32 10% faster on the plane)
    const bool lane_tiles = lanes && plan_lanes(job, ks, item, threads);
    bool plane_kernel = lane_tiles || plan_plane(job, ks, item, threads);
    const bool wasteful = plane_kernel && !lane_tiles && rows_when_wasteful && job.rank == 2 &&
                          !job.plane_aligned &&
                          (job.plane_width - job.out[1]) * 20 > job.plane_width;
    const bool rows_kernel = (!plane_kernel || wasteful) && plan_rows(job, ks, item, threads);
    if (rows_kernel) {
        plane_kernel = false;
        job.plane_kernel = 0;
        job.mparts = 1;
    }
    if (!rows_kernel && !plane_kernel) plan_gemm(job, ks, item, threads);
    const long nr = item == 4 ? ks.nr_f32 : ks.nr_f64;
    const long block_rows = packed_block_rows(job, ks, item);
    size.packed_elems =
        job.w_rows ? 0 : job.group * ceil_div(job.mg, block_rows) * block_rows * job.ck;
    size.tasks = job.n * job.group * job.blocks * job.mparts;
    const int last = job.rank - 1;
    if (rows_kernel) {
        size.tasks *= job.row_blocks;
        size.scratch_elems = job.rows * job.cg * job.outer_taps * job.s[last] * job.row_len;
    } else if (plane_kernel) {
        size.scratch_elems = job.cg * plane_channel(job);
        if (job.w_rows)  // the channel-lane task's block of W after its plane
            size.scratch_elems = lanes_plane_elems(job) +
                                 (item == 4 ? ks.lane_rows_f32 : ks.lane_rows_f64) * job.ck;
    } else {  // the panel, the stride phases of one input row (build_panel), one packed strip
        size.scratch_elems =
            round_up(job.ck * round_up(job.nb, nr) +
                         job.s[last] * (job.out[last] + (job.k[last] - 1) * job.d[last]),
                     16) +
            job.ck * nr;  // the strip 64-byte aligned after the rest
    }
    job.part_tasks = size.tasks / job.mparts;
    return size;
}

// Plans the job (plan_job) with *ks, or with ks->plane_set when it has one and the plane kernel
// takes the job there with its tiles unrolled, unless that set's tiles compute more than 10%
// more rows of W than *ks's; ks is left on the set the job runs with.  Measured with AVX2,
// each set in turn in one process: ResNet's 3x3 (64 output channels) 8.5% faster on the 6 x 2
// tiles on one thread and 4-7% on two, 7-9% with 8 images; 40 and 32 output channels 16% and
// 10% faster, 20 (22 rows against 20) level, 8 (10 against 8) 15% slower; the row and GEMM
// kernels and the plane kernel's general tile no faster per row of W.  With the stride-2 tile
// unrolled too, the 7x7 stride-2 stem 10% faster; with the dilation-2 tile, a 3x3 dilation 2
// on 32 channels of 64 x 64 14% (2 threads) to 21% (1) faster.  On these tiles the plane
// kernel also beats the row kernel where it drops positions: on that dilated 3x3 (rows of 64
// in planes of 68) by 14%, on a 3x3 over 32 x 32 by 0-10%.
Sizing plan_run(ConvJob& job, const KernelSet*& ks, int item, long threads) {
    const Sizing size = plan_job(job, *ks, item, threads);
    if (size.depthwise || job.plane_kernel == 2 || !plane_set_may_take(job, *ks)) return size;
    ConvJob planned = job;
    const Sizing plane_size = plan_job(planned, *ks->plane_set, item, threads, false);
    if (!planned.plane_kernel) return size;
    job = planned;
    ks = ks->plane_set;
    return plane_size;
}

// The threads a run of `size` puts to work out of `threads` asked (the caller's included).
long working_threads(const Sizing& size, long threads) {
    return std::max(1L, std::min(threads, size.tasks));
}

// Bytes a run of `size` allocates on `threads` threads: packed W and, per working thread,
// its buffer, each with the 64 bytes that align it (KeptBuffer::at_least).
long sizing_bytes(const Sizing& size, int item, long threads) {
    if (size.tasks == 0) return 0;
    return (size.packed_elems ? size.packed_elems * item + 64 : 0) +
           working_threads(size, threads) * (size.scratch_elems * item + 64);
}

std::atomic<long> last_run_bytes{0};  // what the latest run asked for (last_conv_bytes())

// Runs the job on `threads` threads (the caller's included), until done or `stop`; false when
// memory ran out.
template <typename T>
bool execute(ConvJob& job, const KernelSet& kernels, long threads, Stop& stop) {
    const KernelSet* chosen = &kernels;
    const Sizing size = plan_run(job, chosen, sizeof(T), threads);
    const KernelSet& ks = *chosen;
    if (job.ck == 0) {  // no input channels: every sum is empty, Y = B (or 0)
        T* y = static_cast<T*>(job.y);
        const T* bias = static_cast<const T*>(job.bias);
        for (long i = 0; i < job.n * job.m; ++i)
            for (long p = 0; p < job.out_plane; ++p)
                y[i * job.out_plane + p] = bias ? bias[i % job.m] : T(0);
        last_run_bytes = 0;
        return true;
    }
    T* packed = 0;  // every element is packed
    Packing<T> packing;
    if (size.packed_elems) {
        packed = static_cast<T*>(t_packed.at_least(size.packed_elems * sizeof(T)));
        if (!packed) return false;
        packing.w = static_cast<const T*>(job.w);
        packing.packed = packed;
        packing.mg = job.mg;
        packing.ck = job.ck;
        packing.lanes = job.plane_kernel == 2;
        packing.mr = packed_block_rows(job, ks, sizeof(T));
        packing.blocks = ceil_div(job.mg, packing.mr);
        packing.shares = job.group * packing.blocks;
        job.w = packed;
        job.w_finite = &packing.finite;
        // a small W is packed before the helpers start: they never wait on one another for it
        if (size.packed_elems * long(sizeof(T)) < SHARED_PACK_BYTES) packing.take_part(ks);
    }
    threads = working_threads(size, threads);
    Run<T> run(job, ks, size, threads, stop, packing);
    // fewer threads than asked (pool busy, or no thread could start): the same sums
    pool().run(&Run<T>::work_of, &run, threads - 1);
    t_packed.trim(KEPT_SCRATCH_BYTES);
    last_run_bytes = long(packed ? size.packed_elems * sizeof(T) + 64 : 0) + run.asked.load();
    return !run.failed;
}

PyObject* py_conv(PyObject*, PyObject* args) {
    PyObject *x, *w, *b, *y, *strides, *dilations, *pads;
    long group, threads;
    const char* isa;
    const char* x_kind = "same";
    if (!PyArg_ParseTuple(args, "OOOOOOOlls|s", &x, &w, &b, &y, &strides, &dilations, &pads,
                          &group, &threads, &isa, &x_kind))
        return 0;
    const std::string kind(x_kind);
    const int x_type = kind == "float16" ? X_FLOAT16 : kind == "bfloat16" ? X_BFLOAT16 : X_SAME;
    if (x_type == X_SAME && kind != "same") {
        PyErr_SetString(PyExc_ValueError, "x_kind must be same, float16 or bfloat16");
        return 0;
    }
    const int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT;
    Buffers bufs;
    if (PyObject_GetBuffer(x, &bufs.x, flags) < 0) return 0;
    bufs.have_x = true;
    if (PyObject_GetBuffer(w, &bufs.w, flags) < 0) return 0;
    bufs.have_w = true;
    if (b != Py_None) {
        if (PyObject_GetBuffer(b, &bufs.b, flags) < 0) return 0;
        bufs.have_b = true;
    }
    if (PyObject_GetBuffer(y, &bufs.y, flags | PyBUF_WRITABLE) < 0) return 0;
    bufs.have_y = true;
    const int item = element_size(bufs.y);
    const bool x_ok = x_type == X_SAME ? element_size(bufs.x) == item
                                       : bufs.x.itemsize == 2 && item == 4;
    if (!item || !x_ok || element_size(bufs.w) != item ||
        (bufs.have_b && element_size(bufs.b) != item)) {
        PyErr_SetString(PyExc_TypeError,
                        "w, b and y must all be float32 or all float64, and x the same (or "
                        "2-byte float16/bfloat16 bits, x_kind, with float32 w, b, y)");
        return 0;
    }
    ConvJob job;
    if (!fill_job(job, bufs, group)) return 0;
    if (!int_list(strides, job.rank, job.s, "strides", 1) ||
        !int_list(dilations, job.rank, job.d, "dilations", 1) ||
        !int_list(pads, job.rank, job.pb, "pads_begin", 0))
        return 0;
    const KernelSet* ks = kernel_set(isa);
    if (!ks || !cpu_has(isa)) {
        PyErr_Format(PyExc_ValueError, "instruction set %s is not available on this CPU", isa);
        return 0;
    }
    job.x = bufs.x.buf;
    job.x_type = x_type;
    job.w = bufs.w.buf;
    job.bias = bufs.have_b ? bufs.b.buf : 0;
    job.y = bufs.y.buf;
    bool ok = true;
    Stop stop;
    if (job.n > 0 && job.out_plane > 0 && job.m > 0) {
        stop.release_gil();
        ok = item == 4 ? execute<float>(job, *ks, threads, stop)
                       : execute<double>(job, *ks, threads, stop);
        stop.take_gil();
    }
    if (stop.stopped) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "conv stopped: request_stop()");
        return 0;
    }
    if (!ok) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

// A shape given as a sequence of at most PADCONV_MAX_RANK + 2 non-negative ints into `out`;
// its length, or -1 (an exception set).
int shape_of(PyObject* seq, long* out, const char* name) {
    PyObject* fast = PySequence_Fast(seq, name);
    if (!fast) return -1;
    const Py_ssize_t size = PySequence_Fast_GET_SIZE(fast);
    Py_DECREF(fast);
    if (size > PADCONV_MAX_RANK + 2) {
        PyErr_Format(PyExc_ValueError, "%s has more than %d dimensions", name,
                     PADCONV_MAX_RANK + 2);
        return -1;
    }
    return int_list(seq, int(size), out, name, 0) ? int(size) : -1;
}

// conv_scratch_bytes(x_shape, w_shape, y_shape, strides, dilations, pads_begin, group,
// threads, isa, itemsize[, x_kind]): bytes conv() allocates for those shapes, worked out by
// the plan_job the run itself calls (packed W and every working thread's buffer).
PyObject* py_conv_scratch_bytes(PyObject*, PyObject* args) {
    PyObject *x, *w, *y, *strides, *dilations, *pads;
    long group, threads, itemsize;
    const char* isa;
    const char* x_kind = "same";
    if (!PyArg_ParseTuple(args, "OOOOOOllsl|s", &x, &w, &y, &strides, &dilations, &pads, &group,
                          &threads, &isa, &itemsize, &x_kind))
        return 0;
    const std::string kind(x_kind);
    const int x_type = kind == "float16" ? X_FLOAT16 : kind == "bfloat16" ? X_BFLOAT16 : X_SAME;
    if ((x_type == X_SAME && kind != "same") || (itemsize != 4 && itemsize != 8) ||
        (x_type != X_SAME && itemsize != 4)) {
        PyErr_SetString(PyExc_ValueError,
                        "itemsize must be 4 or 8, x_kind same (or float16/bfloat16 with 4)");
        return 0;
    }
    long xs[PADCONV_MAX_RANK + 2], ws[PADCONV_MAX_RANK + 2], ys[PADCONV_MAX_RANK + 2];
    const int x_ndim = shape_of(x, xs, "x_shape"), w_ndim = shape_of(w, ws, "w_shape");
    const int y_ndim = shape_of(y, ys, "y_shape");
    if (x_ndim < 0 || w_ndim < 0 || y_ndim < 0 || !valid_rank(x_ndim, w_ndim, y_ndim)) return 0;
    ConvJob job;
    job.x_type = x_type;
    if (!fill_shapes(job, x_ndim, xs, ws, ys, group) ||
        !int_list(strides, job.rank, job.s, "strides", 1) ||
        !int_list(dilations, job.rank, job.d, "dilations", 1) ||
        !int_list(pads, job.rank, job.pb, "pads_begin", 0))
        return 0;
    const KernelSet* ks = kernel_set(isa);
    if (!ks || threads < 1) {
        PyErr_Format(PyExc_ValueError, "unknown instruction set %s, or threads < 1", isa);
        return 0;
    }
    const Sizing size = plan_run(job, ks, int(itemsize), threads);
    return PyLong_FromLong(sizing_bytes(size, int(itemsize), threads));
}

// last_conv_bytes(): bytes the latest conv() asked for (packed W, its threads' buffers).
PyObject* py_last_conv_bytes(PyObject*, PyObject*) { return PyLong_FromLong(last_run_bytes); }

PyObject* py_request_stop(PyObject*, PyObject*) {
    ++stop_requests;
    Py_RETURN_NONE;
}

// The identity of Python's main thread (threading.main_thread()); this thread's if unknown.
unsigned long main_thread_ident() {
    unsigned long ident = PyThread_get_thread_ident();
    PyObject* threading = PyImport_ImportModule("threading");
    PyObject* main = threading ? PyObject_CallMethod(threading, "main_thread", 0) : 0;
    PyObject* number = main ? PyObject_GetAttrString(main, "ident") : 0;
    if (number && PyLong_Check(number)) ident = PyLong_AsUnsignedLong(number);
    Py_XDECREF(number);
    Py_XDECREF(main);
    Py_XDECREF(threading);
    PyErr_Clear();
    return ident;
}

// dst[i] = src[i] rounded to bfloat16, to nearest even (a nan becomes the quiet nan of its
// sign, 0x7fc0 / 0xffc0), as ml_dtypes rounds.
void narrow_bfloat16(const float* src, unsigned short* dst, long count) {
    for (long i = 0; i < count; ++i) {
        uint32_t bits;
        memcpy(&bits, src + i, 4);
        const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
        const uint32_t nan = ((bits >> 16) & 0x8000u) | 0x7fc0u;
        dst[i] = (unsigned short)((bits & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
    }
}

// narrow(y, out, kind, isa): out (2-byte buffer) = the float32 y rounded once to kind
// ("float16" or "bfloat16"); False when this build cannot do it on that instruction set
// (float16 needs the AVX2 unit's F16C), so that the caller rounds.
PyObject* py_narrow(PyObject*, PyObject* args) {
    PyObject *y, *out;
    const char *kind, *isa;
    if (!PyArg_ParseTuple(args, "OOss", &y, &out, &kind, &isa)) return 0;
    const std::string k(kind), i(isa);
    const bool half = k == "float16";
    if (!half && k != "bfloat16") {
        PyErr_SetString(PyExc_ValueError, "kind must be float16 or bfloat16");
        return 0;
    }
    if (half && (i == "generic" || !cpu_has("avx2"))) Py_RETURN_FALSE;
    const int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT;
    Buffers bufs;
    if (PyObject_GetBuffer(y, &bufs.y, flags) < 0) return 0;
    bufs.have_y = true;
    if (PyObject_GetBuffer(out, &bufs.x, flags | PyBUF_WRITABLE) < 0) return 0;
    bufs.have_x = true;
    const long count = bufs.y.len / 4;
    if (element_size(bufs.y) != 4 || bufs.x.itemsize != 2 || bufs.x.len != count * 2) {
        PyErr_SetString(PyExc_ValueError, "y must be float32 and out 2-byte, of one size");
        return 0;
    }
    const float* src = static_cast<const float*>(bufs.y.buf);
    unsigned short* dst = static_cast<unsigned short*>(bufs.x.buf);
    Py_BEGIN_ALLOW_THREADS
    if (half) padconv_narrow_halves_f16c(src, dst, count);
    else narrow_bfloat16(src, dst, count);
    Py_END_ALLOW_THREADS
    Py_RETURN_TRUE;
}

PyObject* py_isas(PyObject*, PyObject*) {
    PyObject* names = PyList_New(0);
    const char* all[] = {"avx512", "avx2", "generic"};
    for (const char* name : all) {
        if (!cpu_has(name)) continue;
        PyObject* text = PyUnicode_FromString(name);
        if (!text || PyList_Append(names, text) < 0) {
            Py_XDECREF(text);
            Py_DECREF(names);
            return 0;
        }
        Py_DECREF(text);
    }
    return names;
}

// The CPUs this process may run on (its affinity mask; the online CPUs where that is unknown).
long usable_cpus() {
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
#endif
#ifndef _WIN32
    return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
#else
    return std::max(1u, std::thread::hardware_concurrency());
#endif
}

// usable_cpus(): the CPUs this process may run on.  In C, as getenv below: through
// os.sched_getaffinity and os.environ, thread_count and selected_isa took about 20 us of a Conv
// call, the interpreter's data for them having left the caches during the Conv before.
PyObject* py_usable_cpus(PyObject*, PyObject*) { return PyLong_FromLong(usable_cpus()); }

// getenv(name): the variable as the process's environment holds it ("" when unset;
// os.environ writes through to it), decoded as os.environ decodes it.
PyObject* py_getenv(PyObject*, PyObject* args) {
    const char* name = 0;
    if (!PyArg_ParseTuple(args, "s", &name)) return 0;
    const char* value = getenv(name);
    return PyUnicode_DecodeFSDefault(value ? value : "");
}

PyMethodDef methods[] = {
    {"qconv", padconv_py_qconv, METH_VARARGS,
     "qconv(x, x_signed, w, w_signed, x_zero_point, w_zero_points, y, strides, dilations, "
     "pads_begin, group, threads, isa[, requantization]): integer Conv sums modulo 2**32 "
     "into int32 y, requantized by the tasks when asked (qconv.h)."},
    {"requantize", padconv_py_requantize, METH_VARARGS,
     "requantize(acc, bias, factors, y_zero_point, y, unsure): QLinearConv's float64 "
     "requantization, marking the elements near a tie (qconv_module.cpp)."},
    {"interleave_phases", padconv_py_interleave_phases, METH_VARARGS,
     "interleave_phases(phases, y, strides, threads): y[p, i*s + a, ...] = phases[p, a, ..., "
     "i, ...], ConvTranspose's stride phases put in place (conv_transpose_phases.cpp)."},
    {"phase_convs", padconv_py_phase_convs, METH_VARARGS,
     "phase_convs(w, b, y, m0, runs, strides, threads, isa): ConvTranspose's stride phases "
     "as one job; False when a weight is not finite (conv_transpose_run.cpp)."},
    {"phase_convs_bytes", padconv_py_phase_convs_bytes, METH_VARARGS,
     "phase_convs_bytes(c, mc, counts, runs, strides, threads, isa, itemsize): what "
     "phase_convs() allocates (conv_transpose_run.cpp)."},
    {"pad_into", padconv_py_pad_into, METH_VARARGS,
     "pad_into(src, out, tables, fill, threads): out[i...] = src[tables[a][i_a]...], fill "
     "where an index is -1; elements of 1, 2, 4, 8 or 16 bytes (pad.cpp)."},
    {"conv", py_conv, METH_VARARGS,
     "conv(x, w, b, y, strides, dilations, pads_begin, group, threads, isa, x_kind='same'): "
     "ONNX Conv of float32/float64 arrays into y, sums in a fixed order (c, then the taps in C "
     "order); x_kind 'float16' or 'bfloat16': x holds those 2-byte values, read as float32."},
    {"narrow", py_narrow, METH_VARARGS,
     "narrow(y, out, kind, isa): out = float32 y rounded once to float16/bfloat16 (to nearest "
     "even); False when float16 cannot be done natively on that instruction set."},
    {"conv_scratch_bytes", py_conv_scratch_bytes, METH_VARARGS,
     "conv_scratch_bytes(x_shape, w_shape, y_shape, strides, dilations, pads_begin, group, "
     "threads, isa, itemsize, x_kind='same'): bytes conv() allocates besides x, w, b and y "
     "(packed W, every working thread's buffer), from the sizing the run itself uses."},
    {"last_conv_bytes", py_last_conv_bytes, METH_NOARGS,
     "last_conv_bytes(): bytes the latest conv() asked for besides x, w, b and y."},
    {"request_stop", py_request_stop, METH_NOARGS,
     "request_stop(): every conv running now stops taking tasks and raises (RuntimeError, or "
     "the exception a signal handler raised); later calls are not affected."},
    {"getenv", py_getenv, METH_VARARGS,
     "getenv(name): the environment variable as the process holds it ('' when unset)."},
    {"usable_cpus", py_usable_cpus, METH_NOARGS,
     "usable_cpus(): the CPUs this process may run on (its affinity mask)."},
    {"isas", py_isas, METH_NOARGS,
     "Instruction sets this CPU can run, fastest first (always ends with 'generic')."},
    {0, 0, 0, 0},
};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", "padconv's native Conv kernels.", -1,
                      methods, 0, 0, 0, 0};

}  // namespace

PyMODINIT_FUNC PyInit__native(void) {
#ifndef _WIN32
    pthread_atfork(0, 0, forget_pool_in_child);
#endif
    main_thread = main_thread_ident();
    return PyModule_Create(&module);
}

// The integer Conv and ConvTranspose's phases run their tasks on the same helpers as Conv.
padconv::Pool& padconv_shared_pool() { return pool(); }

// ConvTranspose's phases run as one job (conv_transpose_run.cpp) share conv()'s pieces.
const KernelSet* padconv_kernels(const char* isa) { return cpu_has(isa) ? kernel_set(isa) : 0; }
void padconv_plan_conv_job(ConvJob& job, const KernelSet& ks, int item, long threads,
                           long* tasks, long* scratch_elems, bool rows_when_wasteful) {
    // the phases keep the position tiles: the channel-lane tiles were not measured on them
    const Sizing size = plan_job(job, ks, item, threads, rows_when_wasteful, false);
    job.w_rows = 0;  // the phases' W comes packed
    *tasks = size.tasks;
    *scratch_elems = size.scratch_elems;
}
void* padconv_thread_scratch(size_t bytes) { return t_scratch.at_least(bytes); }
void padconv_trim_thread_scratch() { t_scratch.trim(KEPT_SCRATCH_BYTES); }
long padconv_stop_requests() { return stop_requests.load(); }  // Pad stops on them too
unsigned long padconv_main_thread() { return main_thread; }
void padconv_record_conv_bytes(long bytes) { last_run_bytes = bytes; }
