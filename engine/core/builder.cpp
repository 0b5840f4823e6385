#include "core/builder.h"

#include <limits>

#include "core/bits.h"
#include "core/error.h"

namespace pao {

ColumnBuilder::ColumnBuilder(DataType type) : type_(std::move(type)), width_(type_.byte_width()) {
  if (is_string(type_.id)) offsets_.push_back(0);
}

void ColumnBuilder::reserve(int64_t rows) {
  const auto n = static_cast<size_t>(rows);
  switch (type_.layout()) {
    case Layout::kBits:
      values_.reserve(n / 8 + 1);
      break;
    case Layout::kFixed:
      values_.reserve(n * static_cast<size_t>(width_));
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

void ColumnBuilder::set_null(int64_t row) {
  if (nulls_ == 0) {  // the first null: every value so far is valid
    validity_.resize(static_cast<size_t>(bitmap_bytes(size_)));
    std::memset(validity_.data(), 0xFF, validity_.size());
    if ((size_ & 7) != 0) validity_.back() = static_cast<uint8_t>((1u << (size_ & 7)) - 1);
  }
  if (get_bit(validity_.data(), row)) {
    validity_.data()[row >> 3] &= static_cast<uint8_t>(~(1u << (row & 7)));
    ++nulls_;
  }
  std::memset(values_.data() + row * width_, 0, static_cast<size_t>(width_));
}

void ColumnBuilder::append_null() {
  if (nulls_ == 0) {  // the first null: every earlier value is valid, the bits past them clear
    validity_.resize(static_cast<size_t>(bitmap_bytes(size_)));
    std::memset(validity_.data(), 0xFF, validity_.size());
    if ((size_ & 7) != 0) validity_.back() = static_cast<uint8_t>((1u << (size_ & 7)) - 1);
  }
  if ((size_ & 7) == 0) validity_.push_back(0);
  switch (type_.layout()) {
    case Layout::kBits:
      if ((size_ & 7) == 0) values_.push_back(0);
      break;
    case Layout::kFixed:
      std::memset(values_.grow_by(static_cast<size_t>(width_)), 0, static_cast<size_t>(width_));
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
  if (!value.empty()) std::memcpy(data_.grow_by(value.size()), value.data(), value.size());
  offsets_.push_back(static_cast<int64_t>(data_.size()));
  mark_valid();
}

Column ColumnBuilder::finish(BatchMemory& memory) {
  Column c;
  c.null_count = nulls_;
  if (nulls_ > 0) c.validity = memory.add(std::move(validity_));
  switch (type_.layout()) {
    case Layout::kBits:
    case Layout::kFixed:
      c.values = memory.add(std::move(values_));  // never null, even for zero rows (Buffer)
      break;
    case Layout::kOffsets32: {
      if (offsets_.back() > std::numeric_limits<int32_t>::max()) {
        throw Error(ErrorKind::kInvalidInput, "a string column of the result passes 2 GiB in one batch");
      }
      auto* o = reinterpret_cast<int32_t*>(memory.allocate(offsets_.size() * sizeof(int32_t)));
      for (size_t i = 0; i < offsets_.size(); ++i) o[i] = static_cast<int32_t>(offsets_[i]);
      c.values = o;
      break;
    }
    case Layout::kOffsets64: {
      uint8_t* o = memory.allocate(offsets_.size() * sizeof(int64_t));
      std::memcpy(o, offsets_.data(), offsets_.size() * sizeof(int64_t));
      c.values = o;
      break;
    }
  }
  if (is_string(type_.id)) c.data = memory.add(std::move(data_));
  *this = ColumnBuilder(type_);
  return c;
}

std::vector<ColumnBuilder> builders_of(std::initializer_list<DataType> types) {
  std::vector<ColumnBuilder> out;
  out.reserve(types.size());
  for (const DataType& t : types) out.emplace_back(t);
  return out;
}

Batch empty_batch(std::shared_ptr<const Schema> schema) {
  std::vector<ColumnBuilder> builders;
  builders.reserve(schema->fields.size());
  for (const Field& f : schema->fields) builders.emplace_back(f.type);
  return finish_batch(std::move(schema), builders);
}

Batch finish_batch(std::shared_ptr<const Schema> schema, std::vector<ColumnBuilder>& builders) {
  auto memory = std::make_shared<BatchMemory>();
  const int64_t rows = builders.empty() ? 0 : builders[0].size();
  std::vector<Column> columns;
  columns.reserve(builders.size());
  for (ColumnBuilder& b : builders) columns.push_back(b.finish(*memory));
  return Batch(std::move(schema), rows, std::move(columns), std::move(memory));
}

}  // namespace pao
