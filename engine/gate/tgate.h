#pragma once
// The T-Gate: a lock-free merge of N timestamp-sorted inputs that many producers insert into
// concurrently and several readers each read completely, in the merged order, tuple by tuple,
// never before a tuple is ready. (Multiway aggregation paper, sections 4 and 5.5.)
//
// Structure. An insertion-only lock-free skip list of nodes ordered by the packed key
// (time, input index, position): the merged order of docs/semantics.md. A producer keeps, per
// level, the predecessor its last insertion found (the paper's per-input `written`/update hints),
// so the next tuple of the same input, which sorts after it, is searched for from there.
//
// Readiness (Definition 1, without the paper's shortcut). Every input i publishes
//   published_[i]  tuples of i linked into the list, and
//   bound_[i]      the least time i may still send (its last tuple's time or its heartbeat),
//   closed_[i]     no more tuples from i.
// A reader at node h may return x = h.next when, for every input i, a tuple of i still to come
// sorts after x: either i has a linked tuple the reader has not passed (it sorts after x, since
// x is the least unread node), or i's bound lies after x with ties broken by input index, or i is
// closed. A reader remembers the inputs whose every linked tuple it has passed ("exposed"
// inputs) and checks only those, so the common case costs O(1), not O(N) as in a skip list that
// scans all inputs (the paper's Figure 7 baseline, kept as Readiness::kScanAll). The newest tuple
// of an input is released as soon as the other inputs allow it, not when its input sends another.
//
// Memory. A producer inserts a batch as one arena: the batch (kept alive) plus one node per row.
// Inserts only ever land after the slowest reader (a new key exceeds every ready key), so all
// nodes before the slowest reader's position are garbage once the sentinel's links skip them.
// reclaim() (run by readers and by producers waiting for space; one at a time, skipped when
// busy) advances the sentinel past them and frees whole arenas under epoch-based protection
// for producers that may still be walking those nodes. Nothing is left to a garbage collector.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/batch.h"
#include "core/order_key.h"
#include "sync/cache_line.h"
#include "sync/wakeup.h"

namespace pao::gate {

using Key = OrderKey::Packed;  // the merged-order key, packed (core/order_key.h)

enum class Readiness : uint8_t {
  kExact,    // only the exposed inputs are checked: O(1) per tuple in the steady state
  kScanAll,  // every input is checked for every tuple: the concurrent skip-list baseline
};

struct TGateOptions {
  size_t inputs = 1;
  size_t readers = 1;
  // Producers that may insert at the same time; each gets an epoch slot (see Producer).
  size_t producers = 1;
  Readiness readiness = Readiness::kExact;
  // Rows per arena: longer batches are inserted as zero-copy slices, so reclamation and
  // back-pressure work at this granularity whatever the input batch size.
  int64_t arena_rows = 4096;
  // Back-pressure: an input with this many arenas not yet reclaimed waits before inserting more.
  // At least 2: an open input's newest arena is kept until the next one is linked.
  size_t max_arenas_per_input = 16;
};

class TGate;

// A ready tuple handed to a reader. Valid until that reader's next call: the reader's position
// keeps the node, and with it the batch, alive.
struct TupleRef {
  const Batch* batch = nullptr;
  int64_t row = 0;
  int64_t time = 0;
  uint32_t input = 0;
  uint64_t position = 0;
};

struct ReadResult {
  enum class State : uint8_t { kTuple, kNotReady, kEnd };
  State state = State::kNotReady;
  TupleRef tuple;
  // With kNotReady: every tuple this reader will still receive has time >= watermark.
  int64_t watermark = INT64_MIN;
};

class TGate {
 public:
  explicit TGate(TGateOptions options);
  ~TGate();
  TGate(const TGate&) = delete;
  TGate& operator=(const TGate&) = delete;

  const TGateOptions& options() const noexcept { return options_; }

  // ---- producers. At most one thread inserts into a given input at a time, and each thread
  // uses its own producer slot (0 <= slot < options.producers). ----

  // Inserts every row of `batch`, whose times (one per row, non-decreasing, at or after the
  // input's bound) the caller has validated with an InputTimes (gate/times.h). Blocks (without spinning)
  // while the input has max_arenas_per_input arenas not yet reclaimed, unless `wait` is false,
  // in which case it returns false instead of inserting anything.
  // A producer that feeds several inputs must never block on one while another of its inputs
  // holds back the readers: a batch longer than arena_rows is inserted an arena at a time and
  // may block part-way, its inserted part running past the times the producer's other inputs
  // have reached, and those inputs then wait for the producer. Deadlock-free: calls of at most
  // arena_rows rows (all or nothing), each into the owned input with the least next time
  // (ties: least index), the others heartbeated at their next times before a call may block
  // (testing/tgate_bench.cpp; ops/multiway_producers.cpp's producers do the same but poll instead of blocking).
  bool insert(size_t slot, uint32_t input, const Batch& batch, const int64_t* times, bool wait = true);
  // Promises that `input` sends nothing earlier than `time`. Throws kUnsorted if time is below an
  // earlier heartbeat of this input.
  void heartbeat(uint32_t input, int64_t time);
  // No more tuples from `input`.
  void close(uint32_t input);
  // Stops every reader and waiting producer: readers get kEnd, inserts return false. Used on
  // errors and cancellation.
  void cancel();
  bool cancelled() const noexcept { return cancelled_.load(std::memory_order_acquire); }

