// padconv_cli.kernels._native.qconv: the Python entry point of the native integer Conv.
//
// qconv(x, x_signed, w, w_signed, x_zero_point, w_zero_points, y, strides, dilations,
//       pads_begin, group, threads, isa[, requantization]) writes into the C-contiguous int32
// y (N, M, *out)
// the sums  sum (Xpad - xz) * (W[m] - wz[m])  modulo 2**32 (qconv.h), for the C-contiguous
// 1-byte x (N, C, *in) and w (M, C/group, *k), int8 when *_signed else uint8, the zero points
// given as plain integers (w_zero_points: an int32 array of M).  Shapes and attributes must
// already be validated (padconv's plan_conv); this function re-checks only what keeps its
// memory accesses inside the buffers.  The GIL is released while the kernel runs; tasks are
// shared by the calling thread and up to `threads` - 1 helpers of Conv's persistent pool.
// With requantization = (bias or None, float64 factors (M,), y_zero_point, yq, unsure) each
// task also requantizes the sums it made, as requantize() below does (QJob::yq), and the call
// returns the number of elements marked in `unsure` (else None).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include <atomic>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "pool.h"
#include "qconv.h"

padconv::Pool& padconv_shared_pool();  // module.cpp

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

namespace {

const long QPANEL_BYTES = 192 * 1024;  // one task's panel, about

bool x86_has(const char* what) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (!padconv_have_qconv_x86) return false;
    __builtin_cpu_init();
    const std::string name(what);
    if (name == "avx2") return __builtin_cpu_supports("avx2");
    if (name == "vnni")
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vnni");
#endif
    (void)what;
    return false;
}

// The kernel for padconv's instruction-set name: avx512 means VNNI when the CPU has it (else
// the AVX2 kernel), avx2 the AVX2 kernel; null when the CPU lacks it.
const QKernel* kernel_for(const std::string& isa) {
    static const bool avx2 = x86_has("avx2"), vnni = x86_has("vnni");
    if (isa == "generic") return &padconv_qconv_generic;
    if (isa == "avx2") return avx2 ? &padconv_qconv_avx2 : 0;
    if (isa == "avx512") return vnni ? &padconv_qconv_vnni : avx2 ? &padconv_qconv_avx2 : 0;
    return 0;
}

bool read_longs(PyObject* seq, int count, long* out, const char* name, long minimum) {
    PyObject* fast = PySequence_Fast(seq, name);
    if (!fast) return false;
    bool ok = PySequence_Fast_GET_SIZE(fast) == count;
    for (int i = 0; ok && i < count; ++i) {
        out[i] = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
        if (out[i] == -1 && PyErr_Occurred()) ok = false;
        else if (out[i] < minimum) ok = false;
    }
    Py_DECREF(fast);
    if (!ok && !PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "bad %s", name);
    return ok;
}

struct Views {
    Py_buffer x, w, wz, y, bias, factors, yq, unsure;
    bool hx = false, hw = false, hz = false, hy = false;
    bool hb = false, hf = false, hq = false, hu = false;
    ~Views() {
        if (hx) PyBuffer_Release(&x);
        if (hw) PyBuffer_Release(&w);
        if (hz) PyBuffer_Release(&wz);
        if (hy) PyBuffer_Release(&y);
        if (hb) PyBuffer_Release(&bias);
        if (hf) PyBuffer_Release(&factors);
        if (hq) PyBuffer_Release(&yq);
        if (hu) PyBuffer_Release(&unsure);
    }
};

