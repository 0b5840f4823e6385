#pragma once
// The cache line, for data that threads write concurrently: state of different owners kept on
// lines of their own so that one's writes do not invalidate the other's reads (false sharing).
// 64 bytes on the x86-64 and ARMv8 cores we run on. Not std::hardware_destructive_interference_size:
// GCC warns that its value may differ between compilations (-Winterference-size), and a layout
// must not. Every padded struct checks its layout with static_asserts beside its definition.
#include <cstddef>

namespace pao::sync {

inline constexpr std::size_t kCacheLine = 64;

}  // namespace pao::sync
