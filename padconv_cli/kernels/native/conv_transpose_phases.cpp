// padconv_cli.kernels._native.interleave_phases: ConvTranspose's stride phases put in place.
//
// interleave_phases(phases, y, strides, threads, phase_major=False) copies the C-contiguous
// `phases` (P, s_1, ..., s_r, in_1, ..., in_r) into the C-contiguous y (P, in_1 * s_1, ...,
// in_r * s_r):
//     y[p, i_1 * s_1 + a_1, ..., i_r * s_r + a_r] = phases[p, a_1, ..., a_r, i_1, ..., i_r]
// for 4- or 8-byte elements (phase_major: `phases` is (s_1, ..., s_r, P, in_1, ..., in_r)):
// the stride phases of a ConvTranspose whose phases all have in_i outputs per axis written
// in one pass, each output row of y in order from the s_r phase rows it interleaves.  Planes are shared by the calling thread and up to
// `threads` - 1 helpers of Conv's pool; every element is a copy, so the result does not depend
// on the thread count.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include <atomic>

#include "pool.h"

padconv::Pool& padconv_shared_pool();  // module.cpp

namespace {

const int MAX_RANK = 8;

struct Interleave {
    const char* src;
    char* dst;
    long planes, rank, item;
    long in[MAX_RANK], s[MAX_RANK];
    long phases;      // prod(s)
    long in_plane;    // prod(in)
    long out_rows;    // prod(in * s) over the axes but the last
    long plane_step, phase_step;  // elements between planes p, p + 1 and phases a, a + 1
    std::atomic<long> next{0};

    template <typename T>
    void row(const T* const* from, T* out) const {
        const long last = rank - 1, width = in[last], step = s[last];
        if (step == 2) {
            const T* a = from[0];
            const T* b = from[1];
            for (long j = 0; j < width; ++j) {
                out[2 * j] = a[j];
                out[2 * j + 1] = b[j];
            }
            return;
        }
        for (long j = 0; j < width; ++j)
            for (long k = 0; k < step; ++k) out[j * step + k] = from[k][j];
    }

    template <typename T>
    void plane(long p) const {
        const T* base = reinterpret_cast<const T*>(src) + p * plane_step;
        T* out = reinterpret_cast<T*>(dst) + p * phases * in_plane;
        const long last = rank - 1, width = in[last] * s[last];
        const T* from[64];
        for (long r = 0; r < out_rows; ++r) {
            // the outer output coordinates of row r, split into input index and phase
            long rest = r, phase = 0, index = 0, phase_stride = s[last], index_stride = in[last];
            long phase_of[MAX_RANK], index_of[MAX_RANK];
            for (long a = last - 1; a >= 0; --a) {
                const long o = rest % (in[a] * s[a]);
                rest /= in[a] * s[a];
                phase_of[a] = o % s[a];
                index_of[a] = o / s[a];
            }
            for (long a = last - 1; a >= 0; --a) {
                phase += phase_of[a] * phase_stride;
                index += index_of[a] * index_stride;
                phase_stride *= s[a];
                index_stride *= in[a];
            }
            for (long k = 0; k < s[last]; ++k) from[k] = base + (phase + k) * phase_step + index;
            this->row(from, out + r * width);
        }
    }

    void work() {
        for (long p = next++; p < planes; p = next++) {
            if (item == 4) plane<uint32_t>(p);
            else plane<uint64_t>(p);
        }
    }

    static void work_of(void* self) { static_cast<Interleave*>(self)->work(); }
};

}  // namespace

