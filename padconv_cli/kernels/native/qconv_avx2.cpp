// AVX2 integer Conv kernel: int16 panel (pairs of taps), vpmaddwd of x' and w' pairs into
// int32 lanes (no 16-bit saturation: each pair sum is at most 2 * 255 * 128), vpaddd modulo
// 2**32.  Compiled for AVX2 by the pragma below; dispatched only on CPUs that have it.
#include <stdint.h>
#include <string.h>

#include "qconv.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2")
#endif
#include <immintrin.h>

#include "qconv_panel.h"

namespace {

const int MR = 3, NR = 3, LANES = 8, TILE = NR * LANES;

void task(const QJob& job, long index, void* scratch) {
    const long b = index % job.blocks, g = (index / job.blocks) % job.group,
               n = index / (job.blocks * job.group);
    const long p0 = b * job.block;
    const long count = job.out_plane - p0 < job.block ? job.out_plane - p0 : job.block;
    int16_t* panel = static_cast<int16_t*>(scratch);
    int32_t* sumx = reinterpret_cast<int32_t*>(panel + job.words * 2 * job.block);
    int32_t* acc = sumx + job.block;
    qpanel::pack<2>(job, n, g, p0, count, reinterpret_cast<uint32_t*>(panel),
                    reinterpret_cast<uint8_t*>(acc + MR * TILE));
    const int32_t* wg = job.wpack + g * job.rows * job.words;
    for (long row0 = 0; row0 < job.rows; row0 += MR) {
        const int32_t* w0 = wg + row0 * job.words;
        for (long p = 0; p < count; p += TILE) {
            __m256i s[MR][NR];
            for (int i = 0; i < MR; ++i)
                for (int j = 0; j < NR; ++j) s[i][j] = _mm256_setzero_si256();
            const int16_t* xq = panel + p * 2;
            for (long q = 0; q < job.words; ++q, xq += job.block * 2) {
                __m256i xv[NR];
                for (int j = 0; j < NR; ++j)
                    xv[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + j * 16));
                for (int i = 0; i < MR; ++i) {
                    const __m256i wv = _mm256_set1_epi32(w0[i * job.words + q]);
                    for (int j = 0; j < NR; ++j)
                        s[i][j] = _mm256_add_epi32(s[i][j], _mm256_madd_epi16(xv[j], wv));
                }
            }
            for (int i = 0; i < MR; ++i)
                for (int j = 0; j < NR; ++j)
                    _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + i * TILE + j * LANES),
                                        s[i][j]);
            const long valid = count - p < TILE ? count - p : TILE;
            qpanel::store(job, n, g, row0, MR, p0, p, valid, acc, TILE, sumx);
        }
    }
}

// The direct path (every stride 1): the task's X, int16 channel pairs over its part of the
// padded grid, woven by the caller at the start of `scratch` (qconv.h); no panel is packed.
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
            __m256i s[MR][NR];
            for (int i = 0; i < MR; ++i)
                for (int j = 0; j < NR; ++j) s[i][j] = _mm256_setzero_si256();
            const uint8_t* base = xg + p * 4;
            for (long q = 0; q < job.words; ++q) {
                const uint8_t* xq = base + job.offsets[q] * 4;
                __m256i xv[NR];
                for (int j = 0; j < NR; ++j)
                    xv[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + j * 32));
                for (int i = 0; i < MR; ++i) {
                    const __m256i wv = _mm256_set1_epi32(w0[i * job.words + q]);
                    for (int j = 0; j < NR; ++j)
                        s[i][j] = _mm256_add_epi32(s[i][j], _mm256_madd_epi16(xv[j], wv));
                }
            }
            for (int i = 0; i < MR; ++i)
                for (int j = 0; j < NR; ++j)
                    _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + i * TILE + j * LANES),
                                        s[i][j]);
            const long valid = count - p < TILE ? count - p : TILE;
            qpanel::store_virtual(job, n, g, row0, MR, v0 + p, valid, acc, TILE, sumx + p);
        }
    }
}

}  // namespace

// Four marks (bytes 0 or 1) of the four bits of an index.
static const uint32_t BIT_BYTES[16] = {
    0x00000000, 0x00000001, 0x00000100, 0x00000101, 0x00010000, 0x00010001, 0x00010100,
    0x00010101, 0x01000000, 0x01000001, 0x01000100, 0x01000101, 0x01010000, 0x01010001,
    0x01010100, 0x01010101};

