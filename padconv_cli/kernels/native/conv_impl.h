// padconv native Conv kernels, written once over a vector type and compiled once per
// instruction set.  The including file defines, before including this header:
//   VecF / VecD   -- vector traits for float / double (type, lanes, zero, load, store, bcast,
//                    fma(a, b, c) = a * b + c, add)
//   PADCONV_MR    -- rows of W per micro-tile
//   PADCONV_NV    -- vectors of output positions per micro-tile
//   PADCONV_DW_NV -- vectors of output positions per depthwise register block
//   PADCONV_KERNELS_NAME, PADCONV_KERNELS_SYMBOL -- the KernelSet's name and symbol
//   PADCONV_PLANE_SET (optional) -- the KernelSet's plane_set (null if not defined)
//   PADCONV_UNROLLED_STRIDE (optional) -- its unrolled_stride, 1 or 2 (1 if not defined)
//   PADCONV_UNROLLED_DILATION (optional) -- its unrolled_dilation, 1 or 2 (1 if not defined)
//   PADCONV_TILE_FMA (optional) -- the vectors' member that the register tiles' steps call for
//                    a * b + c (fma if not defined; see tile_step_at)
//   PADCONV_SPLIT_ROWS (optional) -- 1 when the plane kernel's tiles may run on across output
//                    rows (the vectors' merge loads lanes from a second place; 0 if not defined)
//   PADCONV_LANE_POSITIONS (optional) -- positions of the plane kernel's channel-lane tiles
//                    (lanes_plane_task), 0 for none (0 if not defined)
//   PADCONV_LANE_PREFETCH (optional) -- channels ahead that the channel-lane tiles ask for
//                    (0 for none; 0 if not defined)
//   PADCONV_LANES_LONG_ROWS (optional) -- 1 when the channel-lane tiles also take output rows
//                    of a position tile or more on Intel CPUs (module.cpp, plan_lanes; 0 if
//                    not defined)
// Everything here has internal linkage, so that code built for one instruction set is never
// linked in place of another's.
//
// GEMM kernel (any C/G): a task is a block of `nb` consecutive flattened output positions of
// one image and group.  Its panel P[q][j] = Xpad[n, g*C/G + c, position(p0 + j) * s + t * d]
// (q = c * taps + t, the row order of W.reshape(M, -1)) is gathered row by row from X -- the
// padding is written as zeros into the panel, X itself is never padded -- and then
// Y[m, p0 + j] = sum_q Wpacked[m][q] * P[q][j] is computed by an MR x NR register tile that
// runs the whole sum over q in one accumulator per element.  Pointwise (1x1, stride 1, no
// pads), X is the panel: each column strip of it (NR positions, every row q) is first copied
// contiguous, then multiplied by every row block of W.
//
// Row kernel (gemm_rows_task, any C/G when the output rows fill the register tiles): the same
// panel rows, read in place from padded, stride-split copies of the input rows.
//
// Plane kernel (gemm_plane_task, rank >= 2, C/G > 1): the same panel rows, read in place from
// zero-padded copies of the input split into stride phases, with the register tiles running
// on across output rows.
//
// Channel-lane tiles (lanes_plane_task, 2-D, PADCONV_LANE_POSITIONS > 0): the plane kernel's
// copy and sums, the register tiles holding output channels in their vectors.
//
// Depthwise kernels (C/G == 1, conv_depthwise.h): a task is a block of output rows of one image
// and channel; 2-D rows with stride 1 are read in place, other shapes from zero-padded copies
// of the input rows split into their stride phases.

#include <stdint.h>
#include <string.h>

#include <type_traits>
#include <utility>

#include "conv_job.h"