PyObject* padconv_py_interleave_phases(PyObject*, PyObject* args) {
    PyObject *src_obj, *dst_obj, *strides;
    long threads;
    int phase_major = 0;
    if (!PyArg_ParseTuple(args, "OOOl|p", &src_obj, &dst_obj, &strides, &threads, &phase_major))
        return 0;
    const int flags = PyBUF_C_CONTIGUOUS | PyBUF_ND;
    Py_buffer src, dst;
    if (PyObject_GetBuffer(src_obj, &src, flags) < 0) return 0;
    if (PyObject_GetBuffer(dst_obj, &dst, flags | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&src);
        return 0;
    }
    Interleave job;
    const long rank = dst.ndim - 1;
    bool ok = rank >= 1 && rank <= MAX_RANK && src.ndim == 1 + 2 * rank &&
              src.itemsize == dst.itemsize && (src.itemsize == 4 || src.itemsize == 8);
    PyObject* fast = ok ? PySequence_Fast(strides, "strides") : 0;
    ok = ok && fast && PySequence_Fast_GET_SIZE(fast) == rank;
    if (ok) {
        job.src = static_cast<const char*>(src.buf);
        job.dst = static_cast<char*>(dst.buf);
        job.planes = dst.shape[0];
        job.rank = rank;
        job.item = src.itemsize;
        job.phases = job.in_plane = job.out_rows = 1;
        for (long a = 0; a < rank; ++a) {
            job.s[a] = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, a));
            job.in[a] = src.shape[1 + rank + a];
            const long phase_axis = phase_major ? a : 1 + a;
            ok = ok && job.s[a] >= 1 && src.shape[phase_axis] == job.s[a] &&
                 dst.shape[1 + a] == job.in[a] * job.s[a];
            job.phases *= job.s[a];
            job.in_plane *= job.in[a];
            if (a < rank - 1) job.out_rows *= job.in[a] * job.s[a];
        }
        ok = ok && src.shape[phase_major ? rank : 0] == job.planes && !PyErr_Occurred() &&
             job.s[rank - 1] <= 64;
        job.plane_step = phase_major ? job.in_plane : job.phases * job.in_plane;
        job.phase_step = phase_major ? job.planes * job.in_plane : job.in_plane;
    }
    Py_XDECREF(fast);
    if (ok && job.planes > 0 && job.in_plane > 0) {
        long helpers = threads - 1;
        if (helpers > job.planes - 1) helpers = job.planes - 1;
        if (helpers < 0) helpers = 0;
        Py_BEGIN_ALLOW_THREADS
        padconv_shared_pool().run(&Interleave::work_of, &job, helpers);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    if (!ok) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "interleave_phases: inconsistent arrays");
        return 0;
    }
    Py_RETURN_NONE;
}

// gather_kernels(w, parts, m0, threads) fills, for each (taps, out) of the list `parts`, the
// C-contiguous out (P, Mc, C, T) from the C-contiguous w (C, M, K) (ConvTranspose's W, its
// kernel flattened) and the int64 taps (P, T):
//     out[p, m, c, t] = w[c, m0 + m, taps[p, t]]
// for 4- or 8-byte floats: the stride phases' sub-kernels in Conv's layout, each part's phases
// stacked phase after phase.  Each row w[c, m0 + m, :] is fetched once, for every part, and
// checked on the way: the call returns whether every element of the rows
// w[:, m0 : m0 + Mc, :] is finite (the phase Convs would multiply their zero padding by an
// infinite weight).  Blocks of GATHER_ROWS output channels are shared by the calling thread
// and up to `threads` - 1 helpers of Conv's pool; every element is a copy, so the result
// does not depend on them.
namespace {

const long GATHER_ROWS = 16;  // output channels per task
// input channels per tile: W's runs for consecutive input channels lie M * K elements apart
// (8 KiB for 128 4x4 kernels), in the same cache sets; 8 of them stay in a level-1 cache of
// 8 or more ways while the tile is copied
const long GATHER_CHANNELS = 8;
const int MAX_PARTS = 64;

// The bits of a float, and the sign bit of (exponent bits + one exponent step): set exactly
// when every exponent bit is (an infinity or a nan), so that an OR over many tells.
inline uint32_t non_finite_bit(float v) {
    uint32_t bits;
    memcpy(&bits, &v, 4);
    return ((bits & 0x7f800000u) + 0x00800000u) & 0x80000000u;
}
inline uint64_t non_finite_bit(double v) {
    uint64_t bits;
    memcpy(&bits, &v, 8);
    return ((bits & 0x7ff0000000000000ull) + 0x0010000000000000ull) & 0x8000000000000000ull;
}

struct Part {
    const int64_t* taps;
    char* out;
    long phases, t_count;
};

struct Gather {
    const char* w;
    Part parts[MAX_PARTS];
    long part_count = 0;
    long item, mc, c, m, k, m0, blocks;
    std::atomic<long> next{0};
    std::atomic<bool> infinite{false};