// The optional requantization (bias or None, float64 factors (M,), y_zero_point, yq, unsure)
// of a qconv call into `job`; false with a Python error set when it does not fit y.
bool read_requantization(PyObject* spec, Views& v, QJob& job, long m, Py_ssize_t count) {
    PyObject *bias, *factors, *yq, *unsure;
    int yz;
    if (!PyArg_ParseTuple(spec, "OOiOO", &bias, &factors, &yz, &yq, &unsure)) return false;
    const int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND;
    if (bias != Py_None) {
        if (PyObject_GetBuffer(bias, &v.bias, flags) < 0) return false;
        v.hb = true;
    }
    if (PyObject_GetBuffer(factors, &v.factors, flags) < 0) return false;
    v.hf = true;
    if (PyObject_GetBuffer(yq, &v.yq, flags | PyBUF_WRITABLE) < 0) return false;
    v.hq = true;
    if (PyObject_GetBuffer(unsure, &v.unsure, flags | PyBUF_WRITABLE) < 0) return false;
    v.hu = true;
    if ((v.hb && (v.bias.itemsize != 4 || v.bias.len != 4 * m)) || v.factors.itemsize != 8 ||
        v.factors.len != 8 * m || v.yq.itemsize != 1 || v.yq.len != count ||
        v.unsure.itemsize != 1 || v.unsure.len != count) {
        PyErr_SetString(PyExc_ValueError, "qconv: inconsistent requantization buffers");
        return false;
    }
    job.y_signed = v.yq.format && std::string(v.yq.format) == "b";
    job.yz = yz;
    job.low = (job.y_signed ? -128.0 : 0.0) - yz;
    job.high = (job.y_signed ? 127.0 : 255.0) - yz;
    job.bias = v.hb ? static_cast<const int32_t*>(v.bias.buf) : 0;
    job.factors = static_cast<const double*>(v.factors.buf);
    job.yq = static_cast<uint8_t*>(v.yq.buf);
    job.unsure = static_cast<uint8_t*>(v.unsure.buf);
    return true;
}

long round_up(long v, long step) { return (v + step - 1) / step * step; }

// The direct path's task X (QJob::direct): its span, its bytes and the offsets of the words.
void direct_layout(QJob& job, long pack, std::vector<long>& offsets) {
    long farthest = 0;
    for (int a = 0; a < job.rank; ++a) farthest += (job.k[a] - 1) * job.d[a] * job.sv[a];
    job.span = job.block + farthest;
    job.xq_image = round_up((job.cg + pack - 1) / pack * job.span * 4, 64);
    for (long q = 0; q < job.words; ++q) {
        long t = q % job.taps, offset = (q / job.taps) * job.span;
        for (int a = job.rank - 1; a >= 0; --a) {
            offset += (t % job.k[a]) * job.d[a] * job.sv[a];
            t /= job.k[a];
        }
        offsets[q] = offset;
    }
    job.offsets = offsets.data();
}

// sum_k w'[m, k] per output channel, w' = W's byte ^ flip as int8 (flip 0x80 moves uint8 by
// -128).
void sum_w(const QJob& job, const uint8_t* w, uint8_t flip, std::vector<int32_t>& sumw) {
    sumw.assign(job.m, 0);
    const long kk = job.kk;
    for (long m = 0; m < job.m; ++m) {
        uint32_t total = 0;  // modulo 2**32, as the sums it corrects
        const uint8_t* row = w + m * kk;
        if (flip) {  // uint8: sum w - 128 per tap
            for (long k = 0; k < kk; ++k) total += row[k];
            total -= (uint32_t)(128 * kk);
        } else {
            const int8_t* values = reinterpret_cast<const int8_t*>(row);
            for (long k = 0; k < kk; ++k) total += (uint32_t)(int32_t)values[k];
        }
        sumw[m] = (int32_t)total;
    }
}

// The rows of each group (lanes of type Lane): row 0 ones, rows 1..M/G the channels' w'
// (qconv.h); tap t of channel c goes to lane first(c) + t * step of the row.
template <typename Lane, typename First>
void pack_lanes(const QJob& job, const uint8_t* w, uint8_t flip, long step, int32_t* packed,
                First first) {
    for (long g = 0; g < job.group; ++g) {
        Lane* rows = reinterpret_cast<Lane*>(packed + g * job.rows * job.words);
        const long per_row = job.words * (long)(4 / sizeof(Lane));
        for (long r = 0; r <= job.mg; ++r) {
            Lane* row = rows + r * per_row;
            const uint8_t* source = r > 0 ? w + (g * job.mg + r - 1) * job.kk : 0;
            for (long c = 0; c < job.cg; ++c) {
                Lane* lane = row + first(c);
                if (source)
                    for (long t = 0; t < job.taps; ++t)
                        lane[t * step] = (int8_t)(source[c * job.taps + t] ^ flip);
                else
                    for (long t = 0; t < job.taps; ++t) lane[t * step] = 1;
            }
        }
    }
}

