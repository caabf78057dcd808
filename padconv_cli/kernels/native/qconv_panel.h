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

// Row `row` (block positions, `count` of them valid) of x' at tap kk for the positions
// [p0, p0 + count) of image n, group g: the padding holds xz'.
inline void fill_row(const QJob& job, long n, long g, long kk, long p0, long count,
                     uint8_t* row) {
    const int r = job.rank;
    const long last_in = job.in[r - 1], last_out = job.out[r - 1];
    const long s = job.s[r - 1], d = job.d[r - 1], pbl = job.pb[r - 1];
    const uint8_t flip = job.x_signed ? 0x80 : 0;
    const uint8_t pad = (uint8_t)job.xz;
    long o[PADCONV_QMAX_RANK], t[PADCONV_QMAX_RANK];
    const long c = kk / job.taps;
    long rest = kk % job.taps;
    for (int a = r - 1; a >= 0; --a) {
        t[a] = rest % job.k[a];
        rest /= job.k[a];
    }
    const uint8_t* plane = job.x + (n * job.c + g * job.cg + c) * job.in_plane;
    coords(job, p0, o);
    long p = 0;
    while (p < count) {  // one output row segment at a time
        const long run = last_out - o[r - 1] < count - p ? last_out - o[r - 1] : count - p;
        long in_row = 0;
        bool inside = true;
        for (int a = 0; a < r - 1; ++a) {
            const long i = o[a] * job.s[a] + t[a] * job.d[a] - job.pb[a];
            if (i < 0 || i >= job.in[a]) inside = false;
            in_row = in_row * job.in[a] + i;
        }
        uint8_t* out = row + p;
        if (!inside) {
            memset(out, pad, run);
        } else {
            const uint8_t* src = plane + in_row * last_in;
            const long i0 = o[r - 1] * s + t[r - 1] * d - pbl;  // input of out[0]
            // out[j] reads i0 + j*s: inside for j in [lo, hi)
            long lo = i0 >= 0 ? 0 : (-i0 + s - 1) / s;
            long hi = i0 >= last_in ? 0 : (last_in - 1 - i0) / s + 1;
            if (lo > run) lo = run;
            if (hi > run) hi = run;
            if (hi < lo) hi = lo;
            memset(out, pad, lo);
            if (s == 1) {
                const uint8_t* from = src + i0;
                for (long j = lo; j < hi; ++j) out[j] = from[j] ^ flip;
            } else {
                for (long j = lo; j < hi; ++j) out[j] = src[i0 + j * s] ^ flip;
            }
            memset(out + hi, pad, run - hi);
        }
        p += run;
        o[r - 1] = 0;  // the next output row
        for (int a = r - 2; a >= 0 && ++o[a] == job.out[a]; --a) o[a] = 0;
    }
}

// The panel of task (n, g, positions [p0, p0 + count)): for each group of PACK taps, PACK
// rows of x' (`rows`, PACK * block bytes of scratch) woven into words, one per position
// (uint8 lanes for PACK 4, int16 lanes for PACK 2); taps beyond K and positions beyond
// count are 0.
template <int PACK>
void pack(const QJob& job, long n, long g, long p0, long count, uint32_t* panel,
          uint8_t* rows) {
    const long block = job.block;
    for (long q = 0; q < job.words; ++q) {
        for (int j = 0; j < PACK; ++j) {
            const long kk = q * PACK + j;
            if (kk < job.kk) fill_row(job, n, g, kk, p0, count, rows + j * block);
            else memset(rows + j * block, 0, count);
        }
        uint32_t* out = panel + q * block;
        const uint8_t* r0 = rows;
        const uint8_t* r1 = rows + block;
        if (PACK == 4) {
            const uint8_t* r2 = rows + 2 * block;
            const uint8_t* r3 = rows + 3 * block;
            for (long p = 0; p < count; ++p)
                out[p] = (uint32_t)r0[p] | (uint32_t)r1[p] << 8 | (uint32_t)r2[p] << 16 |
                         (uint32_t)r3[p] << 24;
        } else {
            for (long p = 0; p < count; ++p) out[p] = (uint32_t)r0[p] | (uint32_t)r1[p] << 16;
        }
        memset(out + count, 0, 4 * (block - count));
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

// A run of a direct-path tile: `length` consecutive lanes from `lane` that land on the
// consecutive outputs from `flat`.
struct Segment {
    long lane, flat, length;
};

// The runs of the `valid` virtual positions from v whose grid coordinates lie inside `out`
// (the others are dropped), at most `valid` of them; returns their number.
inline long segments_of(const QJob& job, long v, long valid, Segment* runs) {
    const int r = job.rank;
    const long width = job.pd[r - 1], last = job.out[r - 1];
    long o[PADCONV_QMAX_RANK];
    long rest = v;
    for (int a = 0; a < r; ++a) {
        o[a] = rest / job.sv[a];
        rest %= job.sv[a];
    }
    long count = 0;
    for (long lane = 0; lane < valid;) {  // one grid row (last axis) at a time
        bool inside = o[r - 1] < last;
        long flat = 0;
        for (int a = 0; a < r; ++a) {
            if (a < r - 1 && o[a] >= job.out[a]) inside = false;
            flat = flat * job.out[a] + o[a];
        }
        const long row_left = width - o[r - 1];
        const long step = row_left < valid - lane ? row_left : valid - lane;
        if (inside) {
            const long length = last - o[r - 1] < step ? last - o[r - 1] : step;
            runs[count++] = Segment{lane, flat, length};
        }
        lane += step;
        o[r - 1] = 0;  // the next grid row
        for (int a = r - 2; a >= 0; --a) {
            if (++o[a] < job.pd[a] || a == 0) break;
            o[a] = 0;
        }
    }
    return count;
}

// The direct path's store: the tile's `valid` virtual positions from v (sums of x' of the
// tile's positions in `sumx`, written by row 0): each position whose grid coordinates lie
// inside `out` goes to y, the others are dropped.
inline void store_virtual(const QJob& job, long n, long g, long row0, long rows, long v,
                          long valid, const int32_t* acc, long tile, int32_t* sumx) {
    Segment runs[256];
    const long count = segments_of(job, v, valid, runs);
    for (long i = 0; i < rows; ++i) {
        const long row = row0 + i;
        const int32_t* sums = acc + i * tile;
        if (row == 0) {
            for (long j = 0; j < valid; ++j) sumx[j] = sums[j];
            continue;
        }
        if (row > job.mg) break;
        const long m = g * job.mg + row - 1;
        const uint32_t wz = (uint32_t)job.wz[m];
        const uint32_t base = (uint32_t)job.kk * (uint32_t)job.xz * wz -
                              (uint32_t)job.xz * (uint32_t)job.sumw[m];
        int32_t* y = job.y + (n * job.m + m) * job.out_plane;
        for (long k = 0; k < count; ++k) {
            const Segment& run = runs[k];
            const uint32_t* from = reinterpret_cast<const uint32_t*>(sums + run.lane);
            const uint32_t* sx = reinterpret_cast<const uint32_t*>(sumx + run.lane);
            uint32_t* to = reinterpret_cast<uint32_t*>(y + run.flat);
            for (long j = 0; j < run.length; ++j) to[j] = from[j] - wz * sx[j] + base;
        }
    }
}

}  // namespace qpanel
}  // namespace

#endif
