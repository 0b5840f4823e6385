#pragma once
// Worklists of the ordered runtime (ordered-processing paper, sections 4 and 5).
//
//   Fifo             the worklist of a stateless or stateful operator: items in serial order,
//                    taken by any worker, but only while the reorder buffer admits their serial.
//   PartitionQueue   the worklist of a partitioned operator, in three schemes:
//     kShared        one queue; a worker takes the head and locks its partition while it still
//                    holds the queue (Figure 5: taking and locking must be atomic, or two workers
//                    could run one key's tuples out of order), so a worker whose head belongs to
//                    a busy partition blocks everyone behind it: the baseline.
//     kPartitioned   one queue per partition (Figure 6); a worker owns a partition while it works
//                    on it. Workers can run far ahead on some partitions while an early tuple
//                    waits in an unowned one, and the reorder buffer then holds everything back.
//     kHybrid        (Figure 7, our default) per-partition queues hold the items, and a master
//                    queue holds each item's partition in arrival order. A worker takes the next
//                    partition number from the master queue; if nobody is active on that
//                    partition it becomes active and works on the partition's items for as long
//                    as others delegate to it (count[p] > 0), otherwise it delegates (count[p]++)
//                    and moves on. Work proceeds almost in arrival order and nobody waits.
//
// The FIFOs themselves are short critical sections under a mutex: one push or pop, no work
// inside. The paper's contributions here are the delegation protocol and the reorder buffer, both
// lock-free; a lock-free FIFO would change nothing in the ordering argument, and at our morsel
// sizes (hundreds to thousands of tuples per item) a push or pop is not where time goes.
//
// Producers: every push for one worklist comes from one thread at a time (the reorder buffer's
// drainer of the upstream operator, or the ingress thread), in serial order.
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "sync/cache_line.h"

namespace pao::sync {

// A cache line of its own for per-partition state that different workers hammer.
struct alignas(kCacheLine) PaddedCount {
  std::atomic<int64_t> value{0};
};
static_assert(sizeof(PaddedCount) == kCacheLine, "one count per line");

// A worklist entry: `item` was admitted with the serial of the input it came from (the pieces of
// one morsel share a serial) and belongs to `partition` (0 where there are no partitions).
template <class T>
struct Entry {
  T* item = nullptr;
  uint32_t partition = 0;
  uint64_t serial = 0;
};

// A FIFO of entries under a mutex, popping the head only while its serial is below a limit (the
// reorder buffer's admit bound).
template <class T>
class Fifo {
 public:
  void push(Entry<T> e) {
    std::lock_guard lock(mutex_);
    items_.push_back(e);
    size_.store(static_cast<int64_t>(items_.size()), std::memory_order_relaxed);
  }
  std::optional<Entry<T>> pop_below(uint64_t limit) {
    std::lock_guard lock(mutex_);
    if (items_.empty() || items_.front().serial >= limit) return std::nullopt;
    Entry<T> e = items_.front();
    items_.pop_front();
    size_.store(static_cast<int64_t>(items_.size()), std::memory_order_relaxed);
    return e;
  }
  bool ready_below(uint64_t limit) const {
    std::lock_guard lock(mutex_);
    return !items_.empty() && items_.front().serial < limit;
  }
  // Approximate (scheduler statistics).
  int64_t size() const noexcept { return size_.load(std::memory_order_relaxed); }
  // Empties the FIFO, appending the non-null items to `out` (cancellation).
  void take_all(std::vector<T*>& out) {
    std::lock_guard lock(mutex_);
    for (auto& e : items_)
      if (e.item != nullptr) out.push_back(e.item);
    items_.clear();
    size_.store(0, std::memory_order_relaxed);
  }

 private:
  mutable std::mutex mutex_;
  std::deque<Entry<T>> items_;
  std::atomic<int64_t> size_{0};
};

enum class Partitioning : uint8_t { kHybrid, kPartitioned, kShared };

template <class T>
class PartitionQueue {
 public:
  virtual ~PartitionQueue() = default;
  // One producer at a time, serials nondecreasing.
  virtual void push(Entry<T> e) = 0;
  // Runs `work(item)` on items the caller may process (its partition exclusively, each
  // partition's items in arrival order), starting only items whose serial is below `limit`.
  // Returns once it has run about `budget` items or finds nothing it may run; returns how many it
  // ran. `worker` (the caller's index) spreads kPartitioned's workers over partitions.
  virtual size_t consume(uint64_t limit, size_t budget, size_t worker, const std::function<void(T*)>& work) = 0;
  // Whether some item could start now under `limit` (the scheduler's hint; may be stale).
  virtual bool ready(uint64_t limit) const = 0;
  // Items pushed and not yet started (approximate).
  int64_t size() const noexcept { return size_.load(std::memory_order_relaxed); }
  // Empties the queue, appending the items to `out` (cancellation; no consumer may be running).
  virtual void take_all(std::vector<T*>& out) = 0;

 protected:
  std::atomic<int64_t> size_{0};
};

template <class T>
class HybridQueue final : public PartitionQueue<T> {
 public:
  explicit HybridQueue(size_t partitions) : parts_(partitions), count_(partitions) {}

  void push(Entry<T> e) override {
    this->size_.fetch_add(1, std::memory_order_relaxed);
    // Item first, then its partition number in the master queue (Figure 7, lines 4-5), so whoever
    // takes the number finds the item: the two FIFOs' mutexes order the pushes before the pops.
    parts_[e.partition].push(e);
    master_.push({nullptr, e.partition, e.serial});
  }

