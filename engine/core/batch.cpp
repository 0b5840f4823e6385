#include "core/batch.h"

#include <new>

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

Buffer::Buffer(size_t size) : size_(size) {
  // aligned_alloc wants a multiple of the alignment; one spare line also makes size 0 valid.
  const size_t rounded = (size + 64) & ~size_t{63};
  data_.reset(static_cast<uint8_t*>(std::aligned_alloc(64, rounded)));
  if (!data_) throw std::bad_alloc();
}

}  // namespace pao
