// AVX-512 VNNI integer Conv kernel: uint8 panel (quads of taps), vpdpbusd of x' (unsigned,
// the instruction's first operand) and w' (signed) into int32 lanes: the four products are
// summed in 32 bits with no intermediate saturation (vpdpbusd, not vpdpbusds), modulo 2**32.
// Compiled for AVX-512F/BW/VNNI by the pragma below; dispatched only on CPUs that have them.
#include <stdint.h>

#include "qconv.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vnni,avx2"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vnni,avx2")
#endif
#include <immintrin.h>

#include "qconv_panel.h"

namespace {

const int MR = 5, NR = 4, LANES = 16, TILE = NR * LANES;

void task(const QJob& job, long index, void* scratch) {
    const long b = index % job.blocks, g = (index / job.blocks) % job.group,
               n = index / (job.blocks * job.group);
    const long p0 = b * job.block;
    const long count = job.out_plane - p0 < job.block ? job.out_plane - p0 : job.block;
    uint8_t* panel = static_cast<uint8_t*>(scratch);
    int32_t* sumx = reinterpret_cast<int32_t*>(panel + job.words * 4 * job.block);
    int32_t* acc = sumx + job.block;
    qpanel::pack<4>(job, n, g, p0, count, reinterpret_cast<uint32_t*>(panel),
                    reinterpret_cast<uint8_t*>(acc + MR * TILE));
    const int32_t* wg = job.wpack + g * job.rows * job.words;
    for (long row0 = 0; row0 < job.rows; row0 += MR) {
        const int32_t* w0 = wg + row0 * job.words;
        for (long p = 0; p < count; p += TILE) {
            __m512i s[MR][NR];
            for (int i = 0; i < MR; ++i)
                for (int j = 0; j < NR; ++j) s[i][j] = _mm512_setzero_si512();
            const uint8_t* xq = panel + p * 4;
            for (long q = 0; q < job.words; ++q, xq += job.block * 4) {
                __m512i xv[NR];
                for (int j = 0; j < NR; ++j) xv[j] = _mm512_loadu_si512(xq + j * 64);
                for (int i = 0; i < MR; ++i) {
                    const __m512i wv = _mm512_set1_epi32(w0[i * job.words + q]);
                    for (int j = 0; j < NR; ++j) s[i][j] = _mm512_dpbusd_epi32(s[i][j], xv[j], wv);
                }
            }
            for (int i = 0; i < MR; ++i)
                for (int j = 0; j < NR; ++j)
                    _mm512_storeu_si512(acc + i * TILE + j * LANES, s[i][j]);
            const long valid = count - p < TILE ? count - p : TILE;
            qpanel::store(job, n, g, row0, MR, p0, p, valid, acc, TILE, sumx);
        }
    }
}

// The direct path: a task is (n, g, a block of virtual positions); its X, channel quads
// over its part of the padded grid, was woven by the caller at the start of `scratch`
// (qconv.h); no panel is packed.
void direct_task(const QJob& job, long index, void* scratch) {
    const long b = index % job.blocks, g = (index / job.blocks) % job.group,
               n = index / (job.blocks * job.group);
    const long v0 = b * job.block;
    const long count = job.vtotal - v0 < job.block ? job.vtotal - v0 : job.block;
    const uint8_t* xg = static_cast<const uint8_t*>(scratch);  // the task's X (qconv.h)
    int32_t* sumx = reinterpret_cast<int32_t*>(static_cast<uint8_t*>(scratch) + job.xq_image);
    int32_t* acc = sumx + job.block;
    const int32_t* wg = job.wpack + g * job.rows * job.words;
    for (long row0 = 0; row0 < job.rows; row0 += MR) {
        const int32_t* w0 = wg + row0 * job.words;
        for (long p = 0; p < count; p += TILE) {
            __m512i s[MR][NR];
            for (int i = 0; i < MR; ++i)
                for (int j = 0; j < NR; ++j) s[i][j] = _mm512_setzero_si512();
            const uint8_t* base = xg + p * 4;
            for (long q = 0; q < job.words; ++q) {
                const uint8_t* xq = base + job.offsets[q] * 4;
                __m512i xv[NR];
                for (int j = 0; j < NR; ++j) xv[j] = _mm512_loadu_si512(xq + j * 64);
                for (int i = 0; i < MR; ++i) {
                    const __m512i wv = _mm512_set1_epi32(w0[i * job.words + q]);
                    for (int j = 0; j < NR; ++j) s[i][j] = _mm512_dpbusd_epi32(s[i][j], xv[j], wv);
                }
            }
            for (int i = 0; i < MR; ++i)
                for (int j = 0; j < NR; ++j)
                    _mm512_storeu_si512(acc + i * TILE + j * LANES, s[i][j]);
            const long valid = count - p < TILE ? count - p : TILE;
            qpanel::store_virtual(job, n, g, row0, MR, v0 + p, valid, acc, TILE, sumx + p);
        }
    }
}

}  // namespace

