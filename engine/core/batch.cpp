#include "core/batch.h"

#include <cstring>
#include <new>
#include <string>

#include "core/buffer_pool.h"
#include "core/error.h"

namespace pao {

Batch Batch::slice(int64_t start, int64_t length) const {
  std::vector<Column> columns = columns_;
  const bool whole = start == 0 && length == num_rows_;
  for (Column& c : columns) {
    c.offset += start;
    // A slice keeps a known count only when it is zero (no nulls anywhere) or the slice is whole.
    if (!whole && c.null_count > 0) c.null_count = -1;
  }
  return Batch(schema_, length, std::move(columns), owner_);
}

void Buffer::reallocate(size_t capacity) {
  // aligned_alloc wants a multiple of the alignment; one spare line also makes size 0 valid, so a
  // column's data pointer is never null, even for zero rows.
  const size_t rounded = (capacity + 64) & ~size_t{63};
  size_t usable = 0;
  uint8_t* fresh = pool_allocate(rounded, &usable);
  if (size_ > 0) std::memcpy(fresh, data_.get(), size_);
  data_ = std::unique_ptr<uint8_t, Free>(fresh, Free{usable});
  capacity_ = usable;
}

Batch side_by_side(std::shared_ptr<const Schema> schema, const Batch& left, const Batch& right) {
  if (left.num_rows() != right.num_rows()) {
    throw Error(ErrorKind::kUsage, "side_by_side: " + std::to_string(left.num_rows()) + " rows beside " +
                                       std::to_string(right.num_rows()));
  }
  auto owner = std::make_shared<BatchMemory>();
  owner->share(left.owner());
  owner->share(right.owner());
  std::vector<Column> columns;
  columns.reserve(left.num_columns() + right.num_columns());
  for (size_t c = 0; c < left.num_columns(); ++c) columns.push_back(left.column(c));
  for (size_t c = 0; c < right.num_columns(); ++c) columns.push_back(right.column(c));
  return Batch(std::move(schema), left.num_rows(), std::move(columns), std::move(owner));
}

}  // namespace pao
