#pragma once
// Exact sums of doubles, rounded once when read (docs/semantics.md, "Floating-point sums").
//
// Why exact: a floating-point sum added one value at a time depends on the order of the
// additions, so every design that splits the work (threads updating windows unmerged, slices
// combined into windows, partitions on Spark) would need the one order of a sequential run to
// give the same bits. The exact sum has no order: its correctly rounded value is the same
// however the terms are grouped, and it is the best double there is for the true sum
// (math.fsum's result, without fsum's intermediate overflow).
//
// Two forms, so that the common case costs a shift and a 128-bit add:
//  - ExactSum, 32 bytes: value = m * 2^scale with -2^125 <= m < 2^125 (fits()). Any sum whose terms span at most
//    about 70 binary orders of magnitude fits (values from 1e-6 to 1e15 together, say).
//  - WideSum, 272 bytes: a fixed-point integer in units of 2^-1074 (the least subnormal) wide
//    enough for any sum of up to 2^63 finite doubles. A caller moves to it when ExactSum::add
//    says the sum no longer fits, and keeps the ExactSum for later terms' flags.
// NaN and infinities are flags beside the finite part: the value is NaN if a NaN or both
// infinities were added, else the infinity added, else the finite part rounded to nearest, ties
// to even (a finite part beyond the double range rounds to an infinity, as IEEE rounding does).
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

namespace pao {

// Trivial (it lives in unions): value-initialize, `ExactSum s{}`, for the empty sum.
struct ExactSum {
  __int128 m;
  int32_t scale;
  uint8_t special;  // kNaN | kPosInf | kNegInf, of the terms added so far
  static constexpr uint8_t kNaN = 1, kPosInf = 2, kNegInf = 4;
  // A first term's mantissa goes kHeadroom to kHeadroom + kScaleGrid - 1 bits above the scale:
  // at most 53 + 27 = 80 bits, leaving 45 for the sum to grow before it must move to a WideSum.
  static constexpr int32_t kHeadroom = 20;
  static constexpr int32_t kScaleGrid = 8;

