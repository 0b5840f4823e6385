#pragma once
// Session windows (issue 31; `window=po.session(gap)`): per key, a session is a maximal run of
// the key's tuples, in the merged order, each at most `gap` after the one before (the rule of the
// pipelines' sessionize: a tuple more than `gap` after its key's previous one opens a new
// session). One row per session: window_start = its first tuple's time, window_end = its last
// tuple's time + gap, the key columns, every aggregate.
//
// A session is final once no tuple can extend it: when the stream's watermark (every later tuple
// is at least it) passes window_end. Rows leave in window_end order, keys ascending for equal
// ends, as soon as the watermark proves them final, not at the end of the input; so the output is
// all sessions sorted by (window_end, key), whatever the batches, threads and timing.
//
// Fed by one thread in the merged order, like WindowAggregate: the designs whose one updater
// sees every tuple in that order (MQ, MQLF, TuMLSC) take it. The W-Hive's designs (sliced,
// TuMLMC, WiML) place a tuple in windows by its time alone, and a session depends on its key's
// earlier tuples, so they refuse sessions (WindowOutput's constructor).
#include <cstdint>
#include <queue>
#include <utility>
#include <vector>

#include "window/window_aggregate.h"

namespace pao::window {

// The times a session aggregate takes from a time column of `type`: a session's end (last time +
// gap) must fit the column's range.
TimeBounds session_time_bounds(int64_t gap, const DataType& type);

class SessionAggregate : public WindowOutput {
 public:
  // query.session_gap must be set (>= 0).
  SessionAggregate(const Schema& input, const AggregateQuery& query, int64_t batch_size);

  // One tuple, in the merged order; completes the sessions it proves final (their end is below
  // `time`).
  void add(const Batch& batch, int64_t row, int64_t time);
  // No tuple earlier than `watermark` will come: completes the sessions ending below it.
  void advance(int64_t watermark);
  // No tuple will come.
  void finish() { advance(INT64_MAX); }

  int64_t open_sessions() const noexcept { return open_count_; }

  // Checkpoints (docs/checkpoints.md): the open sessions as rows of states_schema()
  // (window_start = the first time, window_end = the last time + gap), keys in output order; and
  // loading them back, before any tuple: every tuple they stand for precedes, in the merged
  // order, every tuple added afterwards. Loading refuses rows that do not fit (kInvalidInput).
  Batch save_sessions();
  void load_sessions(const Batch& states);

 private:
  uint32_t slot_of(uint32_t key);  // the key's slot, the per-slot arrays grown to hold it

  int64_t gap_;
  // Every key's state lives in one set: its slot is its session's aggregate states, reset when the
  // session closes and reused by the key's next one.
  WindowSet table_;
  std::vector<int64_t> start_;  // by slot: the open session's first time
  std::vector<int64_t> last_;   // by slot: its last time
  std::vector<uint8_t> open_;   // by slot: 1 while a session is open
  int64_t open_count_ = 0;
  // Open sessions by end, earliest first: (end, slot). One entry per open session; an entry whose
  // session has grown since (its end moved later) is pushed again with the new end when it comes
  // up, so the heap holds at most one entry per open session.
  using Entry = std::pair<int64_t, uint32_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> ends_;
  std::vector<Value> values_;
  // Closing: the sessions of one end, as key ids and slots, sorted into key order.
  std::vector<uint32_t> closing_keys_;
  std::vector<uint32_t> closing_slots_;
  std::vector<uint32_t> order_;
  std::vector<uint32_t> sorted_slots_;
  std::vector<int64_t> starts_;
};

}  // namespace pao::window
