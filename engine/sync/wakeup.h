#pragma once
// Wakeup: the engine's one way for a thread to sleep until another has made progress. A counter
// of events (an insert, a freed arena, a published bound, new work) that notify() bumps, and
// that a waiter, having seen value() == seen and found nothing to do, sleeps on until it moves.
// The T-Gate (progress for readers, freed arenas for producers), the multiway aggregate's feeds
// (the output thread) and the pipeline runtime (idle workers, the ingress) all use it.
//
// No lost wake-up, and no mutex on the notifier's fast path: notify() increments the counter
// (seq_cst) and then loads waiters_ (seq_cst); a waiter increments waiters_ (seq_cst) and then,
// under the mutex, re-loads the counter (seq_cst) before it sleeps. In the single total order of
// seq_cst operations either the notifier's load comes after the waiter's increment, and it takes
// the mutex (which the waiter holds from its re-check until the condition variable releases it
// asleep) and notifies; or the waiter's re-check comes after the increment and it does not
// sleep. The timeout is a safety net for callers whose condition also depends on state that
// does not notify (a stop flag polled by `done`), not part of the protocol.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace pao::sync {

class Wakeup {
 public:
  uint64_t value() const noexcept { return count_.load(std::memory_order_seq_cst); }

  void notify() {
    count_.fetch_add(1, std::memory_order_seq_cst);
    if (waiters_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard lock(mutex_);
      cv_.notify_all();
    }
  }

  // Sleeps until value() != seen, or done() holds, or `timeout` passed. `seen` is value() read
  // before the caller last looked for work.
  template <class Rep, class Period, class Done>
  void wait(uint64_t seen, std::chrono::duration<Rep, Period> timeout, Done done) {
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    {
      std::unique_lock lock(mutex_);
      cv_.wait_for(lock, timeout, [&] { return value() != seen || done(); });
    }
    // Relaxed: a late decrement only costs a notifier a needless lock.
    waiters_.fetch_sub(1, std::memory_order_relaxed);
  }
  template <class Rep, class Period>
  void wait(uint64_t seen, std::chrono::duration<Rep, Period> timeout) {
    wait(seen, timeout, [] { return false; });
  }

 private:
  std::atomic<uint64_t> count_{0};
  std::atomic<int> waiters_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
};

}  // namespace pao::sync
