// The AVX2 + FMA vectors of the register tiles (8 floats / 4 doubles), shared by the two AVX2
// kernel sets (conv_avx2.cpp, conv_avx2_plane.cpp); included inside their anonymous namespace,
// after <immintrin.h>, under their target pragma.
#ifndef PADCONV_AVX2_VECTORS_H
#define PADCONV_AVX2_VECTORS_H

struct VecF {
    enum { lanes = 8 };
    typedef __m256 type;
    static inline type zero() { return _mm256_setzero_ps(); }
    static inline type load(const float* p) { return _mm256_loadu_ps(p); }
    static inline void store(float* p, type a) { _mm256_storeu_ps(p, a); }
    static inline type bcast(float x) { return _mm256_set1_ps(x); }
    static inline type fma(type a, type b, type c) { return _mm256_fmadd_ps(a, b, c); }
    static inline type fma_in_place(type a, type b, type c) {  // see PADCONV_TILE_FMA
        __asm__("vfmadd231ps %[b], %[a], %[c]" : [c] "+x"(c) : [a] "x"(a), [b] "x"(b));
        return c;
    }
    static inline type add(type a, type b) { return _mm256_add_ps(a, b); }
    // dst[q * 8 + i] = src[i * stride + q] for i, q < 8: a block of W's rows turned into the
    // vectors of the channel-lane tiles (conv_impl.h, pack_w_lanes), in registers
    static inline void transpose(const float* src, long stride, float* dst) {
        type r[8], t[8];
        for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * stride);
        for (int i = 0; i < 8; i += 2) {  // pairs of rows interleaved by element
            t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
            t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
        }
        for (int i = 0; i < 8; i += 4) {  // then by pairs of elements
            const __m256d a = _mm256_castps_pd(t[i]), b = _mm256_castps_pd(t[i + 1]);
            const __m256d c = _mm256_castps_pd(t[i + 2]), d = _mm256_castps_pd(t[i + 3]);
            r[i] = _mm256_castpd_ps(_mm256_unpacklo_pd(a, c));
            r[i + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(a, c));
            r[i + 2] = _mm256_castpd_ps(_mm256_unpacklo_pd(b, d));
            r[i + 3] = _mm256_castpd_ps(_mm256_unpackhi_pd(b, d));
        }
        for (int i = 0; i < 4; ++i) {  // then by 128-bit halves
            _mm256_storeu_ps(dst + i * 8, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
            _mm256_storeu_ps(dst + (i + 4) * 8, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
        }
    }
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
    // the lanes of m loaded from p, the others a's
    static inline type merge(type a, part m, const float* p) {
        return _mm256_blendv_ps(a, _mm256_loadu_ps(p), _mm256_castsi256_ps(m));
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
    static inline type fma_in_place(type a, type b, type c) {  // see PADCONV_TILE_FMA
        __asm__("vfmadd231pd %[b], %[a], %[c]" : [c] "+x"(c) : [a] "x"(a), [b] "x"(b));
        return c;
    }
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
    static inline type merge(type a, part m, const double* p) {
        return _mm256_blendv_pd(a, _mm256_loadu_pd(p), _mm256_castsi256_pd(m));
    }
    static inline void store_first(double* p, type a, int count) {
        alignas(32) double lane[lanes];
        _mm256_store_pd(lane, a);
        for (int i = 0; i < count; ++i) p[i] = lane[i];
    }
};

#endif  // PADCONV_AVX2_VECTORS_H
