#include "core/exact_sum.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace pao {

namespace {

using u128 = unsigned __int128;

u128 magnitude(__int128 v) noexcept { return v < 0 ? -static_cast<u128>(v) : static_cast<u128>(v); }

int bit_length(u128 v) noexcept {
  const auto hi = static_cast<uint64_t>(v >> 64);
  const auto lo = static_cast<uint64_t>(v);
  return hi != 0 ? 128 - std::countl_zero(hi) : 64 - std::countl_zero(lo);
}

// A finite, nonzero double as ±mantissa * 2^exponent with an odd mantissa (at most 53 bits).
struct Split {
  uint64_t mantissa;
  int32_t exponent;
  bool negative;
};

// False for zero (nothing to add).
bool split(uint64_t bits, Split& out) noexcept {
  const auto field = static_cast<int32_t>((bits >> 52) & 0x7ff);
  const uint64_t fraction = bits & ((uint64_t{1} << 52) - 1);
  uint64_t mantissa = field == 0 ? fraction : fraction | (uint64_t{1} << 52);
  if (mantissa == 0) return false;
  int32_t exponent = field == 0 ? -1074 : field - 1075;
  const int zeros = std::countr_zero(mantissa);
  out = {mantissa >> zeros, exponent + zeros, (bits >> 63) != 0};
  return true;
}

// The double nearest to ±mag * 2^e0 (ties to even), mag > 0. e0 >= -1074, so the value is a
// multiple of the least subnormal and its leading bit lands on the double grid. Only the top 53
// bits (fewer below 2^-1022) survive; the bits under them decide the rounding.
double round_scaled(u128 mag, int32_t e0, bool negative) noexcept {
  if (double r; ExactSum::round_normal(mag, e0, negative, r)) [[likely]] return r;
  const int length = bit_length(mag);
  const int32_t top = e0 + length - 1;  // the exponent of the leading bit
  const int precision = top >= -1022 ? 53 : top + 1075;  // subnormals keep fewer bits; >= 1
  const int shift = std::max(length - precision, 0);     // bits dropped
  auto q = static_cast<uint64_t>(mag >> shift);
  if (shift > 0) {
    const u128 half = u128{1} << (shift - 1);
    const u128 rest = mag & ((half << 1) - 1);
    if (rest > half || (rest == half && (q & 1) != 0)) ++q;
  }
  // q * 2^(e0 + shift) lies on the double grid (q <= 2^53), so ldexp is exact, or infinite past
  // the range, which is the rounded value then. With a normal power of two the product is the
  // same, exactly (or the same infinity), without ldexp's call: a running sum() rounds its sum at
  // every row, where ldexp was a third of the rounding's time.
  const int32_t k = e0 + shift;
  const double r = k >= -1022 && k <= 1023
                       ? static_cast<double>(q) * std::bit_cast<double>(static_cast<uint64_t>(k + 1023) << 52)
                       : std::ldexp(static_cast<double>(q), k);
  return negative ? -r : r;
}

}  // namespace

bool ExactSum::add_slow(double x) noexcept {
  const auto bits = std::bit_cast<uint64_t>(x);
  if (((bits >> 52) & 0x7ff) == 0x7ff) {
    special |= (bits & ((uint64_t{1} << 52) - 1)) != 0 ? kNaN : (bits >> 63) != 0 ? kNegInf : kPosInf;
    return true;
  }
  Split s;
  if (!split(bits, s)) return true;  // ±0.0
  const __int128 v = s.negative ? -static_cast<__int128>(s.mantissa) : static_cast<__int128>(s.mantissa);
  ExactSum term{};
  term.m = v;
  term.scale = s.exponent;
  return add_slow(term);
}

bool ExactSum::add_slow(const ExactSum& o) noexcept {
  if (o.m == 0) return true;
  if (m == 0) {
    m = o.m;
    scale = o.scale;
    return true;
  }
  // Align both to the smaller scale; shifting left must keep each within fits().
  __int128 a = m;
  __int128 b = o.m;
  const int32_t to = std::min(scale, o.scale);
  const int64_t da = int64_t{scale} - to;
  const int64_t db = int64_t{o.scale} - to;
  if (bit_length(magnitude(a)) + da > 125 || bit_length(magnitude(b)) + db > 125) return false;
  a <<= da;
  b <<= db;
  const __int128 r = a + b;  // both of magnitude below 2^125: no overflow
  if (!fits(r)) return false;
  m = r;
  scale = to;
  return true;
}

