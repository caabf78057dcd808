// AVX2 + FMA kernels (8 floats / 4 doubles per vector, fused multiply-add; F16C
// widens binary16 inputs).  Compiled for that instruction set by the pragma below; the
// dispatcher calls them only on CPUs that have it (and F16C).
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

// dst[i] = src[i] rounded to binary16, to nearest even (overflow to inf), 8 at a time by F16C.
void narrow_halves(const float* src, unsigned short* dst, long count) {
    long i = 0;
    for (; i + 8 <= count; i += 8)
        _mm_storeu_si128((__m128i*)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < count; ++i) dst[i] = _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
}

#define PADCONV_MR 4
#define PADCONV_NV 3
#define PADCONV_DW_NV 4
#define PADCONV_KERNELS_NAME "avx2"
#define PADCONV_KERNELS_SYMBOL padconv_avx2_kernels
#define PADCONV_PLANE_SET (&padconv_avx2_plane_kernels)
#define PADCONV_LANE_POSITIONS 6  // 12 sums, 2 vectors of W and a broadcast: 15 registers
#include "conv_impl.h"

void padconv_narrow_halves_f16c(const float* src, unsigned short* dst, long count) {
    narrow_halves(src, dst, count);
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#else  // not x86-64: no such kernels

extern const KernelSet padconv_avx2_kernels = {"avx2"};
void padconv_narrow_halves_f16c(const float*, unsigned short*, long) {}

#endif
