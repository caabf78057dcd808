// Portable kernels: plain C++ arithmetic on short arrays (a multiply, then an add: the build
// turns off floating-point contraction), for any CPU.
#include "conv_job.h"

namespace {

template <typename T, int N>
struct Lanes {
    T v[N];
};

template <typename T>
struct PortableVec {
    enum { lanes = 4 };
    typedef Lanes<T, lanes> type;
    static inline type zero() {
        type r;
        for (int i = 0; i < lanes; ++i) r.v[i] = T(0);
        return r;
    }
    static inline type load(const T* p) {
        type r;
        for (int i = 0; i < lanes; ++i) r.v[i] = p[i];
        return r;
    }
    static inline void store(T* p, const type& a) {
        for (int i = 0; i < lanes; ++i) p[i] = a.v[i];
    }
    static inline type bcast(T x) {
        type r;
        for (int i = 0; i < lanes; ++i) r.v[i] = x;
        return r;
    }
    static inline type fma(const type& a, const type& b, const type& c) {
        type r;
        for (int i = 0; i < lanes; ++i) {
            const T product = a.v[i] * b.v[i];
            r.v[i] = c.v[i] + product;
        }
        return r;
    }
    static inline type add(const type& a, const type& b) {
        type r;
        for (int i = 0; i < lanes; ++i) r.v[i] = a.v[i] + b.v[i];
        return r;
    }
    // lanes lo .. hi - 1 (0 <= lo <= hi <= lanes) of a partial access
    struct part {
        int lo, hi;
    };
    static inline part part_of(int lo, int hi) { return part{lo, hi}; }
    // lane i = row[col + i] for the lanes of m, else 0; no other element is read
    static inline type load_part(const T* row, long col, part m) {
        type r = zero();
        for (int i = m.lo; i < m.hi; ++i) r.v[i] = row[col + i];
        return r;
    }
    static inline void store_first(T* p, const type& a, int count) {
        for (int i = 0; i < count; ++i) p[i] = a.v[i];
    }
};

typedef PortableVec<float> VecF;
typedef PortableVec<double> VecD;

}  // namespace

#define PADCONV_MR 4
#define PADCONV_NV 2
#define PADCONV_DW_NV 2
#define PADCONV_KERNELS_NAME "generic"
#define PADCONV_KERNELS_SYMBOL padconv_generic_kernels
#include "conv_impl.h"