// W packed per group, lanes of no tap 0 (bytes for pack 4, int16 for pack 2); w' is W as
// int8, or uint8 moved by -128 (its top bit flipped).
template <typename First>
void pack_rows(const QJob& job, const uint8_t* w, int w_signed, int pack, long step,
               std::vector<int32_t>& packed, std::vector<int32_t>& sumw, First first) {
    const uint8_t flip = w_signed ? 0 : 0x80;
    sum_w(job, w, flip, sumw);
    packed.assign(job.group * job.rows * job.words, 0);
    if (pack == 4) pack_lanes<int8_t>(job, w, flip, step, packed.data(), first);
    else pack_lanes<int16_t>(job, w, flip, step, packed.data(), first);
}

// W packed per group for the kernel (qconv.h): tap kk = c * taps + t in lane kk % pack of
// word kk / pack, that is lane kk of the row.
void pack_w(const QJob& job, const uint8_t* w, int w_signed, int pack,
            std::vector<int32_t>& packed, std::vector<int32_t>& sumw) {
    const long taps = job.taps;
    pack_rows(job, w, w_signed, pack, 1, packed, sumw, [taps](long c) { return c * taps; });
}

// W packed for the direct path: word q = (c / pack) * taps + t holds w'[m, c, t] in lane
// c % pack (bytes for pack 4, int16 for pack 2; 0 for channels beyond C/G); row 0 holds
// ones for the real channels.
void pack_w_direct(const QJob& job, const uint8_t* w, int w_signed, int pack,
                   std::vector<int32_t>& packed, std::vector<int32_t>& sumw) {
    const long taps = job.taps;
    pack_rows(job, w, w_signed, pack, pack, packed, sumw, [taps, pack](long c) {
        return (c / pack) * taps * pack + c % pack;
    });
}

// Columns [c0, c1) of padded grid line `line` (flattened over the axes before the last) for
// the channels of pack q of image n, group g, woven into the words `out` (QJob::direct): lane
// j (byte for pack 4, int16 for pack 2) holds x' of channel q * pack + j, xz' in the padding,
// 0 when there is no such channel.
void fill_line(const QJob& job, int pack, long n, long g, long q, long line, long c0, long c1,
               uint32_t* out) {
    const int r = job.rank;
    long in_row = 0, rest = line;
    bool inside = true;
    long o[PADCONV_QMAX_RANK];
    for (int a = r - 2; a >= 0; --a) {
        o[a] = rest % job.pd[a];
        rest /= job.pd[a];
    }
    for (int a = 0; a < r - 1; ++a) {
        const long i = o[a] - job.pb[a];
        if (i < 0 || i >= job.in[a]) inside = false;
        in_row = in_row * job.in[a] + i;
    }
    const int bits = pack == 4 ? 8 : 16;
    const uint32_t lane_ones = pack == 4 ? 0xFF : 0xFFFF;
    uint32_t mask = 0, pad = 0, flip = 0;
    const uint8_t* src[4];
    for (int j = 0; j < pack; ++j) {
        const long c = std::min(q * pack + j, job.cg - 1);  // a missing channel: masked out
        src[j] = job.x + (n * job.c + g * job.cg + c) * job.in_plane +
                 (inside ? in_row * job.in[r - 1] : 0);
        if (q * pack + j < job.cg) {
            mask |= lane_ones << (bits * j);
            pad |= (uint32_t)(uint8_t)job.xz << (bits * j);
            flip |= (job.x_signed ? 0x80u : 0u) << (bits * j);
        }
    }
    const long pb = job.pb[r - 1];
    const long lo = inside ? std::min(std::max(pb, c0), c1) : c1;  // columns with input
    const long hi = inside ? std::max(std::min(pb + job.in[r - 1], c1), lo) : c1;
    for (long c = c0; c < lo; ++c) out[c - c0] = pad;
    uint32_t* middle = out + (lo - c0);
    const long from = lo - pb, count = hi - lo;
    if (pack == 4) {
        const uint8_t *s0 = src[0] + from, *s1 = src[1] + from, *s2 = src[2] + from,
                      *s3 = src[3] + from;
        for (long i = 0; i < count; ++i)
            middle[i] = (((uint32_t)s0[i] | (uint32_t)s1[i] << 8 | (uint32_t)s2[i] << 16 |
                          (uint32_t)s3[i] << 24) ^ flip) & mask;
    } else {
        const uint8_t *s0 = src[0] + from, *s1 = src[1] + from;
        for (long i = 0; i < count; ++i)
            middle[i] = (((uint32_t)s0[i] | (uint32_t)s1[i] << 16) ^ flip) & mask;
    }
    for (long c = hi; c < c1; ++c) out[c - c0] = pad;
}