double ExactSum::round_slow() const noexcept { return round_scaled(magnitude(m), scale, m < 0); }

double ExactSum::value(double finite) const noexcept {
  if ((special & kNaN) != 0 || (special & (kPosInf | kNegInf)) == (kPosInf | kNegInf)) return std::nan("");
  if ((special & kPosInf) != 0) return INFINITY;
  if ((special & kNegInf) != 0) return -INFINITY;
  return finite;
}

void WideSum::add_at(unsigned __int128 mag, bool negative, int bit) noexcept {
  const int l0 = bit / 64;
  const int s = bit % 64;
  const auto lo = static_cast<uint64_t>(mag);
  const auto hi = static_cast<uint64_t>(mag >> 64);
  const uint64_t words[3] = {lo << s, s == 0 ? hi : (lo >> (64 - s)) | (hi << s), s == 0 ? 0 : hi >> (64 - s)};
  // Add (or subtract) the three words at limb l0, then carry (borrow) upwards while one is left.
  bool carry = false;
  for (int l = l0; l < kLimbs; ++l) {
    const uint64_t w = l - l0 < 3 ? words[l - l0] : 0;
    if (l - l0 >= 3 && !carry) break;
    uint64_t r;
    bool c1, c2;
    if (!negative) {
      c1 = __builtin_add_overflow(limbs_[l], w, &r);
      c2 = __builtin_add_overflow(r, uint64_t{carry}, &r);
    } else {
      c1 = __builtin_sub_overflow(limbs_[l], w, &r);
      c2 = __builtin_sub_overflow(r, uint64_t{carry}, &r);
    }
    limbs_[l] = r;
    carry = c1 || c2;
  }
}

void WideSum::add(double finite) noexcept {
  Split s;
  if (!split(std::bit_cast<uint64_t>(finite), s)) return;
  add_at(s.mantissa, s.negative, s.exponent + 1074);
}

void WideSum::add(const ExactSum& fast) noexcept {
  if (fast.m == 0) return;
  add_at(magnitude(fast.m), fast.m < 0, fast.scale + 1074);  // scale >= -1074: a double's exponent
}

void WideSum::add(const WideSum& o) noexcept {
  bool carry = false;
  for (int l = 0; l < kLimbs; ++l) {
    uint64_t r;
    const bool c1 = __builtin_add_overflow(limbs_[l], o.limbs_[l], &r);
    const bool c2 = __builtin_add_overflow(r, uint64_t{carry}, &r);
    limbs_[l] = r;
    carry = c1 || c2;
  }
}

double WideSum::round() const noexcept {
  const bool negative = (limbs_[kLimbs - 1] >> 63) != 0;
  std::array<uint64_t, kLimbs> mag = limbs_;
  if (negative) {  // two's complement: invert and add one
    bool carry = true;
    for (uint64_t& l : mag) {
      l = ~l;
      if (carry) carry = ++l == 0;
    }
  }
  int length = 0;
  for (int l = kLimbs - 1; l >= 0 && length == 0; --l) {
    if (mag[l] != 0) length = 64 * l + 64 - std::countl_zero(mag[l]);
  }
  if (length == 0) return 0.0;
  // The top 127 bits (or all), with any set bit below them folded into the window's lowest bit:
  // that keeps the rounding's "exactly half" test honest, and 127 > 53 + 2 leaves the bits above
  // it untouched. Then the 128-bit rounding applies.
  const int lo = std::max(length - 127, 0);
  const auto limb = [&](int l) { return l < kLimbs ? mag[l] : uint64_t{0}; };
  const int l0 = lo / 64;
  const int s = lo % 64;
  const uint64_t w0 = s == 0 ? limb(l0) : (limb(l0) >> s) | (limb(l0 + 1) << (64 - s));
  const uint64_t w1 = s == 0 ? limb(l0 + 1) : (limb(l0 + 1) >> s) | (limb(l0 + 2) << (64 - s));
  u128 window = (u128{w1} << 64) | w0;
  bool sticky = s != 0 && (mag[l0] & ((uint64_t{1} << s) - 1)) != 0;
  for (int l = 0; l < l0 && !sticky; ++l) sticky = mag[l] != 0;
  if (sticky) window |= 1;
  return round_scaled(window, -1074 + lo, negative);
}

}  // namespace pao
