// padconv_cli.kernels._native.pad_into: ONNX Pad's fill, from per-axis index tables.
//
// pad_into(src, out, tables, fill, threads) writes
//     out[i_0, ..., i_{r-1}] = src[tables[0][i_0], ..., tables[r-1][i_{r-1}]]
// and the element `fill` (bytes of one element) where an index is -1, for any strides of src
// and out (elements of one size: 1, 2, 4, 8 or 16 bytes; only the bytes are copied).  The
// mode's index rule is the caller's (padconv_cli.kernels.pad.source_indices).  An output row
// (one index of every axis but the last) is a fill row when one of its outer indices is -1,
// else it reads one source row: the last axis is copied in runs of consecutive source indices
// (one memcpy for the interior when both rows are contiguous).  Rows are shared by the calling
// thread and up to `threads` - 1 helpers of Conv's pool, so that a fresh output is first touched
// by every core; the GIL is released.  A request_stop() or, on the main thread, a Python signal
// handler that raised stops the call between tasks (stop.h): it raises
// that exception (or RuntimeError) and `out` is partly written.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "pool.h"
#include "stop.h"

padconv::Pool& padconv_shared_pool();  // module.cpp

namespace {

const long TASK_BYTES = 2 << 20;  // output bytes of one task: threads fault in pages of their own

// Consecutive output positions of the last axis that read consecutive source positions
// (from `from`), or the fill (`from` < 0).
struct Run {
    long start, length, from;
};

struct PadJob {
    int rank = 0;
    long item = 0;
    const char* src = 0;
    char* out = 0;
    const char* fill = 0;
    std::vector<long> out_shape, src_strides, out_strides;
    std::vector<const int64_t*> tables;
    std::vector<Run> runs;
    std::vector<char> fills;  // a last-axis row of fill elements
    long rows = 0, rows_per_task = 1, tasks = 0;
    padconv::TaskRanges* shares = 0;  // the tasks, a range per thread (run_job)
    padconv::Stop stop;
};

const long SHORT_RUN = 4;  // elements copied one by one (a memcpy call costs more)

// `count` fill elements from `fills` (a row of them) to `out`, `stride` bytes apart.
template <int N>
void fill_run(char* out, long stride, long count, const char* fills) {
    if (stride == N && count > SHORT_RUN) {
        memcpy(out, fills, count * N);
        return;
    }
    for (long k = 0; k < count; ++k) memcpy(out + k * stride, fills, N);
}

template <int N>
void copy_run(char* out, long out_stride, const char* src, long src_stride, long count) {
    if (out_stride == N && src_stride == N && count > SHORT_RUN) {
        memcpy(out, src, count * N);
        return;
    }
    for (long k = 0; k < count; ++k) memcpy(out + k * out_stride, src + k * src_stride, N);
}

template <int N>
void task(PadJob& job, long first, long last) {
    const int outer = job.rank - 1;
    const long os = job.out_strides[outer], ss = job.src_strides[outer];
    const char* fills = job.fills.data();
    std::vector<long> index(outer);
    for (long a = outer - 1, rest = first; a >= 0; --a) {
        index[a] = rest % job.out_shape[a];
        rest /= job.out_shape[a];
    }
    for (long row = first; row < last; ++row) {
        char* out = job.out;
        const char* src = job.src;
        for (int a = 0; a < outer; ++a) {
            const int64_t from = job.tables[a][index[a]];
            out += index[a] * job.out_strides[a];
            if (src) src = from < 0 ? 0 : src + from * job.src_strides[a];
        }
        if (!src) fill_run<N>(out, os, job.out_shape[outer], fills);  // a fill row
        for (size_t r = 0; src && r < job.runs.size(); ++r) {
            const Run& run = job.runs[r];
            if (run.from < 0) fill_run<N>(out + run.start * os, os, run.length, fills);
            else copy_run<N>(out + run.start * os, os, src + run.from * ss, ss, run.length);
        }
        for (long a = outer - 1; a >= 0 && ++index[a] == job.out_shape[a]; --a) index[a] = 0;
    }
}

template <int N>
void work(void* context, long slot) {
    PadJob& job = *static_cast<PadJob*>(context);
    long step = 0;
    for (long t = job.shares->take(slot, step); t >= 0 && !job.stop.now();
         t = job.shares->take(slot, step))
        task<N>(job, t * job.rows_per_task, std::min(job.rows, (t + 1) * job.rows_per_task));
}

// The last axis as runs of consecutive source positions (fill positions together).
std::vector<Run> last_axis_runs(const int64_t* table, long length) {
    std::vector<Run> runs;
    for (long k = 0; k < length; ++k) {
        const int64_t from = table[k];
        if (!runs.empty()) {
            Run& run = runs.back();
            const bool fills = run.from < 0 && from < 0;
            if (fills || (run.from >= 0 && from == run.from + run.length)) {
                ++run.length;
                continue;
            }
        }
        runs.push_back(Run{k, 1, from < 0 ? -1 : long(from)});
    }
    // the longest first: a row's interior is read before its borders read parts of it again
    std::stable_sort(runs.begin(), runs.end(),
                     [](const Run& a, const Run& b) { return a.length > b.length; });
    return runs;
}

struct Views {
    Py_buffer src, out;
    bool have_src = false, have_out = false;
    std::vector<Py_buffer> tables;
    ~Views() {
        if (have_src) PyBuffer_Release(&src);
        if (have_out) PyBuffer_Release(&out);
        for (Py_buffer& table : tables) PyBuffer_Release(&table);
    }
};

// Reads the tables into the job, each of out_shape[a] indices in [-1, src_shape[a]); false
// with an exception set otherwise.
bool read_tables(PyObject* given, Views& views, PadJob& job, bool have_fill) {
    PyObject* fast = PySequence_Fast(given, "tables must be a sequence");
    if (!fast) return false;
    const Py_ssize_t count = PySequence_Fast_GET_SIZE(fast);
    bool ok = count == job.rank;
    if (!ok) PyErr_SetString(PyExc_ValueError, "tables must hold one table per axis");
    for (Py_ssize_t a = 0; ok && a < count; ++a) {
        views.tables.emplace_back();
        Py_buffer& view = views.tables.back();
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(fast, a), &view, PyBUF_C_CONTIGUOUS) < 0) {
            views.tables.pop_back();
            ok = false;
            break;
        }
        const int64_t* table = static_cast<const int64_t*>(view.buf);
        ok = view.itemsize == 8 && view.len == job.out_shape[a] * 8;
        for (long i = 0; ok && i < job.out_shape[a]; ++i)
            ok = table[i] < views.src.shape[a] && (table[i] >= 0 || (table[i] == -1 && have_fill));
        if (!ok)
            PyErr_SetString(PyExc_ValueError, "each table needs out.shape[a] int64 source indices "
                                              "in [0, src.shape[a]), or -1 when a fill is given");
        job.tables.push_back(table);
    }
    Py_DECREF(fast);
    return ok;
}

