// padconv native integer Conv (ConvInteger, QLinearConv): the job shared by the dispatcher
// (qconv_module.cpp) and the per-ISA kernels (qconv_generic.cpp, qconv_avx2.cpp,
// qconv_vnni.cpp).
//
// Every output is  Y[n, m, o] = sum_{c, t} (Xpad[n, g*C/G + c, o*s + t*d] - xz) * (W[m, c, t] - wz[m])
// with the padding holding xz, computed modulo 2**32 (exact whenever the true sum fits in
// int32).  X is read in the unsigned domain x' (uint8, or int8 + 128) and W in the signed one
// w' (int8, or uint8 - 128), with the zero points moved alike, so that
//     sum (x - xz)(w - wz) = sum x'w' - wz' * sum x' - xz' * sum w' + K * xz' * wz'
// (K = C/G * prod(k)): the products x'w' are uint8 * int8, summed without any 16-bit
// saturation (VNNI vpdpbusd; AVX2 widens to int16 pairs and uses vpmaddwd; the portable kernel
// multiplies in int32).  Integer sums are exact in any order, so results depend neither on the
// thread count nor on the instruction set.
//
// Layout of one task's panel: the im2col values x' of a block of `pb` output positions of one
// image and group, for K taps rounded up to a multiple of `pack` (4 bytes for VNNI, 2 int16
// otherwise): panel[(q * pb + p) * pack + j] = x' at tap q*pack + j (0 beyond K).  W is packed
// per group in rows of ceil(K / pack) int32 words (pack taps each); row 0 holds ones (its
// "output" is sum x' of the position), rows 1..M/G the group's channels, and rows up to a
// multiple of the kernel's `mr` are zero.
#ifndef PADCONV_QCONV_H
#define PADCONV_QCONV_H

#include <stdint.h>

#define PADCONV_QMAX_RANK 16

struct QJob {
    const uint8_t* x;  // raw X bytes
    int x_signed;      // 1: int8 (x' = x + 128)
    int rank;
    long n, c, m, group, cg, mg;
    long in[PADCONV_QMAX_RANK], out[PADCONV_QMAX_RANK], k[PADCONV_QMAX_RANK];
    long s[PADCONV_QMAX_RANK], d[PADCONV_QMAX_RANK], pb[PADCONV_QMAX_RANK];
    long in_plane, out_plane, taps, kk;  // prod(in), prod(out), prod(k), K = C/G * taps
    long words;        // ceil(K / pack): int32 words per packed W row
    long rows;         // packed W rows per group (round_up(M/G + 1, mr))
    const int32_t* wpack;  // group * rows * words
    const int32_t* wz;     // wz' per output channel (M)
    const int32_t* sumw;   // sum_k w'[m, k] per output channel (M)
    int32_t xz;            // xz'
    int32_t* y;            // N x M x prod(out)
    long block;            // output positions per task (a multiple of the kernel's tile)
    long blocks;           // ceil(prod(out) / block)
    // Direct path (every stride 1, VNNI or AVX2, C/G >= 4): a "virtual" position v of the
    // padded input grid pd (strides sv) reads word q at v + offsets[q] (positions along the
    // grid whose coordinates reach past `out` are computed and dropped).  Each task first
    // weaves the part of X it reads into the start of its scratch (qconv_module.cpp):
    // [C/G / pack][span grid positions from its first v][pack channels] (uint8 lanes for VNNI,
    // int16 for AVX2), the padding holding xz', 0 beyond the grid and for missing channels.
    int direct;
    long pd[PADCONV_QMAX_RANK], sv[PADCONV_QMAX_RANK];
    long grid;             // prod(pd): positions of one pack's padded grid
    long vtotal;           // virtual positions computed: out[0] * sv[0]
    long span;             // grid positions of a task's X: block + the farthest tap
    long xq_image;         // bytes of a task's X: packs * span * 4, rounded up to 64
    const long* offsets;   // offsets (in positions) of word q = (pack, tap) in a task's X
    // QLinearConv's requantization fused into the tasks (yq null: the int32 sums only): each
    // task requantizes the outputs it has just summed, still in cache, into yq and marks the
    // near-ties in `unsure` (both N x M x prod(out) bytes), as padconv_py_requantize does.
    uint8_t* yq;
    uint8_t* unsure;
    const double* factors;  // M
    const int32_t* bias;    // M, or null
    double low, high;       // the output range minus yz
    int yz;
    int y_signed;
    int requantize_avx512;  // the requantization of the VNNI kernels: AVX-512
};

struct QKernel {
    const char* name;
    int pack;   // taps per int32 word of W: 4 (uint8 x') or 2 (int16 x')
    int mr;     // W rows per register tile
    int tile;   // output positions per register tile
    // One task: n, g and a block of positions; `scratch` holds the panel (the direct path:
    // the task's X, woven beforehand by the caller), then the block's sums of x' and a
    // register tile of int32 sums (sizes: run() in qconv_module.cpp).
    void (*task)(const QJob& job, long task, void* scratch);
};

extern const QKernel padconv_qconv_generic;
extern const QKernel padconv_qconv_avx2;   // CPUs with AVX2
extern const QKernel padconv_qconv_avx2_direct;  // the direct path of the same CPUs
extern const QKernel padconv_qconv_vnni;   // CPUs with AVX-512F, BW and VNNI
extern const QKernel padconv_qconv_vnni_direct;  // the direct path of the same CPUs
extern const int padconv_have_qconv_x86;   // 1 when the two above were compiled in

// QLinearConv's float64 requantization of one plane, AVX2 (CPUs with AVX2 only).
void padconv_requantize_plane_avx2(const int32_t* in, double factor, double bias, double low,
                                   double high, int yz, bool is_signed, long count,
                                   uint8_t* y, uint8_t* unsure);
// The same, AVX-512 (CPUs with the VNNI kernel's instruction sets only).
void padconv_requantize_plane_avx512(const int32_t* in, double factor, double bias, double low,
                                     double high, int yz, bool is_signed, long count,
                                     uint8_t* y, uint8_t* unsure);
#endif
