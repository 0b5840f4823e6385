#pragma once
// The window states a live aggregation keeps for its checkpoints (docs/checkpoints.md, "What a
// snapshot holds"): the rows every input has handed the engine, once they lie before every
// input's promise, folded into one state per (window, key), so that a snapshot and the memory
// kept for it are the size of the open windows' keys, not of their rows.
//
// Why folding early is exact: a row older than every input's promise precedes, in the merged
// order (time, input, position), every row any input can still send. Restored (load_states), such
// a state is therefore folded in before the tuples of the restored run (WindowOutput::emit), as
// the uninterrupted run folded its rows; first and last compare OrderKeys here, since the rows of
// several inputs come in per input, not merged.
//
// One thread at a time: the live aggregation calls it under its own lock.
#include <cstdint>
#include <vector>

#include "window/sessions.h"
#include "window/window_aggregate.h"

namespace pao::window {

class WindowStates : public WindowOutput {
 public:
  WindowStates(const Schema& input, const AggregateQuery& query);
  WindowStates(const WindowStates&) = delete;
  WindowStates& operator=(const WindowStates&) = delete;

  // Folds every row of `batch` (rows of input `input`, in its order, the first being the
  // `first_position`-th row the input handed the engine) into the windows it falls in. The rows'
  // times must be in the query's time bounds (the engine checked them when they were pushed).
  void add(const Batch& batch, uint32_t input, uint64_t first_position);
  // Drops the windows ending before `end`: every row of theirs has left the run.
  void forget_before(int64_t end);

 private:
  // Rows [first, end) of `batch`, all in the current slice: each window's slots for the run, then
  // one loop per aggregate (AggStates::update_rows).
  void fold_run(const Batch& batch, int64_t first, int64_t end, uint32_t input, uint64_t position);

  size_t time_index_;
  // The slice of the last row, [lo_, hi_), and the sets of the windows it lies in (map nodes do
  // not move): the rows of a batch are in time order, so they come in long runs of one slice.
  int64_t lo_ = 1;
  int64_t hi_ = 0;
  std::vector<WindowSet*> current_;
  std::vector<int64_t> times_;  // the run's
  std::vector<uint32_t> ids_;   // the run's key ids
  std::vector<uint32_t> slots_;
};

// Session windows' counterpart: a session depends on the order of its key's tuples, so only the
// rows older than every input's promise are folded, merged by the caller into the merged order
// (time, input, position), into a SessionAggregate. advance(promise) then closes the sessions that
// no row to come can extend; their rows are final, and the caller keeps them until they have left.
// The open sessions are saved and loaded with save_sessions() / load_sessions().
class SessionStates : public SessionAggregate {
 public:
  SessionStates(const Schema& input, const AggregateQuery& query);
  SessionStates(const SessionStates&) = delete;
  SessionStates& operator=(const SessionStates&) = delete;

  // Every row of `batch`, in order (the merged order, after the rows added before).
  void add_all(const Batch& batch);

 private:
  size_t time_index_;
};

}  // namespace pao::window