// A task's X (QJob::direct): grid positions [a, a + span) of every pack of channels of
// image n, group g, into `out`.
void fill_task_x(const QJob& job, int pack, long n, long g, long a, uint8_t* out) {
    const long width = job.pd[job.rank - 1], packs = (job.cg + pack - 1) / pack;
    const long end = std::min(a + job.span, job.grid);
    for (long q = 0; q < packs; ++q) {
        uint32_t* words = reinterpret_cast<uint32_t*>(out) + q * job.span;
        for (long v = a; v < end;) {
            const long line = v / width, c0 = v % width;
            const long c1 = std::min(width, c0 + (end - v));
            fill_line(job, pack, n, g, q, line, c0, c1, words + (v - a));
            v += c1 - c0;
        }
        if (end - a < job.span) memset(words + (end - a), 0, (job.span - (end - a)) * 4);
    }
}

void requantize_run(const int32_t* in, double factor, double bias, double low, double high,
                    int yz, bool is_signed, long count, uint8_t* y, uint8_t* unsure);

// One run of the fused requantization: AVX-512 for the VNNI kernels, else requantize_run.
void requantize_job_run(const QJob& job, const int32_t* in, long m, long count, uint8_t* y,
                        uint8_t* unsure) {
    const double bias = job.bias ? (double)job.bias[m] : 0.0;
    if (job.requantize_avx512)
        padconv_requantize_plane_avx512(in, job.factors[m], bias, job.low, job.high, job.yz,
                                        job.y_signed, count, y, unsure);
    else
        requantize_run(in, job.factors[m], bias, job.low, job.high, job.yz, job.y_signed, count,
                       y, unsure);
}

// Outputs (flattened) before the direct path's virtual position v: those of the grid
// coordinates lexicographically below v's that lie inside `out`.
long outputs_before(const QJob& job, long v) {
    long o[PADCONV_QMAX_RANK];
    for (int a = 0; a < job.rank; ++a) {
        o[a] = a == 0 ? v / job.sv[0] : v / job.sv[a] % job.pd[a];
    }
    long count = 0, inner = job.out_plane;
    for (int a = 0; a < job.rank; ++a) {
        inner /= job.out[a];
        if (o[a] >= job.out[a]) return count + job.out[a] * inner;
        count += o[a] * inner;
    }
    return count;
}

// Elements marked in `count` bytes of `unsure` (each 0 or 1).
long marked_in(const uint8_t* unsure, long count) {
    long total = 0;
    for (long i = 0; i < count; ++i) total += unsure[i];
    return total;
}

