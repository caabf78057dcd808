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

    static void work_of(void* self, long) { static_cast<Interleave*>(self)->work(); }
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

// interleave_phases in phase-major form for native callers (conv_transpose_run.cpp): src
// (s_1, ..., s_r, planes, in_1, ..., in_r) into dst (planes, in_1 * s_1, ...), elements of
// `item` bytes (4 or 8), rank at most MAX_RANK, s_r at most 64 (checked by the caller).
void padconv_interleave_phase_major(const void* src, void* dst, long planes, long rank,
                                    const long* strides, const long* in, long item,
                                    long threads) {
    Interleave job;
    job.src = static_cast<const char*>(src);
    job.dst = static_cast<char*>(dst);
    job.planes = planes;
    job.rank = rank;
    job.item = item;
    job.phases = job.in_plane = job.out_rows = 1;
    for (long a = 0; a < rank; ++a) {
        job.s[a] = strides[a];
        job.in[a] = in[a];
        job.phases *= job.s[a];
        job.in_plane *= job.in[a];
        if (a < rank - 1) job.out_rows *= job.in[a] * job.s[a];
    }
    job.plane_step = job.in_plane;
    job.phase_step = job.planes * job.in_plane;
    if (planes <= 0 || job.in_plane <= 0) return;
    long helpers = threads - 1;
    if (helpers > planes - 1) helpers = planes - 1;
    padconv_shared_pool().run(&Interleave::work_of, &job, helpers > 0 ? helpers : 0);
}
