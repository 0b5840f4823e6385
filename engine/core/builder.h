#pragma once
// Building new columns value by value (aggregate results, key columns), for batches the engine
// creates from scratch. gather() is the bulk path for copying rows of existing batches.
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string_view>
#include <vector>

#include "core/batch.h"

namespace pao {

class ColumnBuilder {
 public:
  explicit ColumnBuilder(DataType type);

  const DataType& type() const noexcept { return type_; }
  int64_t size() const noexcept { return size_; }

  // Room for `rows` values (and the terminator finish() adds) without reallocating: a builder
  // that is filled to a known batch size reserves once, so values are written once and not
  // copied again as the vectors double.
  void reserve(int64_t rows);
  void append_null();
  // Fixed layout: the low byte_width() bytes of `value` (little-endian), so a caller holding an
  // int64 writes an int32 column by passing the int64's address.
  void append_fixed(const void* value) {
    std::memcpy(values_.grow_by(static_cast<size_t>(width_)), value, static_cast<size_t>(width_));
    mark_valid();
  }
  // Fixed layout: `n` valid values, written by the caller into the n * byte_width() bytes at the
  // returned pointer (valid until the next append). The bulk path of emitting a window's rows.
  uint8_t* append_fixed_n(int64_t n) {
    uint8_t* at = values_.grow_by(static_cast<size_t>(n * width_));
    mark_valid_n(n);
    return at;
  }
  // Fixed layout: `n` copies of `value`.
  void append_repeat(const void* value, int64_t n);
  // Fixed layout: value `row` (< size()) becomes null, its bytes zero. With append_fixed_n, the
  // bulk path of a column whose nulls are rare (a running sum over a key's null values so far).
  void set_null(int64_t row);
  void append_bool(bool value);
  void append_string(std::string_view value);

  // Moves the values into `memory` and returns a column over them; the builder is empty after.
  Column finish(BatchMemory& memory);

 private:
  // The validity bitmap exists only once a null was appended (nulls_ > 0): until then every
  // value is valid and appends do not touch it.
  void mark_valid() {
    if (nulls_ > 0) {
      if ((size_ & 7) == 0) validity_.push_back(0);
      validity_.back() |= static_cast<uint8_t>(1u << (size_ & 7));
    }
    ++size_;
  }
  void mark_valid_n(int64_t n);

  DataType type_;
  int width_;
  int64_t size_ = 0;
  int64_t nulls_ = 0;
  Buffer validity_;
  Buffer values_;                 // fixed values or bool bits
  std::vector<int64_t> offsets_;  // strings (narrowed to int32 by finish() for utf8)
  Buffer data_;                   // string bytes
};

// One empty builder per type, in order (a braced list of builders would copy them, and a builder
// owns its buffers, so it only moves).
std::vector<ColumnBuilder> builders_of(std::initializer_list<DataType> types);

// A batch of `schema` with no rows (its columns valid, empty buffers).
Batch empty_batch(std::shared_ptr<const Schema> schema);

// A batch of `schema` from one builder per field, all of the same size, owning their memory.
Batch finish_batch(std::shared_ptr<const Schema> schema, std::vector<ColumnBuilder>& builders);

}  // namespace pao
