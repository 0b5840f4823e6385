#include "core/gather.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "core/error.h"

namespace pao {
namespace {

// Per-source pointers of one column, resolved once per column rather than once per segment.
struct SourceColumn {
  const uint8_t* validity;  // nullptr when the source column has no nulls
  const void* values;
  const uint8_t* data;
  int64_t offset;
};

std::vector<SourceColumn> resolve(std::span<const Batch> sources, size_t col) {
  std::vector<SourceColumn> out;
  out.reserve(sources.size());
  for (const Batch& b : sources) {
    const Column& c = b.column(col);
    out.push_back({c.may_have_nulls() ? c.validity : nullptr, c.values, c.data, c.offset});
  }
  return out;
}

template <class T>
void gather_fixed(std::span<const SourceColumn> src, std::span<const Segment> segments, T* out) {
  std::vector<const T*> base(src.size());
  for (size_t i = 0; i < src.size(); ++i) base[i] = static_cast<const T*>(src[i].values) + src[i].offset;
  for (const Segment& s : segments) {
    const T* from = base[s.source] + s.start;
    if (s.length == 1) {
      *out++ = *from;  // the common case when inputs interleave finely: no memcpy call
    } else {
      std::memcpy(out, from, static_cast<size_t>(s.length) * sizeof(T));
      out += s.length;
    }
  }
}

// Copies bits, e.g. bool values or validity, and returns how many copied bits were 0. A source
// without a bitmap (`bits` == nullptr) counts as all ones.
int64_t gather_bitmap(std::span<const SourceColumn> src, std::span<const Segment> segments,
                      bool validity, uint8_t* out) {
  int64_t o = 0;
  int64_t zeros = 0;
  for (const Segment& s : segments) {
    const SourceColumn& c = src[s.source];
    const auto* bits = validity ? c.validity : static_cast<const uint8_t*>(c.values);
    if (bits == nullptr) {
      for (int64_t i = 0; i < s.length; ++i) or_bit(out, o++, true);
      continue;
    }
    for (int64_t i = c.offset + s.start, e = i + s.length; i < e; ++i) {
      const bool v = get_bit(bits, i);
      or_bit(out, o++, v);
      zeros += !v;
    }
  }
  return zeros;
}

// memcpy, without a library call for the few bytes of a row or two of short strings (inputs that
// interleave finely make segments that short): up to 16 bytes as two fixed-size copies that
// overlap in the middle (plain moves; nothing read or written outside [from, from + n)).
inline void copy_bytes(uint8_t* to, const uint8_t* from, size_t n) {
  if (n >= 8) {
    if (n > 16) {
      std::memcpy(to, from, n);
      return;
    }
    std::memcpy(to, from, 8);
    std::memcpy(to + n - 8, from + n - 8, 8);
  } else if (n >= 4) {
    std::memcpy(to, from, 4);
    std::memcpy(to + n - 4, from + n - 4, 4);
  } else {
    for (size_t i = 0; i < n; ++i) to[i] = from[i];
  }
}

template <class Offset>
void gather_strings(std::span<const SourceColumn> src, std::span<const Segment> segments,
                    const std::string& name, int64_t num_rows, BatchMemory& owned, Column& out) {
  std::vector<const Offset*> base(src.size());
  for (size_t i = 0; i < src.size(); ++i) base[i] = static_cast<const Offset*>(src[i].values) + src[i].offset;
  int64_t total = 0;
  for (const Segment& s : segments) {
    const Offset* offs = base[s.source] + s.start;
    total += static_cast<int64_t>(offs[s.length] - offs[0]);
  }
  if (total > static_cast<int64_t>(std::numeric_limits<Offset>::max())) {
    throw Error(ErrorKind::kInvalidInput,
                "column '" + name + "' holds more than 2 GiB of string data in one output batch; "
                "pass a smaller batch_size or use large_string");
  }
  auto* offsets = reinterpret_cast<Offset*>(owned.allocate((num_rows + 1) * sizeof(Offset)));
  uint8_t* bytes = owned.allocate(static_cast<size_t>(total));
  Offset pos = 0;
  Offset* next = offsets;
  *next++ = 0;
  for (const Segment& s : segments) {
    const Offset* offs = base[s.source] + s.start;
    const Offset first = offs[0];
    const auto len = static_cast<size_t>(offs[s.length] - first);
    copy_bytes(bytes + pos, src[s.source].data + first, len);
    for (int64_t i = 1; i <= s.length; ++i) *next++ = pos + (offs[i] - first);
    pos += static_cast<Offset>(len);
  }
  out.values = offsets;
  out.data = bytes;
}

}  // namespace

Batch gather(std::shared_ptr<const Schema> schema, std::span<const Batch> sources,
             std::span<const Segment> segments) {
  int64_t num_rows = 0;
  for (const Segment& s : segments) num_rows += s.length;
  auto owned = std::make_shared<BatchMemory>();
  std::vector<Column> columns(schema->fields.size());
  const auto bitmap_size = static_cast<size_t>(bitmap_bytes(num_rows));

  for (size_t col = 0; col < columns.size(); ++col) {
    Column& out = columns[col];
    const std::vector<SourceColumn> src = resolve(sources, col);
    out.null_count = 0;
    // Every source is one a segment reads (else a bitmap of no nulls is made, which is harmless).
    bool any_nulls = false;
    for (const SourceColumn& c : src) any_nulls |= c.validity != nullptr;
    if (any_nulls) {
      uint8_t* validity = owned->allocate_zeroed(bitmap_size);
      out.null_count = gather_bitmap(src, segments, true, validity);
      out.validity = validity;
    }

    const DataType& type = schema->fields[col].type;
    switch (type.layout()) {
      case Layout::kBits: {
        uint8_t* bits = owned->allocate_zeroed(bitmap_size);
        gather_bitmap(src, segments, false, bits);
        out.values = bits;
        break;
      }
      case Layout::kFixed: {
        uint8_t* values = owned->allocate(static_cast<size_t>(num_rows) * type.byte_width());
        switch (type.byte_width()) {
          case 1: gather_fixed(std::span(src), segments, values); break;
          case 2: gather_fixed(std::span(src), segments, reinterpret_cast<uint16_t*>(values)); break;
          case 4: gather_fixed(std::span(src), segments, reinterpret_cast<uint32_t*>(values)); break;
          default: gather_fixed(std::span(src), segments, reinterpret_cast<uint64_t*>(values)); break;
        }
        out.values = values;
        break;
      }
      case Layout::kOffsets32:
        gather_strings<int32_t>(src, segments, schema->fields[col].name, num_rows, *owned, out);
        break;
      case Layout::kOffsets64:
        gather_strings<int64_t>(src, segments, schema->fields[col].name, num_rows, *owned, out);
        break;
    }
  }
  return Batch(std::move(schema), num_rows, std::move(columns), std::move(owned));
}

GatherPlan::GatherPlan(std::shared_ptr<const Schema> s, std::vector<Batch> src, std::vector<Segment> segs)
    : schema(std::move(s)), sources(std::move(src)), segments(std::move(segs)) {
  ends.reserve(segments.size());
  int64_t rows = 0;
  for (const Segment& seg : segments) ends.push_back(rows += seg.length);
}

Batch gather_range(const GatherPlan& plan, int64_t begin, int64_t end) {
  // The first segment ending after `begin` and the one holding row end - 1.
  const auto first = static_cast<size_t>(std::upper_bound(plan.ends.begin(), plan.ends.end(), begin) - plan.ends.begin());
  const auto last = static_cast<size_t>(std::lower_bound(plan.ends.begin(), plan.ends.end(), end) - plan.ends.begin());
  auto start_of = [&](size_t s) { return plan.ends[s] - plan.segments[s].length; };  // in plan rows
  if (first == last) {
    const Segment& seg = plan.segments[first];
    return plan.sources[seg.source].slice(seg.start + (begin - start_of(first)), end - begin).with_schema(plan.schema);
  }
  std::vector<Segment> segs(plan.segments.begin() + static_cast<std::ptrdiff_t>(first),
                            plan.segments.begin() + static_cast<std::ptrdiff_t>(last) + 1);
  const int64_t cut = begin - start_of(first);  // rows of the first segment before `begin`
  segs.front().start += cut;
  segs.front().length -= cut;
  segs.back().length = end - start_of(last);
  return gather(plan.schema, plan.sources, segs);
}

bool can_scatter(const Schema& schema) {
  for (const Field& f : schema.fields)
    if (f.type.layout() != Layout::kFixed) return false;
  return true;
}

namespace {
template <class T>
void scatter_values(std::span<const Batch> sources, std::span<const std::vector<int64_t>> positions, size_t col,
                    T* out) {
  for (size_t p = 0; p < sources.size(); ++p) {
    const T* from = sources[p].column(col).typed<T>();
    const std::vector<int64_t>& to = positions[p];
    for (size_t j = 0; j < to.size(); ++j) out[to[j]] = from[j];
  }
}
}  // namespace

Batch scatter(std::shared_ptr<const Schema> schema, std::span<const Batch> sources,
              std::span<const std::vector<int64_t>> positions, int64_t rows) {
  auto owner = std::make_shared<BatchMemory>();
  std::vector<Column> columns;
  for (size_t col = 0; col < schema->fields.size(); ++col) {
    const int width = schema->fields[col].type.byte_width();
    Buffer values(static_cast<size_t>(rows) * static_cast<size_t>(width));
    switch (width) {
      case 1: scatter_values(sources, positions, col, values.data()); break;
      case 2: scatter_values(sources, positions, col, reinterpret_cast<uint16_t*>(values.data())); break;
      case 4: scatter_values(sources, positions, col, reinterpret_cast<uint32_t*>(values.data())); break;
      case 8: scatter_values(sources, positions, col, reinterpret_cast<uint64_t*>(values.data())); break;
      default: throw Error(ErrorKind::kUsage, "scatter: a column of width " + std::to_string(width));
    }
    Column c;
    c.values = owner->add(std::move(values));
    c.null_count = 0;
    bool nulls = false;
    for (const Batch& b : sources) nulls = nulls || b.column(col).may_have_nulls();
    if (nulls) {
      // Every bit written once: start all valid, clear the nulls.
      Buffer bits(static_cast<size_t>(bitmap_bytes(rows)));
      std::memset(bits.data(), 0xFF, bits.size());
      int64_t null_count = 0;
      for (size_t p = 0; p < sources.size(); ++p) {
        const Column& from = sources[p].column(col);
        if (!from.may_have_nulls()) continue;
        const std::vector<int64_t>& to = positions[p];
        for (size_t j = 0; j < to.size(); ++j) {
          if (from.is_valid(static_cast<int64_t>(j))) continue;
          bits.data()[to[j] >> 3] &= static_cast<uint8_t>(~(1u << (to[j] & 7)));
          ++null_count;
        }
      }
      c.validity = owner->add(std::move(bits));
      c.null_count = null_count;
    }
    columns.push_back(c);
  }
  return Batch(std::move(schema), rows, std::move(columns), std::move(owner));
}

}  // namespace pao
