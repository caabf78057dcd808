// The AVX2 + FMA kernels of conv_avx2.cpp with register tiles of 6 rows of W by 2 vectors
// (16 floats / 8 doubles) instead of 4 by 3, for the plane kernel's unrolled tiles (module.cpp,
// plan_run, says when), unrolled for last-axis strides of 1 and 2: 12 sums, 2 loads and a
// broadcast per step leave a register free, where the 4 x 3 tile's 12 sums, 3 loads and a
// broadcast take all 16 and the unrolled steps spill.  Its tiles may run on from one output row
// into the next (PADCONV_SPLIT_ROWS; conv_impl.h, RowSplit): the blend's lane mask then takes
// the free register.
#include <stdint.h>
#include <string.h>

#include "conv_job.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
#include <immintrin.h>

namespace {

#include "avx2_vectors.h"

#include "f16c_widen.h"

}  // namespace

#define PADCONV_MR 6
#define PADCONV_NV 2
#define PADCONV_DW_NV 4
#define PADCONV_UNROLLED_STRIDE 2
#define PADCONV_UNROLLED_DILATION 2
#define PADCONV_TILE_FMA fma_in_place
#define PADCONV_SPLIT_ROWS 1
#define PADCONV_KERNELS_NAME "avx2"
#define PADCONV_KERNELS_SYMBOL padconv_avx2_plane_kernels
#include "conv_impl.h"

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#else  // not x86-64: no such kernels

extern const KernelSet padconv_avx2_plane_kernels = {"avx2"};

#endif
