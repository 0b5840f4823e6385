#include "core/gather.h"

#include <cstring>
#include <limits>

#include "core/error.h"

namespace pao {
namespace {

inline bool get_bit(const uint8_t* bits, int64_t i) noexcept { return (bits[i >> 3] >> (i & 7)) & 1; }
inline void set_bit(uint8_t* bits, int64_t i, bool v) noexcept {
  // Destination bytes start zeroed, so setting is enough.
  bits[i >> 3] |= static_cast<uint8_t>(v) << (i & 7);
}

// The memory of one built batch: its buffers live exactly as long as this does.
struct OwnedBuffers {
  std::vector<Buffer> buffers;
  uint8_t* add(size_t size, bool zeroed) {
    buffers.emplace_back(size);
    if (zeroed) std::memset(buffers.back().data(), 0, size);
    return buffers.back().data();
  }
};

template <class T>
void gather_fixed(std::span<const Batch> sources, std::span<const Segment> segments, size_t col,
                  T* out) {
  for (const Segment& s : segments) {
    const T* src = sources[s.source].column(col).typed<T>() + s.start;
    if (s.length == 1) {
      *out++ = *src;  // the common case when inputs interleave finely: no memcpy call
    } else {
      std::memcpy(out, src, static_cast<size_t>(s.length) * sizeof(T));
      out += s.length;
    }
  }
}

void gather_bits(std::span<const Batch> sources, std::span<const Segment> segments, size_t col,
                 uint8_t* out) {
  int64_t o = 0;
  for (const Segment& s : segments) {
    const Column& c = sources[s.source].column(col);
    const auto* bits = static_cast<const uint8_t*>(c.values);
    for (int64_t i = 0; i < s.length; ++i) set_bit(out, o++, get_bit(bits, c.offset + s.start + i));
  }
}

template <class Offset>
void gather_strings(std::span<const Batch> sources, std::span<const Segment> segments, size_t col,
                    const std::string& name, int64_t num_rows, OwnedBuffers& owned, Column& out) {
  int64_t total = 0;
  for (const Segment& s : segments) {
    const Offset* offs = sources[s.source].column(col).typed<Offset>() + s.start;
    total += static_cast<int64_t>(offs[s.length] - offs[0]);
  }
  if (total > static_cast<int64_t>(std::numeric_limits<Offset>::max())) {
    throw Error(ErrorKind::kInvalidInput,
                "column '" + name + "' holds more than 2 GiB of string data in one output batch; pass a smaller "
                    "batch_size or use large_string");
  }
  auto* offsets = reinterpret_cast<Offset*>(owned.add((num_rows + 1) * sizeof(Offset), false));
  uint8_t* bytes = owned.add(static_cast<size_t>(total), false);
  Offset pos = 0;
  int64_t row = 0;
  offsets[0] = 0;
  for (const Segment& s : segments) {
    const Column& c = sources[s.source].column(col);
    const Offset* offs = c.typed<Offset>() + s.start;
    const Offset base = offs[0];
    const auto len = static_cast<size_t>(offs[s.length] - base);
    std::memcpy(bytes + pos, c.data + base, len);
    for (int64_t i = 1; i <= s.length; ++i) offsets[row + i] = pos + (offs[i] - base);
    pos += static_cast<Offset>(len);
    row += s.length;
  }
  out.values = offsets;
  out.data = bytes;
}

}  // namespace

Batch gather(std::shared_ptr<const Schema> schema, std::span<const Batch> sources,
             std::span<const Segment> segments) {
  int64_t num_rows = 0;
  for (const Segment& s : segments) num_rows += s.length;
  auto owned = std::make_shared<OwnedBuffers>();
  owned->buffers.reserve(schema->fields.size() * 3);
  std::vector<Column> columns(schema->fields.size());
  const auto bitmap_bytes = static_cast<size_t>((num_rows + 7) / 8);

  for (size_t col = 0; col < columns.size(); ++col) {
    Column& out = columns[col];
    out.null_count = 0;
    bool any_nulls = false;
    for (const Segment& s : segments) any_nulls |= sources[s.source].column(col).may_have_nulls();
    if (any_nulls) {
      uint8_t* validity = owned->add(bitmap_bytes, true);
      int64_t o = 0;
      for (const Segment& s : segments) {
        const Column& c = sources[s.source].column(col);
        for (int64_t i = 0; i < s.length; ++i, ++o) {
          const bool valid = c.is_valid(s.start + i);
          set_bit(validity, o, valid);
          out.null_count += !valid;
        }
      }
      out.validity = validity;
    }

    const DataType& type = schema->fields[col].type;
    switch (type.layout()) {
      case Layout::kBits: {
        uint8_t* bits = owned->add(bitmap_bytes, true);
        gather_bits(sources, segments, col, bits);
        out.values = bits;
        break;
      }
      case Layout::kFixed: {
        uint8_t* values = owned->add(static_cast<size_t>(num_rows) * type.byte_width(), false);
        switch (type.byte_width()) {
          case 1: gather_fixed(sources, segments, col, values); break;
          case 2: gather_fixed(sources, segments, col, reinterpret_cast<uint16_t*>(values)); break;
          case 4: gather_fixed(sources, segments, col, reinterpret_cast<uint32_t*>(values)); break;
          default: gather_fixed(sources, segments, col, reinterpret_cast<uint64_t*>(values)); break;
        }
        out.values = values;
        break;
      }
      case Layout::kOffsets32:
        gather_strings<int32_t>(sources, segments, col, schema->fields[col].name, num_rows, *owned, out);
        break;
      case Layout::kOffsets64:
        gather_strings<int64_t>(sources, segments, col, schema->fields[col].name, num_rows, *owned, out);
        break;
    }
  }
  return Batch(std::move(schema), num_rows, std::move(columns), std::move(owned));
}

}  // namespace pao
