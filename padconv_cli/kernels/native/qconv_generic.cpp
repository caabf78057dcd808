// Portable integer Conv kernel: int16 panel (pairs of taps), int32 products, sums modulo 2**32.
#include <stdint.h>

#include "qconv.h"
#include "qconv_panel.h"

namespace {

const int MR = 4, TILE = 16;

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
        for (long p = 0; p < count; p += TILE) {
            uint32_t sums[MR][TILE] = {};
            for (long q = 0; q < job.words; ++q) {
                const int16_t* xv = panel + (q * job.block + p) * 2;
                for (int i = 0; i < MR; ++i) {
                    const uint32_t word = (uint32_t)wg[(row0 + i) * job.words + q];
                    const int32_t w0 = (int16_t)(word & 0xffff), w1 = (int16_t)(word >> 16);
                    for (int j = 0; j < TILE; ++j)
                        sums[i][j] += (uint32_t)(xv[2 * j] * w0 + xv[2 * j + 1] * w1);
                }
            }
            for (int i = 0; i < MR; ++i)
                for (int j = 0; j < TILE; ++j) acc[i * TILE + j] = (int32_t)sums[i][j];
            const long valid = count - p < TILE ? count - p : TILE;
            qpanel::store(job, n, g, row0, MR, p0, p, valid, acc, TILE, sumx);
        }
    }
}

}  // namespace

extern const QKernel padconv_qconv_generic = {"generic", 2, MR, TILE, task};
