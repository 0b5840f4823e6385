#pragma once
// Window assignment and the window sets of a windowed, grouped aggregate, fed one tuple at a time
// in the merged order by a single thread (the update and output stages of MQ, MQLF and TuMLSC).
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/batch.h"
#include "core/builder.h"
#include "window/aggregates.h"
#include "core/key_table.h"

namespace pao::window {

// Windows [s, s + size) for s = offset + k * advance, every integer k (docs/semantics.md).
struct WindowSpec {
  int64_t size = 1;
  int64_t advance = 1;
  int64_t offset = 0;

  // The k of the windows containing time t: [first, last]; empty (first > last) in a gap.
  int64_t first_k(int64_t t) const noexcept { return floor_div(__int128{t} - offset - size, advance) + 1; }
  int64_t last_k(int64_t t) const noexcept { return floor_div(__int128{t} - offset, advance); }
  int64_t start(int64_t k) const noexcept { return static_cast<int64_t>(__int128{offset} + __int128{k} * advance); }
  int64_t end(int64_t k) const noexcept { return static_cast<int64_t>(__int128{start(k)} + size); }

  // Slices: the time line cut at every window start and end, [offset + j * g, + g) for
  // g = gcd(size, advance). A window is exactly the `slices_per_window()` slices from
  // first_slice(k); a tuple lies in one slice (window slicing, docs/semantics.md).
  int64_t slice_length() const noexcept { return std::gcd(size, advance); }
  int64_t slices_per_window() const noexcept { return size / slice_length(); }
  int64_t slice_of(int64_t t) const noexcept { return floor_div(__int128{t} - offset, slice_length()); }
  // Slice j's times [lo, hi), clamped to the int64 range. Every time in it lies in the same
  // windows. (At the ends of the time line the clamp leaves some of the slice's times out; a
  // caller caching by this range only looks those up again.)
  std::pair<int64_t, int64_t> slice_range(int64_t j) const noexcept {
    const __int128 lo = __int128{offset} + __int128{j} * slice_length();
    const auto clamp = [](__int128 v) { return static_cast<int64_t>(std::clamp<__int128>(v, INT64_MIN, INT64_MAX)); };
    return {clamp(lo), clamp(lo + slice_length())};
  }
  int64_t first_slice(int64_t k) const noexcept {
    return static_cast<int64_t>(__int128{k} * (advance / slice_length()));
  }

  // The same windows with the offset reduced to [0, advance): window and slice numbers then stay
  // inside int64 for every time time_bounds_for() admits, whatever offset the user gave.
  WindowSpec normalized() const noexcept {
    WindowSpec w = *this;
    if (advance < 1) return w;  // invalid: WindowOutput refuses it
    w.offset = static_cast<int64_t>(__int128{offset} - __int128{floor_div(offset, advance)} * advance);
    return w;
  }
  static int64_t floor_div(__int128 a, int64_t b) noexcept {
    if (b > 0 && a >= INT64_MIN && a <= INT64_MAX) {
      // The usual case (times and windows far from the int64 limits): one 64-bit division rather
      // than the 128-bit library call, which took 4% of a keyed window pipeline.
      const auto x = static_cast<int64_t>(a);
      const int64_t q = x / b;
      return q - (x % b != 0 && x < 0);
    }
    __int128 q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return static_cast<int64_t>(q);
  }
};

// The times a windowed aggregate takes from a time column of `type` (its range: int64, or int32
// for date32 and int32): those whose windows lie inside the range too. A window holding t starts
// after t - size and ends by t + size; one advance more on each side keeps normalized()'s window
// and slice numbers inside int64 (and off the W-Hive's INT64_MIN sentinel). Empty (lo > hi) when
// a window is about as long as the range. `why` ends the refusal of a time outside them
// ("outside the times " + why).
struct TimeBounds {
  int64_t lo;
  int64_t hi;
  std::string why;
};
TimeBounds time_bounds_for(const WindowSpec& window, const DataType& type);

struct AggregateQuery {
  std::string time_column;
  std::vector<std::string> keys;
  WindowSpec window;
  std::vector<AggSpec> aggs;
  // Set: session windows with this gap (window/sessions.h) instead of `window`, which is unused.
  std::optional<int64_t> session_gap;
};

// What every window store shares: the query's validation, the output schema, the key table, and
// turning a finished window set into output rows (windows in start order, keys ascending).
class WindowOutput {
 public:
  // Validates the query against the input schema (unknown columns, unsupported types, windows).
  // Refuses session windows: only SessionAggregate, through the protected constructor, takes them.
  WindowOutput(const Schema& input, const AggregateQuery& query, int64_t batch_size)
      : WindowOutput(input, query, batch_size, false) {}