  // Adds x. False, with nothing changed, when the finite part would no longer fit: add x to a
  // WideSum then. NaN and infinities always go in (as flags).
  bool add(double x) noexcept {
    // Inline: a normal x at or above the scale, shifted by at most 72 bits (|x's mantissa << d| <
    // 2^125), added to |m| < 2^125 cannot overflow; the result is kept if it stays below 2^125.
    const auto bits = std::bit_cast<uint64_t>(x);
    const auto field = static_cast<int32_t>((bits >> 52) & 0x7ff);
    const int32_t e = field - 1075;
    if (field == 0 || field == 0x7ff) return add_slow(x);
    // The first term (m == 0: the scale means nothing yet) sets the scale at least kHeadroom
    // binary orders of magnitude below x's mantissa, so that later terms down to 2^-kHeadroom of
    // it stay on this path (e >= scale); never below the least subnormal (round() relies on
    // scale >= -1074). Rounded down to a multiple of kScaleGrid, so that sums whose first terms
    // are within a few binary orders of magnitude of each other (the slices of one column) mostly
    // share a scale, and merging them takes add(ExactSum)'s inline path rather than a realignment.
    if (m == 0) scale = std::max((e - kHeadroom) & ~(kScaleGrid - 1), -1074);
    if (e >= scale && e - scale <= 72) {
      __int128 v = static_cast<__int128>((bits & ((uint64_t{1} << 52) - 1)) | (uint64_t{1} << 52)) << (e - scale);
      if ((bits >> 63) != 0) v = -v;
      const __int128 r = m + v;
      if (fits(r)) {
        m = r;
        return true;
      }
    }
    return add_slow(x);
  }
  // Adds o's finite part (not its flags: the caller ORs `special`). False, nothing changed, when
  // the result would not fit.
  bool add(const ExactSum& o) noexcept {
    if (m == 0) {  // a copy (an empty o copies as empty)
      m = o.m;
      scale = o.scale;
      return true;
    }
    // Inline: o at or above this scale, with |o.m << d| < 2^125 (o.m's bits from 125 - d up are
    // all sign), so the sum cannot overflow; kept if it fits.
    if (o.scale >= scale && o.scale - scale < 125) {
      const int32_t d = o.scale - scale;
      const __int128 top = o.m >> (125 - d);
      if (top == 0 || top == -1) {
        const __int128 r = m + (o.m << d);
        if (fits(r)) {
          m = r;
          return true;
        }
      }
    }
    return add_slow(o);
  }
  // The finite part, correctly rounded (flags ignored): inline for a result in the normal range
  // (round_normal), the general case out of line. A running sum() rounds at every row, where the
  // call was a tenth of its time (sessions pipeline, 1,024 users).
  double round() const noexcept {
    if (m == 0) return 0.0;
    const auto mag = m < 0 ? -static_cast<unsigned __int128>(m) : static_cast<unsigned __int128>(m);
    if (double r; round_normal(mag, scale, m < 0, r)) [[likely]] return r;
    return round_slow();
  }
  // ±mag * 2^e0 (mag > 0) rounded to the nearest double, ties to even, into `out` when that is a
  // normal double; false otherwise. The top 63 bits of mag, with a sticky bit for any nonzero bit
  // below them, convert to the double mag would round to (63 bits leave 10 under a double's 53,
  // so the sticky bit only turns an exact half into more than half, as the bits it stands for
  // do), in one signed conversion that rounds in the hardware, and the scaling by a power of two
  // is exact. (Deciding the rounding with a compare instead was a branch a running sum()
  // mispredicts about every other row.)
  static bool round_normal(unsigned __int128 mag, int32_t e0, bool negative, double& out) noexcept {
    const auto hi = static_cast<uint64_t>(mag >> 64);
    const int length = hi != 0 ? 128 - std::countl_zero(hi) : 64 - std::countl_zero(static_cast<uint64_t>(mag));
    const int drop = std::max(length - 63, 0);
    const int32_t low = e0 + drop;        // the exponent of the kept bits' last
    const int32_t top = e0 + length - 1;  // and of the leading bit
    if (low < -1022 || top > 1023) return false;
    const auto below = mag & ((static_cast<unsigned __int128>(1) << drop) - 1);
    const auto u = static_cast<int64_t>(static_cast<uint64_t>(mag >> drop) | static_cast<uint64_t>(below != 0));
    const double r = static_cast<double>(u) * std::bit_cast<double>(static_cast<uint64_t>(low + 1023) << 52);
    out = negative ? -r : r;
    return true;
  }
  // The sum's value: the flags' NaN or infinity, else `finite`.
  double value(double finite) const noexcept;
  double value() const noexcept { return value(round()); }

  // |m| < 2^125 (-2^125 <= m < 2^125), so two of them add without overflow.
  static bool fits(__int128 r) noexcept {
    const __int128 top = r >> 125;
    return top == 0 || top == -1;
  }

 private:
  double round_slow() const noexcept;
  bool add_slow(double x) noexcept;
  bool add_slow(const ExactSum& o) noexcept;
};

class WideSum {
 public:
  void add(double finite) noexcept;               // a finite double
  void add(const ExactSum& fast) noexcept;        // its finite part
  void add(const WideSum& o) noexcept;
  double round() const noexcept;                  // correctly rounded (beyond the range: infinity)

  // Two's complement, least significant limb first; bit i weighs 2^(i - 1074). 2^63 terms below
  // 2^1024 stay below 2^1087, so 1074 + 1087 bits and a sign bit fit in 34 limbs. Read and set
  // whole by a saved window state (window/aggregates.h, AggStates::save).
  static constexpr int kLimbs = 34;
  const std::array<uint64_t, kLimbs>& limbs() const noexcept { return limbs_; }
  void set_limbs(const std::array<uint64_t, kLimbs>& limbs) noexcept { limbs_ = limbs; }

 private:
  void add_at(unsigned __int128 magnitude, bool negative, int bit) noexcept;
  std::array<uint64_t, kLimbs> limbs_{};
};

}  // namespace pao