// The fused requantization of task `index`: its outputs [f0, f1) of each channel of its group;
// returns how many of them it marked as near a tie.
long requantize_task(const QJob& job, long index) {
    const long b = index % job.blocks, g = (index / job.blocks) % job.group,
               n = index / (job.blocks * job.group);
    const long total = job.direct ? job.vtotal : job.out_plane;
    const long first = b * job.block, last = std::min(first + job.block, total);
    const long f0 = job.direct ? outputs_before(job, first) : first;
    const long f1 = job.direct ? outputs_before(job, last) : last;
    long marked = 0;
    for (long m = g * job.mg; m < (g + 1) * job.mg; ++m) {
        const long at = (n * job.m + m) * job.out_plane + f0;
        requantize_job_run(job, job.y + at, m, f1 - f0, job.yq + at, job.unsure + at);
        marked += marked_in(job.unsure + at, f1 - f0);
    }
    return marked;
}

// The tasks of one call, shared by the threads taking part in a range each (TaskRanges).
struct Run {
    const QJob& job;
    const QKernel& kernel;
    padconv::TaskRanges tasks;
    size_t scratch;
    std::atomic<bool> failed{false};
    std::atomic<long> marked{0};  // elements the requantization marked near a tie

    Run(const QJob& j, const QKernel& k, long t, long threads, size_t s)
        : job(j), kernel(k), tasks(t, threads), scratch(s) {}

    void work(long slot) {
        char* buffer = new (std::nothrow) char[scratch + 64];
        if (!buffer) {
            failed = true;
            return;
        }
        char* aligned = buffer + (64 - reinterpret_cast<size_t>(buffer) % 64) % 64;
        long near = 0;
        long step = 0;
        for (long t = tasks.take(slot, step); t >= 0 && !failed; t = tasks.take(slot, step)) {
            if (job.direct) {  // the task's X first (QJob::direct)
                const long g = (t / job.blocks) % job.group, n = t / (job.blocks * job.group);
                fill_task_x(job, kernel.pack, n, g, t % job.blocks * job.block,
                            reinterpret_cast<uint8_t*>(aligned));
            }
            kernel.task(job, t, aligned);
            if (job.yq) near += requantize_task(job, t);
        }
        marked += near;
        delete[] buffer;
    }

    static void work_of(void* self, long slot) { static_cast<Run*>(self)->work(slot); }
};

// Runs the tasks; `marked` receives the number of elements marked near a tie.
bool run(const QJob& job, const QKernel& kernel, long threads, long& marked) {
    const long tasks = job.n * job.group * job.blocks;
    const size_t element = kernel.pack == 4 ? 1 : 2;
    const size_t panel =
        job.direct ? job.xq_image : job.words * kernel.pack * job.block * element;
    const size_t scratch = panel +
                           4 * (job.block + (size_t)kernel.mr * kernel.tile) +
                           kernel.pack * job.block + 64;
    if (threads > tasks) threads = tasks;
    if (threads < 1) threads = 1;
    Run state(job, kernel, tasks, threads, scratch);
    // fewer helpers than asked (pool busy, or none could start): the same sums
    padconv_shared_pool().run(&Run::work_of, &state, threads - 1);
    marked = state.marked;
    return !state.failed;
}

}  // namespace

