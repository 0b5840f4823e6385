#include "core/buffer_pool.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <new>
#include <pthread.h>
#include <vector>

namespace pao {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kPooled = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kPooled = false;
#else
constexpr bool kPooled = true;
#endif
#else
constexpr bool kPooled = true;
#endif

// Class c covers sizes up to class_size(c): 2^(16 + c / 4) * (4 + c % 4) / 4.
constexpr size_t kClasses = 4 * (std::countr_zero(kPoolMax) - std::countr_zero(kPoolMin)) + 1;

// How many classes above a request's a block may come from: up to 1.68x the class's size.
constexpr size_t kLarger = 3;

constexpr size_t class_size(size_t c) noexcept { return (kPoolMin << (c / 4)) / 4 * (4 + c % 4); }

// The least class whose size holds `bytes` (kPoolMin <= bytes <= kPoolMax).
size_t class_of(size_t bytes) noexcept {
  const size_t octave = static_cast<size_t>(std::bit_width((bytes - 1) / kPoolMin));  // bytes <= kPoolMin << octave
  if (octave == 0) return 0;
  // bytes is in (kPoolMin << (octave - 1), kPoolMin << octave]: the quarter steps of that octave.
  const size_t base = kPoolMin << (octave - 1);
  const size_t step = base / 4;
  const size_t quarter = (bytes - base + step - 1) / step;  // 1..4
  return 4 * (octave - 1) + quarter;
}

struct Idle {
  uint8_t* block;
  uint64_t freed;  // Pool::frees when it came back: the least is the pool's least recently used
};

struct FreeList {
  std::mutex mutex;
  std::deque<Idle> blocks;  // oldest first, newest last: the most recently used memory goes out first
};

struct Pool {
  std::array<FreeList, kClasses> lists;
  uint64_t limit = kIdleLimit;  // set once, before any other thread can see the pool
  // Relaxed: a bound on idle memory and counters for stats(); the lists' mutexes order the blocks.
  std::atomic<uint64_t> idle{0};
  std::atomic<uint64_t> reused{0};
  std::atomic<uint64_t> fresh{0};
  std::atomic<uint64_t> frees{0};  // blocks taken back so far: their order of return
};

Pool& pool();

// A fork() while another thread holds a list's mutex would leave it locked forever in the child
// (only the forking thread survives there), and the child's next allocation of that class would
// hang: the lists are locked around the fork, as glibc's malloc does with its arenas (multiprocessing
// and Spark's Python workers fork).
void lock_all() noexcept {
  for (FreeList& l : pool().lists) l.mutex.lock();
}
void unlock_all() noexcept {
  for (FreeList& l : pool().lists) l.mutex.unlock();
}

// Never destroyed: batches may be released during interpreter shutdown, after static destructors.
Pool& pool() {
  static Pool* p = [] {
    auto* made = new Pool;
    if (const char* mib = std::getenv("PYARROW_OPS_IDLE_MIB"); mib != nullptr && *mib != '\0') {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(mib, &end, 10);
      if (end != nullptr && *end == '\0') made->limit = static_cast<uint64_t>(std::min<unsigned long long>(v, 1ULL << 40)) << 20;
    }
    pthread_atfork(lock_all, unlock_all, unlock_all);
    return made;
  }();
  return *p;
}

// Frees the idle block returned longest ago (each list's first is its oldest); false when none is
// idle. The lists are read one lock at a time, so the block found may be taken meanwhile: that
// list's oldest then goes instead, or, if it is empty by then, nothing (the caller looks again).
bool evict_oldest(Pool& p) {
  size_t oldest = kClasses;
  uint64_t when = UINT64_MAX;
  for (size_t c = 0; c < kClasses; ++c) {
    std::lock_guard lock(p.lists[c].mutex);
    if (!p.lists[c].blocks.empty() && p.lists[c].blocks.front().freed < when) {
      when = p.lists[c].blocks.front().freed;
      oldest = c;
    }
  }
  if (oldest == kClasses) return false;
  uint8_t* block = nullptr;
  {
    std::lock_guard lock(p.lists[oldest].mutex);
    if (p.lists[oldest].blocks.empty()) return true;
    block = p.lists[oldest].blocks.front().block;
    p.lists[oldest].blocks.pop_front();
  }
  p.idle.fetch_sub(class_size(oldest), std::memory_order_relaxed);
  std::free(block);
  return true;
}

uint8_t* allocate_new(size_t bytes) {
  // aligned_alloc wants a multiple of the alignment (Buffer asks for one; be safe for any caller).
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) & ~size_t{63}));
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

