#pragma once
// A loser tree over the heads of k sorted sequences, and the keys it plays with: the merge's
// (gate/merge.cpp) tournament of inputs and the union's (ops/multi_input.cpp) of ports.
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "core/order_key.h"

namespace pao {

// A row as a tournament key: its time and an order (the input index while the input has rows;
// leaves + input for an input out of rows, and for each padding leaf, with the greatest time, so
// it sorts after every row, even one whose time is INT64_MAX), packed so that the merged order is
// plain integer order: one compare, and selects the compiler turns into conditional moves. The
// tree only ever compares rows of different inputs, so no position is needed.
//
// WideKeys pack any time: the 128-bit merged-order key (core/order_key.h).
struct WideKeys {
  using Key = OrderKey::Packed;
  Key make(int64_t time, uint32_t order) const noexcept { return OrderKey::of(time, order, 0).packed(); }
  Key last(uint32_t order) const noexcept { return make(std::numeric_limits<int64_t>::max(), order); }
  int64_t time(Key k) const noexcept { return OrderKey::unpack(k).time; }
  uint32_t order(Key k) const noexcept { return OrderKey::unpack(k).input(); }
};
// NarrowKeys pack time - base above `bits` order bits in 64: for a part whose times span less
// than 2^(63 - bits) - 1 (every part of timestamps within centuries of each other, in ns too for
// a few inputs), half the width, so a match costs one compare and one select instead of two each.
struct NarrowKeys {
  using Key = uint64_t;
  int64_t base;
  unsigned bits;  // enough for orders up to 2 * leaves
  uint64_t order_mask = (uint64_t{1} << bits) - 1;  // made once: order() is on every step's chain
  Key make(int64_t time, uint32_t order) const noexcept {
    return ((static_cast<uint64_t>(time) - static_cast<uint64_t>(base)) << bits) | order;
  }
  Key last(uint32_t order) const noexcept { return (((uint64_t{1} << (63 - bits)) - 1) << bits) | order; }
  int64_t time(Key k) const noexcept { return static_cast<int64_t>((k >> bits) + static_cast<uint64_t>(base)); }
  uint32_t order(Key k) const noexcept { return static_cast<uint32_t>(k & order_mask); }
  // Keys for times in [lo, hi] and `leaves` leaves, if they fit.
  static std::optional<NarrowKeys> fit(int64_t lo, int64_t hi, uint32_t leaves) noexcept {
    unsigned bits = 1;
    while ((uint64_t{1} << bits) < 2 * uint64_t{leaves}) ++bits;
    const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
    if (hi < lo || bits > 40 || span >= (uint64_t{1} << (63 - bits)) - 1) return std::nullopt;
    return NarrowKeys{lo, bits};
  }
};

inline uint32_t leaves_for(size_t inputs) noexcept {
  uint32_t leaves = 1;
  while (leaves < inputs) leaves <<= 1;
  return leaves;
}

// A loser tree over k inputs: leaves_ (k rounded up to a power of two) leaves; tree_[n] for
// 1 <= n < leaves_ holds the loser of the match at node n, winner_ the overall winner. After the
// winner's key changes, replay() plays its leaf-to-root path again: one comparison per level,
// written as selects so the unpredictable outcome costs no branch misprediction.
//
// The runner-up (the best key but the winner's) lost its last match to the winner, at a node on
// the winner's path, where it stays as that match's loser: runner() is the least loser on that
// path, found when asked (log k loads) rather than tracked by every replay, since only a long run
// of one input asks for it.
template <class Keys>
class LoserTree {
 public:
  using Key = typename Keys::Key;
  // `first[i]`: input i's first key (ended(i) for an input without rows), for i < k.
  LoserTree(const Keys& keys, std::span<const Key> first) : keys_(keys), leaves_(leaves_for(first.size())) {
    const auto k = static_cast<uint32_t>(first.size());
    // Play the whole tournament once, bottom up: winners[n] is the winner below node n.
    std::vector<Key> winners(2 * leaves_);
    for (uint32_t i = 0; i < leaves_; ++i) winners[leaves_ + i] = i < k ? first[i] : ended(i);
    tree_.assign(leaves_, Key{0});
    for (uint32_t n = leaves_ - 1; n >= 1; --n) {
      const Key a = winners[2 * n];
      const Key b = winners[2 * n + 1];
      winners[n] = a < b ? a : b;
      tree_[n] = a < b ? b : a;
    }
    winner_ = winners[1];
  }

  Key ended(uint32_t input) const noexcept { return keys_.last(leaves_ + input); }
  bool live(Key k) const noexcept { return keys_.order(k) < leaves_; }
  Key winner() const noexcept { return winner_; }
  // The runner-up: the least key but the winner's (not live when every other input has ended;
  // with one leaf there is none, and ~0 is not live either). The winner must be live.
  Key runner() const noexcept {
    Key runner = ~Key{0};
    for (uint32_t node = (leaves_ + keys_.order(winner_)) >> 1; node >= 1; node >>= 1) {
      runner = tree_[node] < runner ? tree_[node] : runner;
    }
    return runner;
  }

  void replay(uint32_t input, Key key) noexcept {
    for (uint32_t node = (leaves_ + input) >> 1; node >= 1; node >>= 1) {
      const Key other = tree_[node];
      tree_[node] = other < key ? key : other;
      key = other < key ? other : key;
    }
    winner_ = key;
  }

 private:
  Keys keys_;
  uint32_t leaves_;
  std::vector<Key> tree_;
  Key winner_ = 1;
};

// Runs the steps of two lanes (each step() false once its lane is done) in one loop, then the rest
// of the one left: a lane's step is one chain of dependent loads and compares (the winner's
// input, its next time, the matches up its tree, the next winner), so one lane alone leaves the
// core waiting on latency, and two independent chains fill each other's waits. The merge's parts
// (gate/merge.cpp) and the union's drain (ops/multi_input.cpp) run their lanes so.
template <class A, class B>
inline void step_together(A& a, B& b) {
  bool more_a = true;
  bool more_b = true;
  while (more_a && more_b) {
    more_a = a.step();
    more_b = b.step();
  }
  while (more_a) more_a = a.step();
  while (more_b) more_b = b.step();
}

}  // namespace pao
