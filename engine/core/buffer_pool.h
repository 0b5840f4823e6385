#pragma once
// Large buffers recycled instead of returned to the allocator. A pipeline frees and allocates the
// same few sizes of column buffer (a morsel's columns, a gather's output) thousands of times a
// second; from glibc each such buffer is fresh pages (mmap, or a heap trimmed back to the OS) that
// the kernel zeroes on first touch, which measured a fifth of a 4-input filter pipeline's time
// (`clear_page_erms`). Here a freed buffer of 64 KiB to 64 MiB waits in a free list of its size
// class for the next request of that class, already mapped and warm in cache.
//
// Size classes step by a quarter of a power of two (64 KiB, 80, 96, 112, 128, 160, ...), so a
// buffer's capacity is at most 25% above its request. Idle buffers are kept up to
// PoolStats::idle_limit bytes in all: a buffer freed into a full pool makes its room by sending the
// least recently freed idle buffers (of any class) back to the allocator, so the memory the pool
// holds on top of live batches is bounded and is what the current work uses. pool_release() hands
// every idle buffer back.
//
// Thread safety: any thread may allocate and free (batches are released by whichever thread drops
// them last, Python's included); each class's list has its own mutex, held for a push or a pop (an
// eviction reads the lists one lock at a time, never two at once, so there is no lock order).
// Under AddressSanitizer the pool is off (every buffer comes from and returns to the allocator),
// so a use after free is still caught.
#include <cstddef>
#include <cstdint>

namespace pao {

// A 64-byte aligned block of at least `bytes` (above 0); *capacity receives its usable size, which
// pool_free() must be given back.
uint8_t* pool_allocate(size_t bytes, size_t* capacity);
void pool_free(uint8_t* block, size_t capacity) noexcept;

struct PoolStats {
  uint64_t idle_bytes = 0;  // held in free lists now
  uint64_t reused = 0;      // allocations served from a free list, since the process started
  uint64_t fresh = 0;       // allocations of a pooled size class that went to the allocator
  uint64_t idle_limit = 0;  // the most idle_bytes may be (see kIdleLimit)
};
PoolStats pool_stats() noexcept;
// Frees every idle buffer; returns their bytes.
uint64_t pool_release() noexcept;

inline constexpr size_t kPoolMin = size_t{64} << 10;  // smaller: the allocator's own bins do well
inline constexpr size_t kPoolMax = size_t{64} << 20;  // larger: rare, and too big to keep idle
// The limit on idle bytes: kIdleLimit, or the environment's PYARROW_OPS_IDLE_MIB (read once, at
// the pool's first use; 0 turns recycling off), for processes of which many run at once (Spark's
// Python workers, one per core, each keeping its idle buffers between tasks).
inline constexpr uint64_t kIdleLimit = uint64_t{256} << 20;

}  // namespace pao
