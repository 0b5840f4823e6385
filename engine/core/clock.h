#pragma once
// The engine's clock for latencies and scheduling: steady (never jumps with the wall clock), in
// nanoseconds since an arbitrary epoch, so only differences mean anything.
#include <chrono>
#include <cstdint>

namespace pao {

inline int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace pao