  const std::shared_ptr<const Schema>& output_schema() const noexcept { return out_schema_; }
  // A batch of finished rows: full batches (batch_size rows) always; with `flush`, any rows.
  std::optional<Batch> take(bool flush);
  // Window sets emitted so far (those with at least one row).
  int64_t window_sets_emitted() const noexcept { return emitted_; }
  // Appends each emitted window set's end to *sink from now on (latency measurement); null: stop.
  void record_ends(std::vector<int64_t>* sink) noexcept { ends_ = sink; }
  bool has_output(bool flush) const noexcept {
    return !ready_.empty() || (flush && !builders_.empty() && builders_[0].size() > 0);
  }

  // Saved window states (a checkpoint's, docs/checkpoints.md): one row per (window, key),
  // window_start, window_end, the key columns, then one utf8 column per aggregate holding
  // AggStates::save()'s text. Every tuple a loaded state stands for precedes, in the merged order,
  // every tuple this store is given afterwards, so a window's loaded state is folded in first
  // when the window is emitted, and a window with a loaded state and no tuple is emitted too.
  std::shared_ptr<const Schema> states_schema() const;
  // Before any tuple: takes the states of `states` (rows of states_schema()). Throws kInvalidInput
  // for rows that do not fit this query (another schema, a start that is no window's, a
  // (window, key) given twice, a malformed state).
  void load_states(const Batch& states);
  // The loaded states (for WindowStates: those folded in) of the windows ending at or after
  // `from_end`, windows in start order, keys in output order.
  Batch save_states(int64_t from_end);

 protected:
  // The (key -> states) table of one window or slice, indexed by dense key ids.
  struct WindowSet {
    std::vector<uint32_t> slot_of_key;  // key id -> slot, kNoSlot when absent
    std::vector<uint32_t> keys;         // slot -> key id
    std::vector<AggStates> aggs;

    static constexpr uint32_t kNoSlot = UINT32_MAX;
    // The slot of `key`, added when absent; `prototypes` are the states for a first use.
    uint32_t slot(uint32_t key, const std::vector<AggStates>& prototypes) {
      if (key >= slot_of_key.size()) slot_of_key.resize(static_cast<size_t>(key) + 1, kNoSlot);
      uint32_t s = slot_of_key[key];
      if (s == kNoSlot) {
        s = append(key, prototypes);
        slot_of_key[key] = s;
      }
      return s;
    }
    // A new slot for `key`, without slot_of_key: for a set whose single writer tracks its keys'
    // slots itself (a W-Hive shard). Such a set is only read through its keys and aggs.
    uint32_t append(uint32_t key, const std::vector<AggStates>& prototypes) {
      if (aggs.empty()) aggs = prototypes;
      const auto s = static_cast<uint32_t>(keys.size());
      keys.push_back(key);
      for (AggStates& a : aggs) {
        if (a.size() <= s) a.resize(std::max<size_t>(16, 2 * a.size()));  // cells past keys.size() stay fresh
      }
      return s;
    }
    // Room for `slots` slots and for key ids below `key_ids`, so that slot_in_room() can add keys
    // without checking sizes: the bulk path of folding one set into another.
    void make_room(size_t slots, size_t key_ids, const std::vector<AggStates>& prototypes) {
      if (slot_of_key.size() < key_ids) slot_of_key.resize(key_ids, kNoSlot);
      if (aggs.empty()) aggs = prototypes;
      for (AggStates& a : aggs) {
        if (a.size() < slots) a.resize(std::max(slots, 2 * a.size()));  // cells past keys.size() stay fresh
      }
    }
    // slot() after make_room() covered `key` and one more slot.
    uint32_t slot_in_room(uint32_t key) {
      uint32_t s = slot_of_key[key];
      if (s == kNoSlot) {
        s = static_cast<uint32_t>(keys.size());
        keys.push_back(key);
        slot_of_key[key] = s;
      }
      return s;
    }
    // Empties the set, keeping its memory: only the touched entries are reset.
    void clear() {
      if (!slot_of_key.empty()) {
        for (uint32_t key : keys) slot_of_key[key] = kNoSlot;
      }
      for (AggStates& a : aggs) a.clear_used(keys.size());
      keys.clear();
    }
  };

