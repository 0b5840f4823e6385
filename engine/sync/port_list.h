#pragma once
// The free list of the IBM Streams scheduler (elastic-lock-free-operator-scheduler paper, section
// 4.1; issue 30's "dynamic" threading): the operators (ports) that may have work, in least
// recently used order. A thread takes the head, runs that operator a while and offers it again at
// the tail if work is left, so every operator with work is reached in turn and no thread scans
// all of them. Lock-free, bounded (each port is on the list at most once), no allocation after
// construction.
//
// Each port has a `listed` flag; offer() puts the port on the list only when it flips the flag
// from false to true, take() flips it back. Both flips are acq_rel read-modify-writes, so they
// read each other in the flag's modification order: whoever offers after linking work to the
// port (release) is read by the taker's flip (acquire), which then sees that work. An offer that
// finds the flag set publishes nothing new to the list, but the taker that clears the flag later
// reads the offerer's flip and so sees its work.
//
// The queue is Vyukov's bounded multi-producer multi-consumer ring: each cell has a sequence
// number; a producer claims the tail position with a CAS and publishes the cell with a release
// store of its sequence, a consumer claims the head likewise and frees the cell with a release
// store of the next lap's sequence. A value is written before its cell's release and read after
// the matching acquire, so it needs no atomicity of its own.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "sync/cache_line.h"

namespace pao::sync {

class PortList {
 public:
  explicit PortList(size_t ports) : ports_(ports), listed_(new std::atomic<bool>[ports]) {
    size_t capacity = 2;
    while (capacity < ports) capacity <<= 1;
    mask_ = capacity - 1;
    cells_ = std::unique_ptr<Cell[]>(new Cell[capacity]);
    for (size_t i = 0; i < capacity; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
    for (size_t i = 0; i < ports; ++i) listed_[i].store(false, std::memory_order_relaxed);
  }

  size_t ports() const noexcept { return ports_; }

  // Puts `port` at the tail unless it is on the list already. Never fails: at most ports() ports
  // are listed at once and the ring holds at least that many.
  void offer(uint32_t port) {
    if (listed_[port].exchange(true, std::memory_order_acq_rel)) return;
    size_t pos = tail_.value.load(std::memory_order_relaxed);
    Cell* cell;
    for (;;) {
      cell = &cells_[pos & mask_];
      const size_t seq = cell->seq.load(std::memory_order_acquire);
      const auto diff = static_cast<std::ptrdiff_t>(seq) - static_cast<std::ptrdiff_t>(pos);
      if (diff == 0) {
        if (tail_.value.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) break;
      } else {
        // diff < 0 would mean a full ring, which the listed flags rule out; diff > 0: another
        // producer took this position.
        pos = tail_.value.load(std::memory_order_relaxed);
      }
    }
    cell->port = port;
    cell->seq.store(pos + 1, std::memory_order_release);
  }

  // The least recently offered port, taken off the list; nothing when the list is empty.
  std::optional<uint32_t> take() {
    size_t pos = head_.value.load(std::memory_order_relaxed);
    Cell* cell;
    for (;;) {
      cell = &cells_[pos & mask_];
      const size_t seq = cell->seq.load(std::memory_order_acquire);
      const auto diff = static_cast<std::ptrdiff_t>(seq) - static_cast<std::ptrdiff_t>(pos + 1);
      if (diff == 0) {
        if (head_.value.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) break;
      } else if (diff < 0) {
        return std::nullopt;  // empty
      } else {
        pos = head_.value.load(std::memory_order_relaxed);
      }
    }
    const uint32_t port = cell->port;
    cell->seq.store(pos + mask_ + 1, std::memory_order_release);
    listed_[port].exchange(false, std::memory_order_acq_rel);  // reads the latest offer (see above)
    return port;
  }

 private:
  struct Cell {
    std::atomic<size_t> seq;
    uint32_t port = 0;
  };
  struct alignas(kCacheLine) Position {
    std::atomic<size_t> value{0};
  };

  size_t ports_;
  std::unique_ptr<std::atomic<bool>[]> listed_;
  std::unique_ptr<Cell[]> cells_;
  size_t mask_ = 1;
  Position head_;  // next position to take
  Position tail_;  // next position to offer at
};

}  // namespace pao::sync