namespace {

inline long round_up(long value, long step) { return (value + step - 1) / step * step; }
inline long min_l(long a, long b) { return a < b ? a : b; }
inline long max_l(long a, long b) { return a > b ? a : b; }

template <typename T> struct VecOf;
template <> struct VecOf<float> { typedef VecF V; };
template <> struct VecOf<double> { typedef VecD V; };

#ifndef PADCONV_PLANE_SET
#define PADCONV_PLANE_SET 0
#endif
#ifndef PADCONV_UNROLLED_STRIDE
#define PADCONV_UNROLLED_STRIDE 1
#endif
#ifndef PADCONV_UNROLLED_DILATION
#define PADCONV_UNROLLED_DILATION 1
#endif
#ifndef PADCONV_TILE_FMA
#define PADCONV_TILE_FMA fma
#endif
#ifndef PADCONV_SPLIT_ROWS
#define PADCONV_SPLIT_ROWS 0
#endif
#ifndef PADCONV_LANE_POSITIONS
#define PADCONV_LANE_POSITIONS 0
#endif
#ifndef PADCONV_LANES_LONG_ROWS
#define PADCONV_LANES_LONG_ROWS 0
#endif
#ifndef PADCONV_LANE_PREFETCH
#define PADCONV_LANE_PREFETCH 0
#endif

const int MR = PADCONV_MR;
const int NV = PADCONV_NV;
const int DW_NV = PADCONV_DW_NV;
const int UNROLLED_STRIDE = PADCONV_UNROLLED_STRIDE;
const int UNROLLED_DILATION = PADCONV_UNROLLED_DILATION;
const bool SPLIT_ROWS = PADCONV_SPLIT_ROWS;
const int LANE_POSITIONS = PADCONV_LANE_POSITIONS;
const int LANE_VECTORS = 2;  // vectors of output channels in a channel-lane tile
const bool LANES_LONG_ROWS = PADCONV_LANES_LONG_ROWS;
// channels ahead that a channel-lane tile asks for its reads (0: none).  Measured on an Intel
// Xeon with AVX-512, 2 threads, one channel ahead against none: batch 8 of ResNet's 3x3 3%
// faster, ResNet's 3x3 1.5%, 128 ch 28x28 4.5% (8 images of it 1.7%), 256 ch 14x14 and the
// stem level, 512 ch 7x7 1.7% slower (within the noise); two channels ahead no better.  With
// AVX2 (its short rows only) 0-2% slower: none there.
const int LANE_PREFETCH = PADCONV_LANE_PREFETCH;
const int FEW_ROWS = few_rows(MR);  // a last row block's tile rows (conv_job.h)
const long PREFETCH_ROWS = 16;  // panel rows a register tile asks for ahead of its reads
// channels ahead that the plane kernel's register tile asks for: its rows jump between taps
// and channels, which the hardware prefetcher does not follow (measured with AVX2 on a 3x3
// over 64 channels: about 10% faster)
const long PLANE_PREFETCH = 2;
// An X or Y larger than this comes from L3 or memory, its lines not near the core: the plane
// kernel then asks for them ahead.  fill_plane asks for the next channel's input row while it
// copies a row; each register tile asks for the lines of Y that the next tile stores (measured
// on an AMD EPYC Zen 4, builds taking turns in fresh processes, 2 threads: ResNet's 3x3 on 8
// images, X and Y 6.4 MB, 2-3% faster for X (AVX-512 and AVX2) and 1.5-2% more for Y (AVX-512;
// AVX2's tiles, a line a row, level), 64 channels of 112 x 112 2% for X; an X or Y of 0.2-0.8
// MB, mostly in L2 already, level to 4% slower when asked for).
const long FAR_BYTES = 2L << 20;

// Whether w[0 .. count) are all finite (no infinity, no NaN): the packers' test, run over W
// as it lies so that the blocks then go without a test per weight (4.6x faster than one loop
// doing both: 64 x 576 weights with AVX-512, 4.4 us against 20; packed per call, on ResNet's
// 3x3 that was 2% of two threads' time).
template <typename T>
bool every_finite(const T* w, long count) {
    uint64_t seen = 0;  // conv_job.h, non_finite_bit
    for (long e = 0; e < count; ++e) seen |= non_finite_bit(w[e]);
    return seen == 0;
}

// packed[b][q][i] = w[(b * MR + i) * ck + q] for rows below m, zero after: one group's W.
// Returns whether every weight is finite (every_finite).
template <typename T>
bool pack_w(const T* w, long m, long ck, T* packed) {
    const bool finite = every_finite(w, m * ck);
    for (long b = 0; b * MR < m; ++b) {
        const T* src = w + b * MR * ck;
        T* dst = packed + b * MR * ck;
        const long rows = min_l(MR, m - b * MR);
        if (rows == MR) {
            for (long q = 0; q < ck; ++q)
                for (int i = 0; i < MR; ++i) dst[q * MR + i] = src[i * ck + q];
        } else {
            for (long q = 0; q < ck; ++q)
                for (int i = 0; i < MR; ++i) dst[q * MR + i] = i < rows ? src[i * ck + q] : T(0);
        }
    }
    return finite;
}

// Elements of X read as float32 on the fly (exactly: every binary16 and bfloat16 value is a
// float32 value): X is never copied whole into float32.
inline float widen(float v) { return v; }
inline double widen(double v) { return v; }
inline float widen(Bf16 v) {
    const uint32_t bits = uint32_t(v.bits) << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
inline float widen(Half v) {
#ifdef PADCONV_WIDEN_HALF  // the instruction set's own conversion
    return PADCONV_WIDEN_HALF(v.bits);
#endif
    const uint32_t sign = uint32_t(v.bits & 0x8000) << 16;
    uint32_t exponent = (v.bits >> 10) & 0x1f, mantissa = v.bits & 0x3ff, bits;
    if (exponent == 0x1f) {
        bits = sign | 0x7f800000u | (mantissa << 13);  // inf, nan (payload kept)
    } else if (exponent != 0) {
        bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
        bits = sign;  // +-0
    } else {  // subnormal: normalise
        exponent = 113;
        while (!(mantissa & 0x400)) {
            mantissa <<= 1;
            --exponent;
        }
        bits = sign | (exponent << 23) | ((mantissa & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

// dst[0 .. count) = src[0 .. count) for buffers that do not overlap, inline by vectors (the
// last one ending at count, overlapping the one before): the panel's runs are tens of
// elements, where a call of memcpy costs as much as the copy.
template <typename T>
inline void copy_run(T* dst, const T* src, long count) {
    typedef typename VecOf<T>::V V;
    if (count < V::lanes) {
        for (long e = 0; e < count; ++e) dst[e] = src[e];
        return;
    }
    long e = 0;
    for (; e + V::lanes <= count; e += V::lanes) V::store(dst + e, V::load(src + e));
    if (e < count) V::store(dst + count - V::lanes, V::load(src + count - V::lanes));
}
template <typename T, typename S>
inline void copy_run(T* dst, const S* src, long count) {
    for (long e = 0; e < count; ++e) dst[e] = widen(src[e]);
}
#ifdef PADCONV_WIDEN_HALVES  // the instruction set converts binary16 itself (F16C)
template <>
inline void copy_run<float, Half>(float* dst, const Half* src, long count) {
    PADCONV_WIDEN_HALVES(dst, reinterpret_cast<const unsigned short*>(src), count);
}
#endif

// dst[e] = src[(first + e) * step + shift] where that index lies in [0, size), else 0.
template <typename T, typename S>
void gather_row(T* dst, const S* src, long first, long count, long shift, long step, long size) {
    const long start = first * step + shift;  // input index of e = 0
    long lo = 0, hi = count;
    const long last_ok = size - 1 - start;  // e * step <= last_ok
    if (step == 1) {  // no division
        if (start < 0) lo = min_l(count, -start);
        hi = last_ok < 0 ? 0 : min_l(count, last_ok + 1);
    } else {
        if (start < 0) lo = min_l(count, (-start + step - 1) / step);
        hi = last_ok < 0 ? 0 : min_l(count, last_ok / step + 1);
    }
    if (hi < lo) hi = lo;
    for (long e = 0; e < lo; ++e) dst[e] = T(0);
    const S* from = src + start;
    if (step == 1) {
        if (hi > lo) copy_run(dst + lo, from + lo, hi - lo);
    } else if (step == 2) {  // a constant step the compiler vectorises
        for (long e = lo; e < hi; ++e) dst[e] = widen(from[e * 2]);
    } else {
        for (long e = lo; e < hi; ++e) dst[e] = widen(from[e * step]);
    }
    for (long e = hi; e < count; ++e) dst[e] = T(0);
}

// Flat offset of the input row under output row `row` and outer tap `tap`, or -1 when that
// row lies in the padding.
long input_row_offset(const ConvJob& J, long row, long tap) {
    const int outer = J.rank - 1;
    long o[PADCONV_MAX_RANK], kt[PADCONV_MAX_RANK];
    for (int i = outer - 1; i >= 0; --i) {
        o[i] = row % J.out[i];
        row /= J.out[i];
        kt[i] = tap % J.k[i];
        tap /= J.k[i];
    }
    long offset = 0;
    for (int i = 0; i < outer; ++i) {
        const long index = o[i] * J.s[i] + kt[i] * J.d[i] - J.pb[i];
        if (index < 0 || index >= J.in[i]) return -1;
        offset = offset * J.in[i] + index;
    }
    return offset * J.in[J.rank - 1];
}

// panel[q][j] for q < ck, j < npad (zeros from np on), of the positions p0 .. p0 + np - 1.
// With a stride along the last axis, each input row is first split into its stride phases
// (phases[f][i] = Xpad[(first + i) * s + f], held after the panel in the scratch), and every
// tap of that axis is then one copy of a phase.
template <typename T, typename S>
void build_panel(const ConvJob& J, long n, long g, long p0, long np, long npad, T* panel) {
    T* phases = panel + J.ck * npad;
    const int last = J.rank - 1;
    const long L = J.out[last], KL = J.k[last], SL = J.s[last], DL = J.d[last];
    const long PL = J.pb[last], IL = J.in[last];
    const S* xg = static_cast<const S*>(J.x) + (n * J.c + g * J.cg) * J.in_plane;
    for (long q = 0; q < J.ck; ++q)
        for (long j = np; j < npad; ++j) panel[q * npad + j] = T(0);
    long p = p0;
    while (p < p0 + np) {
        const long row = p / L, first = p % L;
        const long len = min_l(L - first, p0 + np - p);
        const long j = p - p0;
        for (long t = 0; t < J.outer_taps; ++t) {
            const long offset = input_row_offset(J, row, t);
            for (long c = 0; c < J.cg; ++c) {
                T* dst = panel + (c * J.taps + t * KL) * npad + j;
                if (offset < 0) {
                    for (long kw = 0; kw < KL; ++kw) memset(dst + kw * npad, 0, len * sizeof(T));
                    continue;
                }
                const S* src = xg + c * J.in_plane + offset;
                if (SL > 1 && KL > 1) {  // split the row into its stride phases once
                    const long phase_len = len + (KL - 1) * DL / SL;
                    for (long f = 0; f < SL; ++f)
                        gather_row(phases + f * phase_len, src, first, phase_len, f - PL, SL, IL);
                    for (long kw = 0; kw < KL; ++kw)
                        copy_run(dst + kw * npad,
                                 phases + (kw * DL % SL) * phase_len + kw * DL / SL, len);
                    continue;
                }
                for (long kw = 0; kw < KL; ++kw)
                    gather_row(dst + kw * npad, src, first, len, kw * DL - PL, SL, IL);
            }
        }
        p += len;
    }
}

// The MR x NV register tile shared by micro_tile and row_tile: acc[i][v] holds output row i,
// positions v * lanes ..; each helper is one step of the same sum, in the same order.
#if defined(__GNUC__) || defined(__clang__)
#define PADCONV_TILE_INLINE inline __attribute__((always_inline))
#else
#define PADCONV_TILE_INLINE inline
#endif

template <typename T, int R, int N>
PADCONV_TILE_INLINE void tile_zero(typename VecOf<T>::V::type (&acc)[R][N]) {
    typedef typename VecOf<T>::V V;
    for (int i = 0; i < R; ++i)
        for (int v = 0; v < N; ++v) acc[i][v] = V::zero();
}

// acc[i][v] += w(i, q) * row[v * lanes ..]: one row q of the panel times column q of W's
// block, however W is laid out (w: the tile's weight of row i at step q).
// Why AVX2's 6 x 2 tiles (conv_avx2_plane.cpp) call fma_in_place: given the intrinsic, GCC
// writes some sums into the register of the row just loaded, so that each sum wanders from
// register to register; over the 7 unrolled steps of the stem's 7x7 taps the registers no longer
// match at the loop's end, and it stores two sums to the stack and loads them back on every pass
// (seen in the disassembly).  fma_in_place is the same instruction with the sum kept in one
// register (vfmadd231), and that loop then runs with no spill.  Measured each way in turn: the
// stem 4-10% faster, 5x5 and 7x7 taps 5-6%, 3x3 level.  Not on the 4 x 3 tiles, whose 12 sums and
// 4 operands fill all 16 registers: there it cost two moves a step, and pointwise ran 4-12%
// slower.
template <typename T, int R, int N, typename WAt>
PADCONV_TILE_INLINE void tile_fma(typename VecOf<T>::V::type (&acc)[R][N], const WAt& w, long q,
                                  const typename VecOf<T>::V::type (&b)[N]) {
    typedef typename VecOf<T>::V V;
    for (int i = 0; i < R; ++i) {
        const typename V::type a = V::bcast(w(i, q));
        for (int v = 0; v < N; ++v) acc[i][v] = V::PADCONV_TILE_FMA(a, b[v], acc[i][v]);
    }
}

template <typename T, int R, int N, typename WAt>
PADCONV_TILE_INLINE void tile_step_at(typename VecOf<T>::V::type (&acc)[R][N], const WAt& w,
                                      long q, const T* row) {
    typedef typename VecOf<T>::V V;
    typename V::type b[N];
    for (int v = 0; v < N; ++v) b[v] = V::load(row + v * V::lanes);
    tile_fma<T>(acc, w, q, b);
}

// tile_step_at with W packed: wq[i] is row i's weight.
template <typename T, int R, int N>
PADCONV_TILE_INLINE void tile_step(typename VecOf<T>::V::type (&acc)[R][N], const T* wq,
                                   const T* row) {
    tile_step_at<T>(acc, [wq](int i, long) { return wq[i]; }, 0, row);
}

// Where a plane tile's positions run on into the next output row (PADCONV_SPLIT_ROWS): the
// lanes of vector `vector` from `lane` on, and every later vector, read `gap` elements further
// on (past the padded columns between the two rows).  vector -1: the tile lies in one row.
struct RowSplit {
    int vector, lane;
    long gap;
};

// The kernel taps [first, end) (C order) a plane tile sums over: every tap, or, on a 2-D plane,
// without the first axis's taps that read only padding for every output row of the tile
// (tile_taps).
struct TapRange {
    long first, end;
};

// Every tap of J.
inline TapRange all_taps(const ConvJob& J) { return {0, J.taps}; }

// The taps a 2-D plane tile on output rows r0 .. r1 needs: without the first axis's taps
// k0 whose input row r * s0 + k0 * d0 - pb0 lies in the padding for each of those rows (the
// plane holds zeros there).  Leaving a term w * 0 out of a sum changes no bit when w is
// finite: the sum starts at +0 and never becomes -0 (an exact zero rounds to +0), so adding
// +-0 gives it back unchanged; an infinite or NaN w must stay in (w * 0 is NaN, as the spec's
// zero padding gives): the tasks skip only when W was packed with every weight finite
// (pack_w).
inline TapRange tile_taps(const ConvJob& J, long r0, long r1) {
    const long inner = J.taps / J.k[0], k = J.k[0], d = J.d[0];
    // first k0 reaching row 0 from the last row; last k0 still inside from the first row
    const long from = J.pb[0] - r1 * J.s[0], to = J.in[0] - 1 + J.pb[0] - r0 * J.s[0];
    const long lo = from <= 0 ? 0 : (from + d - 1) / d;
    const long hi = to < 0 ? -1 : min_l(k - 1, to / d);
    if (hi < lo) return {0, 0};
    return {lo * inner, (hi + 1) * inner};
}

// The output rows [first, end) whose every tap along the first axis reads X (none of them in
// the padding): r * s - pb >= 0 and r * s - pb + (k - 1) * d < in.  A plane tile on them takes
// every tap, without tile_taps's divisions; the depthwise kernel reads them without checks.
struct RowsInside {
    long first, end;

    RowsInside(long in, long pb, long k, long d, long s) {
        const long last = in - 1 + pb - (k - 1) * d;  // r * s <= last
        first = (pb + s - 1) / s;
        end = last < 0 ? 0 : last / s + 1;
    }
    explicit RowsInside(const ConvJob& J) : RowsInside(J.in[0], J.pb[0], J.k[0], J.d[0], J.s[0]) {}
    // The taps of a tile on rows r0 .. r1 when W is finite (tile_taps), else every tap.
    TapRange taps(const ConvJob& J, bool finite, long r0, long r1) const {
        return finite && (r0 < first || r1 >= end) ? tile_taps(J, r0, r1) : all_taps(J);
    }
};

// Whether W was packed before the run with every weight finite (the packers found so).
inline bool w_packed_finite(const ConvJob& J) {
    return J.w_finite && J.w_finite->load(std::memory_order_relaxed);
}

// Vector v of a step of a tile split at vector SV: before SV as tile_step loads it; vector SV
// with the lanes of `next` (from split.lane on) from `gap` further on; after SV wholly there.
template <typename T, int SV, int v>
PADCONV_TILE_INLINE typename VecOf<T>::V::type split_load(const T* row, long gap,
                                                          typename VecOf<T>::V::part next) {
    typedef typename VecOf<T>::V V;
    const T* at = row + v * V::lanes;
    if constexpr (v < SV) return V::load(at);
    else if constexpr (v == SV) return V::merge(V::load(at), next, at + gap);
    else return V::load(at + gap);
}

// tile_step for a tile split at vector SV (split_load): the same sums in the same order.
template <typename T, int R, int N, int SV, int... v>
PADCONV_TILE_INLINE void tile_step_split(typename VecOf<T>::V::type (&acc)[R][N], const T* wq,
                                         const T* row, long gap,
                                         typename VecOf<T>::V::part next,
                                         std::integer_sequence<int, v...>) {
    const typename VecOf<T>::V::type b[N] = {split_load<T, SV, v>(row, gap, next)...};
    tile_fma<T>(acc, [wq](int i, long) { return wq[i]; }, 0, b);
}

// One step of a plane tile: tile_step, or tile_step_split for split vector SV >= 0.
template <typename T, int R, int N, int SV>
PADCONV_TILE_INLINE void plane_step(typename VecOf<T>::V::type (&acc)[R][N], const T* wq,
                                    const T* row, long gap, typename VecOf<T>::V::part next) {
    if constexpr (SV < 0) tile_step(acc, wq, row);
    else tile_step_split<T, R, N, SV>(acc, wq, row, gap, next,
                                      std::make_integer_sequence<int, N>());
}

// The lanes that plane_step's split vector takes from the next row (none for SV < 0).
template <typename T, int SV>
inline typename VecOf<T>::V::part next_row_lanes(const RowSplit& split) {
    typedef typename VecOf<T>::V V;
    if constexpr (SV < 0) return typename V::part();
    else return V::part_of(split.lane, V::lanes);
}

// The epilogue: bias[i] added to row i (when given), then row i stored at out + i * ostride.
template <typename T, int R, int N>
PADCONV_TILE_INLINE void tile_store(typename VecOf<T>::V::type (&acc)[R][N], const T* bias,
                                    T* out, long ostride) {
    typedef typename VecOf<T>::V V;
    if (bias) {
        for (int i = 0; i < R; ++i) {
            const typename V::type b = V::bcast(bias[i]);
            for (int v = 0; v < N; ++v) acc[i][v] = V::add(acc[i][v], b);
        }
    }
    for (int i = 0; i < R; ++i)
        for (int v = 0; v < N; ++v) V::store(out + i * ostride + v * V::lanes, acc[i][v]);
}

// The bias of W's row block mb, of which `rows` rows are real: copied into `tile_bias` (MR
// values, zeros after the real rows), or null without a bias.
template <typename T>
inline const T* block_bias(const T* bias, long mb, long rows, T* tile_bias) {
    if (!bias) return 0;
    for (int i = 0; i < MR; ++i) tile_bias[i] = i < rows ? bias[mb * MR + i] : T(0);
    return tile_bias;
}

// The `rows` x `cols` corner of a tile computed aside (rows `nr` apart) copied into Y (rows
// `ostride` apart): a tile at the edge of W's rows or of the positions.
template <typename T>
inline void copy_tile_part(const T* tile, long nr, long rows, long cols, T* out, long ostride) {
    for (long i = 0; i < rows; ++i) memcpy(out + i * ostride, tile + i * nr, cols * sizeof(T));
}

// out[i][j] = sum_q w(i, q) * panel[q][j] (+ bias[i]), q ascending, one accumulator per
// element, for j below N vectors (NV, or fewer for a tile at the edge of the positions);
// panel rows are `pstride` apart, output rows `ostride` apart.
template <typename T, int N, typename WAt>
inline void tile_sweep(const WAt& w, const T* panel, long pstride, long ck, const T* bias,
                       T* out, long ostride) {
    typedef typename VecOf<T>::V V;
    typename V::type acc[MR][N];
    tile_zero<T>(acc);
    for (long q = 0; q < ck; ++q) {
        const T* row = panel + q * pstride;
#if defined(__GNUC__) || defined(__clang__)
        // rows of a strip lie pstride apart: fetch some ahead (a hint; never faults)
        __builtin_prefetch(row + PREFETCH_ROWS * pstride);
        __builtin_prefetch(row + PREFETCH_ROWS * pstride + N * V::lanes - 1);
#endif
        tile_step_at<T>(acc, w, q, row);
    }
    tile_store(acc, bias, out, ostride);
}

// tile_sweep with W packed: wp[q][i] is row i's weight at step q.
template <typename T, int N = NV>
inline void micro_tile(const T* wp, const T* panel, long pstride, long ck, const T* bias,
                       T* out, long ostride) {
    tile_sweep<T, N>([wp](int i, long q) { return wp[q * MR + i]; }, panel, pstride, ck, bias,
                     out, ostride);
}

// tile_sweep with W read as given: row i of the tile from w + min(i, rows - 1) * ck (rows
// past W's last repeat it; their sums are never stored).  The same steps in the same order.
template <typename T, int N = NV>
inline void micro_tile_rows(const T* w, long rows, const T* panel, long pstride, long ck,
                            const T* bias, T* out, long ostride) {
    const T* row[MR];
    for (int i = 0; i < MR; ++i) row[i] = w + min_l(i, rows - 1) * ck;
    tile_sweep<T, N>([&row](int i, long q) { return row[i][q]; }, panel, pstride, ck, bias, out,
                     ostride);
}

// One register tile of the GEMM kernel, W packed or read as given (J.w_rows).
template <typename T, int N = NV>
inline void w_tile(const ConvJob& J, const T* w, long rows, const T* panel, long pstride,
                   const T* bias, T* out, long ostride) {
    if (J.w_rows) micro_tile_rows<T, N>(w, rows, panel, pstride, J.ck, bias, out, ostride);
    else micro_tile<T, N>(w, panel, pstride, J.ck, bias, out, ostride);
}

// A 1x1 kernel with stride 1 and no padding: the panel is X itself.
bool is_pointwise(const ConvJob& J) {
    for (int i = 0; i < J.rank; ++i)
        if (J.k[i] != 1 || J.s[i] != 1 || J.pb[i] != 0 || J.in[i] != J.out[i]) return false;
    return true;
}

// strip[q][j] = src[q * stride + j] for j < cols, 0 for cols <= j < nr (q < ck): one column
// strip of the panel (or of X), contiguous, so that the register tiles of every row block of W
// read it from the nearest cache in order.
template <typename T>
void pack_strip(const T* src, long stride, long ck, long cols, T* strip) {
    typedef typename VecOf<T>::V V;
    const long nr = NV * V::lanes;
    if (cols == nr) {
        for (long q = 0; q < ck; ++q) {
#if defined(__GNUC__) || defined(__clang__)
            // rows far apart in X: asked for ahead (a hint; never faults)
            __builtin_prefetch(src + (q + PREFETCH_ROWS) * stride);
            __builtin_prefetch(src + (q + PREFETCH_ROWS) * stride + nr - 1);
#endif
            for (int v = 0; v < NV; ++v)
                V::store(strip + q * nr + v * V::lanes, V::load(src + q * stride + v * V::lanes));
        }
        return;
    }
    for (long q = 0; q < ck; ++q) {
        memcpy(strip + q * nr, src + q * stride, cols * sizeof(T));
        memset(strip + q * nr + cols, 0, (nr - cols) * sizeof(T));
    }
}

// Elements of scratch before the strip: the panel (ck x npad) and one input row's phases,
// rounded up to 64 bytes (the scratch is 64-byte aligned, and so is the strip).
long strip_offset(const ConvJob& J, long npad) {
    const int last = J.rank - 1;
    const long used = J.ck * npad + J.s[last] * (J.out[last] + (J.k[last] - 1) * J.d[last]);
    return round_up(used, 64 / (long)sizeof(double));
}

template <typename T, typename S>
void gemm_task(const ConvJob& J, long task, T* panel) {
    typedef typename VecOf<T>::V V;
    const long nr = NV * V::lanes;
    const long part = task / J.part_tasks, block = task % J.part_tasks % J.blocks;
    const long image_group = task % J.part_tasks / J.blocks;
    const long g = image_group % J.group, n = image_group / J.group;
    const long p0 = block * J.nb, np = min_l(J.nb, J.out_plane - p0), npad = round_up(np, nr);
    // Pointwise: the panel is X itself, read in place (X's type)
    const bool direct = is_pointwise(J) && sizeof(S) == sizeof(T);
    const T* source =
        reinterpret_cast<const T*>(static_cast<const S*>(J.x) + (n * J.c + g * J.cg) * J.in_plane + p0);
    if (!direct) build_panel<T, S>(J, n, g, p0, np, npad, panel);
    T* strip = panel + strip_offset(J, J.nb);
    const long mblocks = (J.mg + MR - 1) / MR;
    const T* wg = static_cast<const T*>(J.w) + g * (J.w_rows ? J.mg : mblocks * MR) * J.ck;
    const T* bias = J.bias ? static_cast<const T*>(J.bias) + g * J.mg : 0;
    T* y = static_cast<T*>(J.y) + (n * J.m + g * J.mg) * J.out_plane + p0;
    T tile[MR * NV * V::lanes];
    T tile_bias[MR];
    // one register tile: rows mb * MR .. of W by the strip of positions j0 .. (from)
    auto tile_at = [&](long mb, long j0, const T* from, long stride) {
        const long rows = min_l(MR, J.mg - mb * MR), cols = min_l(nr, np - j0);
        const T* w = wg + mb * MR * J.ck;
        const T* b = block_bias(bias, mb, rows, tile_bias);
        T* out = y + mb * MR * J.out_plane + j0;
        if (rows == MR && cols == nr) {  // the whole tile lands in Y
            w_tile<T>(J, w, rows, from, stride, b, out, J.out_plane);
            return;
        }
        // an edge of the positions: only the vectors that hold some (the sums are the same)
        if (NV > 1 && cols <= V::lanes) w_tile<T, 1>(J, w, rows, from, stride, b, tile, nr);
        else if (NV > 2 && cols <= 2 * V::lanes)
            w_tile<T, (NV > 2 ? 2 : NV)>(J, w, rows, from, stride, b, tile, nr);
        else w_tile<T>(J, w, rows, from, stride, b, tile, nr);
        copy_tile_part(tile, nr, rows, cols, out, J.out_plane);
    };
    const long mb0 = part * mblocks / J.mparts, mb1 = (part + 1) * mblocks / J.mparts;
    if (direct) {  // each strip of X packed first (its rows are far apart in X), then the
                   // task's range of W's row blocks
        for (long j0 = 0; j0 < npad; j0 += nr) {
            pack_strip<T>(source + j0, J.in_plane, J.ck, min_l(nr, np - j0), strip);
            for (long mb = mb0; mb < mb1; ++mb) tile_at(mb, j0, strip, nr);
        }
        return;
    }
    for (long mb = mb0; mb < mb1; ++mb)  // a row block of W stays near while it sweeps
        for (long j0 = 0; j0 < npad; j0 += nr) tile_at(mb, j0, panel + j0, npad);
}

// dst[f * len + i] = Xpad[f + i * step] of one padded input row (src, or zeros when null).
template <typename T, typename S>
void split_phases(T* dst, const S* src, long len, long step, long pad, long size) {
    for (long f = 0; f < step; ++f) {
        T* phase = dst + f * len;
        if (!src) {
            memset(phase, 0, len * sizeof(T));
            continue;
        }
        gather_row(phase, src, 0, len, f - pad, step, size);
    }
}

// o = the outer output coordinates of output row `row`.
void outer_coords(const ConvJob& J, long row, long* o) {
    for (int i = J.rank - 2; i >= 0; --i) {
        o[i] = row % J.out[i];
        row /= J.out[i];
    }
}

// Flat offset of the input row under outer output coordinates o and outer tap kt, or -1 when
// that row lies in the padding.
long tap_row_offset(const ConvJob& J, const long* o, const long* kt) {
    long offset = 0;
    for (int i = 0; i < J.rank - 1; ++i) {
        const long index = o[i] * J.s[i] + kt[i] * J.d[i] - J.pb[i];
        if (index < 0 || index >= J.in[i]) return -1;
        offset = offset * J.in[i] + index;
    }
    return offset * J.in[J.rank - 1];
}

// o = the outer output coordinates of the next output row.
void next_row(const ConvJob& J, long* o) {
    for (int i = J.rank - 2; i >= 0; --i) {
        if (++o[i] < J.out[i]) return;
        o[i] = 0;
    }
}

// kt = the next outer tap in C order.
void next_tap(const ConvJob& J, long* kt) {
    for (int i = J.rank - 2; i >= 0; --i) {
        if (++kt[i] < J.k[i]) return;
        kt[i] = 0;
    }
}

#include "conv_depthwise.h"

// out[i][j] = sum_q wp[q][i] * B[q][j] (+ bias[i]) as micro_tile, where row q = (c, t, kw) of
// B is read in place from the padded input rows of the row kernel: slot c * outer_taps + t
// (slot_size elements apart), at tap_start[kw] from position j0.
template <typename T>
inline void row_tile(const ConvJob& J, const T* wp, const T* slots, long slot_size,
                     const long* tap_start, const T* bias, T* out, long ostride) {
    typename VecOf<T>::V::type acc[MR][NV];
    tile_zero<T>(acc);
    const long KL = J.k[J.rank - 1], slot_count = J.cg * J.outer_taps;
    const T* wq = wp;
    for (long slot = 0; slot < slot_count; ++slot) {
        const T* base = slots + slot * slot_size;
        for (long kw = 0; kw < KL; ++kw, wq += MR) tile_step(acc, wq, base + tap_start[kw]);
    }
    tile_store(acc, bias, out, ostride);
}

// The row kernel (J.row_kernel; any C/G > 1 with at most PADCONV_DW_TAPS taps on the last
// axis): a task is `nb` consecutive positions of one output row, of one image and group.  For
// every channel c and outer tap t, the input row under it is copied once, zero-padded and
// split into its stride phases (phase f holds Xpad[(p + e) * s + f], e >= 0, p the task's
// first position), so that the panel row q = (c, t, kw) is the window of phase (kw*d) % s
// starting at (kw*d) / s: the register tile reads it in place.  The rows of B are those of
// gemm_task's panel and are summed in the same order: the same bits.
// The padded input rows of output row `row` (positions p0 ..), one slot per channel c and
// outer tap t (slot c * outer_taps + t), each split into its stride phases.
template <typename T, typename S>
void fill_row_slots(const ConvJob& J, const S* xg, long row, long p0, T* slots) {
    const int last = J.rank - 1;
    const long SL = J.s[last], len = J.row_len, slot_size = SL * len;
    long o[PADCONV_MAX_RANK], kt[PADCONV_MAX_RANK];
    outer_coords(J, row, o);
    for (int i = 0; i < last; ++i) kt[i] = 0;
    for (long t = 0; t < J.outer_taps; ++t, next_tap(J, kt)) {
        const long offset = tap_row_offset(J, o, kt);
        for (long c = 0; c < J.cg; ++c) {
            T* slot = slots + (c * J.outer_taps + t) * slot_size;
            for (long f = 0; f < SL; ++f) {
                if (offset < 0) memset(slot + f * len, 0, len * sizeof(T));
                else gather_row(slot + f * len, xg + c * J.in_plane + offset, p0, len,
                                f - J.pb[last], SL, J.in[last]);
            }
        }
    }
}

// The row kernel (J.row_kernel; any C/G > 1 with at most PADCONV_DW_TAPS taps on the last
// axis): a task is `nb` consecutive positions of `rows` consecutive output rows, of one image
// and group.  For every output row, channel c and outer tap t, the input row under it is
// copied once, zero-padded and split into its stride phases (phase f holds
// Xpad[(p + e) * s + f], e >= 0, p the task's first position), so that the panel row
// q = (c, t, kw) is the window of phase (kw*d) % s starting at (kw*d) / s: the register tile
// reads it in place.  The rows of B are those of gemm_task's panel, summed in the same
// order: the same bits.
template <typename T, typename S>
void gemm_rows_task(const ConvJob& J, long task, T* slots) {
    typedef typename VecOf<T>::V V;
    const long nr = NV * V::lanes;
    const int last = J.rank - 1;
    const long L = J.out[last], KL = J.k[last], SL = J.s[last], DL = J.d[last];
    const long block = task % J.blocks, rest = task / J.blocks;
    const long rb = rest % J.row_blocks, image_group = rest / J.row_blocks;
    const long g = image_group % J.group, n = image_group / J.group;
    const long r0 = rb * J.rows, r1 = min_l(J.outer_out, r0 + J.rows);
    const long p0 = block * J.nb, np = min_l(J.nb, L - p0), npad = round_up(np, nr);
    const long len = J.row_len, slot_size = SL * len, row_slots = J.cg * J.outer_taps * slot_size;
    const S* xg = static_cast<const S*>(J.x) + (n * J.c + g * J.cg) * J.in_plane;
    for (long r = r0; r < r1; ++r) fill_row_slots<T, S>(J, xg, r, p0, slots + (r - r0) * row_slots);
    long tap_start[PADCONV_DW_TAPS];
    for (long kw = 0; kw < KL; ++kw) tap_start[kw] = (kw * DL % SL) * len + kw * DL / SL;
    const long mblocks = (J.mg + MR - 1) / MR;
    const T* wg = static_cast<const T*>(J.w) + g * mblocks * MR * J.ck;
    const T* bias = J.bias ? static_cast<const T*>(J.bias) + g * J.mg : 0;
    T* y = static_cast<T*>(J.y) + (n * J.m + g * J.mg) * J.out_plane + p0;
    T tile[MR * NV * V::lanes];
    T tile_bias[MR];
    for (long mb = 0; mb < mblocks; ++mb) {
        const long rows = min_l(MR, J.mg - mb * MR);
        const T* w = wg + mb * MR * J.ck;
        const T* b = block_bias(bias, mb, rows, tile_bias);
        for (long r = r0; r < r1; ++r) {
            const T* row_slot = slots + (r - r0) * row_slots;
            for (long j0 = 0; j0 < npad; j0 += nr) {
                const long cols = min_l(nr, np - j0);
                long starts[PADCONV_DW_TAPS];
                for (long kw = 0; kw < KL; ++kw) starts[kw] = tap_start[kw] + j0;
                T* out = y + mb * MR * J.out_plane + r * L + j0;
                if (rows == MR && cols == nr) {
                    row_tile<T>(J, w, row_slot, slot_size, starts, b, out, J.out_plane);
                    continue;
                }
                row_tile<T>(J, w, row_slot, slot_size, starts, b, tile, nr);
                copy_tile_part(tile, nr, rows, cols, out, J.out_plane);
            }
        }
    }
}

// The plane kernel (J.plane_kernel; rank >= 2, C/G > 1): along every axis the zero-padded
// input is split into its stride phases (phase f holds Xpad[f], Xpad[f + s], ...), so that tap
// k reads phase (k * d) % s from element o + (k * d) / s; every axis but the first is padded
// to P[i] = out[i] + ((k[i] - 1) * d[i]) / s[i], and output position (o[0], o[1], ...) is the
// virtual position v = o[0] * S + (o[1] * P[2] + o[2]) * ... with S = prod(P[1:])
// (J.plane_width).  Panel row q = (c, t) over consecutive virtual positions is then one
// contiguous window of one phase of channel c, a fixed distance after v: the register tile
// reads it in place, with no panel built.  Virtual positions with some o[i] >= out[i] (windows
// that run on into the next row or plane) are computed and dropped.  A task is `nb` virtual
// positions of one image and group; the slabs (index of the first axis) of every phase they
// read are copied once per channel into the scratch: channel c, then phase of the first axis,
// then phase of the other axes, then plane_rows slabs of S elements.  The rows of B and their
// order are gemm_task's: the same bits.  2-D jobs whose output rows are a whole number of
// tiles (or, with PADCONV_SPLIT_ROWS, at least one tile) take the real positions only
// (plane_aligned): a tile that runs on from one row into the next reads the next row's
// lanes past the padded columns between them (RowSplit), and none lies on the padding.

// P[i], the padded extent of axis i in the plane kernel's copy.
inline long plane_extent(const ConvJob& J, int i) {
    return J.out[i] + (J.k[i] - 1) * J.d[i] / J.s[i];
}

// Where tap t (C order) reads in a channel's copy, from the virtual position it computes.
inline long plane_tap_offset(const ConvJob& J, long t) {
    long shift = 0, step = 1, phase = 0, phase_step = 1;
    for (int i = J.rank - 1; i >= 0; --i) {
        const long at = t % J.k[i] * J.d[i];
        t /= J.k[i];
        shift += at / J.s[i] * step;
        phase += at % J.s[i] * phase_step;
        step *= i > 0 ? plane_extent(J, i) : 0;
        phase_step *= J.s[i];
    }
    return phase * J.plane_rows * J.plane_width + shift;
}

// out[i * ostride + e] = sum_q wp[q][i] * B[q][e] (+ bias[i]) for R rows (MR, or FEW_ROWS for
// a last row block that has no more) of nr positions, row q = (c, t) of B read at
// `at` + c * cs + tap_offsets[t]; wp is packed for MR rows either way.  SV >= 0: the tile's
// positions run on into the next output row at vector SV (split; plane_step).
template <typename T, int R = MR, int SV = -1>
inline void plane_tile(const ConvJob& J, const T* wp, const T* at, long cs,
                       const long* tap_offsets, TapRange taps, RowSplit split, const T* bias,
                       T* out, long ostride) {
    typename VecOf<T>::V::type acc[R][NV];
    tile_zero<T>(acc);
    const typename VecOf<T>::V::part next = next_row_lanes<T, SV>(split);
    const long reach = NV * VecOf<T>::V::lanes - 1 + (SV < 0 ? 0 : split.gap);
    const long w_skip = (J.taps - (taps.end - taps.first)) * MR;  // left out, each channel
    const T* wq = wp + taps.first * MR;
    for (long c = 0; c < J.cg; ++c, at += cs, wq += w_skip)
        for (long t = taps.first; t < taps.end; ++t, wq += MR) {
#if defined(__GNUC__) || defined(__clang__)
            const T* ahead = at + PLANE_PREFETCH * cs + tap_offsets[t];
            __builtin_prefetch(ahead);
            __builtin_prefetch(ahead + reach);
#endif
            plane_step<T, R, NV, SV>(acc, wq, at + tap_offsets[t], split.gap, next);
        }
    tile_store(acc, bias, out, ostride);
}

// plane_tile for a last axis of KL taps with stride S and dilation D (S 1 or 2 with D 1, or
// S 1 with D 2), unrolled over them: tap kx reads (kx * D) / S elements after outer tap o's
// offset, in the last axis's phase (kx * D) % S (one phase copy further), so that every step's
// address is one of S registers and a constant, and the loop's own instructions come once per
// outer tap instead of once per tap.  Measured, each way in turn in one process: ResNet's 3x3
// 2-3% and its batch of 8 5% faster with AVX-512, with AVX2 on 4 x 3 tiles (whose 16 registers
// the unrolled steps crowd) within the noise; the 7x7 stride-2 stem 10% faster on AVX2's 6 x 2
// tiles, and within the noise on AVX-512 (so unrolled there for stride 1 only).  The steps and
// their order are plane_tile's: the same bits.
template <typename T, int KL, int S, int D, int R = MR, int SV = -1>
void plane_tile_unrolled(const ConvJob& J, const T* wp, const T* at, long cs,
                         const long* tap_offsets, TapRange taps, RowSplit split,
                         const T* bias, T* out, long ostride) {
    const long lanes = VecOf<T>::V::lanes;
    const long phase_step = S > 1 ? J.plane_rows * J.plane_width : 0;
    typename VecOf<T>::V::type acc[R][NV];
    tile_zero<T>(acc);
    const typename VecOf<T>::V::part next = next_row_lanes<T, SV>(split);
    const long gap = SV < 0 ? 0 : split.gap;
    const long w_skip = (J.taps - (taps.end - taps.first)) * MR;  // left out, each channel
    const long o_end = taps.end / KL;
    const T* wq = wp + taps.first * MR;
    for (long c = 0; c < J.cg; ++c, at += cs, wq += w_skip)
        for (long o = taps.first / KL; o < o_end; ++o, wq += KL * MR) {
            const T* row = at + tap_offsets[o * KL];
#if defined(__GNUC__) || defined(__clang__)
            for (int f = 0; f < (S < KL ? S : KL); ++f) {  // each phase's reads, asked ahead
                const T* ahead = row + f * phase_step + PLANE_PREFETCH * cs;
                __builtin_prefetch(ahead);
                __builtin_prefetch(ahead + (KL - 1) * D / S + NV * lanes - 1 + gap);
            }
#pragma GCC unroll 8
#endif
            for (int kx = 0; kx < KL; ++kx)
                plane_step<T, R, NV, SV>(acc, wq + kx * MR,
                                         row + kx * D % S * phase_step + kx * D / S, gap, next);
        }
    tile_store(acc, bias, out, ostride);
}

template <typename T>
using PlaneTile = void (*)(const ConvJob&, const T*, const T*, long, const long*, TapRange,
                           RowSplit, const T*, T*, long);

// plane_tile_unrolled for KL = taps (1 to 7), stride S, dilation D, R rows and split vector SV;
// null for more taps.
template <typename T, int S, int D, int R, int SV>
PlaneTile<T> unrolled_for_taps(long taps) {
    switch (taps) {
        case 1: return plane_tile_unrolled<T, 1, S, D, R, SV>;
        case 2: return plane_tile_unrolled<T, 2, S, D, R, SV>;
        case 3: return plane_tile_unrolled<T, 3, S, D, R, SV>;
        case 4: return plane_tile_unrolled<T, 4, S, D, R, SV>;
        case 5: return plane_tile_unrolled<T, 5, S, D, R, SV>;
        case 6: return plane_tile_unrolled<T, 6, S, D, R, SV>;
        case 7: return plane_tile_unrolled<T, 7, S, D, R, SV>;
        default: return 0;
    }
}

// The plane tile of R rows and split vector SV unrolled over the last axis's taps for J when
// plane_tile_unrolled_for says so; else null (plane_tile).
template <typename T, int R = MR, int SV = -1>
PlaneTile<T> unrolled_plane_tile(const ConvJob& J) {
    if (!plane_tile_unrolled_for(J, UNROLLED_STRIDE, UNROLLED_DILATION)) return 0;
    const int last = J.rank - 1;
    if constexpr (UNROLLED_STRIDE >= 2)
        if (J.s[last] == 2) return unrolled_for_taps<T, 2, 1, R, SV>(J.k[last]);
    if constexpr (UNROLLED_DILATION >= 2)
        if (J.d[last] == 2) return unrolled_for_taps<T, 1, 2, R, SV>(J.k[last]);
    return unrolled_for_taps<T, 1, 1, R, SV>(J.k[last]);
}

// tiles[v]: J's plane tile of R rows split at vector v (PADCONV_SPLIT_ROWS; else null).
template <typename T, int R, int... SV>
void split_tiles(const ConvJob& J, PlaneTile<T> (&tiles)[NV], std::integer_sequence<int, SV...>) {
    if constexpr (SPLIT_ROWS) {
        PlaneTile<T> unrolled[NV] = {unrolled_plane_tile<T, R, SV>(J)...};
        ((tiles[SV] = unrolled[SV] ? unrolled[SV] : plane_tile<T, R, SV>), ...);
    } else {
        ((tiles[SV] = 0), ...);
    }
}

// Asks for every cache line of `bytes` bytes from `from`, to be written when WRITE (taken for
// this core alone); a hint: no fault, no result.
template <bool WRITE = false>
inline void prefetch_bytes(const void* from, long bytes) {
#if defined(__GNUC__) || defined(__clang__)
    const char* p = static_cast<const char*>(from);
    for (long b = 0; b < bytes; b += 64) __builtin_prefetch(p + b, WRITE);
    __builtin_prefetch(p + bytes - 1, WRITE);
#else
    (void)from;
    (void)bytes;
#endif
}

// The copy of one group's channels that a task reads (see above): slab first + i of phase
// (f[0], F) of channel c holds Xpad[c, (first + i) * s[0] + f[0], ...] at the phase F of the
// other axes, over their padded extents P[1:] (zeros outside X).
template <typename T, typename S>
void fill_plane(const ConvJob& J, const S* xg, long first, T* plane) {
    const int last = J.rank - 1;
    const long width = plane_extent(J, last);
    const long rows = J.plane_width / width;  // padded rows of a slab
    const long in_slab = J.in_plane / J.in[0];
    long inner_phases = 1;
    for (int a = 1; a < J.rank; ++a) inner_phases *= J.s[a];
    const bool ahead = J.n * J.c * J.in_plane * long(sizeof(S)) > FAR_BYTES;
    T* dst = plane;
    for (long c = 0; c < J.cg; ++c) {
        for (long f0 = 0; f0 < J.s[0]; ++f0) {
            for (long phase = 0; phase < inner_phases; ++phase) {
                long f[PADCONV_MAX_RANK];
                for (long a = last, rest = phase; a >= 1; --a) {
                    f[a] = rest % J.s[a];
                    rest /= J.s[a];
                }
                for (long i = 0; i < J.plane_rows; ++i) {
                    const long index0 = (first + i) * J.s[0] + f0 - J.pb[0];
                    const bool outside = index0 < 0 || index0 >= J.in[0];
                    const S* xs = xg + c * J.in_plane + (outside ? 0 : index0 * in_slab);
                    for (long row = 0; row < rows; ++row, dst += width) {
                        long offset = outside ? -1 : 0, rest = row, place = 1;
                        for (int a = last - 1; a >= 1 && offset >= 0; --a) {
                            const long padded = plane_extent(J, a);
                            const long index = rest % padded * J.s[a] + f[a] - J.pb[a];
                            rest /= padded;
                            if (index < 0 || index >= J.in[a]) offset = -1;
                            else offset += index * place;
                            place *= J.in[a];
                        }
                        if (offset < 0) {
                            memset(dst, 0, width * sizeof(T));
                            continue;
                        }
                        const S* src = xs + offset * J.in[last];
                        // the next channel's row, once (the inner phases read one row)
                        if (ahead && phase == 0 && c + 1 < J.cg)
                            prefetch_bytes(src + J.in_plane, J.in[last] * long(sizeof(S)));
                        gather_row(dst, src, 0, width, f[last] - J.pb[last], J.s[last],
                                   J.in[last]);
                    }
                }
            }
        }
    }
}

// The real positions among the `count` virtual positions v .. of a tile (`nr` apart in it,
// `rows` rows) copied into Y (rows `ostride` apart), a run along the last axis at a time.
template <typename T>
inline void scatter_tile(const ConvJob& J, const T* tile, long nr, long rows, long v,
                         long count, T* out, long ostride) {
    const int last = J.rank - 1;
    const long width = plane_extent(J, last);
    long e = 0;
    while (e < count) {
        long rest = (v + e) / width, flat = 0, place = J.out[last];
        const long j = (v + e) % width, run = min_l(count - e, width - j);
        bool real = j < J.out[last];
        for (int a = last - 1; a >= 0 && real; --a) {
            const long padded = a == 0 ? J.out[0] : plane_extent(J, a);
            const long index = rest % padded;
            rest /= padded;
            real = index < J.out[a];
            flat += index * place;
            place *= J.out[a];
        }
        const long length = min_l(run, J.out[last] - j);
        for (long i = 0; real && i < rows; ++i)
            memcpy(out + i * ostride + flat + j, tile + i * nr + e, length * sizeof(T));
        e += run;
    }
}

// Where in an output plane virtual position v lies when the `count` positions from v are all
// real and in one output row (a tile stored straight into Y); -1 otherwise.
inline long output_run(const ConvJob& J, long v, long count) {
    const int last = J.rank - 1;
    const long width = plane_extent(J, last), j = v % width;
    if (j + count > J.out[last]) return -1;
    long rest = v / width, flat = j, place = J.out[last];
    for (int a = last - 1; a >= 0; --a) {
        const long padded = a == 0 ? J.out[0] : plane_extent(J, a);
        const long index = rest % padded;
        rest /= padded;
        if (index >= J.out[a]) return -1;
        flat += index * place;
        place *= J.out[a];
    }
    return flat;
}

// Units [u0, u1) of plane task `task`, in image-group `image_group`: the `blocks` tasks of an
// image-group share its units (of `nr` virtual positions, see ConvJob) equally.
inline void plane_task_units(const ConvJob& J, long nr, long task, long& image_group, long& u0,
                             long& u1) {
    const long units = (J.plane_end + nr - 1) / nr, block = task % J.blocks;
    image_group = task / J.blocks;
    u0 = block * units / J.blocks;
    u1 = (block + 1) * units / J.blocks;
}

template <typename T, typename S>
void gemm_plane_task(const ConvJob& J, long task, T* plane) {
    typedef typename VecOf<T>::V V;
    const long nr = NV * V::lanes;
    const long slab = J.plane_width, cs = plane_channel(J);
    const long virtual_end = J.plane_end;
    long image_group, u0, u1;  // register tiles [u0, u1), at most nb / nr of them
    plane_task_units(J, nr, task % J.part_tasks, image_group, u0, u1);
    const long g = image_group % J.group, n = image_group / J.group;
    const long L = J.out[J.rank - 1];  // positions of an output row (plane_aligned)
    const long v0 = u0 * nr, v1 = min_l(u1 * nr, virtual_end);
    const long first = J.plane_aligned ? v0 / L : v0 / slab;
    const S* xg = static_cast<const S*>(J.x) + (n * J.c + g * J.cg) * J.in_plane;
    fill_plane<T, S>(J, xg, first, plane);
    long tap_offsets[PADCONV_PLANE_TAPS];
    for (long t = 0; t < J.taps; ++t) tap_offsets[t] = plane_tap_offset(J, t);
    const T* at_v0 = plane + (v0 - first * slab);
    const PlaneTile<T> unrolled = unrolled_plane_tile<T>(J);
    const PlaneTile<T> unrolled_few = unrolled_plane_tile<T, FEW_ROWS>(J);
    PlaneTile<T> split_at[NV], split_few[NV];
    split_tiles<T, MR>(J, split_at, std::make_integer_sequence<int, NV>());
    split_tiles<T, FEW_ROWS>(J, split_few, std::make_integer_sequence<int, NV>());
    RowSplit split = {-1, 0, slab - L};
    auto tile_at = [&](const T* w, long rows, const T* at, TapRange taps, const T* b, T* out,
                       long ostride) {
        const bool few = rows <= FEW_ROWS;  // a last row block with few rows: no idle FMAs
        if (split.vector >= 0) {
            (few ? split_few : split_at)[split.vector](J, w, at, cs, tap_offsets, taps, split, b,
                                                       out, ostride);
        } else if (few) {
            if (unrolled_few)
                unrolled_few(J, w, at, cs, tap_offsets, taps, split, b, out, ostride);
            else
                plane_tile<T, FEW_ROWS>(J, w, at, cs, tap_offsets, taps, split, b, out, ostride);
        } else if (unrolled) {
            unrolled(J, w, at, cs, tap_offsets, taps, split, b, out, ostride);
        } else {
            plane_tile<T>(J, w, at, cs, tap_offsets, taps, split, b, out, ostride);
        }
    };
    const long mblocks = (J.mg + MR - 1) / MR, part = task / J.part_tasks;
    const T* wg = static_cast<const T*>(J.w) + g * mblocks * MR * J.ck;
    const bool finite = w_packed_finite(J);
    const RowsInside inside(J);
    const T* bias = J.bias ? static_cast<const T*>(J.bias) + g * J.mg : 0;
    T* y = static_cast<T*>(J.y) + (n * J.m + g * J.mg) * J.out_plane;
    T tile[MR * NV * V::lanes];
    T tile_bias[MR];
    const long mb0 = part * mblocks / J.mparts, mb1 = (part + 1) * mblocks / J.mparts;
    const bool y_ahead = J.n * J.m * J.out_plane * long(sizeof(T)) > FAR_BYTES;
    for (long mb = mb0; mb < mb1; ++mb) {  // a row block of W stays near while it sweeps
        const long rows = min_l(MR, J.mg - mb * MR);
        const T* w = wg + mb * MR * J.ck;
        const T* b = block_bias(bias, mb, rows, tile_bias);
        T* y_block = y + mb * MR * J.out_plane;
        const long stored = rows <= FEW_ROWS ? FEW_ROWS : MR;  // rows the tile writes
        if (J.plane_aligned) {  // the real positions, each tile's in one or two output rows
            long row = v0 / L, j = v0 % L;
            for (long v = v0; v < v1; v += nr) {
                const T* at = plane + (row - first) * slab + j;
                const long count = min_l(nr, v1 - v), in_row = L - j;
                // split where the tile's real positions run on into the next row (a partial
                // last tile reads on there as well, in bounds, its lanes then dropped)
                split.vector = in_row < count ? int(in_row / V::lanes) : -1;
                split.lane = int(in_row % V::lanes);
                const TapRange taps = inside.taps(J, finite, row, row + (split.vector >= 0));
                if (y_ahead && v + nr < v1)  // the rows of Y of the task's next tile
                    for (long i = 0; i < rows; ++i)
                        prefetch_bytes<true>(y_block + v + nr + i * J.out_plane,
                                             nr * long(sizeof(T)));
                if (rows == stored && count == nr) {
                    tile_at(w, rows, at, taps, b, y_block + v, J.out_plane);
                } else {
                    tile_at(w, rows, at, taps, b, tile, nr);
                    copy_tile_part(tile, nr, rows, count, y_block + v, J.out_plane);
                }
                if ((j += nr) >= L) {  // at most one row on: nr <= L
                    j -= L;
                    ++row;
                }
            }
            split.vector = -1;
            continue;
        }
        for (long v = v0; v < v1; v += nr) {
            const long count = min_l(nr, v1 - v);
            const long at_y = rows == stored && count == nr ? output_run(J, v, nr) : -1;
            if (at_y >= 0) {  // the whole tile lands in one row of Y
                tile_at(w, rows, at_v0 + (v - v0), all_taps(J), b, y_block + at_y, J.out_plane);
                continue;
            }
            tile_at(w, rows, at_v0 + (v - v0), all_taps(J), b, tile, nr);
            scatter_tile(J, tile, nr, rows, v, count, y_block, J.out_plane);
        }
    }
}

// The plane kernel's channel-lane tiles (J.plane_kernel 2, 2-D): the plane copy and the
// sums of gemm_plane_task, but each register tile holds up to LANE_VECTORS vectors of output
// channels (W's packed row blocks, one or two a vector) at P consecutive positions of one
// output row: acc[p][k] += broadcast(B[q][p]) * W[q][the k-th vector's rows], q = (c, t)
// ascending, one accumulator per output element, the bias added after the sum: the sums and
// the order of the position tiles, so the same bits.  The position tiles keep 48 positions
// (AVX-512; 24 AVX2) in their vectors, idle on rows of 7, 14 or 28 and on the padded columns
// between rows; these keep 32 channels (16) (module.cpp, plan_lanes, has the measurements).
// A row is cut into pieces of equal size (a row of 29 on 14-position tiles: 9, 10 and 10,
// not 14, 14 and 1), and rows of LANE_POSITIONS / 2 or fewer take two rows a tile.

// Output channels of a channel-lane tile, LANE_VECTORS vectors of them (0: none for T).  The
// sets that have them are those whose vectors hold MR or 2 MR rows: the ones measured with them
// (module.cpp, plan_lanes).
template <typename T>
constexpr int lane_rows() {
    const int lanes = VecOf<T>::V::lanes;
    return LANE_POSITIONS > 0 && (lanes == MR || lanes == 2 * MR) ? LANE_VECTORS * lanes : 0;
}

// packed[b][q][i] = w[(b * L + i) * ck + q] for rows below m, zero after, L a vector's lanes:
// one group's W for the channel-lane tiles, whose steps each load whole vectors of it.  Read
// from pack_w's MR-row blocks, two halves joined a vector, they ran slower on an Intel Xeon,
// whose insert takes a port of the FMAs (2 threads: AVX-512 128 ch 28x28 3.6%, 512 ch 7x7
// 2.6%; AVX2 256 ch 14x14 10%, 512 ch 7x7 14%).  Full blocks go by the vectors' transposes
// in registers: by elements, 16 rows a step, a W in cache (64 x 576) took 2.3x as long.
// Returns whether every weight is finite (every_finite).
template <typename T>
bool pack_w_lanes(const T* w, long m, long ck, T* packed) {
    typedef typename VecOf<T>::V V;
    if constexpr (lane_rows<T>() == 0 || V::lanes == MR) {  // the same blocks
        return pack_w<T>(w, m, ck, packed);
    } else {
        const bool finite = every_finite(w, m * ck);
        const long L = V::lanes;
        for (long b = 0; b * L < m; ++b) {
            const T* src = w + b * L * ck;
            T* dst = packed + b * L * ck;
            const long rows = min_l(L, m - b * L);
            long q = 0;
            if (rows == L)
                for (; q + L <= ck; q += L) V::transpose(src + q, ck, dst + q * L);
            for (; q < ck; ++q)
                for (long i = 0; i < L; ++i) dst[q * L + i] = i < rows ? src[i * ck + q] : T(0);
        }
        return finite;
    }
}

// out[i * ostride + p] = sum_q W[i][q] * B[q][p] (+ bias[i]) for i < rows (at most H vectors'
// lanes) and P positions, row q = (c, t) of B read at `at` + c * cs + tap_offsets[t] + p, and
// for positions p >= R (those of the next output row, when a tile takes two) `next` further on;
// W in H blocks of a vector's rows from wp (pack_w_lanes), bstride apart.
template <typename T, int P, int H, int R = P>
void lane_tile(const ConvJob& J, const T* wp, long bstride, const T* at, long cs,
               const long* tap_offsets, TapRange taps, long next, const T* bias, long rows,
               T* out, long ostride) {
    typedef typename VecOf<T>::V V;
    constexpr int K = H, L = V::lanes;
    typename V::type acc[P][K];
    for (int p = 0; p < P; ++p)
        for (int k = 0; k < K; ++k) acc[p][k] = V::zero();
    const long w_skip = (J.taps - (taps.end - taps.first)) * L;  // left out, each channel
    const T* wq = wp + taps.first * L;
    for (long c = 0; c < J.cg; ++c, at += cs, wq += w_skip)
        for (long t = taps.first; t < taps.end; ++t, wq += L) {
            typename V::type w[K];
            for (int k = 0; k < K; ++k) w[k] = V::load(wq + k * bstride);
            const T* x = at + tap_offsets[t];
#if defined(__GNUC__) || defined(__clang__)
            if constexpr (LANE_PREFETCH > 0) {  // this tap's reads, channels ahead
                __builtin_prefetch(x + LANE_PREFETCH * cs);
                __builtin_prefetch(x + LANE_PREFETCH * cs + R - 1);
            }
#endif
            const T* x_next = x + next - R;
            for (int p = 0; p < P; ++p) {
                const typename V::type b = V::bcast(p < R ? x[p] : x_next[p]);
                for (int k = 0; k < K; ++k) acc[p][k] = V::PADCONV_TILE_FMA(b, w[k], acc[p][k]);
            }
        }
    alignas(64) T sums[P][K * V::lanes];  // transposed on the way out: Y's rows are channels
    for (int p = 0; p < P; ++p)
        for (int k = 0; k < K; ++k) {
            typename V::type sum = acc[p][k];
            if (bias) sum = V::add(sum, V::load(bias + k * V::lanes));
            V::store(sums[p] + k * V::lanes, sum);
        }
    for (long i = 0; i < rows; ++i)
        for (int p = 0; p < P; ++p) out[i * ostride + p] = sums[p][i];
}

template <typename T>
using LaneTile = void (*)(const ConvJob&, const T*, long, const T*, long, const long*,
                          TapRange, long, const T*, long, T*, long);

// The channel-lane tiles of H row blocks: one[p - 1] of p positions of a row (p = 1 ..
// LANE_POSITIONS), two[l - 1] of two whole rows of l positions (2 l <= LANE_POSITIONS).
template <typename T>
struct LaneTiles {
    LaneTile<T> one[LANE_POSITIONS];
    LaneTile<T> two[LANE_POSITIONS / 2];
};

template <typename T, int H, int... P>
void one_row_tiles(LaneTiles<T>& tiles, std::integer_sequence<int, P...>) {
    ((tiles.one[P] = lane_tile<T, P + 1, H>), ...);
}

template <typename T, int H, int... L>
void two_row_tiles(LaneTiles<T>& tiles, std::integer_sequence<int, L...>) {
    ((tiles.two[L] = lane_tile<T, 2 * (L + 1), H, L + 1>), ...);
}

// tiles[h - 1]: the tiles of h = 1 .. LANE_VECTORS vectors of output channels.
template <typename T, int... H>
void lane_tile_table(LaneTiles<T>* tiles, std::integer_sequence<int, H...>) {
    (one_row_tiles<T, H + 1>(tiles[H], std::make_integer_sequence<int, LANE_POSITIONS>()), ...);
    (two_row_tiles<T, H + 1>(tiles[H], std::make_integer_sequence<int, LANE_POSITIONS / 2>()),
     ...);
}

// A task of the channel-lane tiles: output rows [r0, r1) of one image and group (units of
// out[1] positions, plane_task_units) on a range of blocks of lane_rows channels (mparts).  With J.w_rows
// (one image-group, one block of rows: every block of W read by one task), each task packs
// its blocks of W into its buffer, after its plane, as it reaches them.
template <typename T, typename S>
void lanes_plane_task(const ConvJob& J, long task, T* plane) {
    if constexpr (lane_rows<T>() > 0) {
        constexpr int LW = VecOf<T>::V::lanes, LR = lane_rows<T>(), HB = LR / LW;  // HB vectors
        const long slab = J.plane_width, cs = plane_channel(J), L = J.out[1];
        const long pieces = (L + LANE_POSITIONS - 1) / LANE_POSITIONS;  // tiles a row
        const RowsInside inside(J);
        long image_group, r0, r1;
        plane_task_units(J, L, task % J.part_tasks, image_group, r0, r1);
        const long g = image_group % J.group, n = image_group / J.group;
        const S* xg = static_cast<const S*>(J.x) + (n * J.c + g * J.cg) * J.in_plane;
        fill_plane<T, S>(J, xg, r0, plane);
        long tap_offsets[PADCONV_PLANE_TAPS];
        for (long t = 0; t < J.taps; ++t) tap_offsets[t] = plane_tap_offset(J, t);
        LaneTiles<T> tiles[HB];
        lane_tile_table<T>(tiles, std::make_integer_sequence<int, HB>());
        const long wblocks = (J.mg + LW - 1) / LW, bstride = LW * J.ck;
        const long mblocks = (J.mg + LR - 1) / LR, part = task / J.part_tasks;
        const T* wg = static_cast<const T*>(J.w) + g * (J.w_rows ? J.mg : wblocks * LW) * J.ck;
        T* w_block = plane + lanes_plane_elems(J);  // J.w_rows: a block of W packed here
        const T* bias = J.bias ? static_cast<const T*>(J.bias) + g * J.mg : 0;
        T* y = static_cast<T*>(J.y) + (n * J.m + g * J.mg) * J.out_plane;
        alignas(64) T tile_bias[LR];
        const long mb0 = part * mblocks / J.mparts, mb1 = (part + 1) * mblocks / J.mparts;
        for (long mb = mb0; mb < mb1; ++mb) {  // a block of W stays near while it sweeps
            const long rows = min_l(LR, J.mg - mb * LR);
            const long blocks = min_l(HB, wblocks - mb * HB);
            for (int i = 0; bias && i < LR; ++i)
                tile_bias[i] = i < rows ? bias[mb * LR + i] : T(0);
            const T* w = wg + mb * HB * bstride;
            bool finite = w_packed_finite(J);
            if (J.w_rows) {  // this task alone reads the block: packed as it is needed
                finite = pack_w_lanes<T>(wg + mb * LR * J.ck, rows, J.ck, w_block);
                w = w_block;
            }
            T* y_block = y + mb * LR * J.out_plane;
            const LaneTiles<T>& tile = tiles[blocks - 1];
            const T* b = bias ? tile_bias : 0;
            for (long r = r0; r < r1; ++r) {
                const T* at = plane + (r - r0) * slab;
                const bool two = 2 * L <= LANE_POSITIONS && r + 1 < r1;  // rows r and r + 1
                const TapRange taps = inside.taps(J, finite, r, r + two);
                if (two) {
                    tile.two[L - 1](J, w, bstride, at, cs, tap_offsets, taps, slab, b, rows,
                                    y_block + r * L, J.out_plane);
                    ++r;
                    continue;
                }
                for (long piece = 0; piece < pieces; ++piece) {  // pieces of equal size
                    const long j = piece * L / pieces, count = (piece + 1) * L / pieces - j;
                    tile.one[count - 1](J, w, bstride, at + j, cs, tap_offsets, taps, 0, b, rows,
                                        y_block + r * L + j, J.out_plane);
                }
            }
        }
    }
}

template <typename T, typename S>
void gemm_any(const ConvJob& job, long task, T* scratch) {
    if (job.row_kernel) gemm_rows_task<T, S>(job, task, scratch);
    else if (job.plane_kernel == 2) lanes_plane_task<T, S>(job, task, scratch);
    else if (job.plane_kernel) gemm_plane_task<T, S>(job, task, scratch);
    else gemm_task<T, S>(job, task, scratch);
}

bool pack_f32(const float* w, long m, long ck, float* packed) {
    return pack_w<float>(w, m, ck, packed);
}
bool pack_f64(const double* w, long m, long ck, double* packed) {
    return pack_w<double>(w, m, ck, packed);
}
bool pack_lanes_f32(const float* w, long m, long ck, float* packed) {
    return pack_w_lanes<float>(w, m, ck, packed);
}
bool pack_lanes_f64(const double* w, long m, long ck, double* packed) {
    return pack_w_lanes<double>(w, m, ck, packed);
}
void gemm_f32(const ConvJob& job, long task, float* s) { gemm_any<float, float>(job, task, s); }
void gemm_f64(const ConvJob& job, long task, double* s) {
    gemm_any<double, double>(job, task, s);
}
void gemm_f16(const ConvJob& job, long task, float* s) { gemm_any<float, Half>(job, task, s); }
void gemm_bf16(const ConvJob& job, long task, float* s) { gemm_any<float, Bf16>(job, task, s); }
void dw_f32(const ConvJob& job, long task, float* s) { depthwise_task<float, float>(job, task, s); }
void dw_f64(const ConvJob& job, long task, double* s) {
    depthwise_task<double, double>(job, task, s);
}
void dw_f16(const ConvJob& job, long task, float* s) { depthwise_task<float, Half>(job, task, s); }
void dw_bf16(const ConvJob& job, long task, float* s) { depthwise_task<float, Bf16>(job, task, s); }

}  // namespace

extern const KernelSet PADCONV_KERNELS_SYMBOL = {
    PADCONV_KERNELS_NAME, MR, NV * VecF::lanes, NV * VecD::lanes,
    DW_NV * VecF::lanes, DW_NV * VecD::lanes,
    pack_f32, pack_f64, pack_lanes_f32, pack_lanes_f64, gemm_f32, gemm_f64, dw_f32, dw_f64,
    {gemm_f32, gemm_f16, gemm_bf16}, {dw_f32, dw_f16, dw_bf16},
    UNROLLED_STRIDE, UNROLLED_DILATION, PADCONV_PLANE_SET, SPLIT_ROWS,
    lane_rows<float>(), lane_rows<double>(), LANES_LONG_ROWS,
};
