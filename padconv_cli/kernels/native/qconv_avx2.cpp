// AVX2 integer Conv kernel: int16 panel (pairs of taps), vpmaddwd of x' and w' pairs into
// int32 lanes (no 16-bit saturation: each pair sum is at most 2 * 255 * 128), vpaddd modulo
// 2**32.  Compiled for AVX2 by the pragma below; dispatched only on CPUs that have it.
#include <stdint.h>

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
    qpanel::pack<int16_t, 2>(job, n, g, p0, count, panel);
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

}  // namespace

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

extern const QKernel padconv_qconv_avx2 = {"avx2", 2, MR, TILE, task};
extern const int padconv_have_qconv_x86 = 1;
#else
extern const QKernel padconv_qconv_avx2 = {"avx2", 2, 1, 1, 0};
extern const int padconv_have_qconv_x86 = 0;
#endif