PyObject* padconv_py_qconv(PyObject*, PyObject* args) {
    PyObject *x, *w, *wz, *y, *strides, *dilations, *pads, *requantization = Py_None;
    int x_signed, w_signed, xz;
    long group, threads;
    const char* isa;
    if (!PyArg_ParseTuple(args, "OpOpiOOOOOlls|O", &x, &x_signed, &w, &w_signed, &xz, &wz, &y,
                          &strides, &dilations, &pads, &group, &threads, &isa,
                          &requantization))
        return 0;
    const QKernel* kernel = kernel_for(isa);
    if (!kernel || !kernel->task) {
        PyErr_Format(PyExc_ValueError, "instruction set %s is not available on this CPU", isa);
        return 0;
    }
    const int flags = PyBUF_C_CONTIGUOUS | PyBUF_ND;
    Views v;
    if (PyObject_GetBuffer(x, &v.x, flags) < 0) return 0;
    v.hx = true;
    if (PyObject_GetBuffer(w, &v.w, flags) < 0) return 0;
    v.hw = true;
    if (PyObject_GetBuffer(wz, &v.wz, flags) < 0) return 0;
    v.hz = true;
    if (PyObject_GetBuffer(y, &v.y, flags | PyBUF_WRITABLE) < 0) return 0;
    v.hy = true;
    const int ndim = v.x.ndim;
    if (v.x.itemsize != 1 || v.w.itemsize != 1 || v.y.itemsize != 4 || v.wz.itemsize != 4 ||
        ndim < 3 || ndim - 2 > PADCONV_QMAX_RANK || v.w.ndim != ndim || v.y.ndim != ndim ||
        group < 1) {
        PyErr_SetString(PyExc_ValueError, "x, w: 1-byte arrays of one rank >= 3; y, "
                                          "w_zero_points: 4-byte arrays");
        return 0;
    }
    QJob job;
    memset(&job, 0, sizeof(job));
    job.rank = ndim - 2;
    job.n = v.x.shape[0];
    job.c = v.x.shape[1];
    job.m = v.w.shape[0];
    job.cg = v.w.shape[1];
    job.group = group;
    job.mg = job.m / group;
    job.in_plane = job.out_plane = job.taps = 1;
    for (int a = 0; a < job.rank; ++a) {
        job.in[a] = v.x.shape[a + 2];
        job.k[a] = v.w.shape[a + 2];
        job.out[a] = v.y.shape[a + 2];
        job.in_plane *= job.in[a];
        job.out_plane *= job.out[a];
        job.taps *= job.k[a];
    }
    if (job.cg * group != job.c || job.mg * group != job.m || v.y.shape[0] != job.n ||
        v.y.shape[1] != job.m || v.wz.len != 4 * job.m) {
        PyErr_SetString(PyExc_ValueError, "inconsistent x, w, y or w_zero_points shapes");
        return 0;
    }
    if (requantization != Py_None &&
        !read_requantization(requantization, v, job, job.m, v.y.len / 4))
        return 0;
    if (!read_longs(strides, job.rank, job.s, "strides", 1) ||
        !read_longs(dilations, job.rank, job.d, "dilations", 1) ||
        !read_longs(pads, job.rank, job.pb, "pads_begin", 0))
        return 0;
    if (job.n == 0 || job.m == 0 || job.out_plane == 0) {
        if (requantization != Py_None) return PyLong_FromLong(0);
        Py_RETURN_NONE;
    }
    job.kk = job.cg * job.taps;
    job.x = static_cast<const uint8_t*>(v.x.buf);
    job.x_signed = x_signed;
    job.xz = x_signed ? xz + 128 : xz;
    // the direct path rounds channels up to the pack: worth it from 4 channels per group
    bool direct = (kernel == &padconv_qconv_vnni || kernel == &padconv_qconv_avx2) &&
                  job.cg >= 4;
    for (int a = 0; a < job.rank; ++a) direct = direct && job.s[a] == 1;
    job.direct = direct;
    if (direct)
        kernel = kernel == &padconv_qconv_vnni ? &padconv_qconv_vnni_direct
                                               : &padconv_qconv_avx2_direct;
    job.requantize_avx512 = kernel == &padconv_qconv_vnni || kernel == &padconv_qconv_vnni_direct;
    const long pack = kernel->pack;
    job.words = direct ? (job.cg + pack - 1) / pack * job.taps : (job.kk + pack - 1) / pack;
    job.rows = round_up(job.mg + 1, kernel->mr);
    std::vector<int32_t> wzs(job.m);
    const int32_t* given = static_cast<const int32_t*>(v.wz.buf);
    for (long m = 0; m < job.m; ++m) wzs[m] = w_signed ? given[m] : given[m] - 128;
    std::vector<int32_t> packed, sumw;
    bool ok = true;
    std::vector<long> offsets;
    try {
        if (direct) {
            pack_w_direct(job, static_cast<const uint8_t*>(v.w.buf), w_signed, kernel->pack,
                          packed, sumw);
            job.grid = 1;
            for (int a = job.rank - 1; a >= 0; --a) {
                job.pd[a] = job.out[a] + (job.k[a] - 1) * job.d[a];
                job.sv[a] = job.grid;
                job.grid *= job.pd[a];
            }
            job.vtotal = job.out[0] * job.sv[0];
            offsets.resize(job.words);
        } else {
            pack_w(job, static_cast<const uint8_t*>(v.w.buf), w_signed, kernel->pack, packed,
                   sumw);
        }
    } catch (const std::bad_alloc&) {
        return PyErr_NoMemory();
    }
    job.wpack = packed.data();
    job.wz = wzs.data();
    job.sumw = sumw.data();
    job.y = static_cast<int32_t*>(v.y.buf);
    const long positions = direct ? job.vtotal : job.out_plane;
    const long per_position = job.words * kernel->pack * (kernel->pack == 4 ? 1 : 2);
    long block = direct ? 16 * kernel->tile : QPANEL_BYTES / (per_position > 0 ? per_position : 1);
    block = round_up(block < kernel->tile ? kernel->tile : block, kernel->tile);
    // blocks of equal numbers of tiles, enough of them for the threads (two tasks each at
    // least, so that a thread held up elsewhere leaves part of its share to the others)
    const long tiles = (positions + kernel->tile - 1) / kernel->tile;
    long count = (tiles + block / kernel->tile - 1) / (block / kernel->tile);
    const long wanted = threads * 2, images = job.n * group;
    if (images * count < wanted) count = std::min(tiles, (wanted + images - 1) / images);
    block = (tiles + count - 1) / count * kernel->tile;
    job.block = block;
    job.blocks = (positions + block - 1) / block;
    if (direct) direct_layout(job, pack, offsets);
    long marked = 0;
    Py_BEGIN_ALLOW_THREADS
    ok = run(job, *kernel, threads, marked);
    Py_END_ALLOW_THREADS
    if (!ok) return PyErr_NoMemory();
    if (requantization != Py_None) return PyLong_FromLong(marked);
    Py_RETURN_NONE;
}