// QLinearConv's requantization of `count` consecutive sums of one channel, with the outputs
// and near-tie marks of padconv_requantize_plane_avx2 (qconv_avx2.cpp), 16 at a time, in
// fewer operations: e = (acc + bias) * factor as there; its distance to the nearest half-
// integer is 0.5 - |e - rint(e)| here and |e - floor(e) - 0.5| there, the same number (every
// step exact below 2**52), and e is not clamped to [low - 2, high + 2] first (which changed
// neither rint(e) once clamped to [low, high] nor the marks, only given inside (low - 1,
// high + 1)).
void padconv_requantize_plane_avx512(const int32_t* in, double factor, double bias,
                                     double low, double high, int yz, bool is_signed,
                                     long count, uint8_t* y, uint8_t* unsure) {
    const __m512d f = _mm512_set1_pd(factor), b = _mm512_set1_pd(bias);
    const __m512d lo1 = _mm512_set1_pd(low - 1), hi1 = _mm512_set1_pd(high + 1);
    const __m512d lo = _mm512_set1_pd(low), hi = _mm512_set1_pd(high);
    const __m512d half = _mm512_set1_pd(0.5), rel = _mm512_set1_pd(4.5e-16);
    const __m256i zero_point = _mm256_set1_epi32(yz);
    // 8 sums: their outputs (int32, yz added) and near-tie bits
    auto eight = [&](__m256i a, __mmask8& near) {
        const __m512d e = _mm512_mul_pd(_mm512_add_pd(_mm512_cvtepi32_pd(a), b), f);
        const __m512d r = _mm512_roundscale_pd(e, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __m512d distance = _mm512_sub_pd(half, _mm512_abs_pd(_mm512_sub_pd(e, r)));
        const __m512d size = _mm512_mul_pd(_mm512_abs_pd(e), rel);
        near = _mm512_cmp_pd_mask(distance, size, _CMP_LE_OQ) &
               _mm512_cmp_pd_mask(e, lo1, _CMP_GT_OQ) & _mm512_cmp_pd_mask(e, hi1, _CMP_LT_OQ);
        const __m512d kept = _mm512_min_pd(_mm512_max_pd(r, lo), hi);
        return _mm256_add_epi32(_mm512_cvtpd_epi32(kept), zero_point);
    };
    (void)is_signed;  // the low byte of the int32 output is its int8 or uint8 value alike
    // 16 sums (the lanes of `lanes`) from `i`
    auto sixteen = [&](long i, __mmask16 lanes) {
        const __m512i a = _mm512_maskz_loadu_epi32(lanes, in + i);
        __mmask8 near0, near1;
        const __m256i v0 = eight(_mm512_castsi512_si256(a), near0);
        const __m256i v1 = eight(_mm512_extracti64x4_epi64(a, 1), near1);
        const __m512i values = _mm512_inserti64x4(_mm512_castsi256_si512(v0), v1, 1);
        const __mmask16 near = (__mmask16)(near0 | (unsigned)near1 << 8);
        _mm512_mask_cvtepi32_storeu_epi8(y + i, lanes, values);
        _mm512_mask_cvtepi32_storeu_epi8(unsure + i, lanes, _mm512_maskz_set1_epi32(near, 1));
    };
    long i = 0;
    for (; i + 16 <= count; i += 16) sixteen(i, 0xFFFF);
    if (i < count) sixteen(i, (__mmask16)((1u << (count - i)) - 1));  // the last few
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

extern const QKernel padconv_qconv_vnni = {"avx512-vnni", 4, MR, TILE, task};
extern const QKernel padconv_qconv_vnni_direct = {"avx512-vnni-direct", 4, MR, TILE,
                                                  direct_task};
#else
extern const QKernel padconv_qconv_vnni = {"avx512-vnni", 4, 1, 1, 0};
extern const QKernel padconv_qconv_vnni_direct = {"avx512-vnni-direct", 4, 1, 1, 0};
void padconv_requantize_plane_avx512(const int32_t*, double, double, double, double, int, bool,
                                     long, uint8_t*, uint8_t*) {}  // never called without it
#endif