void run_job(PadJob& job, long threads) {
    void (*work_of)(void*, long) = job.item == 1   ? work<1>
                                   : job.item == 2 ? work<2>
                                   : job.item == 4 ? work<4>
                                   : job.item == 8 ? work<8>
                                                   : work<16>;
    padconv::TaskRanges shares(job.tasks, threads);
    job.shares = &shares;
    padconv_shared_pool().run(work_of, &job, threads - 1);
}

}  // namespace

PyObject* padconv_py_pad_into(PyObject*, PyObject* args) {
    PyObject *src, *out, *tables;
    const char* fill;
    Py_ssize_t fill_size;
    long threads;
    if (!PyArg_ParseTuple(args, "OOOy#l", &src, &out, &tables, &fill, &fill_size, &threads))
        return 0;
    Views views;
    if (PyObject_GetBuffer(src, &views.src, PyBUF_STRIDES) < 0) return 0;
    views.have_src = true;
    if (PyObject_GetBuffer(out, &views.out, PyBUF_STRIDES | PyBUF_WRITABLE) < 0) return 0;
    views.have_out = true;
    PadJob job;
    job.rank = views.out.ndim;
    job.item = views.out.itemsize;
    const bool sizes = job.item == 1 || job.item == 2 || job.item == 4 || job.item == 8 ||
                       job.item == 16;
    if (!sizes || views.src.itemsize != job.item || views.src.ndim != job.rank ||
        (fill_size != 0 && fill_size != job.item) || threads < 1) {
        PyErr_SetString(PyExc_ValueError, "src and out need one rank and elements of 1, 2, 4, 8 "
                                          "or 16 bytes, fill one element or none, threads >= 1");
        return 0;
    }
    job.out_shape.assign(views.out.shape, views.out.shape + job.rank);
    job.out_strides.assign(views.out.strides, views.out.strides + job.rank);
    job.src_strides.assign(views.src.strides, views.src.strides + job.rank);
    job.src = static_cast<const char*>(views.src.buf);
    job.out = static_cast<char*>(views.out.buf);
    job.fill = fill_size ? fill : 0;
    if (!read_tables(tables, views, job, fill_size != 0)) return 0;
    if (views.out.len == 0) Py_RETURN_NONE;
    if (job.rank == 0) {
        memcpy(job.out, job.src, job.item);
        Py_RETURN_NONE;
    }
    const long width = job.out_shape[job.rank - 1];
    job.runs = last_axis_runs(job.tables[job.rank - 1], width);
    if (job.fill) {
        job.fills.resize(width * job.item);
        for (long k = 0; k < width; ++k) memcpy(&job.fills[k * job.item], job.fill, job.item);
    }
    job.rows = views.out.len / job.item / width;
    job.rows_per_task = std::max(1L, std::min(TASK_BYTES / (width * job.item),
                                              job.rows / (4 * threads)));
    job.tasks = (job.rows + job.rows_per_task - 1) / job.rows_per_task;
    job.stop.release_gil();
    run_job(job, std::min(threads, job.tasks));
    job.stop.take_gil();
    if (!job.stop.stopped) Py_RETURN_NONE;
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "pad stopped: request_stop()");
    return 0;
}
