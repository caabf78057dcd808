// padconv native core: when a run stops taking tasks -- one rule for conv(), ConvTranspose's
// phase job and pad_into().  A run stops once request_stop() was called since it began (by the
// command's signal handler, from any thread), or, on the interpreter's main thread, once a
// Python signal handler raised when the calling thread ran them (at most every
// SIGNAL_CHECK_MS, between its tasks; the exception stays set for the caller to raise).
// Includes Python.h: include it first.
#ifndef PADCONV_STOP_H
#define PADCONV_STOP_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <atomic>
#include <chrono>
#include <thread>

long padconv_stop_requests();         // module.cpp: request_stop() calls so far
unsigned long padconv_main_thread();  // module.cpp: the thread Python runs signal handlers in

namespace padconv {

// Made by the calling thread with the GIL held; release_gil() and take_gil() bracket the run.
struct Stop {
    static constexpr long SIGNAL_CHECK_MS = 20;
    const long requests_at_start = padconv_stop_requests();
    const std::thread::id caller = std::this_thread::get_id();
    const bool on_main_thread = PyThread_get_thread_ident() == padconv_main_thread();
    PyThreadState* state = 0;  // the caller's, while the GIL is released
    std::chrono::steady_clock::time_point next_check = std::chrono::steady_clock::now();
    std::atomic<bool> stopped{false};

    void release_gil() { state = PyEval_SaveThread(); }
    void take_gil() { PyEval_RestoreThread(state); }

    // Whether the run should stop taking tasks (any thread of the run may ask).
    bool now() {
        if (stopped.load(std::memory_order_relaxed)) return true;
        if (padconv_stop_requests() != requests_at_start || handler_raised()) stopped = true;
        return stopped.load(std::memory_order_relaxed);
    }

  private:
    bool handler_raised() {
        if (!on_main_thread || std::this_thread::get_id() != caller) return false;
        const auto at = std::chrono::steady_clock::now();
        if (at < next_check) return false;
        next_check = at + std::chrono::milliseconds(SIGNAL_CHECK_MS);
        PyEval_RestoreThread(state);
        const bool raised = PyErr_CheckSignals() < 0;
        PyEval_SaveThread();
        return raised;
    }
};

}  // namespace padconv

#endif
