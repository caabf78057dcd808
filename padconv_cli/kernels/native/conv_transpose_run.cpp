// padconv_cli.kernels._native.phase_convs: ConvTranspose's stride phases as one native job.
//
// phase_convs(w, b, y, m0, runs, strides, threads, isa) computes, for one image and its
// output channels m0 .. m0 + Mc - 1, a ConvTranspose whose stride phases all have the same
// output counts (kernels/conv_transpose.py, _native_phases).  Run r of consecutive phase
// slots, given as (x, taps, tap_shape, pads_begin, dilations, first), is the stride-1 Conv of
// x (1, C, *in) with its phases' flipped sub-kernels stacked as output channels,
//     P[first + p, m, o] = B[m0 + m] + sum_{c, t} W[c, m0 + m, taps[p, t]] * xpad[c, o + t*d]
// (t over tap_shape in C order), each output summed in the Conv core's one fixed order by its
// GEMM kernels; then y[m, i_1 * s_1 + a_1, ...] = P[a, m, i] (slot a = the phase offsets a_1,
// ..., a_r in C order).  w is ConvTranspose's W (C, M, K) with its kernel flattened, y is
// (Mc, *out) with out = counts * strides; all float32 or all float64, C-contiguous.
//
// Where conv() runs each Conv on its own (packing its W, entering the pool, waiting for the
// last task), this packs every run's sub-kernels straight from W into the register-tile
// layout in one parallel pass -- checking W on the way -- then runs the tasks of every run in
// one entry of the pool, so the threads finish together once, and interleaves the phases into
// y.  The phase outputs and the packed sub-kernels live in one buffer of the calling thread,
// kept for its next call when at most KEPT_WORK_BYTES (a fresh one would be page-faulted in
// every time).  Returns False, having written nothing, when a weight it read is not finite
// (the Convs would multiply their zero padding by it).  Stops like conv() (request_stop(), a
// signal handler on the main thread); y is then garbage.
//
// phase_convs_bytes(c, mc, counts, runs, strides, threads, isa, itemsize) is what such a
// call allocates (phase outputs, packed sub-kernels, every working thread's buffer), runs
// given as (in, tap_shape, pads_begin, dilations, phases): the sizing the call itself uses.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "conv_job.h"
#include "pool.h"
#include "stop.h"

using padconv::Stop;

// module.cpp: the parts of conv() this job shares
padconv::Pool& padconv_shared_pool();
const KernelSet* padconv_kernels(const char* isa);
void padconv_plan_conv_job(ConvJob& job, const KernelSet& ks, int item, long threads,
                           long* tasks, long* scratch_elems, bool rows_when_wasteful = true);
void* padconv_thread_scratch(size_t bytes);
void padconv_trim_thread_scratch();
void padconv_record_conv_bytes(long bytes);
// conv_transpose_phases.cpp
void padconv_interleave_phase_major(const void* src, void* dst, long planes, long rank,
                                    const long* strides, const long* in, long item,
                                    long threads);