// requantize(acc, bias, factors, y_zero_point, y, unsure): QLinearConv's
// y = saturate(rint(e) + yz) with e = (acc + bias[m]) * factors[m] in float64, for the int32
// acc (N, M, P) and bias (M,) (or None), float64 factors (M,), into the 1-byte y (int8 when
// its buffer format says so, else uint8), marking in the 1-byte `unsure` each element whose
// e lies within |e| * 4.5e-16 of a half-integer inside the output range: the caller decides
// those exactly (padconv_cli/kernels/requantize.py gives the argument).
namespace {

// Round to nearest, ties to even, for |v| < 2**51 (the default rounding mode of the add).
inline double round_even(double v) {
    const double magic = 6755399441055744.0;  // 1.5 * 2**52
    return (v + magic) - magic;
}

// The requantization of `count` consecutive elements of one channel (factor, bias).
void requantize_run(const int32_t* in, double factor, double bias, double low, double high,
                    int yz, bool is_signed, long count, uint8_t* y, uint8_t* unsure) {
    static const bool avx2 = x86_has("avx2");
    if (avx2) {
        padconv_requantize_plane_avx2(in, factor, bias, low, high, yz, is_signed, count, y,
                                      unsure);
        return;
    }
    for (long i = 0; i < count; ++i) {
        double e = ((double)in[i] + bias) * factor;
        e = e < low - 2 ? low - 2 : e > high + 2 ? high + 2 : e;  // beyond: saturated
        const double r = round_even(e);
        const double below = r > e ? r - 1 : r;  // floor(e)
        const double distance = e - below - 0.5;
        const double size = e < 0 ? -e : e;
        unsure[i] = (distance < 0 ? -distance : distance) <= size * 4.5e-16 &&
                    e > low - 1 && e < high + 1;
        const double kept = r < low ? low : r > high ? high : r;
        const int value = (int)kept + yz;
        y[i] = is_signed ? (uint8_t)(int8_t)value : (uint8_t)value;
    }
}

// The requantization of `planes` planes of `plane` elements (plane i has channel i % m).
void requantize_planes(const int32_t* a, const int32_t* b, const double* f, int yz, double low,
                       double high, bool is_signed, long planes, long m, long plane,
                       uint8_t* out, uint8_t* mark) {
    for (long k = 0; k < planes; ++k) {
        const long channel = k % m;
        requantize_run(a + k * plane, f[channel], b ? (double)b[channel] : 0.0, low, high, yz,
                       is_signed, plane, out + k * plane, mark + k * plane);
    }
}

}  // namespace

