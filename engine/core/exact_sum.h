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
//  - ExactSum, 32 bytes: value = m * 2^scale with |m| < 2^126. Any sum whose terms span at most
//    about 70 binary orders of magnitude fits (values from 1e-6 to 1e15 together, say).
//  - WideSum, 272 bytes: a fixed-point integer in units of 2^-1074 (the least subnormal) wide
//    enough for any sum of up to 2^63 finite doubles. A caller moves to it when ExactSum::add
//    says the sum no longer fits, and keeps the ExactSum for later terms' flags.
// NaN and infinities are flags beside the finite part: the value is NaN if a NaN or both
// infinities were added, else the infinity added, else the finite part rounded to nearest, ties
// to even (a finite part beyond the double range rounds to an infinity, as IEEE rounding does).
#include <array>
#include <cstdint>

namespace pao {

// Trivial (it lives in unions): value-initialize, `ExactSum s{}`, for the empty sum.
struct ExactSum {
  __int128 m;
  int32_t scale;
  uint8_t special;  // kNaN | kPosInf | kNegInf, of the terms added so far
  static constexpr uint8_t kNaN = 1, kPosInf = 2, kNegInf = 4;

  // Adds x. False, with nothing changed, when the finite part would no longer fit: add x to a
  // WideSum then. NaN and infinities always go in (as flags).
  bool add(double x) noexcept;
  // Adds o's finite part (not its flags: the caller ORs `special`). False, nothing changed, when
  // the result would not fit.
  bool add(const ExactSum& o) noexcept;
  // The finite part, correctly rounded (flags ignored).
  double round() const noexcept;
  // The sum's value: the flags' NaN or infinity, else `finite`.
  double value(double finite) const noexcept;
  double value() const noexcept { return value(round()); }
};

class WideSum {
 public:
  void add(double finite) noexcept;               // a finite double
  void add(const ExactSum& fast) noexcept;        // its finite part
  void add(const WideSum& o) noexcept;
  double round() const noexcept;                  // correctly rounded (beyond the range: infinity)

 private:
  // Two's complement, least significant limb first; bit i weighs 2^(i - 1074). 2^63 terms below
  // 2^1024 stay below 2^1087, so 1074 + 1087 bits and a sign bit fit in 34 limbs.
  static constexpr int kLimbs = 34;
  void add_at(unsigned __int128 magnitude, bool negative, int bit) noexcept;
  std::array<uint64_t, kLimbs> limbs_{};
};

}  // namespace pao