  size_t consume(uint64_t limit, size_t budget, size_t, const std::function<void(T*)>& work) override {
    size_t done = 0;
    while (done < budget) {
      std::optional<Entry<T>> entry = master_.pop_below(limit);
      if (!entry) break;
      const uint32_t p = entry->partition;
      // acq_rel on both sides: a worker becoming active (0 -> 1) must see the partition state the
      // previous active worker left behind (released by its last fetch_sub), and a delegating
      // increment must be seen by the active worker's fetch_sub, which then runs one more item.
      if (count_[p].value.fetch_add(1, std::memory_order_acq_rel) != 0) continue;  // delegated
      do {
        // Never empty: every increment follows a master entry pushed after its item, and only
        // the partition's single active worker pops the partition's FIFO.
        std::optional<Entry<T>> it = parts_[p].pop_below(UINT64_MAX);
        this->size_.fetch_sub(1, std::memory_order_relaxed);
        work(it->item);
        ++done;
      } while (count_[p].value.fetch_sub(1, std::memory_order_acq_rel) > 1);
    }
    return done;
  }

  bool ready(uint64_t limit) const override { return master_.ready_below(limit); }

  void take_all(std::vector<T*>& out) override {
    for (auto& p : parts_) p.take_all(out);
    master_.take_all(out);  // holds no items, only partition numbers
    for (auto& c : count_) c.value.store(0, std::memory_order_relaxed);
    this->size_.store(0, std::memory_order_relaxed);
  }

 private:
  Fifo<T> master_;
  std::vector<Fifo<T>> parts_;
  std::vector<PaddedCount> count_;
};

template <class T>
class PartitionedQueues final : public PartitionQueue<T> {
 public:
  explicit PartitionedQueues(size_t partitions) : parts_(partitions), owned_(partitions) {}

  void push(Entry<T> e) override {
    this->size_.fetch_add(1, std::memory_order_relaxed);
    parts_[e.partition].push(e);
  }

  size_t consume(uint64_t limit, size_t budget, size_t worker, const std::function<void(T*)>& work) override {
    size_t done = 0;
    const size_t n = parts_.size();
    // Start at the worker's own partition so that, with as many partitions as workers, each
    // worker keeps to its own queue, as in the paper's scheme; others are tried when it is empty.
    for (size_t k = 0; k < n && done < budget; ++k) {
      const size_t p = (worker + k) % n;
      if (!parts_[p].ready_below(limit)) continue;
      // acquire: see the previous owner's state writes; its release store below publishes them.
      if (owned_[p].value.exchange(1, std::memory_order_acquire) != 0) continue;
      while (done < budget) {
        std::optional<Entry<T>> it = parts_[p].pop_below(limit);
        if (!it) break;
        this->size_.fetch_sub(1, std::memory_order_relaxed);
        work(it->item);
        ++done;
      }
      owned_[p].value.store(0, std::memory_order_release);
    }
    return done;
  }

  bool ready(uint64_t limit) const override {
    for (auto& p : parts_)
      if (p.ready_below(limit)) return true;
    return false;
  }

  void take_all(std::vector<T*>& out) override {
    for (auto& p : parts_) p.take_all(out);
    this->size_.store(0, std::memory_order_relaxed);
  }

 private:
  std::vector<Fifo<T>> parts_;
  std::vector<PaddedCount> owned_;
};

template <class T>
class SharedQueue final : public PartitionQueue<T> {
 public:
  explicit SharedQueue(size_t partitions) : locks_(partitions) {}

  void push(Entry<T> e) override {
    this->size_.fetch_add(1, std::memory_order_relaxed);
    queue_.push(e);
  }

  size_t consume(uint64_t limit, size_t budget, size_t, const std::function<void(T*)>& work) override {
    size_t done = 0;
    while (done < budget) {
      std::unique_lock<std::mutex> part;
      std::optional<Entry<T>> it;
      {
        // Take the head and its partition's lock as one step (Figure 5): blocking on a busy
        // partition while holding the queue is exactly the cost this baseline shows.
        std::lock_guard take(take_);
        it = queue_.pop_below(limit);
        if (!it) break;
        part = std::unique_lock<std::mutex>(locks_[it->partition].mutex);
      }
      this->size_.fetch_sub(1, std::memory_order_relaxed);
      work(it->item);
      ++done;
    }
    return done;
  }

  bool ready(uint64_t limit) const override { return queue_.ready_below(limit); }

  void take_all(std::vector<T*>& out) override {
    queue_.take_all(out);
    this->size_.store(0, std::memory_order_relaxed);
  }

 private:
  struct alignas(kCacheLine) PaddedMutex {
    std::mutex mutex;
  };
  std::mutex take_;
  Fifo<T> queue_;
  std::vector<PaddedMutex> locks_;
};

template <class T>
std::unique_ptr<PartitionQueue<T>> make_partition_queue(Partitioning scheme, size_t partitions) {
  switch (scheme) {
    case Partitioning::kPartitioned: return std::make_unique<PartitionedQueues<T>>(partitions);
    case Partitioning::kShared: return std::make_unique<SharedQueue<T>>(partitions);
    case Partitioning::kHybrid: break;
  }
  return std::make_unique<HybridQueue<T>>(partitions);
}

}  // namespace pao::sync