namespace {

const int MAX_RUNS = 64;
const long PACK_ROWS = 8;  // output channels a packing task takes, for every phase
const long PACK_AHEAD = 2;  // input channels ahead whose rows of W a packing task prefetches
const size_t KEPT_WORK_BYTES = 8 << 20;  // a thread's work buffer kept for its next call
const int MAX_INTERLEAVED_RANK = 8;  // interleave_phases' limits
const long MAX_LAST_STRIDE = 64;

struct RunSpec {
    const void* x = 0;
    const int64_t* taps = 0;
    long phases = 0, t_count = 0, first = 0;
    long in[PADCONV_MAX_RANK], tap_shape[PADCONV_MAX_RANK];
    long pads[PADCONV_MAX_RANK], dilations[PADCONV_MAX_RANK];
};

struct Shared {
    int rank = 0;
    long c = 0, mc = 0, counts[PADCONV_MAX_RANK], strides[PADCONV_MAX_RANK];
    long slots() const {  // the phase slots: prod(strides)
        long count = 1;
        for (int i = 0; i < rank; ++i) count *= strides[i];
        return count;
    }
    long plane() const {  // outputs of one phase of one channel: prod(counts)
        long count = 1;
        for (int i = 0; i < rank; ++i) count *= counts[i];
        return count;
    }
};

long ceil_div(long a, long b) { return (a + b - 1) / b; }

// The stride-1 Conv of run r as a job of the core (one image, one group, phases * Mc output
// channels); x, w, bias and y are set by the caller.
ConvJob job_of(const Shared& g, const RunSpec& r) {
    ConvJob job;
    memset(&job, 0, sizeof job);
    job.x_type = X_SAME;
    job.rank = g.rank;
    job.n = job.group = 1;
    job.c = job.cg = g.c;
    job.m = job.mg = r.phases * g.mc;
    job.in_plane = job.out_plane = job.taps = job.outer_out = job.outer_taps = 1;
    for (int i = 0; i < g.rank; ++i) {
        job.in[i] = r.in[i];
        job.out[i] = g.counts[i];
        job.k[i] = r.tap_shape[i];
        job.s[i] = 1;
        job.d[i] = r.dilations[i];
        job.pb[i] = r.pads[i];
        job.in_plane *= job.in[i];
        job.out_plane *= job.out[i];
        job.taps *= job.k[i];
        if (i < g.rank - 1) {
            job.outer_out *= job.out[i];
            job.outer_taps *= job.k[i];
        }
    }
    job.ck = job.cg * job.taps;
    return job;
}

// The jobs of every run planned on `threads` threads: their tasks (run r's tasks are
// first_task[r] .. first_task[r + 1] - 1), the work buffer's elements (the phase outputs,
// then, 64-byte aligned, the packed sub-kernels, run r's from packed_at[r]) and the largest
// per-thread buffer's.
struct Plan {
    std::vector<ConvJob> jobs;
    std::vector<long> first_task, packed_at;
    long scratch_elems = 0, slots_elems = 0;

    Plan(const Shared& g, const RunSpec* runs, long count, const KernelSet& ks, int item,
         long threads, bool rows_when_wasteful = true) {
        slots_elems = ceil_div(g.slots() * g.mc * g.plane(), 64 / item) * (64 / item);
        first_task.push_back(0);
        packed_at.push_back(slots_elems);
        for (long r = 0; r < count; ++r) {
            ConvJob job = job_of(g, runs[r]);
            long tasks = 0, scratch = 0;
            padconv_plan_conv_job(job, ks, item, threads, &tasks, &scratch, rows_when_wasteful);
            jobs.push_back(job);
            first_task.push_back(first_task.back() + tasks);
            packed_at.push_back(packed_at.back() + ceil_div(job.m, ks.mr) * ks.mr * job.ck);
            if (scratch > scratch_elems) scratch_elems = scratch;
        }
    }

    bool all_plane() const {
        for (const ConvJob& job : jobs)
            if (!job.plane_kernel) return false;
        return true;
    }
    long tasks() const { return first_task.back(); }
    long working_threads(long threads) const {
        return tasks() < threads ? (tasks() > 0 ? tasks() : 1) : threads;
    }
    long work_elems() const { return packed_at.back(); }
    long bytes(int item, long threads) const {  // what the call allocates, alignment included
        return work_elems() * item + 64 + working_threads(threads) * (scratch_elems * item + 64);
    }
};

// Packs the runs' sub-kernels into the core's layout (pack_w in conv_impl.h), run r's
// packed[b][q][i] = sub[b*MR + i][q] for the rows that exist, zero after, where
// sub[p*Mc + m][c*T + t] = W[c, m0 + m, taps[p, t]].  A task takes PACK_ROWS output channels
// m of every run and phase at once, so that each row W[c, m0 + m, :] is fetched once for all
// the phases that take taps from it.
template <typename T>
struct Pack {
    const T* w;
    long m, k, m0, mr;
    const Shared& g;
    const RunSpec* runs;
    long count;
    const Plan& plan;
    T* packed;
    std::atomic<long> next{0};
    std::atomic<bool> infinite{false};
    std::atomic<bool> failed{false};  // out of memory

    Pack(const T* w_, long m_, long k_, long m0_, long mr_, const Shared& g_, const RunSpec* r,
         long count_, const Plan& p, T* out)
        : w(w_), m(m_), k(k_), m0(m0_), mr(mr_), g(g_), runs(r), count(count_), plan(p),
          packed(out) {}

    long tasks() const { return ceil_div(g.mc, PACK_ROWS); }

