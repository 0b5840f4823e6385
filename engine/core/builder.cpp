#include "core/builder.h"

#include <limits>

#include "core/error.h"

namespace pao {

ColumnBuilder::ColumnBuilder(DataType type) : type_(std::move(type)), width_(type_.byte_width()) {
  if (type_.layout() == Layout::kOffsets32 || type_.layout() == Layout::kOffsets64) offsets_.push_back(0);
}

void ColumnBuilder::reserve(int64_t rows) {
  const auto n = static_cast<size_t>(rows);
  switch (type_.layout()) {
    case Layout::kBits:
      values_.reserve(n / 8 + 2);
      break;
    case Layout::kFixed:
      values_.reserve(n * static_cast<size_t>(width_) + 1);
      break;
    default:
      offsets_.reserve(n + 1);
      break;
  }
}

void ColumnBuilder::mark_valid_n(int64_t n) {
  if (nulls_ == 0) {
    size_ += n;
    return;
  }
  for (int64_t i = 0; i < n; ++i) mark_valid();
}

void ColumnBuilder::append_repeat(const void* value, int64_t n) {
  const size_t w = static_cast<size_t>(width_);
  uint8_t* at = append_fixed_n(n);
  if (w == 8) {  // the common case (timestamps, int64, double): a loop the compiler vectorizes
    uint64_t v;
    std::memcpy(&v, value, 8);
    for (int64_t i = 0; i < n; ++i) std::memcpy(at + i * 8, &v, 8);
    return;
  }
  for (int64_t i = 0; i < n; ++i) std::memcpy(at + static_cast<size_t>(i) * w, value, w);
}

void ColumnBuilder::append_null() {
  if (nulls_ == 0) {  // the first null: every earlier value is valid, the bits past them clear
    validity_.assign(static_cast<size_t>((size_ + 7) / 8), 0xFF);
    if ((size_ & 7) != 0) validity_.back() = static_cast<uint8_t>((1u << (size_ & 7)) - 1);
  }
  if ((size_ & 7) == 0) validity_.push_back(0);
  switch (type_.layout()) {
    case Layout::kBits:
      if ((size_ & 7) == 0) values_.push_back(0);
      break;
    case Layout::kFixed:
      values_.resize(values_.size() + static_cast<size_t>(width_), 0);
      break;
    default:
      offsets_.push_back(offsets_.back());
      break;
  }
  ++size_;
  ++nulls_;
}

void ColumnBuilder::append_bool(bool value) {
  if ((size_ & 7) == 0) values_.push_back(0);
  values_.back() |= static_cast<uint8_t>(value) << (size_ & 7);
  mark_valid();
}

void ColumnBuilder::append_string(std::string_view value) {
  data_.insert(data_.end(), value.begin(), value.end());
  offsets_.push_back(static_cast<int64_t>(data_.size()));
  mark_valid();
}

Column ColumnBuilder::finish(std::vector<std::vector<uint8_t>>& owner) {
  Column c;
  c.null_count = nulls_;
  if (nulls_ > 0) {
    owner.push_back(std::move(validity_));
    c.validity = owner.back().data();
  }
  switch (type_.layout()) {
    case Layout::kBits:
    case Layout::kFixed:
      values_.push_back(0);  // never a null data pointer, even for zero rows
      owner.push_back(std::move(values_));
      c.values = owner.back().data();
      break;
    case Layout::kOffsets32: {
      if (offsets_.back() > std::numeric_limits<int32_t>::max()) {
        throw Error(ErrorKind::kInvalidInput, "a string column of the result passes 2 GiB in one batch");
      }
      std::vector<uint8_t> narrow(offsets_.size() * sizeof(int32_t));
      auto* o = reinterpret_cast<int32_t*>(narrow.data());
      for (size_t i = 0; i < offsets_.size(); ++i) o[i] = static_cast<int32_t>(offsets_[i]);
      owner.push_back(std::move(narrow));
      c.values = owner.back().data();
      break;
    }
    case Layout::kOffsets64: {
      std::vector<uint8_t> wide(offsets_.size() * sizeof(int64_t));
      std::memcpy(wide.data(), offsets_.data(), wide.size());
      owner.push_back(std::move(wide));
      c.values = owner.back().data();
      break;
    }
  }
  if (type_.layout() == Layout::kOffsets32 || type_.layout() == Layout::kOffsets64) {
    data_.push_back(0);
    owner.push_back(std::move(data_));
    c.data = owner.back().data();
  }
  *this = ColumnBuilder(type_);
  return c;
}

Batch finish_batch(std::shared_ptr<const Schema> schema, std::vector<ColumnBuilder>& builders) {
  auto owner = std::make_shared<std::vector<std::vector<uint8_t>>>();
  owner->reserve(builders.size() * 3);  // no reallocation: columns point into the vectors' data
  const int64_t rows = builders.empty() ? 0 : builders[0].size();
  std::vector<Column> columns;
  columns.reserve(builders.size());
  for (ColumnBuilder& b : builders) columns.push_back(b.finish(*owner));
  return Batch(std::move(schema), rows, std::move(columns), std::move(owner));
}

}  // namespace pao