    // Output channels [mi0, mi1) for input channels [c0, c1): the rows w[c, m0 + mi, :] are
    // first checked as contiguous runs (one per input channel), which brings them near; then
    // each output run out[p, mi, c0:c1, :] is written contiguously.  Whether all were finite.
    template <typename T>
    bool tile(long mi0, long mi1, long c0, long c1) const {
        const T* wt = reinterpret_cast<const T*>(w);
        decltype(non_finite_bit(T(0))) bad = 0;
        for (long ci = c0; ci < c1; ++ci) {
            const T* run = wt + (ci * m + m0 + mi0) * k;
            for (long e = 0; e < (mi1 - mi0) * k; ++e) bad |= non_finite_bit(run[e]);
        }
        for (long part = 0; part < part_count; ++part) {
            const Part& to = parts[part];
            for (long mi = mi0; mi < mi1; ++mi) {
                for (long p = 0; p < to.phases; ++p) {
                    const int64_t* tp = to.taps + p * to.t_count;
                    T* dst = reinterpret_cast<T*>(to.out) + ((p * mc + mi) * c + c0) * to.t_count;
                    const T* row = wt + (c0 * m + m0 + mi) * k;
                    switch (to.t_count) {  // the common tap counts unrolled
                        case 1: copy_taps<T, 1>(dst, row, tp, c1 - c0, m * k, 1); break;
                        case 2: copy_taps<T, 2>(dst, row, tp, c1 - c0, m * k, 2); break;
                        case 4: copy_taps<T, 4>(dst, row, tp, c1 - c0, m * k, 4); break;
                        default: copy_taps<T, 0>(dst, row, tp, c1 - c0, m * k, to.t_count);
                    }
                }
            }
        }
        return bad == 0;
    }

    // dst[i * t_count + t] = row[i * row_step + tp[t]] for i < count (COUNT: t_count known).
    template <typename T, int COUNT>
    static void copy_taps(T* dst, const T* row, const int64_t* tp, long count, long row_step,
                          long t_count) {
        if (COUNT > 0) {
            long at[COUNT > 0 ? COUNT : 1];
            for (int t = 0; t < COUNT; ++t) at[t] = tp[t];
            for (long i = 0; i < count; ++i, dst += COUNT, row += row_step)
                for (int t = 0; t < COUNT; ++t) dst[t] = row[at[t]];
            return;
        }
        for (long i = 0; i < count; ++i, dst += t_count, row += row_step)
            for (long t = 0; t < t_count; ++t) dst[t] = row[tp[t]];
    }

    template <typename T>
    void block(long b) {
        const long mi0 = b * GATHER_ROWS, mi1 = mi0 + GATHER_ROWS < mc ? mi0 + GATHER_ROWS : mc;
        bool ok = true;
        for (long c0 = 0; c0 < c; c0 += GATHER_CHANNELS)
            ok &= tile<T>(mi0, mi1, c0, c0 + GATHER_CHANNELS < c ? c0 + GATHER_CHANNELS : c);
        if (!ok) infinite = true;
    }

    void work() {
        for (long b = next++; b < blocks; b = next++) {
            if (item == 4) block<float>(b);
            else block<double>(b);
        }
    }

