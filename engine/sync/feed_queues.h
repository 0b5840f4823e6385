#pragma once
// The per-input queues of the multiway aggregate's queue designs (multiway aggregation paper,
// section 5.3): one producer pushes an input's tuples, the output thread reads every input's
// head and pops the least. Both give all or nothing per push and never wait; the callers do.
//
//   LockedQueue  MQ: a deque behind a mutex, one lock per tuple on each side (the paper's
//                Borealis / StreamCloud baseline).
//   SpscRing     MQLF: a bounded single-producer single-consumer ring without locks.
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "sync/cache_line.h"

namespace pao::sync {

template <class T>
class LockedQueue {
 public:
  explicit LockedQueue(size_t capacity) : capacity_(capacity) {}
  size_t free_space() {
    std::lock_guard lock(mutex_);
    return capacity_ - items_.size();
  }
  bool try_push(const T& item) {
    std::lock_guard lock(mutex_);
    if (items_.size() >= capacity_) return false;
    items_.push_back(item);
    return true;
  }
  bool front(T& out) {
    std::lock_guard lock(mutex_);
    if (items_.empty()) return false;
    out = items_.front();
    return true;
  }
  void pop() {
    std::lock_guard lock(mutex_);
    items_.pop_front();
  }

 private:
  std::mutex mutex_;
  std::deque<T> items_;
  size_t capacity_;
};

// The producer publishes a slot with a release store of tail_ and the consumer frees it with a
// release store of head_; each side acquires the other's index before touching a slot, so a slot
// is never read and written at once. Each side's index has a cache line of its own: the producer
// writes tail_ per tuple while the consumer writes head_ per tuple.
template <class T>
class SpscRing {
 public:
  explicit SpscRing(size_t capacity) : items_(std::bit_ceil(capacity)), mask_(items_.size() - 1) {}
  // Producer only (a lower bound for anyone else).
  size_t free_space() {
    return items_.size() - (tail_.load(std::memory_order_relaxed) - head_.load(std::memory_order_acquire));
  }
  // Producer only.
  bool try_push(const T& item) {
    const uint64_t t = tail_.load(std::memory_order_relaxed);
    if (t - head_.load(std::memory_order_acquire) == items_.size()) return false;
    items_[t & mask_] = item;
    tail_.store(t + 1, std::memory_order_release);
    return true;
  }
  // Consumer only.
  bool front(T& out) {
    const uint64_t h = head_.load(std::memory_order_relaxed);
    if (h == tail_.load(std::memory_order_acquire)) return false;
    out = items_[h & mask_];
    return true;
  }
  // Consumer only, after a front() that returned true.
  void pop() { head_.store(head_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

 private:
  std::vector<T> items_;
  size_t mask_;
  alignas(kCacheLine) std::atomic<uint64_t> head_{0};
  alignas(kCacheLine) std::atomic<uint64_t> tail_{0};
};

}  // namespace pao::sync
