// AVX-512F kernels (16 floats / 8 doubles per vector, fused multiply-add; F16C
// widens binary16 inputs).  Compiled for that instruction set by the pragma below; the
// dispatcher calls them only on CPUs that have it (and F16C).
#include <stdint.h>
#include <string.h>

#include "conv_job.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx2,fma,f16c"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma,f16c")
#endif
#include <immintrin.h>

namespace {

struct VecF {
    enum { lanes = 16 };
    typedef __m512 type;
    static inline type zero() { return _mm512_setzero_ps(); }
    static inline type load(const float* p) { return _mm512_loadu_ps(p); }
    static inline void store(float* p, type a) { _mm512_storeu_ps(p, a); }
    static inline type bcast(float x) { return _mm512_set1_ps(x); }
    static inline type fma(type a, type b, type c) { return _mm512_fmadd_ps(a, b, c); }
    static inline type add(type a, type b) { return _mm512_add_ps(a, b); }
    // lanes 0-7 from lo, 8-15 from hi (two of W's packed row blocks; conv_impl.h, lane_tile)
    static inline type load_halves(const float* lo, const float* hi) {
        const __m512d low = _mm512_castpd256_pd512(_mm256_castps_pd(_mm256_loadu_ps(lo)));
        return _mm512_castpd_ps(_mm512_insertf64x4(low, _mm256_castps_pd(_mm256_loadu_ps(hi)), 1));
    }
    // lanes 0-7 from lo, 8-15 zero
    static inline type load_low(const float* lo) {
        return _mm512_castpd_ps(
            _mm512_insertf64x4(_mm512_setzero_pd(), _mm256_castps_pd(_mm256_loadu_ps(lo)), 0));
    }
    // lanes lo .. hi - 1 (0 <= lo <= hi <= lanes) of a partial access
    typedef __mmask16 part;
    static inline part part_of(int lo, int hi) {
        return part(((1u << hi) - 1) & ~((1u << lo) - 1));
    }
    // lane i = row[col + i] for the lanes of m, else 0; no other element is read
    static inline type load_part(const float* row, long col, part m) {
        return _mm512_maskz_loadu_ps(m, (const float*)((uintptr_t)row + col * 4));
    }
    static inline void store_first(float* p, type a, int count) {
        _mm512_mask_storeu_ps(p, part_of(0, count), a);
    }
    // the lanes of m loaded from p, the others a's
    static inline type merge(type a, part m, const float* p) {
        return _mm512_mask_blend_ps(m, a, _mm512_loadu_ps(p));
    }
};

struct VecD {
    enum { lanes = 8 };
    typedef __m512d type;
    static inline type zero() { return _mm512_setzero_pd(); }
    static inline type load(const double* p) { return _mm512_loadu_pd(p); }
    static inline void store(double* p, type a) { _mm512_storeu_pd(p, a); }
    static inline type bcast(double x) { return _mm512_set1_pd(x); }
    static inline type fma(type a, type b, type c) { return _mm512_fmadd_pd(a, b, c); }
    static inline type add(type a, type b) { return _mm512_add_pd(a, b); }
    typedef __mmask8 part;
    static inline part part_of(int lo, int hi) {
        return part(((1u << hi) - 1) & ~((1u << lo) - 1));
    }
    static inline type load_part(const double* row, long col, part m) {
        return _mm512_maskz_loadu_pd(m, (const double*)((uintptr_t)row + col * 8));
    }
    static inline void store_first(double* p, type a, int count) {
        _mm512_mask_storeu_pd(p, part_of(0, count), a);
    }
    static inline type merge(type a, part m, const double* p) {
        return _mm512_mask_blend_pd(m, a, _mm512_loadu_pd(p));
    }
};

#include "f16c_widen.h"

}  // namespace

#define PADCONV_MR 8
#define PADCONV_NV 3
#define PADCONV_DW_NV 4
#define PADCONV_SPLIT_ROWS 1
#define PADCONV_LANE_POSITIONS 14
#define PADCONV_KERNELS_NAME "avx512"
#define PADCONV_KERNELS_SYMBOL padconv_avx512_kernels
#include "conv_impl.h"

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

extern const int padconv_have_x86_kernels = 1;

#else  // not x86-64: no such kernels

extern const KernelSet padconv_avx512_kernels = {"avx512"};
extern const int padconv_have_x86_kernels = 0;

#endif
