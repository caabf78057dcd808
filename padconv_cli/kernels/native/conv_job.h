// padconv native Conv: the description of one convolution shared by the dispatcher
// (module.cpp) and the per-ISA kernels (conv_generic.cpp, conv_avx2.cpp, conv_avx512.cpp).
//
// Tensors are C-contiguous NCHW...: X (N, C, *in), W (M, C/G, *k), Y (N, M, *out).
// Every output element is  Y[n, m, o] = sum_{c, t} W[m, c, t] * Xpad[n, g*C/G + c, o*s + t*d]
// (+ B[m] after the sum), summed in one fixed order -- c ascending, then the kernel taps t in
// C order -- by one fused multiply-add chain (the portable kernel: multiply then add), whatever
// the block, the task or the thread that computes it.  Results therefore do not depend on the
// thread count nor on how the tensor is cut into tiles.  (Terms of finite weights times the
// padding's zeros may be left out: they change no bit; conv_impl.h, tile_taps.)
#ifndef PADCONV_CONV_JOB_H
#define PADCONV_CONV_JOB_H

#define PADCONV_MAX_RANK 16
#define PADCONV_DW_CACHED_TAPS 32                          // most outer taps whose rows are kept
#define PADCONV_DW_SLOTS (2 * PADCONV_DW_CACHED_TAPS + 1)  // row slots kept for them
#define PADCONV_PLANE_TAPS 512  // most kernel taps of the plane kernel
#define PADCONV_DW_TAPS 64  // taps of the last axis whose starts are worked out once per task

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <atomic>
#include <new>

// A thread's buffer of at least `bytes`, 64-byte aligned (null when memory ran out), kept for
// the thread's next call while at most `kept` bytes: a fresh one would be page-faulted in on
// every call. Conv's per-thread scratch and ConvTranspose's work buffer are two of them.
struct KeptBuffer {
    char* data = 0;
    size_t size = 0;

    void* at_least(size_t bytes) {
        if (size < bytes + 64) {
            release();
            data = new (std::nothrow) char[bytes + 64];
            if (!data) return 0;
            size = bytes + 64;
        }
        return data + (64 - reinterpret_cast<size_t>(data) % 64) % 64;
    }
    void trim(size_t kept) {
        if (size > kept) release();
    }
    void release() {
        delete[] data;
        data = 0;
        size = 0;
    }
};

// The sign bit of (exponent bits + one exponent step): set exactly when every exponent bit
// is (an infinity or a nan), so that an OR over many values tells.  Static: each translation
// unit, built for its own instruction set, keeps its own copy.
static inline uint32_t non_finite_bit(float v) {
    uint32_t bits;
    memcpy(&bits, &v, 4);
    return ((bits & 0x7f800000u) + 0x00800000u) & 0x80000000u;
}
static inline uint64_t non_finite_bit(double v) {
    uint64_t bits;
    memcpy(&bits, &v, 8);
    return ((bits & 0x7ff0000000000000ull) + 0x0010000000000000ull) & 0x8000000000000000ull;
}

// Element types X may have (ConvJob::x_type); W, B and Y are float32 for the narrow ones.
enum XType { X_SAME = 0, X_FLOAT16 = 1, X_BFLOAT16 = 2 };
// The depthwise kernel's ways of reading X (ConvJob::dw_block; conv_depthwise.h).
enum DwKernel { DW_ROWS = 0, DW_BLOCK = 1, DW_DIRECT = 2 };
struct Half {  // IEEE binary16, as stored
    unsigned short bits;
};
struct Bf16 {  // bfloat16, as stored
    unsigned short bits;
};

