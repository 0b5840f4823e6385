#pragma once
// Internals shared by the gather units (gather.cpp: gathers of every kind; gather_in_order.cpp:
// the plan of rows that take each source's rows in order, and its bitmaps). Nothing outside
// core/gather*.cpp includes this.
#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "core/gather.h"

namespace pao::gather_detail {

// Per-source pointers of one column, resolved once per column rather than once per segment.
struct SourceColumn {
  const uint8_t* validity;  // nullptr when the source column has no nulls
  const void* values;
  const uint8_t* data;
  int64_t offset;
  int64_t rows;
};

// Bits [at, at + n) of a bitmap of `bytes` bytes as the low n bits (1 <= n <= 64, at + n within
// the bitmap), reading no byte past it.
inline uint64_t read_bits(const uint8_t* bits, int64_t bytes, int64_t at, unsigned n) noexcept {
  const int64_t byte = at >> 3;
  const auto shift = static_cast<unsigned>(at & 7);
  uint64_t v = 0;
  if (byte + 8 <= bytes) [[likely]] {
    std::memcpy(&v, bits + byte, sizeof v);
  } else {
    for (int64_t b = byte; b < bytes; ++b) v |= uint64_t{bits[b]} << (8 * (b - byte));
  }
  v >>= shift;
  if (shift + n > 64) v |= uint64_t{bits[byte + 8]} << (64 - shift);  // the run's bits reach that byte
  return n == 64 ? v : v & ((uint64_t{1} << n) - 1);
}

// Rows one by one that take each source's rows in order, one after another, as a merge does: each
// source gives a range of consecutive rows. Its strings' bytes are then a range too (their total is
// known from the ranges' ends, not summed row by row), and its bitmaps gather by bit deposits
// instead of a read per row. An output word of 64 rows takes from each source a run
// of consecutive bits (its next ones), which go to the word's bits whose rows come from that
// source, its mask. A run of all ones is the mask itself, a run of all zeros is nothing, and only
// a mixed run is deposited bit by bit; sparse nulls and rare flags (the usual case) make nearly
// every run uniform, so a bitmap costs a few operations per source per 64 rows. The masks are
// made once per gather, in one pass over the rows that also checks their order, and serve every
// bitmap column (each validity, each bool column) of the batch.
class InOrderRows {
 public:
  // Sources beyond kMaxPlanned go row by row (plan() says no): each word's work per source (its
  // mask, a read of its bits, a compare) grows with the sources while a row's work does not. On
  // the merge of smart meter readings (benchmarks/merge.py, one thread), with this plan's pass over
  // the rows, the deposits ran 7-12% ahead at 6, 8 and 12 inputs, even at 16, and 6% behind at 20.
  // Masks the caller made (adopt()) spare that pass, and serve up to kMaxSources.
  static constexpr size_t kMaxPlanned = 16;
  static constexpr size_t kMaxSources = SourceMasks::kMaxSources;

  // Plans rows whose masks the caller made (SourceMasks): each source's words, their counts, and
  // each source's first row, the row of its mask's first set bit.
  void adopt(std::span<const RowRef> rows, size_t sources, const SourceMasks& given);

  // Plans `rows` of `sources` sources: false (nothing planned) when they do not take each
  // source's rows in order, one after another, or have more than kMaxPlanned sources.
  bool plan(std::span<const RowRef> rows, size_t sources);

  // Source s's rows among the planned ones: [first(s), first(s) + taken(s)).
  int64_t first(size_t s) const noexcept { return first_[s]; }
  int64_t taken(size_t s) const noexcept { return taken_[s]; }

  // The planned rows' bits (validity, or bool values) into `out` (whole words, zeroed): by
  // exceptions where one bit value is rare (gather_sparse_bits), else by deposits.
  void gather_bits(std::span<const SourceColumn> src, bool validity, uint8_t* out) const;

 private:
  struct From {
    const uint8_t* bits;  // nullptr: no validity bitmap, every bit one
    int64_t at;           // the bit the next run starts at
    int64_t bytes;        // the bitmap's readable bytes
  };

  // The deposits cost every source a few operations per output word whatever the bits are: at
  // 20 inputs that was 15% of a merge's time, for bitmaps of a few nulls or rare flags. Where
  // the bits are mostly one value (the majority), the output is that value everywhere and only
  // the other bits, the exceptions, are placed one by one: each source's bits are read a word at
  // a time (twice: once to count them, once to find the exceptions), and an exception's output
  // row is found from its rank among the source's rows (a search of the source's running counts,
  // cum_, from the previous exception's word, then the bit of that rank in the word's mask).
  // False, nothing written, where that does not pay: below kMinSparseSources sources, or with
  // more than k_ exceptions in 256 bits. Measured on smart meter readings (benchmarks/merge.py's
  // data, a voltage validity and an outage flag at density d, one thread; deposits -> this):
  // 20 inputs, d = 2%: 70 -> 75 M t/s; 5%: 65 -> 70; 10%: even; 8 inputs, 0.5% and 2%: +1-5%;
  // 4 inputs, 0.5%: 1-2% slower, since the reads of every source's bits cost about as much as
  // the deposits of four. Sources without a bitmap count as ones.
  static constexpr size_t kMinSparseSources = 8;
  bool gather_sparse_bits(const std::array<From, kMaxSources>& from, uint8_t* out) const;

  // counts_, cum_ and taken_ from masks_ (of words_ words of k_ sources): what plan() and adopt()
  // share.
  void count();

  // The low n bits of v, in order, at the set bits of mask (n of them).
  static uint64_t deposit(uint64_t v, uint64_t mask, unsigned n) noexcept;

  size_t k_ = 0;
  size_t words_ = 0;
  int64_t rows_ = 0;  // the planned rows
  std::vector<uint64_t> masks_;  // masks_[w * k_ + s]: the bits of output word w whose rows come from source s
  std::vector<uint8_t> counts_;  // counts_[w * k_ + s]: the set bits of masks_[w * k_ + s]
  std::vector<uint32_t> cum_;    // cum_[s * (words_ + 1) + w]: source s's rows in words before w
  std::vector<int64_t> first_;   // each source's first row among the planned rows
  std::vector<int64_t> taken_;   // and how many of its rows they take
};

}  // namespace pao::gather_detail
