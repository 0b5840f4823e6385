#pragma once
// A tuple's place in the merged order of N time-sorted inputs (docs/semantics.md): by time, then
// input index, then position in its input. Every part of the engine that orders tuples of several
// inputs uses this one key: the sequential merge's loser tree, the T-Gate's skip list, and first /
// last in the aggregate states (which compare the keys of the tuples they keep).
//
// Two forms of one value:
//  - OrderKey {time, seq}, seq = input << kPositionBits | position: a trivial struct, so it fits
//    in the aggregate states' unions;
//  - Packed, an unsigned 128-bit integer whose integer order is the merged order (the time with
//    its sign bit flipped above seq), so comparing two keys is one compare, and selects compile to
//    conditional moves (the loser tree) and a skip list never meets two equal keys (the T-Gate).
#include <cstdint>

namespace pao {

struct OrderKey {
  // Rows per input before the position would reach the input bits: 2^40, about 10^12.
  static constexpr int kPositionBits = 40;
  // Inputs a key can name: 2^24 (the T-Gate admits up to 2^24 - 1).
  static constexpr int kInputBits = 64 - kPositionBits;
  static constexpr uint64_t kPositionMask = (uint64_t{1} << kPositionBits) - 1;

  int64_t time;
  uint64_t seq;

  using Packed = unsigned __int128;

  static constexpr OrderKey of(int64_t time, uint32_t input, uint64_t position) noexcept {
    return {time, (uint64_t{input} << kPositionBits) | position};
  }
  constexpr uint32_t input() const noexcept { return static_cast<uint32_t>(seq >> kPositionBits); }
  constexpr uint64_t position() const noexcept { return seq & kPositionMask; }

  constexpr Packed packed() const noexcept {
    return (static_cast<Packed>(static_cast<uint64_t>(time) ^ kSignBit) << 64) | seq;
  }
  static constexpr OrderKey unpack(Packed k) noexcept {
    return {static_cast<int64_t>(static_cast<uint64_t>(k >> 64) ^ kSignBit), static_cast<uint64_t>(k)};
  }

  friend constexpr bool operator<(const OrderKey& a, const OrderKey& b) noexcept {
    return a.time < b.time || (a.time == b.time && a.seq < b.seq);
  }
  friend constexpr bool operator==(const OrderKey&, const OrderKey&) noexcept = default;

 private:
  static constexpr uint64_t kSignBit = uint64_t{1} << 63;
};

static_assert(OrderKey::of(-1, 0, 0).packed() < OrderKey::of(0, 0, 0).packed(), "signed time order");
static_assert(OrderKey::of(5, 1, 0).packed() > OrderKey::of(5, 0, OrderKey::kPositionMask).packed(),
              "input before position");
static_assert(OrderKey::unpack(OrderKey::of(-7, 3, 9).packed()) == OrderKey::of(-7, 3, 9), "round trip");

}  // namespace pao
