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

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace padconv {

class Pool {
  public:
    typedef void (*Work)(void* context);

    // Runs work(context) on the calling thread and on up to `helpers` pool threads, and
    // returns once every one of them has returned.  Returns the helpers that took part.
    long run(Work work, void* context, long helpers) {
        std::unique_lock<std::mutex> busy(use_, std::try_to_lock);
        if (!busy.owns_lock()) helpers = 0;
        if (helpers > 0) helpers = grow(helpers);
        if (helpers > 0) {
            {
                std::lock_guard<std::mutex> lock(mutex_);
                work_ = work;
                context_ = context;
                taking_part_ = helpers;
                pending_.store(helpers);
                generation_.fetch_add(1, std::memory_order_release);
            }
            wake_.notify_all();
        }
        work(context);
        if (helpers > 0) wait_done();
        return helpers;
    }

  private:
    static constexpr long SPIN_MICROSECONDS = 300;  // how long an idle helper keeps its core

    std::mutex use_;    // held by the call using the pool
    std::mutex mutex_;  // guards the fields below together with the condition variables
    std::condition_variable wake_, done_;
    std::vector<std::thread> threads_;
    std::atomic<long> generation_{0};
    std::atomic<long> pending_{0};
    Work work_ = 0;
    void* context_ = 0;
    long taking_part_ = 0;

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
                wake_.wait(lock, [&] { return generation_.load() != seen; });
            }
            Work work;
            void* context;
            long taking_part;
            {
                // read with the fields it goes with: a helper left out of one generation may
                // only get here once the next has been posted
                std::lock_guard<std::mutex> lock(mutex_);
                seen = generation_.load();
                work = work_;
                context = context_;
                taking_part = taking_part_;
            }
            if (index >= taking_part) continue;
            work(context);
            if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
                std::lock_guard<std::mutex> lock(mutex_);
                done_.notify_all();
            }
        }
    }

    void wait_done() {
        if (spin_until(pending_, 0, true)) return;
        std::unique_lock<std::mutex> lock(mutex_);
        done_.wait(lock, [&] { return pending_.load() == 0; });
    }
};

}  // namespace padconv

#endif