uint8_t* pool_allocate(size_t bytes, size_t* capacity) {
  if (!kPooled || bytes < kPoolMin || bytes > kPoolMax) {
    *capacity = bytes;
    return allocate_new(bytes);
  }
  const size_t c = class_of(bytes);
  Pool& p = pool();
  // The request's class, else one of the next kLarger: batches' sizes vary (a filter keeps a
  // different share of each morsel), so an idle block a little larger beats fresh pages.
  for (size_t k = c; k < std::min(kClasses, c + 1 + kLarger); ++k) {
    FreeList& list = p.lists[k];
    std::lock_guard lock(list.mutex);
    if (list.blocks.empty()) continue;
    uint8_t* block = list.blocks.back().block;
    list.blocks.pop_back();
    *capacity = class_size(k);
    p.idle.fetch_sub(*capacity, std::memory_order_relaxed);
    p.reused.fetch_add(1, std::memory_order_relaxed);
    return block;
  }
  *capacity = class_size(c);
  p.fresh.fetch_add(1, std::memory_order_relaxed);
  return allocate_new(*capacity);
}

void pool_free(uint8_t* block, size_t capacity) noexcept {
  if (block == nullptr) return;
  if (!kPooled || capacity < kPoolMin || capacity > kPoolMax) {
    std::free(block);
    return;
  }
  Pool& p = pool();
  if (capacity > p.limit) {
    std::free(block);
    return;
  }
  // Reserve the idle room first, so that concurrent frees never keep the pool past its limit; make
  // it by evicting the least recently returned blocks of any class. The block freed now is the
  // likeliest to be asked for again (a run allocates what it just freed), while a full pool kept
  // as it was would hold a previous workload's sizes for good: after a 1-input pipeline, a 4-input
  // one found the pool full of the other's classes and took 40% of its buffers fresh, every run.
  while (p.idle.fetch_add(capacity, std::memory_order_relaxed) + capacity > p.limit) {
    p.idle.fetch_sub(capacity, std::memory_order_relaxed);
    if (!evict_oldest(p)) {
      std::free(block);
      return;
    }
  }
  FreeList& list = p.lists[class_of(capacity)];
  try {
    std::lock_guard lock(list.mutex);
    list.blocks.push_back({block, p.frees.fetch_add(1, std::memory_order_relaxed)});
  } catch (...) {  // no memory for the list's growth: the block goes back instead
    p.idle.fetch_sub(capacity, std::memory_order_relaxed);
    std::free(block);
  }
}

PoolStats pool_stats() noexcept {
  const Pool& p = pool();
  return {p.idle.load(std::memory_order_relaxed), p.reused.load(std::memory_order_relaxed),
          p.fresh.load(std::memory_order_relaxed), p.limit};
}

uint64_t pool_release() noexcept {
  Pool& p = pool();
  uint64_t released = 0;
  for (size_t c = 0; c < kClasses; ++c) {
    std::deque<Idle> blocks;
    {
      std::lock_guard lock(p.lists[c].mutex);
      blocks.swap(p.lists[c].blocks);
    }
    for (const Idle& b : blocks) std::free(b.block);
    released += blocks.size() * class_size(c);
  }
  p.idle.fetch_sub(released, std::memory_order_relaxed);
  return released;
}

}  // namespace pao
