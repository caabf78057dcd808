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

// The direct path: a task is (n, g, a block of virtual positions); no panel is packed.
void direct_task(const QJob& job, long index, void* scratch) {
    const long b = index % job.blocks, g = (index / job.blocks) % job.group,
               n = index / (job.blocks * job.group);
    const long v0 = b * job.block;
    const long count = job.vtotal - v0 < job.block ? job.vtotal - v0 : job.block;
    int32_t* sumx = static_cast<int32_t*>(scratch);
    int32_t* acc = sumx + job.block;
    const uint8_t* xg = job.xq + (n * job.group + g) * job.xq_image;
    const int32_t* wg = job.wpack + g * job.rows * job.words;
    for (long row0 = 0; row0 < job.rows; row0 += MR) {
        const int32_t* w0 = wg + row0 * job.words;
        for (long p = 0; p < count; p += TILE) {
            __m512i s[MR][NR];
            for (int i = 0; i < MR; ++i)
                for (int j = 0; j < NR; ++j) s[i][j] = _mm512_setzero_si512();
            const uint8_t* base = xg + (v0 + p) * 4;
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
#endif
