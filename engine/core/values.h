#pragma once
// Reading one value of a column, for the operators that look at a value at a time (keys, hashes,
// per-key state). The vectorized kernels (expressions, gather) read whole buffers instead.
// Validity is never checked here: callers ask Column::is_valid first.
#include <cstdint>
#include <cstring>
#include <string_view>

#include "core/batch.h"
#include "core/bits.h"
#include "core/types.h"

namespace pao {

// The value at `row` of a fixed-width column as its raw bytes in the low byte_width() bytes
// (little-endian, upper bytes zero), or of a bool column as 0 or 1.
inline uint64_t raw_bits(const Column& c, const DataType& type, int64_t row) noexcept {
  const int64_t i = c.offset + row;
  if (type.layout() == Layout::kBits) return get_bit(static_cast<const uint8_t*>(c.values), i);
  // One fixed-size load per width: a memcpy of a run-time width is a library call per value,
  // which was most of the time of reading a row's time in the keyed operators.
  const auto* p = static_cast<const uint8_t*>(c.values);
  switch (type.byte_width()) {
    case 8: { uint64_t v; std::memcpy(&v, p + i * 8, 8); return v; }
    case 4: { uint32_t v; std::memcpy(&v, p + i * 4, 4); return v; }
    case 2: { uint16_t v; std::memcpy(&v, p + i * 2, 2); return v; }
    default: return p[i];
  }
}

// raw_bits() of a signed integer or temporal column, sign-extended to int64.
inline int64_t signed_at(const Column& c, const DataType& type, int64_t row) noexcept {
  const int shift = 64 - 8 * type.byte_width();
  return static_cast<int64_t>(raw_bits(c, type, row) << shift) >> shift;
}

// The bytes of a utf8 or large_utf8 value.
inline std::string_view string_at(const Column& c, const DataType& type, int64_t row) noexcept {
  const int64_t i = c.offset + row;
  int64_t begin, end;
  if (type.layout() == Layout::kOffsets64) {
    begin = static_cast<const int64_t*>(c.values)[i];
    end = static_cast<const int64_t*>(c.values)[i + 1];
  } else {
    begin = static_cast<const int32_t*>(c.values)[i];
    end = static_cast<const int32_t*>(c.values)[i + 1];
  }
  return {reinterpret_cast<const char*>(c.data) + begin, static_cast<size_t>(end - begin)};
}

}  // namespace pao