    // The rows past the last real one of each run's last block: zeros.
    void zero_tails() {
        for (long r = 0; r < count; ++r) {
            const long rows = runs[r].phases * g.mc, tc = runs[r].t_count;
            const long end = ceil_div(rows, mr) * mr, b = rows / mr;
            T* dst = packed + plan.packed_at[r] + b * mr * g.c * tc;
            for (long ci = 0; rows < end && ci < g.c; ++ci, dst += tc * mr)
                for (long i = rows - b * mr; i < mr; ++i)
                    for (long t = 0; t < tc; ++t) dst[t * mr + i] = T(0);
        }
    }

    // Output channels mi0 .. mi1 - 1 of every phase of every run.
    void rows(long mi0, long mi1) {
        struct Target {
            T* at;  // the element of input channel 0, tap 0
            const int64_t* taps;
            long tc;
        };
        std::vector<Target> targets[PACK_ROWS];
        for (long r = 0; r < count; ++r) {
            const long tc = runs[r].t_count;
            for (long p = 0; p < runs[r].phases; ++p) {
                for (long mi = mi0; mi < mi1; ++mi) {
                    const long row = p * g.mc + mi, b = row / mr, i = row % mr;
                    targets[mi - mi0].push_back(
                        {packed + plan.packed_at[r] + b * mr * g.c * tc + i,
                         runs[r].taps + p * tc, tc});
                }
            }
        }
        uint64_t bad = 0;
        const long run_elems = (mi1 - mi0) * k, line = 64 / sizeof(T);
        for (long ci = 0; ci < g.c; ++ci) {
#if defined(__GNUC__) || defined(__clang__)
            // the rows of the channel after next: runs of a few lines, 8 KiB and more apart,
            // which the hardware's prefetchers do not follow (a hint; never faults)
            const T* ahead = w + ((ci + PACK_AHEAD) * m + m0 + mi0) * k;
            for (long e = 0; ci + PACK_AHEAD < g.c && e < run_elems; e += line)
                __builtin_prefetch(ahead + e);
#endif
            for (long mi = mi0; mi < mi1; ++mi) {
                const T* row = w + (ci * m + m0 + mi) * k;
                for (long e = 0; e < k; ++e) bad |= non_finite_bit(row[e]);
                for (const Target& to : targets[mi - mi0]) {
                    T* dst = to.at + ci * to.tc * mr;
                    for (long t = 0; t < to.tc; ++t) dst[t * mr] = row[to.taps[t]];
                }
            }
        }
        if (bad) infinite = true;
    }

    void work() {
        for (long task = next++; task < tasks() && !failed; task = next++) {
            const long mi0 = task * PACK_ROWS;
            try {
                rows(mi0, mi0 + PACK_ROWS < g.mc ? mi0 + PACK_ROWS : g.mc);
            } catch (const std::bad_alloc&) {
                failed = true;
            }
        }
    }
    static void work_of(void* self, long) { static_cast<Pack*>(self)->work(); }
};

// Every run's tasks, shared out dynamically in run order.
template <typename T>
struct Tasks {
    const Plan& plan;
    const KernelSet& ks;
    Stop& stop;
    std::atomic<long> next{0};
    std::atomic<bool> failed{false};

    Tasks(const Plan& p, const KernelSet& k, Stop& s) : plan(p), ks(k), stop(s) {}

    void run_task(const ConvJob& job, long task, T* scratch);

