#include "core/batch.h"

#include <cstring>
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

void Buffer::reallocate(size_t capacity) {
  // aligned_alloc wants a multiple of the alignment; one spare line also makes size 0 valid, so a
  // column's data pointer is never null, even for zero rows.
  const size_t rounded = (capacity + 64) & ~size_t{63};
  auto* fresh = static_cast<uint8_t*>(std::aligned_alloc(64, rounded));
  if (fresh == nullptr) throw std::bad_alloc();
  if (size_ > 0) std::memcpy(fresh, data_.get(), size_);
  data_.reset(fresh);
  capacity_ = rounded;
}

}  // namespace pao
