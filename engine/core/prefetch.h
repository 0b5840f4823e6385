#pragma once
// Requests the cache line holding `p` ahead of its use: for state whose address depends on data
// (a key's slot), a loop asks for the row a few places ahead so that the misses overlap.
//
// An asm statement, not __builtin_prefetch: GCC 12 removes __builtin_prefetch from a lambda (and
// from any small function) it finds to have no side effect; the inter-procedural const analysis
// counts a prefetch as none, and a call to a const function whose result is unused is dead. That
// silently dropped every prefetch of AggStates::run_indexed and update_indexed, which called
// theirs through a lambda: the compiled object held no prefetch instruction, and a profile of
// `running` put 22% of its samples on the miss the prefetch was meant to hide. A volatile asm
// statement is never removed. A prefetch never faults, so `p` may point anywhere.
namespace pao {

inline void prefetch(const void* p) noexcept {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht0 (%0)" : : "r"(p));
#elif defined(__aarch64__)
  asm volatile("prfm pldl1keep, [%0]" : : "r"(p));
#else
  __builtin_prefetch(p);
#endif
}

}  // namespace pao
