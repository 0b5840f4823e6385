#include "window/window_states.h"

#include <tuple>

namespace pao::window {

WindowStates::WindowStates(const Schema& input, const AggregateQuery& query)
    : WindowOutput(input, query, 1), time_index_(*input.find(query.time_column)) {}

void WindowStates::add(const Batch& batch, uint32_t input, uint64_t first_position) {
  for (int64_t row = 0, n = batch.num_rows(); row < n;) {
    const int64_t time = time_at(batch, time_index_, row);
    if (time < lo_ || time >= hi_) {
      std::tie(lo_, hi_) = window_.slice_range(window_.slice_of(time));
      current_.clear();
      for (int64_t k = window_.first_k(time); k <= window_.last_k(time); ++k) current_.push_back(&states_[k]);
    }
    times_.clear();
    int64_t end = row;
    for (int64_t t; end < n && (t = time_at(batch, time_index_, end)) >= lo_ && t < hi_; ++end) times_.push_back(t);
    if (!current_.empty()) fold_run(batch, row, end, input, first_position + static_cast<uint64_t>(row));
    row = end;  // (an empty current_: the run lies in a gap between windows)
  }
}

void WindowStates::fold_run(const Batch& batch, int64_t first, int64_t end, uint32_t input, uint64_t position) {
  const auto n = static_cast<size_t>(end - first);
  ids_.resize(n);
  for (size_t i = 0; i < n; ++i) ids_[i] = keys_.id(batch, first + static_cast<int64_t>(i));
  slots_.resize(n);
  for (WindowSet* ws : current_) {
    for (size_t i = 0; i < n; ++i) slots_[i] = ws->slot(ids_[i], prototypes_);
    for (AggStates& a : ws->aggs) a.update_rows(slots_.data(), batch, first, n, times_.data(), input, position);
  }
}

void WindowStates::forget_before(int64_t end) {
  bool forgot = false;
  while (!states_.empty() && window_.end(states_.begin()->first) < end) {
    states_.erase(states_.begin());
    forgot = true;
  }
  if (forgot) {  // current_ may point at erased sets
    lo_ = 1;
    hi_ = 0;
    current_.clear();
  }
}

SessionStates::SessionStates(const Schema& input, const AggregateQuery& query)
    : SessionAggregate(input, query, INT64_MAX), time_index_(*input.find(query.time_column)) {}

void SessionStates::add_all(const Batch& batch) {
  for (int64_t row = 0; row < batch.num_rows(); ++row) add(batch, row, time_at(batch, time_index_, row));
}

}  // namespace pao::window
