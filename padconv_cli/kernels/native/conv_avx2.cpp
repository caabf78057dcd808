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

struct VecF {
    enum { lanes = 8 };
    typedef __m256 type;
    static inline type zero() { return _mm256_setzero_ps(); }
    static inline type load(const float* p) { return _mm256_loadu_ps(p); }
    static inline void store(float* p, type a) { _mm256_storeu_ps(p, a); }
    static inline type bcast(float x) { return _mm256_set1_ps(x); }
    static inline type fma(type a, type b, type c) { return _mm256_fmadd_ps(a, b, c); }
    static inline type add(type a, type b) { return _mm256_add_ps(a, b); }
    // lanes lo .. hi - 1 (0 <= lo <= hi <= lanes) of a partial access
    typedef __m256i part;
    static inline part part_of(int lo, int hi) {
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        return _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(hi), lane),
                                _mm256_cmpgt_epi32(lane, _mm256_set1_epi32(lo - 1)));
    }
    // lane i = row[col + i] for the lanes of m, else 0; no other element is read
    static inline type load_part(const float* row, long col, part m) {
        return _mm256_maskload_ps((const float*)((uintptr_t)row + col * 4), m);
    }
    // (not vmaskmovps: a masked store is slow on some CPUs)
    static inline void store_first(float* p, type a, int count) {
        alignas(32) float lane[lanes];
        _mm256_store_ps(lane, a);
        for (int i = 0; i < count; ++i) p[i] = lane[i];
    }
};

struct VecD {
    enum { lanes = 4 };
    typedef __m256d type;
    static inline type zero() { return _mm256_setzero_pd(); }
    static inline type load(const double* p) { return _mm256_loadu_pd(p); }
    static inline void store(double* p, type a) { _mm256_storeu_pd(p, a); }
    static inline type bcast(double x) { return _mm256_set1_pd(x); }
    static inline type fma(type a, type b, type c) { return _mm256_fmadd_pd(a, b, c); }
    static inline type add(type a, type b) { return _mm256_add_pd(a, b); }
    typedef __m256i part;
    static inline part part_of(int lo, int hi) {
        const __m256i lane = _mm256_setr_epi64x(0, 1, 2, 3);
        return _mm256_and_si256(_mm256_cmpgt_epi64(_mm256_set1_epi64x(hi), lane),
                                _mm256_cmpgt_epi64(lane, _mm256_set1_epi64x(lo - 1)));
    }
    static inline type load_part(const double* row, long col, part m) {
        return _mm256_maskload_pd((const double*)((uintptr_t)row + col * 8), m);
    }
    static inline void store_first(double* p, type a, int count) {
        alignas(32) double lane[lanes];
        _mm256_store_pd(lane, a);
        for (int i = 0; i < count; ++i) p[i] = lane[i];
    }
};

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
