#include "window/whive.h"

#include <algorithm>
#include <bit>
#include <tuple>

#include "core/error.h"

namespace pao::window {

WHive::WHive(const Schema& input, const AggregateQuery& query, int64_t batch_size, size_t updaters, HiveMode mode)
    : WindowOutput(input, query, batch_size),
      mode_(mode),
      span_(window_.slices_per_window()),
      updaters_(std::max<size_t>(updaters, 1)),
      advance_slices_(window_.advance / window_.slice_length()) {
  if (span_ > kMaxSlicesPerWindow) {
    throw Error(ErrorKind::kInvalidInput,
                "a window of size " + std::to_string(window_.size) + " advancing by " +
                    std::to_string(window_.advance) + " spans " + std::to_string(span_) +
                    " slices of length " + std::to_string(window_.slice_length()) +
                    "; the sliced designs handle at most " + std::to_string(kMaxSlicesPerWindow) +
                    ": use design='tumlsc'");
  }
  // More than span_ + 1 slots (deadlock freedom, whive.h); twice that, so that producers running
  // ahead of the slowest input rarely find their slot busy.
  const auto slots = std::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(2 * span_ + 2, 16)));
  ring_ = std::vector<Slot>(slots);
  mask_ = slots - 1;
  for (Slot& s : ring_) s.shards.resize(updaters_.size());
  if (advance_slices_ < span_) suffix_.resize(static_cast<size_t>(span_));
  for (Updater& u : updaters_) {
    u.values.resize(prototypes_.size());
    if (mode_ != HiveMode::kSingle) u.keys = std::make_unique<KeyTable>(input, keys_.columns());
  }
}

void WHive::locate(Updater& up, int64_t time) const {
  up.gap = window_.first_k(time) > window_.last_k(time);
  up.slice = window_.slice_of(time);
  std::tie(up.lo, up.hi) = window_.slice_range(up.slice);
}

bool WHive::update(size_t u, const Batch& batch, int64_t row, OrderKey at) {
  Updater& up = updaters_[u];
  if (at.time < up.lo || at.time >= up.hi) locate(up, at.time);
  if (up.gap) return true;  // in a gap between windows
  // kSingle: the id in keys_ (one thread, no lock); otherwise this updater's own id.
  const uint32_t own = mode_ == HiveMode::kSingle ? keys_.id(batch, row) : up.keys->id(batch, row);
  if (mode_ == HiveMode::kPartitioned && own % updaters_.size() != u) return true;  // another's key
  const int64_t j = up.slice;
  Slot& s = ring_[static_cast<uint64_t>(j) & mask_];
  int64_t tag = s.tag.load(std::memory_order_acquire);
  if (tag != j) {
    if (tag != kEmpty) return false;  // an older slice not emitted yet
    // Only slices in [base, base + ring size) may exist, so no two live slices share a slot and a
    // slice is never blocked by a newer one (whive.h, deadlock freedom).
    const int64_t base = base_.load(std::memory_order_acquire);
    if (base == kEmpty || j - base >= static_cast<int64_t>(ring_.size())) return false;
    if (!s.tag.compare_exchange_strong(tag, j, std::memory_order_acquire) && tag != j) return false;
  }
  if (own >= up.known.size()) up.known.resize(static_cast<size_t>(own) + 1);
  Known& k = up.known[own];
  WindowSet& ws = s.shards[u];
  if (k.slice != j) {  // the key's first tuple in this slice from this updater
    if (k.shared == WindowSet::kNoSlot) {
      if (mode_ == HiveMode::kSingle) {
        k.shared = own;
      } else {  // a key new to this updater
        std::lock_guard lock(keys_mutex_);
        k.shared = keys_.id(batch, row);
      }
    }
    k.slot = ws.append(k.shared, prototypes_);
    k.slice = j;
  }
  const uint32_t slot = k.slot;
  read_values(batch, row, up.values);
  for (size_t a = 0; a < ws.aggs.size(); ++a) ws.aggs[a].update(slot, up.values[a], at);
  return true;
}

int64_t WHive::min_live_slice() const {
  int64_t m = INT64_MAX;
  for (const Slot& s : ring_) {
    const int64_t tag = s.tag.load(std::memory_order_acquire);
    if (tag != kEmpty) m = std::min(m, tag);
  }
  return m;
}

// Only the output thread changes a non-empty tag, so the relaxed load reads a stable value; the
// release store publishes the cleared shards to the next creator of the slot.
void WHive::release_before(int64_t slice) {
  for (Slot& s : ring_) {
    const int64_t tag = s.tag.load(std::memory_order_relaxed);
    if (tag == kEmpty || tag >= slice) continue;
    for (WindowSet& shard : s.shards) shard.clear();
    s.tag.store(kEmpty, std::memory_order_release);
  }
}

void WHive::emit(int64_t watermark) {
  if (watermark == INT64_MIN) return;
  std::unique_lock lock(keys_mutex_, std::defer_lock);
  if (mode_ != HiveMode::kSingle) lock.lock();  // keys_ is read to sort and decode
  emit_windows(watermark);
  emit_states_through(watermark);  // loaded states of windows no slice reached
}

