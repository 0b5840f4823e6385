#pragma once
// Reorder buffers: outputs produced concurrently, each carrying the serial number its input got
// on arrival (0, 1, 2, ...), leave through `sink` strictly in serial order (ordered-processing
// paper, section 3).
//
//   NonBlockingReorder  the paper's Figure 4: a worker deposits its output in a bounded circular
//                       buffer and, if no other worker is draining, drains every output that is
//                       next in order; a worker that finds another draining returns at once
//                       instead of waiting for it.
//   LockedReorder       the Figure 2 baseline: deposit and drain under one mutex, so workers
//                       queue behind whoever is draining.
//
// Where we improve on the paper: its deposit fails (and the worker must retry, spinning) when an
// output's serial is `capacity` or more ahead of the next to leave. Here the runtime never lets a
// worker *start* an input whose serial is that far ahead (admit() is the gate it consults when it
// takes work), so every deposit succeeds and no worker ever spins in the buffer. Progress holds:
// the input with serial next() has been admitted and is being processed by someone, and its
// deposit moves next() on.
//
// Both call `sink(serial, item)` from one thread at a time, in serial order; consecutive calls may
// come from different threads, and each happens-after the previous one (the drain flag or the
// mutex orders them), so the sink needs no synchronisation of its own.
#include <atomic>
#include <cassert>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace pao::sync {

// What the runtime sees of either scheme.
template <class T>
class Reorder {
 public:
  virtual ~Reorder() = default;
  // Deposits `item` (not null) for `serial`, which admit() allowed, then drains if it can.
  virtual void send(uint64_t serial, T* item) = 0;
  // The serial of the next output to leave: every serial below it has left.
  uint64_t next() const noexcept { return next_.load(std::memory_order_acquire); }
  // Whether an input with `serial` may start now: its output will fit the buffer.
  bool admit(uint64_t serial) const noexcept { return serial < next() + capacity_; }
  uint64_t capacity() const noexcept { return capacity_; }
  // Removes and returns the deposited items that have not left (cancellation: no sender may be
  // running).
  virtual std::vector<T*> take_all() = 0;

 protected:
  explicit Reorder(uint64_t capacity) : capacity_(capacity) {}
  const uint64_t capacity_;
  // Written only by the thread draining (flag or mutex held); read by workers in admit() with
  // acquire, pairing with the drainer's release store, so a worker admitted by the new value also
  // sees the slot the drainer emptied.
  std::atomic<uint64_t> next_{0};
};

template <class T, class Sink>
class NonBlockingReorder final : public Reorder<T> {
 public:
  NonBlockingReorder(uint64_t capacity, Sink sink)
      : Reorder<T>(capacity), slots_(capacity), sink_(std::move(sink)) {
    for (auto& s : slots_) s.store(nullptr, std::memory_order_relaxed);
  }

  void send(uint64_t serial, T* item) override {
    assert(this->admit(serial) && serial >= this->next());
    // seq_cst: this store and the drainer's flag.clear() / re-load below form a Dekker pair. If
    // this worker then fails to take the flag (someone is draining), either the drainer's re-load
    // after clearing sees this item, or this worker's test_and_set sees the flag cleared and it
    // drains itself. With weaker orders both could miss each other and the item would wait for
    // the next send, which may never come.
    slots_[serial % this->capacity_].store(item, std::memory_order_seq_cst);
    drain();
  }

 private:
  void drain() {
    while (!flag_.test_and_set(std::memory_order_seq_cst)) {
      // The flag is ours: we alone move next_ and empty slots.
      uint64_t n = this->next_.load(std::memory_order_relaxed);
      for (;;) {
        auto& slot = slots_[n % this->capacity_];
        T* item = slot.load(std::memory_order_acquire);  // pairs with the depositor's store
        if (item == nullptr) break;
        slot.store(nullptr, std::memory_order_relaxed);  // published by the release on next_
        sink_(n, item);
        ++n;
        this->next_.store(n, std::memory_order_release);
      }
      flag_.clear(std::memory_order_seq_cst);
      // Re-check (Figure 4, lines 39-42): an item deposited after our last look whose depositor
      // found the flag taken would otherwise be stranded. Loop to take the flag again.
      if (slots_[n % this->capacity_].load(std::memory_order_seq_cst) == nullptr) return;
    }
    // Someone else drains; they will see our item (see send()).
  }

  std::vector<T*> take_all() override {
    std::vector<T*> out;
    for (auto& s : slots_)
      if (T* item = s.exchange(nullptr, std::memory_order_acquire)) out.push_back(item);
    return out;
  }

  std::vector<std::atomic<T*>> slots_;
  std::atomic_flag flag_ = ATOMIC_FLAG_INIT;
  Sink sink_;
};

template <class T, class Sink>
class LockedReorder final : public Reorder<T> {
 public:
  LockedReorder(uint64_t capacity, Sink sink) : Reorder<T>(capacity), slots_(capacity, nullptr), sink_(std::move(sink)) {}

  void send(uint64_t serial, T* item) override {
    std::lock_guard lock(mutex_);
    uint64_t n = this->next_.load(std::memory_order_relaxed);
    if (serial != n) {
      slots_[serial % this->capacity_] = item;
      return;
    }
    sink_(n, item);
    ++n;
    while (T* waiting = slots_[n % this->capacity_]) {
      slots_[n % this->capacity_] = nullptr;
      sink_(n, waiting);
      ++n;
    }
    this->next_.store(n, std::memory_order_release);
  }

 private:
  std::vector<T*> take_all() override {
    std::lock_guard lock(mutex_);
    std::vector<T*> out;
    for (T*& s : slots_) {
      if (s != nullptr) out.push_back(s);
      s = nullptr;
    }
    return out;
  }

  std::mutex mutex_;
  std::vector<T*> slots_;
  Sink sink_;
};

enum class ReorderScheme : uint8_t { kNonBlocking, kLocked };

template <class T, class Sink>
std::unique_ptr<Reorder<T>> make_reorder(ReorderScheme scheme, uint64_t capacity, Sink sink) {
  if (scheme == ReorderScheme::kLocked) return std::make_unique<LockedReorder<T, Sink>>(capacity, std::move(sink));
  return std::make_unique<NonBlockingReorder<T, Sink>>(capacity, std::move(sink));
}

}  // namespace pao::sync