PyObject* padconv_py_requantize(PyObject*, PyObject* args) {
    PyObject *acc_obj, *bias_obj, *factor_obj, *y_obj, *unsure_obj;
    int yz;
    if (!PyArg_ParseTuple(args, "OOOiOO", &acc_obj, &bias_obj, &factor_obj, &yz, &y_obj,
                          &unsure_obj))
        return 0;
    const int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND;
    Py_buffer acc, bias, factor, y, unsure;
    if (PyObject_GetBuffer(acc_obj, &acc, flags) < 0) return 0;
    const bool has_bias = bias_obj != Py_None;
    if (has_bias && PyObject_GetBuffer(bias_obj, &bias, flags) < 0) {
        PyBuffer_Release(&acc);
        return 0;
    }
    bool ok = PyObject_GetBuffer(factor_obj, &factor, flags) == 0;
    if (ok && PyObject_GetBuffer(y_obj, &y, flags | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&factor);
        ok = false;
    }
    if (ok && PyObject_GetBuffer(unsure_obj, &unsure, flags | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&factor);
        PyBuffer_Release(&y);
        ok = false;
    }
    if (!ok) {
        PyBuffer_Release(&acc);
        if (has_bias) PyBuffer_Release(&bias);
        return 0;
    }
    const long m = acc.ndim >= 2 ? (long)acc.shape[1] : 0;
    const long count = acc.len / 4;
    const long plane = (acc.ndim >= 2 && m > 0 && acc.shape[0] > 0) ? count / (m * acc.shape[0])
                                                                    : 0;
    const bool is_signed = y.format && std::string(y.format) == "b";
    const bool shapes_ok = acc.itemsize == 4 && acc.ndim >= 2 && factor.itemsize == 8 &&
                           factor.len == 8 * m && y.itemsize == 1 && y.len == count &&
                           unsure.itemsize == 1 && unsure.len == count &&
                           (!has_bias || (bias.itemsize == 4 && bias.len == 4 * m));
    if (shapes_ok && count > 0) {
        const int32_t* a = static_cast<const int32_t*>(acc.buf);
        const int32_t* b = has_bias ? static_cast<const int32_t*>(bias.buf) : 0;
        const double* f = static_cast<const double*>(factor.buf);
        uint8_t* out = static_cast<uint8_t*>(y.buf);
        uint8_t* mark = static_cast<uint8_t*>(unsure.buf);
        const double low = (is_signed ? -128.0 : 0.0) - yz, high = (is_signed ? 127.0 : 255.0) - yz;
        Py_BEGIN_ALLOW_THREADS
        requantize_planes(a, b, f, yz, low, high, is_signed, count / plane, m, plane, out, mark);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&acc);
    if (has_bias) PyBuffer_Release(&bias);
    PyBuffer_Release(&factor);
    PyBuffer_Release(&y);
    PyBuffer_Release(&unsure);
    if (!shapes_ok) {
        PyErr_SetString(PyExc_ValueError, "requantize: inconsistent buffers");
        return 0;
    }
    Py_RETURN_NONE;
}
