#pragma once
// Reading and validating one input's time column, batch by batch: the checks every way into the
// engine shares (merge, T-Gate producers, the push API), so their errors read the same.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/batch.h"

namespace pao::gate {

// What every multi-input operator checks first: input 0 has the time column, of a temporal type,
// and every other input has input 0's names and types (the error names the input and the
// difference). The schema to read with is input 0's, nullable wherever any input's is.
struct InputsSchema {
  std::shared_ptr<const Schema> schema;
  size_t time_index;
};
InputsSchema check_input_schemas(const std::vector<std::shared_ptr<const Schema>>& schemas,
                                 const std::string& time_column);

// The time of every row of `batch` (its column `index`, of `type`) as int64: 32-bit columns are
// widened into `widened` (valid until its next use). Throws kNullTime naming `label`, `column` and
// the row, counted from `first_row`.
const int64_t* read_times(const Batch& batch, size_t index, const DataType& type, std::vector<int64_t>& widened,
                          const std::string& label, const std::string& column, int64_t first_row);

class InputTimes {
 public:
  InputTimes(uint32_t input, std::string column, size_t column_index, DataType type)
      : input_(input), label_("input " + std::to_string(input)), column_(std::move(column)),
        index_(column_index), type_(std::move(type)) {}
  // Errors name the input `label` ("union's input 1", "the join's right input") instead.
  InputTimes(uint32_t input, std::string label, std::string column, size_t column_index, DataType type)
      : input_(input), label_(std::move(label)), column_(std::move(column)), index_(column_index),
        type_(std::move(type)) {}

  // The time of every row of `batch` as int64 (32-bit columns widened into an internal buffer,
  // valid until the next call). Throws kNullTime or kUnsorted naming the input, the row (counted
  // across this input's batches) and the values, before the caller uses any row; on success the
  // rows count as delivered.
  const int64_t* read(const Batch& batch);
  // A promise that nothing earlier than `time` follows. Throws kUnsorted if it goes back before
  // an earlier heartbeat.
  void heartbeat(int64_t time);

  // Times outside [lo, hi] are refused from now on (kInvalidInput naming the input, row and
  // value, then "outside the times " + why): a windowed aggregate's windows must fit the time
  // column's range (window::time_bounds_for).
  void limit(int64_t lo, int64_t hi, std::string why) {
    lo_ = lo;
    hi_ = hi;
    why_ = std::move(why);
  }

  size_t column_index() const noexcept { return index_; }
  int64_t rows() const noexcept { return rows_; }
  // The least time the input may still deliver.
  int64_t floor() const noexcept { return floor_; }
  uint32_t input() const noexcept { return input_; }
  const DataType& type() const noexcept { return type_; }

 private:
  [[noreturn]] void unsorted(int64_t row, int64_t value, int64_t previous, bool heartbeat) const;

  uint32_t input_;
  std::string label_;
  std::string column_;
  size_t index_;
  DataType type_;
  [[noreturn]] void out_of_range(const int64_t* t, int64_t n) const;

  int64_t lo_ = INT64_MIN;
  int64_t hi_ = INT64_MAX;
  std::string why_;
  int64_t rows_ = 0;
  int64_t floor_ = INT64_MIN;
  int64_t last_ = INT64_MIN;       // time of the last row, if rows_ > 0
  int64_t heartbeat_ = INT64_MIN;  // last heartbeat
  std::vector<int64_t> widened_;
};

}  // namespace pao::gate
