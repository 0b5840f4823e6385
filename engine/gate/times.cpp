#include "gate/times.h"

#include <algorithm>
#include <optional>

#include "core/error.h"

namespace pao::gate {

InputsSchema check_input_schemas(const std::vector<std::shared_ptr<const Schema>>& schemas,
                                 const std::string& time_column) {
  if (schemas.empty()) throw Error(ErrorKind::kInvalidInput, "at least one input is needed");
  const Schema& first = *schemas[0];
  std::optional<size_t> time = first.find(time_column);
  if (!time) {
    throw Error(ErrorKind::kInvalidInput, "time column '" + time_column +
                                              "' not found in input 0; its columns are: " + first.to_string());
  }
  const DataType& type = first.fields[*time].type;
  if (!type.is_temporal_key()) {
    throw Error(ErrorKind::kInvalidInput, "time column '" + time_column + "' of input 0 has type " +
                                              type.to_string() +
                                              "; expected a timestamp, date32, int32 or int64 column");
  }
  Schema merged = first;
  for (size_t i = 1; i < schemas.size(); ++i) {
    const Schema& other = *schemas[i];
    if (auto diff = schema_difference(first, other)) {
      throw Error(ErrorKind::kSchemaMismatch, "input " + std::to_string(i) + " does not match input 0: " + *diff);
    }
    for (size_t f = 0; f < merged.fields.size(); ++f) {
      merged.fields[f].nullable = merged.fields[f].nullable || other.fields[f].nullable;
    }
  }
  return {std::make_shared<const Schema>(std::move(merged)), *time};
}

const int64_t* read_times(const Batch& batch, size_t index, const DataType& type, std::vector<int64_t>& widened,
                          const std::string& label, const std::string& column, int64_t first_row) {
  const int64_t n = batch.num_rows();
  const Column& col = batch.column(index);
  if (col.may_have_nulls()) {
    for (int64_t r = 0; r < n; ++r) {
      if (!col.is_valid(r)) {
        throw Error(ErrorKind::kNullTime, label + " has a null time in column '" + column + "' at row " +
                                              std::to_string(first_row + r));
      }
    }
  }
  if (type.byte_width() == 8) return col.typed<int64_t>();
  const int32_t* narrow = col.typed<int32_t>();
  widened.assign(narrow, narrow + n);
  return widened.data();
}

const int64_t* InputTimes::read(const Batch& batch) {
  const int64_t n = batch.num_rows();
  const int64_t* t = read_times(batch, index_, type_, widened_, label_, column_, rows_);
  if (n == 0) return t;
  if (t[0] < floor_) unsorted(rows_, t[0], floor_, rows_ == 0 || heartbeat_ > last_);
  // Branch-free over chunks (so the compiler can vectorise it); the exact row is looked for only
  // in a chunk that fails.
  constexpr int64_t kChunk = 4096;
  for (int64_t from = 1; from < n; from += kChunk) {
    const int64_t to = std::min(n, from + kChunk);
    bool bad = false;
    for (int64_t r = from; r < to; ++r) bad |= t[r] < t[r - 1];
    if (bad) {
      for (int64_t r = from; r < to; ++r) {
        if (t[r] < t[r - 1]) unsorted(rows_ + r, t[r], t[r - 1], false);
      }
    }
  }
  if (t[0] < lo_ || t[n - 1] > hi_) out_of_range(t, n);  // sorted: the ends are the least and greatest
  rows_ += n;
  last_ = t[n - 1];
  floor_ = last_;
  return t;
}

void InputTimes::heartbeat(int64_t time) {
  if (time < heartbeat_) {
    throw Error(ErrorKind::kUnsorted,
                label_ + " sent a heartbeat at " +
                    format_time_value(time, type_) + ", earlier than its previous heartbeat at " +
                    format_time_value(heartbeat_, type_) + "; heartbeats must not go back");
  }
  heartbeat_ = time;
  floor_ = std::max(floor_, time);
}

void InputTimes::out_of_range(const int64_t* t, int64_t n) const {
  int64_t r = 0;
  if (t[0] >= lo_) r = std::upper_bound(t, t + n, hi_) - t;
  throw Error(ErrorKind::kInvalidInput,
              label_ + " has " + format_time_value(t[r], type_) + " in '" + column_ +
                  "' at row " + std::to_string(rows_ + r) + ", outside the times " + why_);
}

void InputTimes::unsorted(int64_t row, int64_t value, int64_t previous, bool heartbeat) const {
  std::string message = label_ + " is not sorted by '" + column_ +
                        "': row " + std::to_string(row) + " has " + format_time_value(value, type_);
  if (heartbeat) {
    message += ", earlier than its heartbeat at " + format_time_value(previous, type_);
  } else {
    message += ", earlier than " + format_time_value(previous, type_) + " at row " + std::to_string(row - 1);
  }
  throw Error(ErrorKind::kUnsorted, message);
}

}  // namespace pao::gate