struct ConvJob {
    const void* x;      // input: the job's element type, or binary16 / bfloat16 (x_type)
    int x_type;         // XType
    const void* w;      // weights as given (depthwise) or packed by the kernel set (GEMM)
    const void* bias;   // M values or null
    void* y;            // output
    int rank;           // spatial rank
    long n, c, m, group, cg, mg;
    long in[PADCONV_MAX_RANK], out[PADCONV_MAX_RANK], k[PADCONV_MAX_RANK];
    long s[PADCONV_MAX_RANK], d[PADCONV_MAX_RANK], pb[PADCONV_MAX_RANK];
    long in_plane, out_plane;  // prod(in), prod(out)
    long taps, ck;             // prod(k), C/G * prod(k)
    long outer_out;            // prod(out[:-1]): output rows
    long outer_taps;           // prod(k[:-1])
    // GEMM kernel: blocks of `nb` flattened output positions of one image and group; with
    // row_kernel, blocks of `nb` positions of one output row (`blocks` per row), and the
    // phases of padded input rows `row_len` elements long
    long nb, blocks;
    long mparts;  // W's row blocks in mparts ranges, one task each (GEMM and plane kernels)
    // tasks on each range of W's row blocks: task t is on range t / part_tasks, so that a
    // thread's contiguous share of the tasks (TaskRanges) reads one range of W
    long part_tasks;
    // W as given (rows C/G * prod(k) apart), not packed before the run: the GEMM kernel reads
    // it so; the channel-lane tiles' tasks pack each block of channels into their buffer
    long w_rows;
    long row_kernel;
    // plane kernel (rank >= 2): blocks of `nb` virtual positions of one image and group
    // (gemm_plane_task; plane_end of them), reading `plane_rows` padded slabs of the first
    // axis per channel, plane_width elements each, copied once per task.  plane_kernel 1: the
    // register tiles hold positions in their vectors; 2 (2-D only): output channels
    // (lanes_plane_task), its tasks whole output rows (units of out[1] positions, aligned)
    long plane_kernel, plane_width, plane_rows, plane_end;
    // ... 2-D with output rows a whole number of register tiles, or of at least one tile with
    // the set's split_rows: the positions are the real ones (plane_end = out_plane), each tile
    // within one output row or running on into the next, stored in place (but a plane's last
    // tile when it is partial)
    long plane_aligned;
    // ... split into tasks of register tiles (units): every image-group in `blocks` equal tasks
    // (plane_task_units), each split over mparts ranges of W's row blocks when mparts > 1 (few
    // tasks that the threads cannot share evenly)
    // depthwise kernel: blocks of `rows` output rows of one image and channel
    long rows, row_blocks;
    long row_len;              // elements of one phase of a deinterleaved padded row
    long dw_block;             // DwKernel: rows, block (2-D, stride 1 along rows), direct
    long dw_slots;             // padded rows held: 2 * outer_taps + 1 (kept), or outer_taps
    // set once W is packed (module.cpp, Packing): whether every weight is finite, which lets
    // the plane kernel leave out taps that read only padding (conv_impl.h, tile_taps); null
    // when nobody packed W before the run
    const std::atomic<bool>* w_finite = 0;
};

// One instruction set's kernels.  `scratch` is a per-thread buffer of the elements of the
// job's type that module.cpp's plan_job sizes for the job's kernel.
struct KernelSet {
    const char* name;
    int mr, nr_f32, nr_f64;  // micro-tile: rows of W, output positions (per element type)
    int dw_f32, dw_f64;      // output positions per depthwise register block
    // pack W's row blocks (conv_impl.h, pack_w); true when every weight is finite
    bool (*pack_w_f32)(const float* w, long m, long ck, float* packed);
    bool (*pack_w_f64)(const double* w, long m, long ck, double* packed);
    // the same for the channel-lane tiles, in blocks of a vector's rows (pack_w_lanes)
    bool (*pack_lanes_f32)(const float* w, long m, long ck, float* packed);
    bool (*pack_lanes_f64)(const double* w, long m, long ck, double* packed);
    void (*gemm_task_f32)(const ConvJob& job, long task, float* scratch);
    void (*gemm_task_f64)(const ConvJob& job, long task, double* scratch);
    void (*depthwise_task_f32)(const ConvJob& job, long task, float* scratch);
    void (*depthwise_task_f64)(const ConvJob& job, long task, double* scratch);
    // float32 sums of X given as float32, binary16 or bfloat16 (indexed by XType)
    void (*gemm_task_x[3])(const ConvJob& job, long task, float* scratch);
    void (*depthwise_task_x[3])(const ConvJob& job, long task, float* scratch);
    int unrolled_stride;  // the plane tile is unrolled for last-axis strides up to this
    int unrolled_dilation;  // and, with stride 1, for last-axis dilations up to this
    // the set to run the plane kernel's unrolled tiles on (plane_tile_unrolled_for), or null
    const KernelSet* plane_set;
    // the plane kernel's tiles may run on from one output row into the next (2-D, rows of at
    // least a tile), computing the real positions only
    bool split_rows;
    // output channels of the plane kernel's channel-lane tiles (plane_kernel 2; 0: the set has
    // none for that type): two vectors, each one or two of W's packed row blocks
    int lane_rows_f32, lane_rows_f64;
    // the channel-lane tiles also on output rows of a position tile or more, on Intel CPUs
    bool lanes_long_rows;
};