void WHive::emit_windows(int64_t watermark) {
  for (;;) {
    if (!next_known_) {
      // Skip the windows with no live slice, but never past one that ends after the watermark:
      // its slices may still be created.
      const int64_t m = min_live_slice();
      if (m == INT64_MAX && watermark == INT64_MAX) return;  // everything emitted
      int64_t k = m == INT64_MAX ? INT64_MAX
                                 : window_.first_k(static_cast<int64_t>(__int128{window_.offset} +
                                                                        __int128{m} * window_.slice_length()));
      if (watermark != INT64_MAX) k = std::min(k, window_.first_k(watermark));
      next_k_ = started_ ? std::max(next_k_, k) : k;
      restart_combining(window_.first_slice(next_k_));
      started_ = true;
      next_known_ = true;
    }
    base_.store(window_.first_slice(next_k_), std::memory_order_release);
    if (window_.end(next_k_) > watermark) return;
    WindowSet& window = combine(window_.first_slice(next_k_));
    const bool empty = window.keys.empty();
    window_keys_ = window.keys.size();
    WindowOutput::emit(next_k_, window);
    ++next_k_;
    release_before(window_.first_slice(next_k_));
    if (empty) next_known_ = false;
  }
}

void WHive::fold(WindowSet& to, const WindowSet& from) {
  if (from.keys.empty()) return;
  // keys_ does not grow meanwhile: the output thread folds under keys_mutex_ (or is the only
  // thread, kSingle), and every id in a shard was taken from keys_ before.
  to.make_room(to.keys.size() + from.keys.size(), keys_.size(), prototypes_);
  to_.resize(from.keys.size());
  for (size_t i = 0; i < from.keys.size(); ++i) to_[i] = to.slot_in_room(from.keys[i]);
  for (size_t a = 0; a < to.aggs.size(); ++a) to.aggs[a].merge_all(from.aggs[a], to_.data(), to_.size());
}

void WHive::restart_combining(int64_t j0) {
  // After an empty window every slice before the next live one is empty, so nothing folded so far
  // is needed; the current block is folded directly until the next one starts.
  // (At the least slice there is nothing before: start there, folding it directly.)
  const int64_t before = j0 == INT64_MIN ? j0 : j0 - 1;
  if (!started_ || absorbed_ < before) absorbed_ = before;
  prefix_on_ = false;
  suffix_block_ = kEmpty;
}

bool WHive::decide_prefix() const {
  // Per slice, with e table entries per slice and w keys per window (a = advance_slices_):
  // directly span_ * e / a merges; by blocks 2e (prefix, suffix) + w (the suffix chain) + w / a
  // (prefix into suffix), both upper bounds; compared multiplied by a.
  if (slice_entries_ < 0) return false;
  const double e = slice_entries_;
  const auto w = static_cast<double>(window_keys_);
  const auto a = static_cast<double>(advance_slices_);
  return 2 * a * e + (a + 1) * w < static_cast<double>(span_) * e;
}

void WHive::absorb_through(int64_t e) {
  for (int64_t j = absorbed_ + 1; j <= e; ++j) {
    const int64_t block = block_of(j);
    const int64_t pos = j - block * span_;
    if (pos == 0) {
      prefix_on_ = decide_prefix();
      prefix_.clear();
      block_entries_ = 0;
      block_slices_ = 0;
    }
    const Slot& s = ring_[static_cast<uint64_t>(j) & mask_];
    if (s.tag.load(std::memory_order_acquire) == j) {
      for (const WindowSet& shard : s.shards) {
        block_entries_ += static_cast<int64_t>(shard.keys.size());
        if (prefix_on_) fold(prefix_, shard);
      }
    }
    ++block_slices_;
    if (pos != span_ - 1) continue;
    slice_entries_ = static_cast<double>(block_entries_) / static_cast<double>(block_slices_);
    suffix_block_ = kEmpty;
    if (!prefix_on_) continue;
    // The block is complete: its suffixes from the first window not emitted on (earlier slices
    // start no window left; they may be released already).
    const int64_t start = j - pos;
    const int64_t lo = std::max(start, window_.first_slice(next_k_));
    for (int64_t i = j; i >= lo; --i) {
      WindowSet& t = suffix_[static_cast<size_t>(i - start)];
      t.clear();
      const Slot& si = ring_[static_cast<uint64_t>(i) & mask_];
      if (si.tag.load(std::memory_order_acquire) == i) {
        for (const WindowSet& shard : si.shards) fold(t, shard);
      }
      if (i < j) fold(t, suffix_[static_cast<size_t>(i + 1 - start)]);  // later tuples after
    }
    suffix_block_ = block;
  }
  absorbed_ = std::max(absorbed_, e);
}

WHive::WindowSet& WHive::combine(int64_t j0) {
  const int64_t e = j0 + span_ - 1;
  if (!suffix_.empty()) {
    absorb_through(e);
    const int64_t b = block_of(j0);
    if (suffix_block_ == b) {
      WindowSet& t = suffix_[static_cast<size_t>(j0 - b * span_)];
      if (block_of(e) == b) return t;  // the window is the block
      if (prefix_on_) {  // prefix_ holds block b + 1 through e
        fold(t, prefix_);
        return t;
      }
    }
  }
  for (int64_t j = j0; j <= e; ++j) {
    const Slot& s = ring_[static_cast<uint64_t>(j) & mask_];
    if (s.tag.load(std::memory_order_acquire) != j) continue;
    for (const WindowSet& shard : s.shards) fold(acc_, shard);
  }
  return acc_;
}

}  // namespace pao::window
