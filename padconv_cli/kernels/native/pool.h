// padconv native Conv: a persistent pool of helper threads shared by every call.
//
// Starting threads for every call costs tens of microseconds, and a thread that has just been
// started runs where the scheduler puts it -- on a busy machine often next to its parent until
// the next load balance, which halves a 2-thread speed-up on a 1-2 ms conv.  The helpers of
// this pool are started once (on first use, again in a child after fork) and stay on their
// cores; between calls each spins briefly, then sleeps on a condition variable.
//
// One call at a time uses the pool; a call arriving while it is busy (another Python thread,
// the GIL being released) gets no helpers and runs on its own thread -- the results are the
// same for any thread count.
#ifndef PADCONV_POOL_H
#define PADCONV_POOL_H

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

namespace padconv {

class Pool {
  public:
    // work(context, slot): slot 0 on the calling thread, 1 .. helpers on the helpers, each
    // helper with the same slot in every call (TaskRanges gives a slot the same tasks)
    typedef void (*Work)(void* context, long slot);

    // Runs work(context, 0) on the calling thread and work(context, slot) on up to `helpers`
    // pool threads, and returns once every one of them that started has returned.  `work` must
    // share its tasks out dynamically (TaskRanges): once the caller's own work returns, helpers
    // that have not started yet are left out (a helper the system has not scheduled would
    // otherwise hold the call for a whole time slice, only to find no task left).  Returns the
    // helpers that ran.
    long run(Work work, void* context, long helpers) {
        std::unique_lock<std::mutex> busy(use_, std::try_to_lock);
        if (!busy.owns_lock()) helpers = 0;
        if (helpers > 0) helpers = grow(helpers);
        bool woke = false;
        if (helpers > 0) {
            {
                std::lock_guard<std::mutex> lock(mutex_);
                work_ = work;
                context_ = context;
                taking_part_ = helpers;
                open_ = true;
                started_ = 0;
                cpus_.assign(1, current_cpu());
                generation_.fetch_add(1, std::memory_order_release);
                woke = sleeping_ > 0;
            }
            wake_.notify_all();
            // a sleeping helper is often woken onto this thread's CPU (away_from), where it
            // would wait for this thread's time slice to end -- milliseconds, several calls
            // -- before it could move: let it run now
            if (woke) std::this_thread::yield();
        }
        work(context, 0);
        return helpers > 0 ? close_and_wait() : 0;
    }

  private:
    static constexpr long SPIN_MICROSECONDS = 300;  // how long an idle helper keeps its core

    std::mutex use_;    // held by the call using the pool
    std::mutex mutex_;  // guards the fields below together with the condition variables
    std::condition_variable wake_, done_;
    std::vector<std::thread> threads_;
    std::atomic<long> generation_{0};
    std::atomic<long> running_{0};  // helpers inside work(context)
    Work work_ = 0;
    void* context_ = 0;
    long taking_part_ = 0;
    bool open_ = false;  // helpers may still join the current call
    long started_ = 0;   // helpers that joined it
    long sleeping_ = 0;  // helpers waiting on wake_
    std::vector<int> cpus_;  // the CPUs of the caller and of the helpers that joined (-1: unknown)

    static int current_cpu() {
#if defined(__linux__)
        return sched_getcpu();
#else
        return -1;
#endif
    }

    // The calling helper's CPU, after moving it off `taken` if it shared one of them; called
    // with mutex_ held.  A helper woken after an idle spell is often placed on the caller's
    // CPU, and the scheduler can take several milliseconds to part them, during which every
    // call runs slower than on one thread (seen on a 2-vCPU machine after 0.1 s of idleness:
    // 3 to 9 calls of a 0.5 ms Conv in a row, in most turns).  Narrowing the helper's affinity
    // moves it at once; the affinity it had is given back straight after, so nothing stays
    // pinned.
    static int away_from(const std::vector<int>& taken) {
        const int cpu = current_cpu();
#if defined(__linux__)
        if (cpu < 0 || std::find(taken.begin(), taken.end(), cpu) == taken.end()) return cpu;
        cpu_set_t allowed, others;
        if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return cpu;
        others = allowed;
        for (int t : taken)
            if (t >= 0 && t < CPU_SETSIZE) CPU_CLR(t, &others);
        if (CPU_COUNT(&others) == 0 || sched_setaffinity(0, sizeof others, &others) != 0)
            return cpu;
        sched_setaffinity(0, sizeof allowed, &allowed);
        return current_cpu();
#else
        (void)taken;
        return cpu;
#endif
    }