    void work() {
        T* scratch = static_cast<T*>(padconv_thread_scratch(plan.scratch_elems * sizeof(T)));
        if (!scratch) {
            failed = true;
            return;
        }
        long run = 0;
        for (long task = next++; task < plan.tasks() && !failed && !stop.now(); task = next++) {
            while (task >= plan.first_task[run + 1]) ++run;
            run_task(plan.jobs[run], task - plan.first_task[run], scratch);
        }
        padconv_trim_thread_scratch();
    }
    static void work_of(void* self, long) { static_cast<Tasks*>(self)->work(); }
};

template <>
void Tasks<float>::run_task(const ConvJob& job, long task, float* scratch) {
    ks.gemm_task_x[X_SAME](job, task, scratch);
}
template <>
void Tasks<double>::run_task(const ConvJob& job, long task, double* scratch) {
    ks.gemm_task_f64(job, task, scratch);
}

thread_local KeptBuffer t_work;  // the calling thread's work buffer, kept up to KEPT_WORK_BYTES

// The set the runs take: ks's plane_set when it may take every run's job (plane_set_may_take)
// and plans each on the plane kernel, as a Conv would (module.cpp, plan_run); else ks.
// Measured with AVX2 on an AMD EPYC, 2 threads, each way in turn in one process: a GAN's 4x4
// stride-2 ConvTranspose (256 -> 128 channels on 32 x 32) 11-21% faster, a 3x3 stride-1 one
// (64 -> 32 on 56 x 56) 10%, a U-Net's 2x2 stride 2 level.
const KernelSet& set_for_runs(const Shared& g, const RunSpec* runs, long count,
                              const KernelSet& ks, int item, long threads) {
    if (!ks.plane_set) return ks;
    for (long r = 0; r < count; ++r)
        if (!plane_set_may_take(job_of(g, runs[r]), ks)) return ks;
    return Plan(g, runs, count, *ks.plane_set, item, threads, false).all_plane() ? *ks.plane_set
                                                                                  : ks;
}

// Packs, runs, interleaves into y; 1 done, 0 a weight not finite, -1 out of memory, -2
// stopped.
template <typename T>
int execute(const Shared& g, RunSpec* runs, long count, const T* w, long m, long k, long m0,
            const T* bias, T* y, const KernelSet& main_set, long threads, Stop& stop) {
    const KernelSet& ks = set_for_runs(g, runs, count, main_set, sizeof(T), threads);
    Plan plan(g, runs, count, ks, sizeof(T), threads, &ks == &main_set);
    T* work = static_cast<T*>(t_work.at_least(plan.work_elems() * sizeof(T)));
    std::vector<std::vector<T>> run_bias(count);
    try {
        for (long r = 0; bias && r < count; ++r) run_bias[r].resize(plan.jobs[r].m);
    } catch (const std::bad_alloc&) {
        return -1;
    }
    if (!work) return -1;
    Pack<T> pack(w, m, k, m0, ks.mr, g, runs, count, plan, work);
    pack.zero_tails();
    const long helpers = threads - 1 < pack.tasks() - 1 ? threads - 1 : pack.tasks() - 1;
    padconv_shared_pool().run(&Pack<T>::work_of, &pack, helpers > 0 ? helpers : 0);
    if (pack.failed) return -1;
    if (pack.infinite) return 0;
    static const std::atomic<bool> every_weight_finite{true};  // else returned just above
    for (long r = 0; r < count; ++r) {
        ConvJob& job = plan.jobs[r];
        for (long row = 0; bias && row < job.m; ++row) run_bias[r][row] = bias[m0 + row % g.mc];
        job.x = runs[r].x;
        job.w = work + plan.packed_at[r];
        job.w_finite = &every_weight_finite;
        job.bias = bias ? run_bias[r].data() : 0;
        job.y = work + runs[r].first * g.mc * job.out_plane;  // the phase slots
    }
    Tasks<T> tasks(plan, ks, stop);
    padconv_shared_pool().run(&Tasks<T>::work_of, &tasks, plan.working_threads(threads) - 1);
    padconv_record_conv_bytes(plan.bytes(sizeof(T), threads));
    if (!tasks.failed && !stop.stopped)
        padconv_interleave_phase_major(work, y, g.mc, g.rank, g.strides, g.counts, sizeof(T),
                                       threads);
    t_work.trim(KEPT_WORK_BYTES);
    if (tasks.failed) return -1;
    return stop.stopped ? -2 : 1;
}

bool long_list(PyObject* seq, int rank, long* out, long minimum) {
    PyObject* fast = PySequence_Fast(seq, "a sequence of ints");
    if (!fast) return false;
    bool ok = PySequence_Fast_GET_SIZE(fast) == rank;
    for (int i = 0; ok && i < rank; ++i) {
        out[i] = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
        ok = !(out[i] == -1 && PyErr_Occurred()) && out[i] >= minimum;
    }
    Py_DECREF(fast);
    return ok;
}

// A run's geometry (in, tap_shape, pads_begin, dilations): `in` given (a sequence) or taken
// from `in_shape`; false when a value is out of range (no taps, negative pads).
bool geometry(const Shared& g, PyObject* in, const Py_ssize_t* in_shape, PyObject* taps,
              PyObject* pads, PyObject* dil, RunSpec& r) {
    if (in) {
        if (!long_list(in, g.rank, r.in, 1)) return false;
    } else {
        for (int i = 0; i < g.rank; ++i) r.in[i] = in_shape[i];
    }
    if (!long_list(taps, g.rank, r.tap_shape, 1) || !long_list(pads, g.rank, r.pads, 0) ||
        !long_list(dil, g.rank, r.dilations, 1))
        return false;
    r.t_count = 1;
    for (int i = 0; i < g.rank; ++i) r.t_count *= r.tap_shape[i];
    return true;
}

char last_format_char(const Py_buffer& view) {
    return view.format && *view.format ? view.format[strlen(view.format) - 1] : 0;
}

// The buffers a call holds, released when it returns.
struct Views {
    Py_buffer views[3 + 2 * MAX_RUNS];
    int count = 0;
    Py_buffer* get(PyObject* obj, int flags) {
        if (PyObject_GetBuffer(obj, &views[count], flags) < 0) return 0;
        return &views[count++];
    }
    ~Views() {
        for (int i = 0; i < count; ++i) PyBuffer_Release(&views[i]);
    }
};

PyObject* fail(const char* message) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, message);
    return 0;
}

