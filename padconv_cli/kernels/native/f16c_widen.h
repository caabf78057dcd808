// Binary16 inputs widened by F16C, shared by the AVX2 and AVX-512 units.  Each includes this
// header inside its target pragma and its anonymous namespace, after <immintrin.h>, so that
// each gets its own copy built for its instruction set.

// dst[i] = the binary16 value src[i], 8 at a time by F16C (exact, like every widening).
inline void widen_halves(float* dst, const unsigned short* src, long count) {
    long i = 0;
    for (; i + 8 <= count; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(src + i))));
    for (; i < count; ++i) dst[i] = _cvtsh_ss(src[i]);
}
#define PADCONV_WIDEN_HALVES widen_halves
#define PADCONV_WIDEN_HALF _cvtsh_ss