    // Starts helpers up to `wanted`; returns how many there are (fewer if starting failed).
    long grow(long wanted) {
        while ((long)threads_.size() < wanted) {
            const long index = (long)threads_.size();
            try {
                threads_.emplace_back([this, index] { loop(index); });
            } catch (...) {
                break;
            }
        }
        return std::min(wanted, (long)threads_.size());
    }

    static bool spin_until(const std::atomic<long>& value, long differs_from, bool equal) {
        const auto until =
            std::chrono::steady_clock::now() + std::chrono::microseconds(SPIN_MICROSECONDS);
        for (long i = 1;; ++i) {
            const long now = value.load(std::memory_order_acquire);
            if ((now == differs_from) == equal) return true;
            if (i % 64 == 0 && std::chrono::steady_clock::now() > until) return false;
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
    }

    void loop(long index) {
        long seen = 0;
        for (;;) {
            if (!spin_until(generation_, seen, false)) {
                std::unique_lock<std::mutex> lock(mutex_);
                ++sleeping_;
                wake_.wait(lock, [&] { return generation_.load() != seen; });
                --sleeping_;
            }
            Work work;
            void* context;
            {
                // read with the fields it goes with: a helper left out of one generation may
                // only get here once the next has been posted
                std::lock_guard<std::mutex> lock(mutex_);
                seen = generation_.load();
                if (!open_ || index >= taking_part_) continue;
                work = work_;
                context = context_;
                ++started_;
                cpus_.push_back(away_from(cpus_));
                running_.fetch_add(1, std::memory_order_relaxed);
            }
            work(context, index + 1);
            if (running_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
                std::lock_guard<std::mutex> lock(mutex_);
                done_.notify_all();
            }
        }
    }

    // Lets no more helpers join the current call, waits for those that joined; their count.
    long close_and_wait() {
        long started;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            open_ = false;
            started = started_;
        }
        if (spin_until(running_, 0, true)) return started;
        std::unique_lock<std::mutex> lock(mutex_);
        done_.wait(lock, [&] { return running_.load() == 0; });
        return started;
    }
};

// Tasks 0 .. count - 1 shared out among the `slots` threads of a Pool::run in contiguous
// ranges, one per slot, that slot taking its own range in order and then what is left of the
// others'.  A thread keeps its slot from call to call, so it gets the same tasks again and
// finds the data they read and wrote in its own core's cache.  One shared counter dealt
// neighbouring tasks to the two cores in turn, and in the next call most of a core's lines
// were in the other's cache.  Measured against it (2 threads, AMD EPYC Zen 4, builds taking
// turns in fresh processes): depthwise 3x3 over 256 channels of 56 x 56 9% faster, 4 images
// of it 30%, 1024 channels of 7 x 7 47%; ResNet's 3x3 and the 7x7 stem 1.5-1.7%; Pad 3-7%.
class TaskRanges {
  public:
    TaskRanges(long count, long slots)
        : slots_(std::max(1L, slots)), ranges_(new Range[slots_]) {
        for (long r = 0; r < slots_; ++r) {
            ranges_[r].next.store(r * count / slots_, std::memory_order_relaxed);
            ranges_[r].end = (r + 1) * count / slots_;
        }
    }

    // The next task for `slot`, or -1 when none is left.  `step` starts at 0 and counts the
    // ranges the slot has emptied: its own, then the others' after it.
    long take(long slot, long& step) {
        for (; step < slots_; ++step) {
            Range& range = ranges_[(slot + step) % slots_];
            const long task = range.next.fetch_add(1, std::memory_order_relaxed);
            if (task < range.end) return task;
        }
        return -1;
    }

  private:
    struct alignas(64) Range {  // a line each: the slots take from their own at once
        std::atomic<long> next{0};
        long end = 0;
    };
    long slots_;
    std::unique_ptr<Range[]> ranges_;
};

}  // namespace padconv

#endif
