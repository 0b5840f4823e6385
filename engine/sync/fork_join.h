#pragma once
// Fork-join over coarse tasks: tasks 0..n-1 run on the calling thread and on helper threads the
// ForkJoin owns, and run() returns when every task has finished.
//
// Meant for tasks of a fraction of a millisecond or more (the parts of a merge's region, about
// 8K rows each), where a handoff of a few microseconds is noise: one mutex guards the round's
// whole state, so the handoff needs no memory-order argument. Invariants, all under `mu_`:
//  - a round is (task_, tasks_, next_, done_, error_); run() writes them, then bumps round_;
//  - a task index is claimed by taking next_ (next_ < tasks_) and read with task_, both under the
//    lock, so a helper that wakes late for an old round can only claim the current round's tasks
//    (its check sees the current round's next_ and tasks_), never a finished round's;
//  - done_ == tasks_ means every claimed task has returned: run() waits for that, so the task
//    object and whatever it writes outlive every use, and the lock's release/acquire makes every
//    task's writes visible to the caller after run() returns.
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace pao::sync {

class ForkJoin {
 public:
  explicit ForkJoin(unsigned helpers) {
    threads_.reserve(helpers);
    for (unsigned i = 0; i < helpers; ++i) threads_.emplace_back([this] { helper_main(); });
  }
  ForkJoin(const ForkJoin&) = delete;
  ForkJoin& operator=(const ForkJoin&) = delete;
  ~ForkJoin() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    start_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  unsigned helpers() const noexcept { return static_cast<unsigned>(threads_.size()); }

  // Runs task(0) .. task(n - 1), each once, on this thread and the helpers; rethrows the first
  // exception a task threw (the other tasks still run to their end).
  void run(size_t n, const std::function<void(size_t)>& task) {
    std::unique_lock lock(mu_);
    task_ = &task;
    tasks_ = n;
    next_ = 0;
    done_ = 0;
    error_ = nullptr;
    ++round_;
    lock.unlock();
    start_.notify_all();
    lock.lock();
    work(lock);
    finished_.wait(lock, [&] { return done_ == tasks_; });
    task_ = nullptr;
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  void helper_main() {
    std::unique_lock lock(mu_);
    // Rounds are numbered from 1: a helper that starts late still sees round 1 as new.
    uint64_t seen = 0;
    for (;;) {
      start_.wait(lock, [&] { return stop_ || round_ != seen; });
      if (stop_) return;
      seen = round_;
      work(lock);
    }
  }

  // Claims and runs tasks of the current round until none is left; `lock` is held on entry and
  // exit and released while a task runs.
  void work(std::unique_lock<std::mutex>& lock) {
    while (next_ < tasks_) {
      const size_t i = next_++;
      const std::function<void(size_t)>* task = task_;
      lock.unlock();
      std::exception_ptr failed;
      try {
        (*task)(i);
      } catch (...) {
        failed = std::current_exception();
      }
      lock.lock();
      if (failed && !error_) error_ = failed;
      if (++done_ == tasks_) finished_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable start_;     // a new round, or stop_
  std::condition_variable finished_;  // done_ reached tasks_
  uint64_t round_ = 0;
  const std::function<void(size_t)>* task_ = nullptr;
  size_t tasks_ = 0;
  size_t next_ = 0;
  size_t done_ = 0;
  std::exception_ptr error_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace pao::sync
