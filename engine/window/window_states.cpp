#include "window/window_states.h"

#include <tuple>

namespace pao::window {

WindowStates::WindowStates(const Schema& input, const AggregateQuery& query)
    : WindowOutput(input, query, 1), time_index_(*input.find(query.time_column)), values_(prototypes_.size()) {}

void WindowStates::add(const Batch& batch, uint32_t input, uint64_t first_position) {
  const Column& times = batch.column(time_index_);
  const bool wide = batch.schema()->fields[time_index_].type.byte_width() == 8;
  for (int64_t row = 0; row < batch.num_rows(); ++row) {
    const int64_t time = wide ? times.typed<int64_t>()[row] : times.typed<int32_t>()[row];
    if (time < lo_ || time >= hi_) {
      std::tie(lo_, hi_) = window_.slice_range(window_.slice_of(time));
      current_.clear();
      for (int64_t k = window_.first_k(time); k <= window_.last_k(time); ++k) current_.push_back(&states_[k]);
      slots_.resize(current_.size());
      column_.resize(current_.size());
    }
    if (current_.empty()) continue;  // in a gap between windows
    const uint32_t key = keys_.id(batch, row);
    read_values(batch, row, values_);
    const OrderKey at = OrderKey::of(time, input, first_position + static_cast<uint64_t>(row));
    for (size_t i = 0; i < current_.size(); ++i) slots_[i] = current_[i]->slot(key, prototypes_);
    for (size_t a = 0; a < prototypes_.size(); ++a) {
      for (size_t i = 0; i < current_.size(); ++i) column_[i] = &current_[i]->aggs[a];
      AggStates::update_each(column_.data(), slots_.data(), current_.size(), values_[a], at);
    }
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

size_t WindowStates::entries() const noexcept {
  size_t n = 0;
  for (const auto& [k, ws] : states_) n += ws.keys.size();
  return n;
}

SessionStates::SessionStates(const Schema& input, const AggregateQuery& query)
    : SessionAggregate(input, query, INT64_MAX), time_index_(*input.find(query.time_column)) {}

void SessionStates::add_all(const Batch& batch) {
  const Column& times = batch.column(time_index_);
  const bool wide = batch.schema()->fields[time_index_].type.byte_width() == 8;
  for (int64_t row = 0; row < batch.num_rows(); ++row) {
    add(batch, row, wide ? times.typed<int64_t>()[row] : times.typed<int32_t>()[row]);
  }
}

}  // namespace pao::window