// Elements of one channel's copy in the plane kernel's buffer: every phase's plane_rows slabs.
inline long plane_channel(const ConvJob& J) {
    long phases = 1;
    for (int i = 0; i < J.rank; ++i) phases *= J.s[i];
    return phases * J.plane_rows * J.plane_width;
}

// Elements of a channel-lane task's plane copy, rounded up to 64 bytes' worth: the block of W
// that the task packs itself (J.w_rows) follows it in the buffer.
inline long lanes_plane_elems(const ConvJob& J) {
    return (J.cg * plane_channel(J) + 15) / 16 * 16;
}

// Rows of the plane kernel's tile for a last row block of W with no more rows, with tiles of
// `mr` rows (6 -> 4: 64 output channels are 10 tiles of 6 rows and one of 4).
constexpr int few_rows(int mr) { return mr == 6 ? 4 : mr / 2; }

// Rows of W the plane kernel's tiles compute for `m` rows, with tiles of `mr` rows.
inline long plane_tile_rows(long m, int mr) {
    const long rest = m % mr;
    return m - rest + (rest == 0 ? 0 : rest <= few_rows(mr) ? few_rows(mr) : mr);
}

// The plane kernel unrolls its register tile over the last axis's taps: at most 7 of them,
// with dilation 1 and stride at most `stride`, or stride 1 and dilation at most `dilation`
// (the kernel set's unrolled_stride and unrolled_dilation; conv_impl.h, plane_tile_unrolled).
inline bool plane_tile_unrolled_for(const ConvJob& job, int stride, int dilation) {
    const int last = job.rank - 1;
    const long s = job.s[last], d = job.d[last];
    return job.k[last] <= 7 && ((d == 1 && s <= stride) || (s == 1 && d <= dilation));
}

// Whether ks's plane_set may run the job (module.cpp, plan_run, has the measurements): its
// tile unrolled for the job, and its tiles computing at most 10% more rows of W than ks's.
inline bool plane_set_may_take(const ConvJob& job, const KernelSet& ks) {
    const KernelSet* set = ks.plane_set;
    return set && plane_tile_unrolled_for(job, set->unrolled_stride, set->unrolled_dilation) &&
           plane_tile_rows(job.mg, set->mr) * 10 <= plane_tile_rows(job.mg, ks.mr) * 11;
}

extern const KernelSet padconv_generic_kernels;
extern const KernelSet padconv_avx2_kernels;    // only usable when the CPU has AVX2 and FMA
extern const KernelSet padconv_avx2_plane_kernels;  // 6 x 2-vector tiles, for the plane kernel
extern const KernelSet padconv_avx512_kernels;  // only usable when the CPU has AVX-512F
extern const int padconv_have_x86_kernels;      // 1 when the x86 sets above were compiled in
// dst[i] = src[i] rounded to binary16 to nearest even; only on CPUs with F16C (AVX2 unit).
void padconv_narrow_halves_f16c(const float* src, unsigned short* dst, long count);

#endif