    static void work_of(void* self) { static_cast<Gather*>(self)->work(); }
};

// The buffers a call holds, released when it returns.
struct Views {
    Py_buffer views[1 + 2 * MAX_PARTS];
    int count = 0;
    Py_buffer* get(PyObject* obj, int flags) {
        if (PyObject_GetBuffer(obj, &views[count], flags) < 0) return 0;
        return &views[count++];
    }
    ~Views() {
        for (int i = 0; i < count; ++i) PyBuffer_Release(&views[i]);
    }
};

char last_format_char(const Py_buffer& view) {
    return view.format && *view.format ? view.format[strlen(view.format) - 1] : 0;
}

// Whether `out` and `taps` make a part of the gather from `w` with m0 (the shapes, types and
// every tap inside W's kernel).
bool valid_part(const Py_buffer& w, const Py_buffer& taps, const Py_buffer& out, long m0) {
    if (taps.ndim != 2 || out.ndim != 4 || taps.itemsize != 8 ||
        !last_format_char(taps) || !strchr("qlQL", last_format_char(taps)) ||
        out.itemsize != w.itemsize || last_format_char(out) != last_format_char(w) ||
        out.shape[0] != taps.shape[0] || out.shape[3] != taps.shape[1] ||
        out.shape[2] != w.shape[0] || m0 + out.shape[1] > w.shape[1])
        return false;
    const int64_t* tp = static_cast<const int64_t*>(taps.buf);
    for (Py_ssize_t i = 0; i < taps.shape[0] * taps.shape[1]; ++i)
        if (tp[i] < 0 || tp[i] >= w.shape[2]) return false;
    return true;
}

}  // namespace

PyObject* padconv_py_gather_kernels(PyObject*, PyObject* args) {
    PyObject *w_obj, *parts_obj;
    long m0, threads = 1;
    if (!PyArg_ParseTuple(args, "OOl|l", &w_obj, &parts_obj, &m0, &threads)) return 0;
    const int flags = PyBUF_C_CONTIGUOUS | PyBUF_ND | PyBUF_FORMAT;
    Views views;
    const Py_buffer* w = views.get(w_obj, flags);
    if (!w) return 0;
    PyObject* parts = PySequence_Fast(parts_obj, "parts must be a sequence of (taps, out)");
    if (!parts) return 0;
    Gather job;
    const char kind = last_format_char(*w);
    bool ok = w->ndim == 3 &&
              ((w->itemsize == 4 && kind == 'f') || (w->itemsize == 8 && kind == 'd')) &&
              m0 >= 0 && threads >= 1 && PySequence_Fast_GET_SIZE(parts) <= MAX_PARTS;
    long mc = -1;
    for (Py_ssize_t i = 0; ok && i < PySequence_Fast_GET_SIZE(parts); ++i) {
        PyObject* pair = PySequence_Fast_GET_ITEM(parts, i);
        ok = PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2;
        const Py_buffer* taps = ok ? views.get(PyTuple_GET_ITEM(pair, 0), flags) : 0;
        const Py_buffer* out =
            taps ? views.get(PyTuple_GET_ITEM(pair, 1), flags | PyBUF_WRITABLE) : 0;
        ok = out && valid_part(*w, *taps, *out, m0) && (mc < 0 || out->shape[1] == mc);
        if (!ok) break;
        mc = out->shape[1];
        job.parts[job.part_count++] = {static_cast<const int64_t*>(taps->buf),
                                       static_cast<char*>(out->buf), long(out->shape[0]),
                                       long(out->shape[3])};
    }
    Py_DECREF(parts);
    if (!ok) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "gather_kernels: inconsistent arrays or taps");
        return 0;
    }
    if (job.part_count > 0 && mc > 0) {
        job.w = static_cast<const char*>(w->buf);
        job.item = w->itemsize;
        job.mc = mc;
        job.c = w->shape[0];
        job.m = w->shape[1];
        job.k = w->shape[2];
        job.m0 = m0;
        job.blocks = (mc + GATHER_ROWS - 1) / GATHER_ROWS;
        long helpers = threads - 1;
        if (helpers > job.blocks - 1) helpers = job.blocks - 1;
        if (helpers < 0) helpers = 0;
        Py_BEGIN_ALLOW_THREADS
        padconv_shared_pool().run(&Gather::work_of, &job, helpers);
        Py_END_ALLOW_THREADS
    }
    return PyBool_FromLong(!job.infinite.load());
}