  WindowOutput(const Schema& input, const AggregateQuery& query, int64_t batch_size, bool sessions);

  // Appends window k's rows from `ws` (sorted by key) and clears `ws`; nothing if it is empty.
  void emit(int64_t k, WindowSet& ws);
  // Appends the rows of `n` sessions that end at `end` (one window set): row i has start
  // starts[i], the key keys[order[i]] and the states of slot slots[i] of `aggs`.
  void emit_sessions(int64_t end, const int64_t* starts, const uint32_t* keys, const uint32_t* order,
                     const uint32_t* slots, size_t n, const std::vector<AggStates>& aggs);
  // Reads each aggregate's column at `row` into `out`.
  void read_values(const Batch& batch, int64_t row, std::vector<Value>& out) const;
  // The key columns of a batch of states_schema() at their places in the input's layout, which
  // the key table reads.
  Batch key_view(const Batch& states) const;
  // The string at `row` of a utf8 column (a saved state).
  static std::string_view text_at(const Column& c, int64_t row);
  // Emits the loaded states of the windows before window k (emit() calls it), or of the windows
  // ending at or before `watermark` (a store calls it once it has emitted every window up to it).
  void emit_states_before(int64_t k);
  void emit_states_through(int64_t watermark);

  // save_states() of `sets` instead of the loaded ones.
  Batch save_sets(const std::map<int64_t, WindowSet>& sets, int64_t from_end);

  // Loaded states by window k (load_states); WindowStates folds tuples into them too.
  std::map<int64_t, WindowSet> states_;

  WindowSpec window_;
  int64_t batch_size_;
  KeyTable keys_;
  std::vector<AggStates> prototypes_;

 private:
  void cut_batch();
  void reserve_batch();

  void emit_rows(int64_t k, WindowSet& ws);

  size_t input_columns_;  // the input schema's, for a key batch of its layout (load_states)
  std::shared_ptr<const Schema> out_schema_;
  std::vector<uint32_t> order_;
  std::vector<ColumnBuilder> builders_;
  std::deque<Batch> ready_;
  int64_t emitted_ = 0;
  std::vector<int64_t>* ends_ = nullptr;
};

// The unsliced window store of MQ, MQLF and TuMLSC: one thread adds tuples in the merged order,
// and each tuple updates every window it falls in (size / advance of them).
class WindowAggregate : public WindowOutput {
 public:
  WindowAggregate(const Schema& input, const AggregateQuery& query, int64_t batch_size)
      : WindowOutput(input, query, batch_size), values_(prototypes_.size()) {}

  // One tuple, in the merged order; time is its time. Completes windows ending at or before it.
  void add(const Batch& batch, int64_t row, int64_t time);
  // No tuple earlier than `watermark` will come: completes windows ending at or before it.
  void advance(int64_t watermark);
  // No tuple will come.
  void finish();
  // Checkpoints: every window not yet emitted, its loaded state and the tuples since folded
  // together, as rows of states_schema(); load_states() takes them back into a fresh store.
  Batch save_open();

 private:
  WindowSet* set_for(int64_t k);
  // The first tuple of a new slice at `time`: completes the windows ending at or before it and
  // finds the sets of the windows the slice lies in.
  void enter_slice(int64_t time);

  // Open window sets for k in [base_k_, base_k_ + open_.size()), null where none received a tuple.
  std::deque<std::unique_ptr<WindowSet>> open_;
  int64_t base_k_ = 0;
  std::vector<Value> values_;  // the current tuple's aggregate inputs
  std::vector<std::unique_ptr<WindowSet>> spare_;
  // The current slice [slice_lo_, slice_hi_) (empty before the first tuple and after advance()
  // completed a window). Window starts and ends are slice boundaries, so every tuple of a slice
  // falls in the same windows, whose sets current_ holds in k order, and no window ends inside
  // it: per tuple, a range check replaces the window arithmetic and the per-window lookups.
  int64_t slice_lo_ = 1;
  int64_t slice_hi_ = 0;
  std::vector<WindowSet*> current_;
  std::vector<uint32_t> slots_;        // the tuple's slot in each of current_
  std::vector<AggStates*> states_;     // one aggregate's states in each of current_
};

}  // namespace pao::window
