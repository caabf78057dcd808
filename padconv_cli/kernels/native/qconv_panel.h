// padconv native integer Conv: the task's panel and its output, shared by the per-ISA kernels
// (included once per instruction-set file, so each compiles it for its own target).
#ifndef PADCONV_QCONV_PANEL_H
#define PADCONV_QCONV_PANEL_H

#include <string.h>

#include "qconv.h"

namespace {  // internal linkage: each instruction-set file keeps its own copy
namespace qpanel {

// Position `p` (flattened) of the output as coordinates.
inline void coords(const QJob& job, long p, long* o) {
    for (int a = job.rank - 1; a >= 0; --a) {
        o[a] = p % job.out[a];
        p /= job.out[a];
    }
}

// The panel of task (n, g, positions [p0, p0 + count)) in `panel` (words * pack elements per
// position, block positions wide; element type T: uint8_t or int16_t), x' with padding xz'.
template <typename T, int PACK>
void pack(const QJob& job, long n, long g, long p0, long count, T* panel) {
    const long block = job.block;
    const long total = job.words * PACK;
    memset(panel, 0, sizeof(T) * total * block);
    const int r = job.rank;
    const long last_in = job.in[r - 1], last_out = job.out[r - 1];
    const long s = job.s[r - 1], d = job.d[r - 1], pbl = job.pb[r - 1];
    const uint8_t flip = job.x_signed ? 0x80 : 0;
    const T pad = (T)job.xz;
    long o[PADCONV_QMAX_RANK], t[PADCONV_QMAX_RANK];
    for (long kk = 0; kk < job.kk; ++kk) {
        const long c = kk / job.taps;
        long rest = kk % job.taps;
        for (int a = r - 1; a >= 0; --a) {
            t[a] = rest % job.k[a];
            rest /= job.k[a];
        }
        const uint8_t* plane = job.x + (n * job.c + g * job.cg + c) * job.in_plane;
        T* dst = panel + (kk / PACK) * block * PACK + kk % PACK;
        long p = 0;
        while (p < count) {  // one output row segment at a time
            coords(job, p0 + p, o);
            const long run = last_out - o[r - 1] < count - p ? last_out - o[r - 1] : count - p;
            long row = 0;
            bool inside = true;
            for (int a = 0; a < r - 1; ++a) {
                const long i = o[a] * job.s[a] + t[a] * job.d[a] - job.pb[a];
                if (i < 0 || i >= job.in[a]) inside = false;
                row = row * job.in[a] + i;
            }
            T* out = dst + p * PACK;
            if (!inside) {
                for (long j = 0; j < run; ++j) out[j * PACK] = pad;
            } else {
                const uint8_t* src = plane + row * last_in;
                long i = o[r - 1] * s + t[r - 1] * d - pbl;
                for (long j = 0; j < run; ++j, i += s)
                    out[j * PACK] = (i >= 0 && i < last_in) ? (T)(uint8_t)(src[i] ^ flip) : pad;
            }
            p += run;
        }
    }
}

// y[n, g*M/G + i - 1, p0 + p] for the tile's rows i >= 1 from the raw sums `acc` (rows x
// tile, row 0 the sums of x'), applying the zero-point terms modulo 2**32.
inline void store(const QJob& job, long n, long g, long row0, long rows, long p0, long p,
                  long valid, const int32_t* acc, long tile, int32_t* sumx) {
    for (long i = 0; i < rows; ++i) {
        const long row = row0 + i;
        if (row == 0) {
            for (long j = 0; j < valid; ++j) sumx[p + j] = acc[i * tile + j];
            continue;
        }
        if (row > job.mg) break;
        const long m = g * job.mg + row - 1;
        const uint32_t wz = (uint32_t)job.wz[m];
        const uint32_t base = (uint32_t)job.kk * (uint32_t)job.xz * wz -
                              (uint32_t)job.xz * (uint32_t)job.sumw[m];
        int32_t* y = job.y + (n * job.m + m) * job.out_plane + p0 + p;
        for (long j = 0; j < valid; ++j)
            y[j] = (int32_t)((uint32_t)acc[i * tile + j] - wz * (uint32_t)sumx[p + j] + base);
    }
}

}  // namespace qpanel
}  // namespace

#endif