// The strides into g (and the phase counts from y's output shape when `y_shape` is given);
// false when they do not fit interleave_phases (rank, last stride) or y.
bool strides_of(PyObject* strides, Shared& g, const Py_ssize_t* y_shape) {
    if (g.rank > MAX_INTERLEAVED_RANK || !long_list(strides, g.rank, g.strides, 1) ||
        g.strides[g.rank - 1] > MAX_LAST_STRIDE)
        return false;
    for (int i = 0; y_shape && i < g.rank; ++i) {
        if (y_shape[i] % g.strides[i] != 0) return false;
        g.counts[i] = y_shape[i] / g.strides[i];
    }
    return true;
}

}  // namespace

PyObject* padconv_py_phase_convs(PyObject*, PyObject* args) {
    PyObject *w_obj, *b_obj, *y_obj, *runs_obj, *strides;
    long m0, threads;
    const char* isa;
    if (!PyArg_ParseTuple(args, "OOOlOOls", &w_obj, &b_obj, &y_obj, &m0, &runs_obj, &strides,
                          &threads, &isa))
        return 0;
    const KernelSet* ks = padconv_kernels(isa);
    if (!ks) return fail("phase_convs: instruction set not available on this CPU");
    const int flags = PyBUF_C_CONTIGUOUS | PyBUF_ND | PyBUF_FORMAT;
    Views views;
    const Py_buffer* w = views.get(w_obj, flags);
    const Py_buffer* y = w ? views.get(y_obj, flags | PyBUF_WRITABLE) : 0;
    const Py_buffer* b = y && b_obj != Py_None ? views.get(b_obj, flags) : 0;
    if (!y || (b_obj != Py_None && !b)) return 0;
    const char kind = last_format_char(*w);
    const long item = w->itemsize;
    Shared g;
    g.rank = y->ndim - 1;
    bool ok = w->ndim == 3 && ((item == 4 && kind == 'f') || (item == 8 && kind == 'd')) &&
              last_format_char(*y) == kind && y->itemsize == item &&
              g.rank >= 1 && g.rank <= PADCONV_MAX_RANK && threads >= 1 && m0 >= 0 &&
              (!b || (b->ndim == 1 && b->shape[0] == w->shape[1] &&
                      last_format_char(*b) == kind && b->itemsize == item));
    if (!ok) return fail("phase_convs: w, b and y must share float32 or float64");
    if (!strides_of(strides, g, y->shape + 1))
        return fail("phase_convs: strides that do not divide y's shape, or past its limits");
    g.c = w->shape[0];
    g.mc = y->shape[0];
    if (g.c < 2 || m0 + g.mc > w->shape[1])
        return fail("phase_convs: at least 2 input channels, and m0 + Mc output channels of W");
    PyObject* runs = PySequence_Fast(runs_obj, "runs must be a sequence");
    if (!runs) return 0;
    const long count = PySequence_Fast_GET_SIZE(runs);
    RunSpec specs[MAX_RUNS];
    ok = count >= 1 && count <= MAX_RUNS;
    for (long r = 0; ok && r < count; ++r) {
        PyObject *x_obj, *taps_obj, *tap_shape, *pads, *dil;
        long first;
        ok = PyArg_ParseTuple(PySequence_Fast_GET_ITEM(runs, r), "OOOOOl", &x_obj, &taps_obj,
                              &tap_shape, &pads, &dil, &first);
        const Py_buffer* x = ok ? views.get(x_obj, flags) : 0;
        const Py_buffer* taps = x ? views.get(taps_obj, flags) : 0;
        ok = taps && x->ndim == g.rank + 2 && x->shape[0] == 1 && x->shape[1] == g.c &&
             last_format_char(*x) == kind && x->itemsize == item &&
             geometry(g, 0, x->shape + 2, tap_shape, pads, dil, specs[r]) &&
             taps->ndim == 2 && taps->itemsize == 8 && last_format_char(*taps) &&
             strchr("qlQL", last_format_char(*taps)) && taps->shape[1] == specs[r].t_count &&
             first >= 0 && taps->shape[0] >= 1 && first + taps->shape[0] <= g.slots();
        if (!ok) break;
        const int64_t* tp = static_cast<const int64_t*>(taps->buf);
        for (Py_ssize_t i = 0; ok && i < taps->shape[0] * taps->shape[1]; ++i)
            ok = tp[i] >= 0 && tp[i] < w->shape[2];
        specs[r].x = x->buf;
        specs[r].taps = tp;
        specs[r].phases = taps->shape[0];
        specs[r].first = first;
    }
    Py_DECREF(runs);
    if (!ok) return fail("phase_convs: inconsistent runs (x, taps, tap_shape, pads, "
                         "dilations, first)");
    int done = 1;
    Stop stop;
    if (g.mc > 0 && g.plane() > 0) {
        stop.release_gil();
        const long m = w->shape[1], k = w->shape[2];
        if (item == 4)
            done = execute<float>(g, specs, count, static_cast<const float*>(w->buf), m, k, m0,
                                  b ? static_cast<const float*>(b->buf) : 0,
                                  static_cast<float*>(y->buf), *ks, threads, stop);
        else
            done = execute<double>(g, specs, count, static_cast<const double*>(w->buf), m, k,
                                   m0, b ? static_cast<const double*>(b->buf) : 0,
                                   static_cast<double*>(y->buf), *ks, threads, stop);
        stop.take_gil();
    }
    if (done == -2) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "conv stopped: request_stop()");
        return 0;
    }
    if (done == -1) return PyErr_NoMemory();
    return PyBool_FromLong(done == 1);
}