// QLinearConv's float64 requantization of one plane (qconv_module.cpp's requantize_planes):
// the same operations four lanes at a time, so the same results.

void padconv_requantize_plane_avx2(const int32_t* in, double factor, double bias, double low,
                                   double high, int yz, bool is_signed, long count,
                                   uint8_t* y, uint8_t* unsure) {
    const __m256d f = _mm256_set1_pd(factor), b = _mm256_set1_pd(bias);
    const __m256d lo2 = _mm256_set1_pd(low - 2), hi2 = _mm256_set1_pd(high + 2);
    const __m256d lo1 = _mm256_set1_pd(low - 1), hi1 = _mm256_set1_pd(high + 1);
    const __m256d lo = _mm256_set1_pd(low), hi = _mm256_set1_pd(high);
    const __m256d half = _mm256_set1_pd(0.5), rel = _mm256_set1_pd(4.5e-16);
    const __m256d sign = _mm256_set1_pd(-0.0);
    const __m128i zero_point = _mm_set1_epi32(yz);
    const __m128i low_bytes = _mm_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                            -1, -1);
    long i = 0;
    for (; i + 4 <= count; i += 4) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
        __m256d e = _mm256_mul_pd(_mm256_add_pd(_mm256_cvtepi32_pd(a), b), f);
        e = _mm256_min_pd(_mm256_max_pd(e, lo2), hi2);
        const __m256d r = _mm256_round_pd(e, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __m256d below = _mm256_floor_pd(e);
        const __m256d distance =
            _mm256_andnot_pd(sign, _mm256_sub_pd(_mm256_sub_pd(e, below), half));
        const __m256d size = _mm256_mul_pd(_mm256_andnot_pd(sign, e), rel);
        const __m256d near = _mm256_and_pd(
            _mm256_cmp_pd(distance, size, _CMP_LE_OQ),
            _mm256_and_pd(_mm256_cmp_pd(e, lo1, _CMP_GT_OQ), _mm256_cmp_pd(e, hi1, _CMP_LT_OQ)));
        const int bits = _mm256_movemask_pd(near);
        const __m256d kept = _mm256_min_pd(_mm256_max_pd(r, lo), hi);
        // the low byte of each int32 output is its int8 or uint8 value alike
        const __m128i values = _mm_add_epi32(_mm256_cvtpd_epi32(kept), zero_point);
        const uint32_t bytes = (uint32_t)_mm_cvtsi128_si32(_mm_shuffle_epi8(values, low_bytes));
        memcpy(y + i, &bytes, 4);
        memcpy(unsure + i, &BIT_BYTES[bits], 4);
    }
    for (; i < count; ++i) {  // the last few, one at a time
        double e = ((double)in[i] + bias) * factor;
        e = e < low - 2 ? low - 2 : e > high + 2 ? high + 2 : e;
        const __m128d v = _mm_set_sd(e);
        const double r = _mm_cvtsd_f64(_mm_round_sd(v, v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const double below = _mm_cvtsd_f64(_mm_floor_sd(v, v));
        const double distance = e - below - 0.5;
        const double size = e < 0 ? -e : e;
        unsure[i] = (distance < 0 ? -distance : distance) <= size * 4.5e-16 && e > low - 1 &&
                    e < high + 1;
        const double kept = r < low ? low : r > high ? high : r;
        const int value = (int)kept + yz;
        y[i] = is_signed ? (uint8_t)(int8_t)value : (uint8_t)value;
    }
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

extern const QKernel padconv_qconv_avx2 = {"avx2", 2, MR, TILE, task};
extern const QKernel padconv_qconv_avx2_direct = {"avx2-direct", 2, MR, TILE, direct_task};
extern const int padconv_have_qconv_x86 = 1;
#else
extern const QKernel padconv_qconv_avx2 = {"avx2", 2, 1, 1, 0};
extern const QKernel padconv_qconv_avx2_direct = {"avx2-direct", 2, 1, 1, 0};
extern const int padconv_have_qconv_x86 = 0;
void padconv_requantize_plane_avx2(const int32_t*, double, double, double, double, int, bool,
                                   long, uint8_t*, uint8_t*) {}  // never called without AVX2
#endif
