#pragma once
// Bitmaps as Arrow lays them out: bit i is bit (i % 8) of byte i / 8, least significant first.
// Validity bitmaps and bool values both use it; every read and write of one goes through here.
#include <cstdint>

namespace pao {

inline bool get_bit(const uint8_t* bits, int64_t i) noexcept { return (bits[i >> 3] >> (i & 7)) & 1; }

// Sets bit i to v in a bitmap whose bytes started zeroed (setting is then enough).
inline void or_bit(uint8_t* bits, int64_t i, bool v) noexcept { bits[i >> 3] |= static_cast<uint8_t>(v) << (i & 7); }

inline int64_t bitmap_bytes(int64_t bits) noexcept { return (bits + 7) / 8; }

}  // namespace pao
