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
    // dst[q * 16 + i] = src[i * stride + q] for i, q < 16: a block of W's rows turned into
    // the vectors of the channel-lane tiles (conv_impl.h, pack_w_lanes), in registers
    static inline void transpose(const float* src, long stride, float* dst) {
        type r[16], t[16];
        for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * stride);
        for (int i = 0; i < 16; i += 2) {  // pairs of rows interleaved by element
            t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
            t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
        }
        for (int i = 0; i < 16; i += 4) {  // then by pairs of elements
            const __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]);
            const __m512d c = _mm512_castps_pd(t[i + 2]), d = _mm512_castps_pd(t[i + 3]);
            r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
            r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
            r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
            r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
        }
        for (int i = 0; i < 4; ++i) {  // then by 128-bit quarters, twice
            t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
            t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
            t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
            t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
        }
        for (int i = 0; i < 4; ++i) {
            _mm512_storeu_ps(dst + i * 16, _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88));
            _mm512_storeu_ps(dst + (i + 8) * 16, _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd));
            _mm512_storeu_ps(dst + (i + 4) * 16, _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88));
            _mm512_storeu_ps(dst + (i + 12) * 16, _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xdd));
        }
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
#define PADCONV_LANES_LONG_ROWS 1
#define PADCONV_LANE_PREFETCH 1
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
