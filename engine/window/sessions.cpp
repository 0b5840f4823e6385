#include "window/sessions.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "core/error.h"

namespace pao::window {
namespace {

// A session's end, saturating at the top of the int64 range (the time bounds keep it inside the
// column's range wherever inputs are checked against them).
int64_t end_of(int64_t last, int64_t gap) noexcept { return last > INT64_MAX - gap ? INT64_MAX : last + gap; }

}  // namespace

TimeBounds session_time_bounds(int64_t gap, const DataType& type) {
  const bool wide = type.byte_width() == 8;
  const int64_t lo = wide ? INT64_MIN : INT32_MIN;
  const int64_t hi = static_cast<int64_t>(__int128{wide ? INT64_MAX : INT32_MAX} - gap);
  return {lo, hi,
          "whose sessions end (last time + gap " + std::to_string(gap) + ") inside the column's range, " +
              format_time_value(lo, type) + " to " + format_time_value(hi, type)};
}

SessionAggregate::SessionAggregate(const Schema& input, const AggregateQuery& query, int64_t batch_size)
    : WindowOutput(input, query, batch_size, true), gap_(query.session_gap.value_or(-1)), values_(prototypes_.size()) {
  if (!query.session_gap) throw Error(ErrorKind::kInvalidInput, "a session aggregate needs a session gap");
}

uint32_t SessionAggregate::slot_of(uint32_t key) {
  const uint32_t slot = table_.slot(key, prototypes_);
  if (slot >= open_.size()) {
    open_.resize(slot + 1, 0);
    start_.resize(slot + 1);
    last_.resize(slot + 1);
  }
  return slot;
}

Batch SessionAggregate::save_sessions() {
  const std::shared_ptr<const Schema> schema = states_schema();
  std::vector<ColumnBuilder> out;
  for (const Field& f : schema->fields) out.emplace_back(f.type);
  std::vector<uint32_t> keys, slots;
  for (uint32_t slot = 0; slot < open_.size(); ++slot) {
    if (open_[slot]) {
      keys.push_back(table_.keys[slot]);
      slots.push_back(slot);
    }
  }
  std::vector<uint32_t> order(keys.size());
  std::iota(order.begin(), order.end(), uint32_t{0});
  keys_.sort(keys.data(), order);
  keys_.append_each(keys.data(), order.data(), order.size(), out, 2);
  const size_t first_agg = 2 + keys_.columns().size();
  for (uint32_t i : order) {
    const uint32_t slot = slots[i];
    const int64_t end = end_of(last_[slot], gap_);
    out[0].append_fixed(&start_[slot]);  // the low bytes: int32 columns too
    out[1].append_fixed(&end);
    for (size_t a = 0; a < table_.aggs.size(); ++a) out[first_agg + a].append_string(table_.aggs[a].save(slot));
  }
  return finish_batch(schema, out);
}

void SessionAggregate::load_sessions(const Batch& states) {
  const std::shared_ptr<const Schema> want = states_schema();
  if (auto diff = schema_difference(*want, *states.schema())) {
    throw Error(ErrorKind::kInvalidInput, "the saved sessions do not fit this query: " + *diff);
  }
  const size_t nkeys = keys_.columns().size();
  const Batch keys = key_view(states);
  for (int64_t row = 0; row < states.num_rows(); ++row) {
    const int64_t start = time_at(states, 0, row);
    const int64_t end = time_at(states, 1, row);
    const auto refuse = [&](const std::string& why) {
      throw Error(ErrorKind::kInvalidInput, "saved session " + std::to_string(row) + " (" + std::to_string(start) +
                                                " to " + std::to_string(end) + ") " + why);
    };
    if (end - gap_ < start) refuse("ends before its start and the gap");
    const uint32_t slot = slot_of(keys_.id(keys, row));
    if (open_[slot]) refuse("repeats a key of an earlier row");
    for (size_t a = 0; a < table_.aggs.size(); ++a) {
      if (!table_.aggs[a].load(slot, text_at(states.column(2 + nkeys + a), row))) {
        refuse("has a malformed state of aggregate '" + want->fields[2 + nkeys + a].name + "'");
      }
    }
    open_[slot] = 1;
    start_[slot] = start;
    last_[slot] = end - gap_;
    ++open_count_;
    ends_.push({end, slot});
  }
}

void SessionAggregate::add(const Batch& batch, int64_t row, int64_t time) {
  // Every later tuple is at least `time`: a session ending below it can grow no more.
  advance(time);
  const uint32_t slot = slot_of(keys_.id(batch, row));
  // Open: this tuple is at most `gap` after the session's last one (advance() closed it otherwise).
  if (!open_[slot]) {
    open_[slot] = 1;
    start_[slot] = time;
    ++open_count_;
    ends_.push({end_of(time, gap_), slot});
  }
  last_[slot] = time;
  read_values(batch, row, values_);
  for (size_t a = 0; a < prototypes_.size(); ++a) table_.aggs[a].update(slot, values_[a]);
}

void SessionAggregate::advance(int64_t watermark) {
  while (!ends_.empty() && ends_.top().first < watermark) {
    const int64_t end = ends_.top().first;
    closing_keys_.clear();
    closing_slots_.clear();
    while (!ends_.empty() && ends_.top().first == end) {
      const uint32_t slot = ends_.top().second;
      ends_.pop();
      const int64_t now = end_of(last_[slot], gap_);
      if (now != end) {  // grew since it was pushed: it comes up again at its new end
        ends_.push({now, slot});
        continue;
      }
      closing_keys_.push_back(table_.keys[slot]);
      closing_slots_.push_back(slot);
    }
    const size_t n = closing_slots_.size();
    if (n == 0) continue;
    // One window set: the sessions ending here, keys ascending.
    order_.resize(n);
    std::iota(order_.begin(), order_.end(), uint32_t{0});
    keys_.sort(closing_keys_.data(), order_);
    sorted_slots_.resize(n);
    starts_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      sorted_slots_[i] = closing_slots_[order_[i]];
      starts_[i] = start_[sorted_slots_[i]];
    }
    emit_sessions(end, starts_.data(), closing_keys_.data(), order_.data(), sorted_slots_.data(), n, table_.aggs);
    for (uint32_t slot : closing_slots_) {
      for (AggStates& a : table_.aggs) a.reset(slot);
      open_[slot] = 0;
    }
    open_count_ -= static_cast<int64_t>(n);
  }
}

}  // namespace pao::window
