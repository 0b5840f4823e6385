#pragma once
// Bitmaps as Arrow lays them out: bit i is bit (i % 8) of byte i / 8, least significant first.
// Validity bitmaps and bool values both use it; every read and write of one goes through here.
#include <cstdint>

namespace pao {

inline bool get_bit(const uint8_t* bits, int64_t i) noexcept { return (bits[i >> 3] >> (i & 7)) & 1; }

// Sets bit i to v in a bitmap whose bytes started zeroed (setting is then enough).
inline void or_bit(uint8_t* bits, int64_t i, bool v) noexcept { bits[i >> 3] |= static_cast<uint8_t>(v) << (i & 7); }

inline int64_t bitmap_bytes(int64_t bits) noexcept { return (bits + 7) / 8; }

// The set bits of x. std::popcount is a library call (libgcc's __popcountdi2) in a build for the
// baseline x86-64, which has no popcnt instruction; this is the same count in a dozen inlined
// operations, and the instruction where the target has it.
inline int popcount(uint64_t x) noexcept {
#if defined(__POPCNT__) || defined(__aarch64__)
  return __builtin_popcountll(x);
#else
  x -= (x >> 1) & 0x5555555555555555ULL;
  x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
  x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
  return static_cast<int>((x * 0x0101010101010101ULL) >> 56);
#endif
}

}  // namespace pao
