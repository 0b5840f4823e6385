#include "core/gather.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "core/builder.h"
#include "core/error.h"
#include "core/gather_in_order.h"
#include "core/prefetch.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace pao {
namespace {

using gather_detail::InOrderRows;
using gather_detail::read_bits;
using gather_detail::SourceColumn;

std::vector<SourceColumn> resolve(std::span<const Batch> sources, size_t col) {
  std::vector<SourceColumn> out;
  out.reserve(sources.size());
  for (const Batch& b : sources) {
    const Column& c = b.column(col);
    out.push_back({c.may_have_nulls() ? c.validity : nullptr, c.values, c.data, c.offset, b.num_rows()});
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

// Writes a bitmap in order, a 64-bit word at a time: a read-modify-write of memory per bit costs
// several times the bit's read. `out` must hold whole words (bitmap_words()).
class BitWriter {
 public:
  explicit BitWriter(uint8_t* out) noexcept : out_(out) {}
  void push(uint64_t bit) noexcept {
    word_ |= bit << used_;
    if (++used_ == 64) flush();
  }
  // n bits at once (1 <= n <= 64; v's bits past n zero).
  void push_bits(uint64_t v, unsigned n) noexcept {
    word_ |= v << used_;  // used_ < 64
    const unsigned total = used_ + n;
    if (total < 64) {
      used_ = total;
      return;
    }
    const unsigned before = used_;
    flush();
    if (total > 64) word_ = v >> (64 - before);  // before > 0 here: the bits that did not fit
    used_ = total - 64;
  }
  void finish() noexcept {
    if (used_ != 0) flush();
  }

 private:
  void flush() noexcept {
    std::memcpy(out_, &word_, sizeof word_);
    out_ += sizeof word_;
    word_ = 0;
    used_ = 0;
  }
  uint8_t* out_;
  uint64_t word_ = 0;
  unsigned used_ = 0;
};

// Bytes of a bitmap of `bits` bits rounded up to whole 64-bit words (BitWriter writes words).
size_t bitmap_words_bytes(int64_t bits) { return static_cast<size_t>((bits + 63) / 64) * 8; }

// The zero bits among the first `bits` of a bitmap whose bits past them are zero.
int64_t count_zeros(const uint8_t* bitmap, int64_t bits) {
  int64_t ones = 0;
  for (size_t w = 0, n = bitmap_words_bytes(bits) / 8; w < n; ++w) {
    uint64_t word;
    std::memcpy(&word, bitmap + w * 8, sizeof word);
    ones += popcount(word);
  }
  return bits - ones;
}

// The bitmap of a column: validity or bool values. A source without one (no nulls) reads as all
// ones: its pointer is a single byte of ones and its index mask 0, so the read needs no branch.
struct BitSource {
  const uint8_t* bits;
  int64_t offset;
  int64_t mask;
};
const uint8_t kAllOnes = 0xFF;
std::vector<BitSource> bit_sources(std::span<const SourceColumn> src, bool validity) {
  std::vector<BitSource> out;
  out.reserve(src.size());
  for (const SourceColumn& c : src) {
    const auto* bits = validity ? c.validity : static_cast<const uint8_t*>(c.values);
    out.push_back(bits == nullptr ? BitSource{&kAllOnes, 0, 0} : BitSource{bits, c.offset, ~int64_t{0}});
  }
  return out;
}
inline uint64_t read_bit(const BitSource& b, int64_t row) noexcept {
  return static_cast<uint64_t>(get_bit(b.bits, (b.offset + row) & b.mask));
}

// A segment's or a RowRef's rows (a RowRef is a segment of one row, known at compile time, so
// loops over its rows fold away).
inline int64_t length_of(const Segment& s) noexcept { return s.length; }
inline int64_t start_of(const Segment& s) noexcept { return s.start; }
constexpr int64_t length_of(const RowRef&) noexcept { return 1; }
inline int64_t start_of(const RowRef& r) noexcept { return r.row; }

template <class Run, class F>
void for_each_row(std::span<const Run> runs, F&& f) {
  for (const Run& s : runs)
    for (int64_t i = start_of(s), e = start_of(s) + length_of(s); i < e; ++i) f(s.source, i);
}

// Copies bits (bool values or validity) into `out` (bitmap_words_bytes(rows) bytes).
void gather_bitmap(std::span<const SourceColumn> src, std::span<const Segment> rows, bool validity, uint8_t* out) {
  const std::vector<BitSource> from = bit_sources(src, validity);
  BitWriter w(out);
  for_each_row(rows, [&](uint32_t source, int64_t row) { w.push(read_bit(from[source], row)); });
  w.finish();
}
// Row by row, a word of 64 rows at a time: each bit goes to a fixed place in its word, so the
// reads are independent and only an OR chains them (BitWriter's count of bits would chain every
// bit to the one before).
void gather_bitmap(std::span<const SourceColumn> src, std::span<const RowRef> rows, bool validity, uint8_t* out) {
  const std::vector<BitSource> from = bit_sources(src, validity);
  const BitSource* f = from.data();
  const size_t n = rows.size();
  size_t r = 0;
  for (; r + 64 <= n; r += 64) {
    uint64_t word = 0;
    for (unsigned j = 0; j < 64; ++j) word |= read_bit(f[rows[r + j].source], rows[r + j].row) << j;
    std::memcpy(out, &word, sizeof word);
    out += sizeof word;
  }
  if (r < n) {
    uint64_t word = 0;
    for (unsigned j = 0; r + j < n; ++j) word |= read_bit(f[rows[r + j].source], rows[r + j].row) << j;
    std::memcpy(out, &word, sizeof word);
  }
}

// A row a selection keeps (gather_kept()): a RowRef of its one source.
struct KeptRow {
  static constexpr uint32_t source = 0;
  uint32_t row;
};
constexpr int64_t length_of(const KeptRow&) noexcept { return 1; }
inline int64_t start_of(const KeptRow& r) noexcept { return r.row; }

// The bits (validity, or bool values) of the rows a selection keeps, in order, into `out` (whole
// words): each word of 64 source rows gives its bits where `keep` is set. Where those are all ones
// or all zeros (a kept row's nulls and flags are sparse, or none) they go on as such; only a word
// that mixes them is compressed bit by bit (a software PEXT). The source has the bitmap: a
// validity is gathered only from a source with nulls (gather_rows), bool values always exist.
void compress_bits(const SourceColumn& c, bool validity, const uint64_t* keep, uint8_t* out) {
  const auto* bits = validity ? c.validity : static_cast<const uint8_t*>(c.values);
  const int64_t bytes = bitmap_bytes(c.offset + c.rows);
  BitWriter w(out);
  for (int64_t i = 0, words = (c.rows + 63) / 64; i < words; ++i) {
    const uint64_t sel = keep[i];
    if (sel == 0) continue;
    const auto n = static_cast<unsigned>(popcount(sel));
    const uint64_t ones = n == 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
    const uint64_t v = read_bits(bits, bytes, c.offset + 64 * i, static_cast<unsigned>(std::min<int64_t>(64, c.rows - 64 * i))) & sel;
    if (v == sel) {
      w.push_bits(ones, n);
    } else if (v == 0) {
      w.push_bits(0, n);
    } else {
      uint64_t packed = 0;
      unsigned k = 0;
      for (uint64_t m = sel; m != 0; m &= m - 1, ++k) packed |= ((v >> std::countr_zero(m)) & 1) << k;
      w.push_bits(packed, n);
    }
  }
  w.finish();
}

// Stores::kStreamed's store of a 4- or 8-byte value: non-temporal where the machine has one (x86),
// else plain. fence_streamed() must follow a run of them before another thread may read them:
// they are not ordered with the release that hands the batch on.
template <class T>
inline void store_streamed(T* to, T v) noexcept {
#if defined(__x86_64__)
  if constexpr (sizeof(T) == 8) {
    long long x;
    std::memcpy(&x, &v, sizeof x);
    _mm_stream_si64(reinterpret_cast<long long*>(to), x);
  } else if constexpr (sizeof(T) == 4) {
    int x;
    std::memcpy(&x, &v, sizeof x);
    _mm_stream_si32(reinterpret_cast<int*>(to), x);
  } else {
    *to = v;
  }
#else
  *to = v;
#endif
}
inline void fence_streamed() noexcept {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

// Rows one by one (RowRefs, or a selection's rows: KeptRow, whose source is always 0) into N
// columns of one width at once: a row's RowRef is read once for all of them, and the loop's own
// work is shared, which is most of a lone column's work per row. base[c * sources + s]: column c's
// values in source s (its offset applied).
template <class T, size_t N, bool kStreamed, class Row>
void gather_fixed_together(const T* const* base, size_t sources, std::span<const Row> rows, T* const* out) {
  std::array<T*, N> to;
  for (size_t c = 0; c < N; ++c) to[c] = out[c];
  const size_t n = rows.size();
  for (size_t r = 0; r < n; ++r) {
    const Row& x = rows[r];
    const T* const* from = base + x.source;
    for (size_t c = 0; c < N; ++c) {
      if constexpr (kStreamed) store_streamed(to[c] + r, from[c * sources][x.row]); else to[c][r] = from[c * sources][x.row];
    }
  }
  if constexpr (kStreamed) fence_streamed();
}

// Every fixed-width column of `schema`, rows one by one, those of one width several at a time;
// out[col] receives each one's values (other columns' entries stay as they are). A pass reads
// every source of each of its columns as a stream of its own, so it takes at most 16 / sources
// columns (up to 4): more streams than the hardware prefetcher follows made the merge of 20 inputs
// of smart-meter readings (benchmarks/merge.py) 10% slower than a column at a time. Streamed stores
// (Stores::kStreamed) for 4- and 8-byte values: on that merge at 2 threads, 4 inputs ran 165-173
// M t/s against 160-165 with plain stores a column at a time, 20 inputs 107-115 against 102-105.
template <class Row>
void gather_fixed_columns(const Schema& schema, std::span<const Batch> sources, std::span<const Row> rows,
                          Stores stores, BatchMemory& owned, std::vector<uint8_t*>& out) {
  constexpr size_t kAtOnce = 4;
  const size_t k = sources.size();
  const size_t at_once = std::clamp<size_t>(16 / std::max<size_t>(k, 1), 1, kAtOnce);
  auto width_class = [](int width) -> size_t { return width == 1 ? 1 : width == 2 ? 2 : width == 4 ? 4 : 8; };
  std::vector<size_t> cols;
  std::vector<const uint8_t*> base;
  for (const size_t width : {size_t{1}, size_t{2}, size_t{4}, size_t{8}}) {
    cols.clear();
    for (size_t col = 0; col < schema.fields.size(); ++col) {
      const DataType& type = schema.fields[col].type;
      if (type.layout() == Layout::kFixed && width_class(type.byte_width()) == width) cols.push_back(col);
    }
    for (size_t first = 0; first < cols.size(); first += at_once) {
      const size_t m = std::min(at_once, cols.size() - first);
      base.resize(m * k);
      std::array<uint8_t*, kAtOnce> to{};
      for (size_t c = 0; c < m; ++c) {
        const size_t col = cols[first + c];
        for (size_t s = 0; s < k; ++s) {
          const Column& from = sources[s].column(col);
          base[c * k + s] = static_cast<const uint8_t*>(from.values) + from.offset * static_cast<int64_t>(width);
        }
        to[c] = out[col] = owned.allocate(rows.size() * width);
      }
      auto run = [&]<class T>(T*) {
        std::vector<const T*> typed(base.size());  // typed copies: no access through another pointer type
        for (size_t j = 0; j < base.size(); ++j) typed[j] = reinterpret_cast<const T*>(base[j]);
        std::array<T*, kAtOnce> outs{};
        for (size_t c = 0; c < m; ++c) outs[c] = reinterpret_cast<T*>(to[c]);
        const T* const* b = typed.data();
        T* const* o = outs.data();
        const bool streamed = stores == Stores::kStreamed && sizeof(T) >= 4;
        auto go = [&]<size_t N>() {
          if (streamed) gather_fixed_together<T, N, true>(b, k, rows, o); else gather_fixed_together<T, N, false>(b, k, rows, o);
        };
        switch (m) {
          case 1: go.template operator()<1>(); break;
          case 2: go.template operator()<2>(); break;
          case 3: go.template operator()<3>(); break;
          default: go.template operator()<4>(); break;
        }
      };
      switch (width) {
        case 1: run(static_cast<uint8_t*>(nullptr)); break;
        case 2: run(static_cast<uint16_t*>(nullptr)); break;
        case 4: run(static_cast<uint32_t*>(nullptr)); break;
        default: run(static_cast<uint64_t*>(nullptr)); break;
      }
    }
  }
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

// Total bytes and the copy, over segments (one copy for each one's rows' bytes) or rows.

template <class Offset, class Run>
int64_t string_bytes(const std::vector<const Offset*>& base, std::span<const Run> runs) {
  int64_t total = 0;
  for (const Run& s : runs) {
    const Offset* offs = base[s.source] + start_of(s);
    total += static_cast<int64_t>(offs[length_of(s)] - offs[0]);
  }
  return total;
}
// `bytes` has kStringSlack bytes past the strings' total: a string of up to 16 bytes is copied
// as 16 bytes, one move with no branch on its length (strings of varied short lengths mispredict
// copy_bytes' branches), reading past it only where its source's strings go on that far.
constexpr size_t kStringSlack = 16;
template <class Offset, class Run>
void copy_strings(const std::vector<const Offset*>& base, std::span<const SourceColumn> src,
                  std::span<const Run> runs, Offset* next, uint8_t* bytes) {
  std::vector<Offset> ends(src.size());  // where each source's strings end: bytes before it are readable
  for (size_t i = 0; i < src.size(); ++i) ends[i] = base[i][src[i].rows];
  Offset pos = 0;
  for (const Run& s : runs) {
    const Offset* offs = base[s.source] + start_of(s);
    const Offset first = offs[0];
    const auto len = static_cast<size_t>(offs[length_of(s)] - first);
    const uint8_t* from = src[s.source].data + first;
    // The next rows' offsets and bytes, requested a line or two ahead: a merge reads as many
    // streams of each as it has inputs, more than the hardware's prefetchers follow (20 inputs,
    // one thread: 81-82 -> 86-88 M t/s; 4 inputs: no change).
    prefetch(offs + 16);
    prefetch(from + 128);
    if (len <= 16 && int64_t{first} + 16 <= int64_t{ends[s.source]}) [[likely]] {
      std::memcpy(bytes + pos, from, 16);
    } else {
      copy_bytes(bytes + pos, from, len);
    }
    for (int64_t i = 1; i <= length_of(s); ++i) *next++ = pos + (offs[i] - first);
    pos += static_cast<Offset>(len);
  }
}

// `in_order`: the rows' plan when they take each source's rows in order (their bytes are then
// ranges), else nullptr.
template <class Offset, class Rows>
void gather_strings(std::span<const SourceColumn> src, Rows rows, const InOrderRows* in_order, const std::string& name,
                    int64_t num_rows, BatchMemory& owned, Column& out) {
  std::vector<const Offset*> base(src.size());
  for (size_t i = 0; i < src.size(); ++i) base[i] = static_cast<const Offset*>(src[i].values) + src[i].offset;
  int64_t total = 0;
  if (in_order != nullptr) {
    for (size_t i = 0; i < src.size(); ++i) {
      if (in_order->taken(i) == 0) continue;
      const Offset* offs = base[i] + in_order->first(i);
      total += static_cast<int64_t>(offs[in_order->taken(i)] - offs[0]);
    }
  } else {
    total = string_bytes(base, rows);
  }
  if (total > static_cast<int64_t>(std::numeric_limits<Offset>::max())) {
    throw Error(ErrorKind::kInvalidInput,
                "column '" + name + "' holds more than 2 GiB of string data in one output batch; "
                "pass a smaller batch_size or use large_string");
  }
  auto* offsets = reinterpret_cast<Offset*>(owned.allocate((num_rows + 1) * sizeof(Offset)));
  uint8_t* bytes = owned.allocate(static_cast<size_t>(total) + kStringSlack);
  offsets[0] = 0;
  copy_strings(base, src, rows, offsets + 1, bytes);
  out.values = offsets;
  out.data = bytes;
}

// What a gather builds and drops, kept per thread: fresh buffers per batch (512 KiB of RowRefs for
// 65,536 rows) would be fresh pages the kernel zeroes at every call. gather() never calls itself,
// so one set per thread suffices. Reached through a call the optimizer cannot see through: GCC
// otherwise propagates the thread-local's address into the loops that use it and recomputes it
// there, a __tls_get_addr call per use in a shared library.
struct GatherScratch {
  std::vector<RowRef> refs;  // Segment rows one by one (gather())
  std::vector<KeptRow> kept;  // a filter's kept rows (gather_kept())
  InOrderRows in_order;      // the plan of RowRef rows (gather_rows)
};
[[gnu::noipa]] GatherScratch& scratch() {
  thread_local GatherScratch s;
  return s;
}

// The segments as one RowRef per row, in `refs`; false (refs untouched) when a segment's rows
// pass 2^32.
bool row_refs(std::span<const Segment> segments, int64_t num_rows, std::vector<RowRef>& refs) {
  for (const Segment& s : segments)
    if (s.start + s.length > int64_t{std::numeric_limits<uint32_t>::max()}) return false;
  refs.resize(static_cast<size_t>(num_rows));
  RowRef* out = refs.data();
  for (const Segment& s : segments)
    for (int64_t i = s.start, e = s.start + s.length; i < e; ++i) *out++ = {s.source, static_cast<uint32_t>(i)};
  return true;
}

// Copies rows (a span of Segment, of RowRef, or of KeptRow with the selection's `keep` bits)
// column by column.
template <class Rows>
Batch gather_rows(std::shared_ptr<const Schema> schema, std::span<const Batch> sources, Rows rows, int64_t num_rows,
                  const uint64_t* keep = nullptr, Stores stores = Stores::kCached, const SourceMasks* masks = nullptr) {
  auto owned = std::make_shared<BatchMemory>();
  std::vector<Column> columns(schema->fields.size());
  const size_t bitmap_size = bitmap_words_bytes(num_rows);
  // Rows one by one are planned (InOrderRows) at the first column that reads bitmaps or strings:
  // the plan serves all of them when the rows take each source's rows in order.
  InOrderRows& plan = scratch().in_order;
  int planned = -1;  // -1: not yet asked; then whether the plan serves these rows
  auto in_order = [&]() -> const InOrderRows* {
    if constexpr (std::is_same_v<Rows, std::span<const RowRef>>) {
      if (planned < 0 && masks != nullptr && sources.size() <= InOrderRows::kMaxSources) {
        plan.adopt(rows, sources.size(), *masks);
        planned = 1;
      }
      if (planned < 0) planned = plan.plan(rows, sources.size()) ? 1 : 0;
      return planned == 1 ? &plan : nullptr;
    }
    return nullptr;
  };
  auto bitmap = [&](std::span<const SourceColumn> src, bool validity, uint8_t* out) {
    if constexpr (std::is_same_v<Rows, std::span<const KeptRow>>) {
      compress_bits(src[0], validity, keep, out);
    } else if (const InOrderRows* p = in_order()) {
      p->gather_bits(src, validity, out);
    } else {
      gather_bitmap(src, rows, validity, out);
    }
  };
  // Rows one by one: the fixed-width columns first, together (gather_fixed_columns).
  std::vector<uint8_t*> fixed(columns.size(), nullptr);
  if constexpr (!std::is_same_v<Rows, std::span<const Segment>>) {
    gather_fixed_columns(*schema, sources, rows, stores, *owned, fixed);
  }
  for (size_t col = 0; col < columns.size(); ++col) {
    Column& out = columns[col];
    const std::vector<SourceColumn> src = resolve(sources, col);
    out.null_count = 0;
    // Every source is one a segment reads (else a bitmap of no nulls is made, which is harmless).
    bool any_nulls = false;
    for (const SourceColumn& c : src) any_nulls |= c.validity != nullptr;
    if (any_nulls) {
      uint8_t* validity = owned->allocate_zeroed(bitmap_size);
      bitmap(std::span(src), true, validity);
      out.null_count = count_zeros(validity, num_rows);
      out.validity = validity;
    }

    const DataType& type = schema->fields[col].type;
    switch (type.layout()) {
      case Layout::kBits: {
        uint8_t* bits = owned->allocate_zeroed(bitmap_size);
        bitmap(std::span(src), false, bits);
        out.values = bits;
        break;
      }
      case Layout::kFixed:
        if constexpr (std::is_same_v<Rows, std::span<const Segment>>) {
          uint8_t* values = owned->allocate(static_cast<size_t>(num_rows) * type.byte_width());
          switch (type.byte_width()) {
            case 1: gather_fixed(std::span(src), rows, values); break;
            case 2: gather_fixed(std::span(src), rows, reinterpret_cast<uint16_t*>(values)); break;
            case 4: gather_fixed(std::span(src), rows, reinterpret_cast<uint32_t*>(values)); break;
            default: gather_fixed(std::span(src), rows, reinterpret_cast<uint64_t*>(values)); break;
          }
          out.values = values;
        } else {
          out.values = fixed[col];  // gathered above
        }
        break;
      case Layout::kOffsets32:
        gather_strings<int32_t>(std::span(src), rows, in_order(), schema->fields[col].name, num_rows, *owned, out);
        break;
      case Layout::kOffsets64:
        gather_strings<int64_t>(std::span(src), rows, in_order(), schema->fields[col].name, num_rows, *owned, out);
        break;
    }
  }
  return Batch(std::move(schema), num_rows, std::move(columns), std::move(owned));
}

}  // namespace

Batch gather(std::shared_ptr<const Schema> schema, std::span<const Batch> sources,
             std::span<const Segment> segments) {
  int64_t num_rows = 0;
  for (const Segment& s : segments) num_rows += s.length;
  // Segments of under two rows on average (inputs that interleave finely): row by row through an
  // index made once for all columns (in the thread's scratch).
  std::vector<RowRef>& refs = scratch().refs;
  if (static_cast<int64_t>(segments.size()) * 2 > num_rows && row_refs(segments, num_rows, refs)) {
    return gather_rows(std::move(schema), sources, std::span<const RowRef>(refs), num_rows);
  }
  return gather_rows(std::move(schema), sources, segments, num_rows);
}

Batch gather(std::shared_ptr<const Schema> schema, std::span<const Batch> sources, std::span<const RowRef> rows,
             Stores stores, const SourceMasks* masks) {
  return gather_rows(std::move(schema), sources, rows, static_cast<int64_t>(rows.size()), nullptr, stores, masks);
}

Batch gather_kept(std::shared_ptr<const Schema> schema, const Batch& in, const uint64_t* keep) {
  const int64_t n = in.num_rows();
  const int64_t words = (n + 63) / 64;
  // The rows kept, and their runs: a run starts at each kept row whose row before is not kept.
  int64_t kept = 0;
  int64_t runs = 0;
  uint64_t carry = 0;  // the last word's top bit: whether the row before this word's first was kept
  for (int64_t i = 0; i < words; ++i) {
    const uint64_t w = keep[i];
    kept += popcount(w);
    runs += popcount(w & ~((w << 1) | carry));
    carry = w >> 63;
  }
  if (kept == 0) return in.slice(0, 0).with_schema(std::move(schema));
  if (runs * 2 <= kept || n > int64_t{std::numeric_limits<uint32_t>::max()}) {
    // Runs of two rows or more on average: a run at a time (one run: a zero-copy slice).
    std::vector<Segment> segments;
    segments.reserve(static_cast<size_t>(runs));
    int64_t start = -1;  // of the open run, if any
    for (int64_t i = 0; i < words; ++i) {
      const uint64_t w = keep[i];
      // Whole words that neither start nor end a run are skipped; the rest go from transition to
      // transition: the next set bit opens a run, the next clear bit ends it.
      if ((w == 0 && start < 0) || (w == ~uint64_t{0} && start >= 0)) continue;
      for (int b = 0; b < 64;) {
        const uint64_t from_b = ~uint64_t{0} << b;
        const uint64_t next = (start < 0 ? w : ~w) & from_b;
        if (next == 0) break;
        b = std::countr_zero(next);
        if (start < 0) {
          start = 64 * i + b;
        } else {
          segments.push_back({0, start, 64 * i + b - start});
          start = -1;
        }
      }
    }
    if (start >= 0) segments.push_back({0, start, n - start});
    if (segments.size() == 1) return in.slice(segments[0].start, segments[0].length).with_schema(std::move(schema));
    return gather_rows(std::move(schema), std::span<const Batch>(&in, 1), std::span<const Segment>(segments), kept);
  }
  // Scattered rows: one by one, their numbers read off the words.
  std::vector<KeptRow>& rows = scratch().kept;
  rows.resize(static_cast<size_t>(kept));
  KeptRow* out = rows.data();
  for (int64_t i = 0; i < words; ++i) {
    for (uint64_t w = keep[i]; w != 0; w &= w - 1) *out++ = {static_cast<uint32_t>(64 * i + std::countr_zero(w))};
  }
  return gather_rows(std::move(schema), std::span<const Batch>(&in, 1), std::span<const KeptRow>(rows), kept, keep);
}

GatherPlan::GatherPlan(std::shared_ptr<const Schema> s, std::vector<Batch> src, std::vector<Segment> segs)
    : schema(std::move(s)), sources(std::move(src)), segments(std::move(segs)) {
  ends.reserve(segments.size());
  int64_t rows = 0;
  for (const Segment& seg : segments) ends.push_back(rows += seg.length);
}

GatherPlan::GatherPlan(std::shared_ptr<const Schema> s, std::vector<Batch> src, std::vector<RowRef> r)
    : schema(std::move(s)), sources(std::move(src)), refs(std::move(r)) {}

Batch gather_range(const GatherPlan& plan, int64_t begin, int64_t end) {
  if (begin == end) return empty_batch(plan.schema);
  if (!plan.refs.empty()) {
    const std::span<const RowRef> rows(plan.refs.data() + begin, static_cast<size_t>(end - begin));
    // One source's consecutive rows (a run longer than the range): a slice. A look at each ref,
    // against a gather's copying of every column of each row.
    bool consecutive = true;
    for (size_t i = 1; i < rows.size() && consecutive; ++i) {
      consecutive = rows[i].source == rows[0].source && rows[i].row == rows[0].row + i;
    }
    if (consecutive) return plan.sources[rows[0].source].slice(rows[0].row, end - begin).with_schema(plan.schema);
    return gather(plan.schema, plan.sources, rows);
  }
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