  // ---- readers: reader r (0 <= r < options.readers) is used by one thread at a time ----

  // The next ready tuple for reader r, once and only once, in the merged order; or kNotReady
  // with a watermark; or kEnd once every input is closed and r has read everything.
  ReadResult next_ready_tuple(size_t reader);
  // Blocks until something may have changed for readers (an insert, heartbeat, close, cancel).
  // `seen` is progress() read before the call that returned kNotReady, so no wake-up is lost.
  void wait_for_progress(uint64_t seen);
  uint64_t progress() const noexcept { return progress_.value(); }

  // Frees what every reader has passed. Safe from any thread; returns at once if another
  // thread is reclaiming.
  void reclaim();

  // For tests and benchmarks.
  size_t live_arenas() const noexcept { return live_arenas_total_.load(std::memory_order_relaxed); }
  size_t peak_live_arenas() const noexcept { return peak_live_arenas_.load(std::memory_order_relaxed); }

  struct Node;
  struct Arena;

 private:
  struct alignas(sync::kCacheLine) InputState;
  struct alignas(sync::kCacheLine) ReaderState;
  struct alignas(sync::kCacheLine) ProducerState;

  Arena* make_arena(size_t slot, uint32_t input, const Batch& batch, const int64_t* times);
  void link_arena(ProducerState& p, Arena* arena);
  void enter(ProducerState& p);
  void leave(ProducerState& p);
  bool ready_against(const ReaderState& r, size_t input, int64_t time, uint32_t from) const;
  void free_arena(Arena* a);
  // Arena memory: a block of at least `bytes` (its size in *capacity), from the pool when one fits.
  void* take_block(size_t bytes, size_t& capacity);
  void give_block(void* memory, size_t capacity);

  TGateOptions options_;
  Node* head_;  // sentinel: key below every real key, kMaxHeight levels
  // The highest level any node is linked at, raised (relaxed CAS) by a producer before it links a
  // taller node, and only ever raised. Relaxed everywhere, and correct through these chains:
  //  - producers read it only as where a search from the sentinel starts; a stale (lower) value
  //    starts lower, which is slower but still finds every level the node needs (link_arena()
  //    takes max(top, height - 1)), since every level's list starts at the sentinel;
  //  - reclaim() must walk every level at which a node of an arena it retires may be linked.
  //    That node's producer raised top_level_ before linking the node (sequenced before), its
  //    links come before the producer's release store of next_in_input or closed, and reclaim()
  //    loads those with acquire before it loads top_level_ (reclaim() step 3a). So the raise
  //    happens-before the load, and coherence makes the load return it or a later, higher value.
  std::atomic<int> top_level_{0};
  std::unique_ptr<InputState[]> inputs_;
  std::unique_ptr<ReaderState[]> readers_;
  std::unique_ptr<ProducerState[]> producers_;

  // Epoch-based reclamation for producers (readers never touch garbage; see reclaim()).
  std::atomic<uint64_t> epoch_{2};
  std::atomic_flag reclaiming_ = ATOMIC_FLAG_INIT;
  Arena* retired_ = nullptr;  // guarded by reclaiming_
  std::vector<Arena*> unlinking_;  // reclaim()'s chosen arenas (3a), guarded by reclaiming_

  // Freed arena blocks kept for reuse (take_block()).
  struct Block {
    void* memory;
    size_t capacity;
  };
#if defined(__SANITIZE_ADDRESS__)
  static constexpr size_t kPoolBlocks = 0;  // AddressSanitizer sees every freed arena
#else
  static constexpr size_t kPoolBlocks = 16;
#endif
  static constexpr size_t kBlockQuantum = 16 * 1024;
  std::mutex pool_mutex_;
  std::vector<Block> pool_;

  std::atomic<size_t> live_arenas_total_{0};
  std::atomic<size_t> peak_live_arenas_{0};
  std::atomic<bool> cancelled_{false};

  // Wake-ups: progress_ for readers (an insert, heartbeat, close or cancel), freed_ for producers
  // waiting for room (a reclamation that freed arenas, or cancel).
  sync::Wakeup progress_;
  sync::Wakeup freed_;
};

}  // namespace pao::gate