// phase_convs_bytes(c, mc, counts, runs, strides, threads, isa, itemsize), runs as (in,
// tap_shape, pads_begin, dilations, phases): bytes phase_convs() allocates for them.
PyObject* padconv_py_phase_convs_bytes(PyObject*, PyObject* args) {
    PyObject *counts, *runs_obj, *strides;
    long c, mc, threads, itemsize;
    const char* isa;
    if (!PyArg_ParseTuple(args, "llOOOlsl", &c, &mc, &counts, &runs_obj, &strides, &threads,
                          &isa, &itemsize))
        return 0;
    const KernelSet* ks = padconv_kernels(isa);
    Shared g;
    g.c = c;
    g.mc = mc;
    const Py_ssize_t rank = PySequence_Size(counts);
    if (!ks || rank < 1 || rank > PADCONV_MAX_RANK || c < 2 || mc < 0 || threads < 1 ||
        (itemsize != 4 && itemsize != 8))
        return fail("phase_convs_bytes: bad arguments");
    g.rank = int(rank);
    if (!long_list(counts, g.rank, g.counts, 0) || !strides_of(strides, g, 0))
        return fail("phase_convs_bytes: bad counts or strides");
    PyObject* runs = PySequence_Fast(runs_obj, "runs must be a sequence");
    if (!runs) return 0;
    const long count = PySequence_Fast_GET_SIZE(runs);
    RunSpec specs[MAX_RUNS];
    bool ok = count >= 1 && count <= MAX_RUNS;
    for (long r = 0; ok && r < count; ++r) {
        PyObject *in, *tap_shape, *pads, *dil;
        ok = PyArg_ParseTuple(PySequence_Fast_GET_ITEM(runs, r), "OOOOl", &in, &tap_shape,
                              &pads, &dil, &specs[r].phases) &&
             geometry(g, in, 0, tap_shape, pads, dil, specs[r]) && specs[r].phases >= 1;
    }
    Py_DECREF(runs);
    if (!ok) return fail("phase_convs_bytes: inconsistent runs");
    if (mc == 0 || g.plane() == 0) return PyLong_FromLong(0);
    const KernelSet& set = set_for_runs(g, specs, count, *ks, int(itemsize), threads);
    const Plan plan(g, specs, count, set, int(itemsize), threads, &set == ks);
    return PyLong_FromLong(plan.bytes(int(itemsize), threads));
}
