#pragma once
// The W-Hive (multiway aggregation paper, section 5.6), sliced: the window store that several
// threads update at once while one output thread emits every window set no thread can still
// change.
//
// Slices, not windows. A tuple updates the one slice it lies in (WindowSpec::slice_of); when
// window k can no longer change, the output thread combines its slices_per_window() slices.
// Sliding windows then cost one update per tuple rather than size / advance of them.
//
// Structure. Slices live in a ring of slots indexed by slice number modulo a power of two larger
// than slices_per_window() + 1, so the slots are ordered by start time and a slice is found in
// O(1) without a search. A slot's `tag` says which slice it holds (kEmpty when none). Each slot
// has one shard per updater: a (key -> states) table that only that updater writes, so updates
// are plain stores, with no atomic per tuple and no contention on hot keys.
//
// Protocol and memory order:
//  - Creating a slice: the first updater to need slice j in an empty slot CASes its tag from
//    kEmpty to j; a concurrent creator of the same slice fails the CAS, reads j and uses the same
//    slot, so two creators end with one slice. The CAS and the tag loads are acquire: they see
//    the output thread's clearing of the slot, published by its release store of kEmpty (an RMW
//    continues that release sequence, so every later acquirer of tag j sees it too).
//  - A slot still holding an older slice (the output thread has not emitted it yet) is busy:
//    update() returns false and the caller retries after the watermark has moved. So is a slice
//    at or beyond base + ring size, where base (published by the output thread, release/acquire)
//    is the first slice not yet released: live slices then always map to distinct slots, and a
//    slice is never blocked by a newer one that a faster input created first. Before the output
//    thread has seen its first watermark there is no base and nothing may be created.
//  - Completion: the caller publishes each source's progress ("every tuple of mine before P has
//    been applied") with a release store after its updates, and the output thread passes the
//    minimum it read (acquire) to emit(). Window k is complete when end(k) <= that watermark;
//    no update to its slices can happen any more, so the output thread reads the shards without
//    synchronisation, then clears the slices no later window needs and stores kEmpty (release).
//  - Deadlock freedom: the least pending tuple's time t is the watermark once every source has
//    published (a busy source publishes the time it waits at). The output thread then emits
//    every window ending at or before t and sets base to the first slice of the first window
//    containing t, so t's slice is less than base + slices_per_window() < base + ring size, and
//    its slot holds no other live slice: the tuple goes in.
//  - Keys: with several updaters each has its own KeyTable and maps its ids to the shared one
//    under keys_mutex_ once per (updater, key); the output thread holds the mutex while it emits
//    (it sorts and decodes keys). Updates of known keys take no lock. Each updater also records
//    its keys' slots in its current shards (Known), so a shard needs no key index.
//  - Memory: the ring is the whole state; emitted slices are cleared and their slot reused, so
//    memory is bounded by the ring size times the keys per slice (and the combining state below
//    by the same again).
//
// Combining slices into windows (output thread only). Directly, window k folds its span_ slices:
// span_ table merges per key and window, which is most of the cost when each key has a few
// tuples per slice (W-OI: 20 merges per key and window against ~2 tuples per key and slice).
// Cheaper, and exact for every function because merges are associative and commutative (exact
// float sums, OrderKeys for first and last) or applied in time order (equal OrderKeys), is to cut
// the slice line into blocks of span_ slices, so that a window spans the end of one block and the
// start of the next:
//  - prefix_ folds each slice of the current block as the windows reach it (one merge per key
//    and slice);
//  - when a block's last slice is folded, suffix_[i] becomes the fold of its slices i..end, built
//    backwards (one merge for the slice, one for suffix_[i + 1]);
//  - window [j0, e] with j0 in block b and e in block b + 1 is suffix_[j0] folded with prefix_.
// About 4 merges per key and slice instead of span_. With sparse keys (most keys in one slice of
// the window) the suffixes hold nearly a window's keys each and that costs more than folding
// directly, so each block picks from the last block's figures (decide_prefix()). A window whose
// suffix or prefix was not built is folded directly, as is every window when the size is at most
// the advance (then no slice is in two windows).
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "sync/cache_line.h"
#include "window/window_aggregate.h"

namespace pao::window {

enum class HiveMode : uint8_t {
  kSingle,       // one thread updates and emits (the sliced design); no lock, no atomics needed
  kShared,       // WiML: any updater may see any key, in any order
  kPartitioned,  // TuMLMC: every updater sees every tuple in the merged order and applies those
                 // of its keys (local key id modulo updaters)
};

class WHive : public WindowOutput {
 public:
  // `updaters`: the threads that may call update() concurrently, each with its own index.
  WHive(const Schema& input, const AggregateQuery& query, int64_t batch_size, size_t updaters, HiveMode mode);

  // Applies one tuple (updater `u`, at `at`: its time and, for WiML, its place in the merged
  // order, which first and last compare) to its slice. False, with nothing done, when the
  // slice's slot still holds an older slice: retry once the watermark has moved.
  bool update(size_t u, const Batch& batch, int64_t row, OrderKey at);

  // Output thread: emits, in order, every window ending at or before `watermark` (no tuple
  // earlier than it will be applied any more). INT64_MAX: every window.
  void emit(int64_t watermark);

  // Slices a window spans beyond which the sliced designs refuse a query (ring memory).
  static constexpr int64_t kMaxSlicesPerWindow = 4096;

 private:
  static constexpr int64_t kEmpty = INT64_MIN;
  struct Slot {
    std::atomic<int64_t> tag{kEmpty};
    std::vector<WindowSet> shards;  // one per updater
  };
  // What an updater knows of one of its keys: the shared id, and the key's slot in this
  // updater's shard of slice `slice` (valid when that is the tuple's slice). The shard itself
  // keeps no key -> slot index: a fresh 4 bytes per key in every ring slot, which sparse keys
  // (K-OI: about 2,900 of 40,000 keys per slice) touched as one cache miss per tuple. This array
  // is reused across slices, so it stays in cache. A slice's shard is cleared only after no
  // source can reach the slice again, so a stamp equal to the tuple's slice is never stale. A
  // WiML producer owning several inputs moves back and forth between their slices, and a key
  // whose stamp moved on meanwhile gets a second slot in the same shard: fold() merges every
  // slot of a key, so that costs space, never correctness.
  struct Known {
    int64_t slice = kEmpty;
    uint32_t shared = WindowSet::kNoSlot;  // id in keys_ (kNoSlot: not asked yet)
    uint32_t slot = 0;
  };
  struct alignas(sync::kCacheLine) Updater {
    std::unique_ptr<KeyTable> keys;  // kShared, kPartitioned: this updater's own ids
    std::vector<Known> known;        // by own id (kSingle: by id in keys_)
    std::vector<Value> values;
    // The slice of this updater's last tuple, [lo, hi) (empty at first): tuples in it share its
    // number and whether it lies in a gap between windows, so only a new slice pays for the
    // window arithmetic.
    int64_t lo = 1;
    int64_t hi = 0;
    int64_t slice = 0;
    bool gap = false;
  };

  void emit_windows(int64_t watermark);  // emit()'s windows, under keys_mutex_ where shared
  void locate(Updater& up, int64_t time) const;
  int64_t min_live_slice() const;
  void release_before(int64_t slice);

  // Combining (see above). fold(): `from`'s states into `to`'s, as if after them.
  void fold(WindowSet& to, const WindowSet& from);
  // The first window from slice j0 on after a start or a skip: no prefix or suffix is valid.
  void restart_combining(int64_t j0);
  // Folds slices (absorbed_, e] into prefix_ (and a finished block into suffix_) as chosen.
  void absorb_through(int64_t e);
  bool decide_prefix() const;
  // Window [j0, j0 + span_)'s states: a suffix_ entry or acc_; emit() clears it.
  WindowSet& combine(int64_t j0);
  int64_t block_of(int64_t slice) const noexcept { return WindowSpec::floor_div(slice, span_); }

  HiveMode mode_;
  int64_t span_;    // slices per window
  std::vector<Slot> ring_;
  uint64_t mask_;
  std::vector<Updater> updaters_;
  std::mutex keys_mutex_;

  // The first slice not released, set by the output thread once it has seen a watermark; kEmpty
  // before (no slice may be created until then).
  std::atomic<int64_t> base_{kEmpty};

  // Output thread.
  int64_t next_k_ = 0;        // the first window not emitted yet, once next_known_
  bool next_known_ = false;  // false at the start and after an empty window: skip ahead
  bool started_ = false;
  WindowSet acc_;             // the window being combined
  std::vector<uint32_t> to_;  // fold(): `from`'s slots in `to`

  // Combining state (output thread).
  int64_t advance_slices_;     // slices per advance
  int64_t absorbed_ = 0;       // the last slice folded into the combining state (once started)
  bool prefix_on_ = false;     // prefix_ holds block_of(absorbed_)'s slices from its start
  int64_t suffix_block_ = kEmpty;  // the block whose suffixes suffix_ holds (kEmpty: none)
  WindowSet prefix_;
  std::vector<WindowSet> suffix_;  // span_ entries, suffix_[i - block start]
  // The last finished block's mean table entries per slice (all shards; -1: none seen yet), the
  // running count for this block, and the keys of the last window emitted: decide_prefix()'s cost
  // figures.
  double slice_entries_ = -1;
  int64_t block_entries_ = 0;
  int64_t block_slices_ = 0;
  size_t window_keys_ = 0;
};

}  // namespace pao::window
