#include "gate/tgate.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.h"

namespace pao::gate {
namespace {

constexpr int kMaxHeight = 20;
constexpr uint64_t kIdle = ~uint64_t{0};
}  // namespace

struct TGate::Node {
  Key key;
  Arena* arena;
  uint32_t row;  // row within arena->batch
  uint8_t height;
  // `height` atomic links follow the node in its arena.
  std::atomic<Node*>* next() noexcept { return reinterpret_cast<std::atomic<Node*>*>(this + 1); }
};

struct TGate::Arena {
  Batch batch;
  uint32_t input = 0;
  Key last_key = 0;
  // The input's next arena, appended by its producer (release) and followed by reclaim()
  // (acquire). An input's newest arena is never retired while the input is open, so the
  // producer never writes into freed memory.
  std::atomic<Arena*> next_in_input{nullptr};
  Arena* next_retired = nullptr;  // reclaim()'s private list
  uint64_t retire_epoch = 0;
  size_t capacity = 0;  // bytes of the block the arena lives in (reused through the pool)
};

static_assert(alignof(TGate::Node) <= 16);

// Per input. The first block is written by the input's producer and read by readers and
// reclaim(); the second is the producer's own.
struct alignas(sync::kCacheLine) TGate::InputState {
  std::atomic<uint64_t> published{0};  // tuples linked into the list (release after linking)
  std::atomic<int64_t> bound{INT64_MIN};  // least time still to come (release)
  std::atomic<bool> closed{false};        // release after the last link
  std::atomic<size_t> live_arenas{0};     // inserted, not yet freed
  std::atomic<Arena*> first{nullptr};     // the input's first arena, for reclaim()
  alignas(sync::kCacheLine) Arena* tail = nullptr;  // producer: newest arena
  uint64_t next_position = 0;             // producer
  int64_t bound_local = INT64_MIN;        // producer: mirror of bound
  Arena* reclaim_cursor = nullptr;        // reclaim(): oldest arena not yet retired
  bool reclaim_done = false;              // reclaim(): every arena of the closed input retired
};

struct alignas(sync::kCacheLine) TGate::ReaderState {
  Node* head = nullptr;                   // last node returned (or the sentinel)
  std::atomic<Node*> shared_head{nullptr};  // head, published for reclaim() (release)
  std::vector<uint64_t> passed;           // per input: tuples of it this reader returned
  // Per input: its `published` as this reader last loaded it (acquire). Counts only grow, so a
  // value above passed[i] proves a linked tuple ahead without touching the producer's line.
  std::vector<uint64_t> published_seen;
  std::vector<uint32_t> exposed;          // inputs whose linked tuples this reader all passed
  std::vector<uint8_t> is_exposed;
  std::vector<int64_t> bound_seen;        // bound loaded for each exposed input this call
  std::vector<uint8_t> closed_seen;
  uint32_t since_reclaim = 0;
};

struct alignas(sync::kCacheLine) TGate::ProducerState {
  std::atomic<uint64_t> announce{kIdle};  // epoch while inside an insert, else kIdle
  Node* preds[kMaxHeight];                // hints: predecessors of the last key at each level
  Node* succs[kMaxHeight];
  uint64_t rng = 0x9E3779B97F4A7C15ULL;
};

TGate::TGate(TGateOptions options) : options_(options) {
  // Layout (checked here, where the private types are visible): each input's, reader's and
  // producer's state starts a cache line, and an input's producer-only block starts one of its
  // own, apart from the block readers load.
  static_assert(alignof(InputState) == sync::kCacheLine && alignof(ReaderState) == sync::kCacheLine &&
                alignof(ProducerState) == sync::kCacheLine);
  static_assert(offsetof(InputState, tail) % sync::kCacheLine == 0 && offsetof(InputState, tail) > 0);
  if (options_.inputs == 0 || options_.inputs >= (size_t{1} << OrderKey::kInputBits)) {
    throw Error(ErrorKind::kInvalidInput, "a T-Gate needs between 1 and 2^24 - 1 inputs");
  }
  if (options_.readers == 0 || options_.producers == 0 || options_.arena_rows < 1 ||
      options_.max_arenas_per_input < 2) {
    throw Error(ErrorKind::kInvalidInput, "a T-Gate needs at least one reader, one producer, "
                                          "one row per arena and two arenas per input");
  }
  const size_t head_bytes = sizeof(Node) + kMaxHeight * sizeof(std::atomic<Node*>);
  void* mem = ::operator new(head_bytes, std::align_val_t{sync::kCacheLine});
  head_ = new (mem) Node{0, nullptr, 0, kMaxHeight};
  for (int l = 0; l < kMaxHeight; ++l) new (&head_->next()[l]) std::atomic<Node*>(nullptr);

  inputs_ = std::make_unique<InputState[]>(options_.inputs);
  readers_ = std::make_unique<ReaderState[]>(options_.readers);
  for (size_t r = 0; r < options_.readers; ++r) {
    ReaderState& s = readers_[r];
    s.head = head_;
    s.shared_head.store(head_, std::memory_order_relaxed);
    s.passed.assign(options_.inputs, 0);
    s.published_seen.assign(options_.inputs, 0);
    s.is_exposed.assign(options_.inputs, 1);
    s.bound_seen.assign(options_.inputs, INT64_MIN);
    s.closed_seen.assign(options_.inputs, 0);
    s.exposed.resize(options_.inputs);
    for (size_t i = 0; i < options_.inputs; ++i) s.exposed[i] = static_cast<uint32_t>(i);
  }
  producers_ = std::make_unique<ProducerState[]>(options_.producers);
  for (size_t p = 0; p < options_.producers; ++p) producers_[p].rng ^= (p + 1) * 0xBF58476D1CE4E5B9ULL;
}

TGate::~TGate() {
  // No thread uses the gate any more: free every arena, retired or not.
  for (Arena* a = retired_; a != nullptr;) {
    Arena* next = a->next_retired;
    free_arena(a);
    a = next;
  }
  for (size_t i = 0; i < options_.inputs; ++i) {
    InputState& in = inputs_[i];
    Arena* a = in.reclaim_done ? nullptr
               : in.reclaim_cursor ? in.reclaim_cursor
                                   : in.first.load(std::memory_order_relaxed);
    while (a != nullptr) {
      Arena* next = a->next_in_input.load(std::memory_order_relaxed);
      free_arena(a);
      a = next;
    }
  }
  head_->~Node();
  ::operator delete(head_, std::align_val_t{sync::kCacheLine});
  for (const Block& b : pool_) ::operator delete(b.memory, std::align_val_t{sync::kCacheLine});
}

TGate::Arena* TGate::make_arena(size_t slot, uint32_t input, const Batch& batch, const int64_t* times) {
  ProducerState& p = producers_[slot];
  InputState& in = inputs_[input];
  const auto n = static_cast<size_t>(batch.num_rows());
  // Heights first (geometric, p = 1/4: on average 1.33 links per node), to size the arena.
  std::vector<uint8_t> heights(n);
  size_t bytes = (sizeof(Arena) + 15) & ~size_t{15};
  for (size_t r = 0; r < n; ++r) {
    p.rng ^= p.rng >> 12;
    p.rng ^= p.rng << 25;
    p.rng ^= p.rng >> 27;
    const uint64_t bits = p.rng * 0x2545F4914F6CDD1DULL;
    const int h = 1 + std::min(kMaxHeight - 1, std::countr_one(bits) / 2);
    heights[r] = static_cast<uint8_t>(h);
    bytes += (sizeof(Node) + h * sizeof(std::atomic<Node*>) + 15) & ~size_t{15};
  }
  size_t capacity = 0;
  void* mem = take_block(bytes, capacity);
  auto* a = new (mem) Arena();
  a->capacity = capacity;
  a->batch = batch;
  a->input = input;
  auto* at = static_cast<uint8_t*>(mem) + ((sizeof(Arena) + 15) & ~size_t{15});
  for (size_t r = 0; r < n; ++r) {
    auto* node = new (at) Node{OrderKey::of(times[r], input, in.next_position + r).packed(), a,
                               static_cast<uint32_t>(r), heights[r]};
    for (int l = 0; l < heights[r]; ++l) new (&node->next()[l]) std::atomic<Node*>(nullptr);
    at += (sizeof(Node) + heights[r] * sizeof(std::atomic<Node*>) + 15) & ~size_t{15};
  }
  a->last_key = OrderKey::of(times[n - 1], input, in.next_position + n - 1).packed();
  const size_t live = live_arenas_total_.fetch_add(1, std::memory_order_relaxed) + 1;
  size_t peak = peak_live_arenas_.load(std::memory_order_relaxed);
  while (live > peak && !peak_live_arenas_.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
  in.live_arenas.fetch_add(1, std::memory_order_relaxed);
  return a;
}

void TGate::free_arena(Arena* a) {
  // The total drops before the input's count, whose release store publishes the drop to the
  // input's producer (its acquire load lets it insert again), and make_arena raises the total
  // before the input's count: so the total never exceeds inputs * max_arenas_per_input, and
  // neither does the peak. (The other order let a producer's new arena be counted while a
  // freed one still was: a peak one over that bound.)
  live_arenas_total_.fetch_sub(1, std::memory_order_relaxed);
  inputs_[a->input].live_arenas.fetch_sub(1, std::memory_order_release);
  const size_t capacity = a->capacity;
  a->~Arena();  // releases the batch; nodes are trivially destructible
  give_block(a, capacity);
}

// Arena blocks. An arena of 4,096 rows takes about 200 KB. Allocated fresh for every arena and
// freed after reclamation, each node store in make_arena() went to memory not in cache (the
// largest T-Gate cost in a perf profile of the sliced design on W-OI). A few freed blocks are kept
// and reused, newest first, as the most likely to be in cache still. Small arenas (a push of a few
// rows) are not pooled: they are allocated at their size. The pool's mutex is taken
// once per arena, by a producer or the reclaiming thread; it also orders the freeing thread's last
// access to a block before the next owner's first write.
void* TGate::take_block(size_t bytes, size_t& capacity) {
  if (bytes < kBlockQuantum) {
    capacity = bytes;
    return ::operator new(bytes, std::align_val_t{sync::kCacheLine});
  }
  {
    std::lock_guard lock(pool_mutex_);
    for (size_t i = pool_.size(); i-- > 0;) {
      if (pool_[i].capacity >= bytes) {
        const Block b = pool_[i];
        pool_.erase(pool_.begin() + static_cast<std::ptrdiff_t>(i));
        capacity = b.capacity;
        return b.memory;
      }
    }
  }
  // Rounded up, so that arenas of nearly the same size (random node heights) share blocks.
  capacity = (bytes + kBlockQuantum - 1) / kBlockQuantum * kBlockQuantum;
  return ::operator new(capacity, std::align_val_t{sync::kCacheLine});
}

void TGate::give_block(void* memory, size_t capacity) {
  if (capacity >= kBlockQuantum) {
    std::lock_guard lock(pool_mutex_);
    if (pool_.size() < kPoolBlocks) {
      pool_.push_back({memory, capacity});
      return;
    }
  }
  ::operator delete(memory, std::align_val_t{sync::kCacheLine});
}

// Epoch-based protection of a producer's walk (reclaim() explains the grace periods). The
// announcement and every load of a sentinel link are seq_cst, as are reclaim()'s CAS of those
// links and its loads of announcements: in their single total order, either reclaim() sees this
// announcement (and keeps what it retires alive), or it moved the sentinel before we load it (and
// we never reach what it retires). seq_cst operations rather than fences, which ThreadSanitizer
// does not model.
void TGate::enter(ProducerState& p) {
  p.announce.store(epoch_.load(std::memory_order_seq_cst), std::memory_order_seq_cst);
  // Hints from an earlier insert may point at nodes freed since: start from the sentinel.
  std::fill(std::begin(p.preds), std::end(p.preds), head_);
}

void TGate::leave(ProducerState& p) { p.announce.store(kIdle, std::memory_order_release); }

void TGate::link_arena(ProducerState& p, Arena* arena) {
  InputState& in = inputs_[arena->input];
  auto* at = reinterpret_cast<uint8_t*>(arena) + ((sizeof(Arena) + 15) & ~size_t{15});
  const auto n = static_cast<size_t>(arena->batch.num_rows());
  for (size_t r = 0; r < n; ++r) {
    Node* node = reinterpret_cast<Node*>(at);
    at += (sizeof(Node) + node->height * sizeof(std::atomic<Node*>) + 15) & ~size_t{15};
    const Key key = node->key;
    const int h = node->height;
    // Relaxed: a search hint here, and raised before the node is linked (tgate.h, top_level_).
    int top = top_level_.load(std::memory_order_relaxed);
    while (h - 1 > top && !top_level_.compare_exchange_weak(top, h - 1, std::memory_order_relaxed)) {
    }
    top = std::max(top, h - 1);
    // Every hint precedes key (keys of one input only grow). When the hints of the node's own
    // levels are real nodes (every node of an arena but the first few), first try walking each
    // of those levels forward from its hint: the node needs links at h levels (1.33 on average),
    // and with few inputs interleaved each walk passes a node or two, where a search from the
    // top visits every level. A walk longer than kHintSteps (many inputs interleaved finely)
    // gives up for the search from the top, which starts each level at the later of the level
    // above's predecessor and the hint. Acquire on every link load: a node reached through a
    // link is fully built.
    constexpr int kHintSteps = 4;
    bool hinted = true;
    for (int l = 0; l < h; ++l) hinted &= p.preds[l] != head_;
    for (int l = 0; hinted && l < h; ++l) {
      Node* pred = p.preds[l];
      Node* succ = pred->next()[l].load(std::memory_order_acquire);
      for (int steps = 0; succ != nullptr && succ->key < key; ++steps) {
        if (steps == kHintSteps) {
          hinted = false;
          break;
        }
        pred = succ;
        succ = pred->next()[l].load(std::memory_order_acquire);
      }
      p.preds[l] = pred;  // a later hint for this level either way: it precedes key
      p.succs[l] = succ;
    }
    if (!hinted) {
      Node* pred = head_;
      for (int l = top; l >= 0; --l) {
        Node* hint = p.preds[l];
        if (hint != head_ && (pred == head_ || hint->key > pred->key)) pred = hint;
        Node* succ = pred->next()[l].load(pred == head_ ? std::memory_order_seq_cst : std::memory_order_acquire);
        while (succ != nullptr && succ->key < key) {
          pred = succ;
          succ = pred->next()[l].load(std::memory_order_acquire);
        }
        p.preds[l] = pred;
        p.succs[l] = succ;
      }
    }
    // Link bottom up. The release CAS publishes the node's fields and its link at that level;
    // on failure someone linked between pred and succ, so walk on from pred and retry.
    for (int l = 0; l < h; ++l) {
      Node* pr = p.preds[l];
      Node* su = p.succs[l];
      for (;;) {
        node->next()[l].store(su, std::memory_order_relaxed);
        if (pr->next()[l].compare_exchange_weak(su, node, std::memory_order_release,
                                                std::memory_order_acquire)) {
          break;
        }
        while (su != nullptr && su->key < key) {
          pr = su;
          su = pr->next()[l].load(std::memory_order_acquire);
        }
      }
      p.preds[l] = node;  // the next key of this input sorts after this node
    }
    // Publish for readers: after the link (release), so a reader that sees the count also sees
    // the node in the list. The bound likewise, after the link.
    in.published.store(OrderKey::unpack(key).position() + 1, std::memory_order_release);
    const int64_t t = OrderKey::unpack(key).time;
    if (t > in.bound_local) {
      in.bound_local = t;
      in.bound.store(t, std::memory_order_release);
    }
  }
}

bool TGate::insert(size_t slot, uint32_t input, const Batch& batch, const int64_t* times, bool wait) {
  ProducerState& p = producers_[slot];
  InputState& in = inputs_[input];
  const int64_t n = batch.num_rows();
  bool first = true;
  for (int64_t start = 0; start < n; start += options_.arena_rows) {
    // Back-pressure. An input waits while it holds max_arenas_per_input arenas. This cannot
    // deadlock: if every open input were full, every input would have unread tuples ahead of
    // every reader, so the least of them is ready and readers make room.
    while (in.live_arenas.load(std::memory_order_acquire) >= options_.max_arenas_per_input) {
      if (cancelled()) return false;
      const uint64_t seen = freed_.value();
      // Reclaim before giving up too: the readers free arenas only every 1024 tuples or when
      // they run dry, and a reader that ran dry may sleep until the next insert, which a
      // producer that gave up without freeing anything would never make (one input, small
      // batches: a stall per round of arenas).
      reclaim();
      if (in.live_arenas.load(std::memory_order_acquire) < options_.max_arenas_per_input) break;
      if (first && !wait) return false;
      // The wake-up comes from reclaim() or cancel().
      freed_.wait(seen, std::chrono::milliseconds(2), [&] { return cancelled(); });
    }
    if (cancelled()) return false;
    first = false;
    const int64_t len = std::min<int64_t>(options_.arena_rows, n - start);
    Batch part = (start == 0 && len == n) ? batch : batch.slice(start, len);
    Arena* a = make_arena(slot, input, part, times + start);
    enter(p);
    link_arena(p, a);
    leave(p);
    in.next_position += static_cast<uint64_t>(len);
    if (in.tail == nullptr) {
      in.first.store(a, std::memory_order_release);
    } else {
      in.tail->next_in_input.store(a, std::memory_order_release);
    }
    in.tail = a;
    progress_.notify();
  }
  return true;
}

void TGate::heartbeat(uint32_t input, int64_t time) {
  InputState& in = inputs_[input];
  if (time > in.bound_local) {
    in.bound_local = time;
    in.bound.store(time, std::memory_order_release);
    progress_.notify();
  }
}

void TGate::close(uint32_t input) {
  inputs_[input].closed.store(true, std::memory_order_release);
  progress_.notify();
}

void TGate::cancel() {
  cancelled_.store(true, std::memory_order_release);
  progress_.notify();
  freed_.notify();
}

void TGate::wait_for_progress(uint64_t seen) {
  progress_.wait(seen, std::chrono::milliseconds(50), [&] { return cancelled(); });
}

ReadResult TGate::next_ready_tuple(size_t reader) {
  ReaderState& r = readers_[reader];
  ReadResult out;
  if (cancelled()) {
    out.state = ReadResult::State::kEnd;
    return out;
  }
  // 1. What the inputs this reader has exhausted promise. These loads must come before the load
  //    of the candidate (acquire orders them): a tuple linked after we read a bound sorts after
  //    that bound, and a count that moved on means a linked tuple we will see in the list.
  bool all_closed = true;
  if (options_.readiness == Readiness::kScanAll) {
    for (size_t i = 0; i < options_.inputs; ++i) {
      r.bound_seen[i] = inputs_[i].bound.load(std::memory_order_acquire);
      r.closed_seen[i] = inputs_[i].closed.load(std::memory_order_acquire);
      all_closed &= r.closed_seen[i] != 0;
    }
  } else {
    size_t kept = 0;
    for (uint32_t i : r.exposed) {
      InputState& in = inputs_[i];
      r.published_seen[i] = in.published.load(std::memory_order_acquire);
      if (r.published_seen[i] > r.passed[i]) {
        r.is_exposed[i] = 0;  // it has a tuple ahead of us now
        all_closed = false;
        continue;
      }
      r.closed_seen[i] = in.closed.load(std::memory_order_acquire);
      r.bound_seen[i] = in.bound.load(std::memory_order_acquire);
      all_closed &= r.closed_seen[i] != 0;
      r.exposed[kept++] = i;
    }
    r.exposed.resize(kept);
    if (kept != options_.inputs) all_closed = false;
  }
  // 2. The least unread tuple.
  Node* x = r.head->next()[0].load(std::memory_order_acquire);
  int64_t watermark = INT64_MAX;
  if (x != nullptr) {
    const OrderKey xk = OrderKey::unpack(x->key);
    const int64_t t = xk.time;
    const uint32_t j = xk.input();
    watermark = t;
    // 3. Ready if every input still to deliver something delivers it after x: (bound, i) after
    //    (t, j) in the merged order, or closed. x's own input always does.
    bool ready = true;
    auto check = [&](uint32_t i) {
      if (i == j || r.closed_seen[i]) return;
      const int64_t b = r.bound_seen[i];
      if (!(b > t || (b == t && i > j))) ready = false;
    };
    if (options_.readiness == Readiness::kScanAll) {
      for (uint32_t i = 0; i < options_.inputs; ++i) check(i);
    } else {
      for (uint32_t i : r.exposed) check(i);
    }
    if (ready) {
      r.head = x;
      // Release: reclaim() may read x's key through this pointer.
      r.shared_head.store(x, std::memory_order_release);
      const uint64_t pos = xk.position();
      r.passed[j] = pos + 1;
      // j becomes exposed when x was its last linked tuple. Reload its count only when the one
      // seen does not already show a later tuple, rather than once per tuple from a cache line
      // the producer keeps writing.
      if (options_.readiness == Readiness::kExact && !r.is_exposed[j] && r.published_seen[j] <= pos + 1) {
        r.published_seen[j] = inputs_[j].published.load(std::memory_order_acquire);
        if (r.published_seen[j] <= pos + 1) {
          r.is_exposed[j] = 1;
          r.exposed.push_back(j);
        }
      }
      if (++r.since_reclaim >= 1024) {
        r.since_reclaim = 0;
        reclaim();
      }
      out.state = ReadResult::State::kTuple;
      out.tuple = {&x->arena->batch, x->row, t, j, pos};
      return out;
    }
  } else if (all_closed) {
    out.state = ReadResult::State::kEnd;
    return out;
  }
  for (size_t i = 0; i < options_.inputs; ++i) {
    const bool consider = options_.readiness == Readiness::kScanAll ? true : r.is_exposed[i] != 0;
    if (consider && !r.closed_seen[i]) watermark = std::min(watermark, r.bound_seen[i]);
  }
  out.state = ReadResult::State::kNotReady;
  out.watermark = watermark;
  reclaim();
  return out;
}

// Frees the arenas every reader has passed.
//  1. m = the least key a reader stands on. Every node below m has been passed by all readers,
//     and no new tuple's key is below m (a new key exceeds every ready one), so nodes below m are
//     only reachable through the sentinel, through each other, or through a producer's walk in
//     progress. Reader heads are at m or later; links only point forward.
//  3a. Choose the arenas to retire: all of whose nodes are below m, and which are not their open
//     input's newest arena (its producer still appends to it). An arena stops being its input's
//     newest only when the producer stores next_in_input (release) after link_arena() returned,
//     or closed after its last insert, and we load those with acquire: so every link of every
//     node of a chosen arena, at every level, happens-before the walk in 2.
//  2. Point the sentinel's links past the nodes below m. A node below m can still be linked at a
//     level above 0 after readers passed it (its producer links bottom up, and readers need only
//     level 0), even at the front, replacing a link this walk set. That is why 3a comes first:
//     such a late link is to a node of an arena not chosen, and the walk sees every link of the
//     chosen ones. (Deciding after the walk, as this code once did, could retire an arena that a
//     late link made reachable from the sentinel again.)
//  3b. Retire the chosen arenas with the current epoch: now unreachable for a walk that starts
//     after this point.
//  4. Advance the epoch once every producer inside an insert has announced it; free what was
//     retired two epochs ago: every producer walking then has left since.
void TGate::reclaim() {
  if (reclaiming_.test_and_set(std::memory_order_acquire)) return;
  Node* least = nullptr;
  for (size_t i = 0; i < options_.readers; ++i) {
    Node* h = readers_[i].shared_head.load(std::memory_order_acquire);
    if (h == head_) {
      least = nullptr;
      break;
    }
    if (least == nullptr || h->key < least->key) least = h;
  }
  if (least != nullptr) {
    const Key m = least->key;
    // 3a. Which arenas to retire, decided before the sentinel moves (see 2. and top_level_).
    for (size_t i = 0; i < options_.inputs; ++i) {
      InputState& in = inputs_[i];
      if (in.reclaim_done) continue;
      for (;;) {
        Arena* a = in.reclaim_cursor ? in.reclaim_cursor : in.first.load(std::memory_order_acquire);
        if (a == nullptr || a->last_key >= m) break;
        const bool closed = in.closed.load(std::memory_order_acquire);
        Arena* next = a->next_in_input.load(std::memory_order_acquire);
        if (next == nullptr && !closed) break;
        unlinking_.push_back(a);
        in.reclaim_cursor = next;
        if (next == nullptr) {
          in.reclaim_done = true;
          break;
        }
      }
    }
    // 2. Every level a node of those arenas may be linked at is at most top (see top_level_).
    const int top = top_level_.load(std::memory_order_relaxed);
    for (int l = 0; l <= top; ++l) {
      Node* s = head_->next()[l].load(std::memory_order_acquire);
      for (;;) {
        Node* f = s;
        while (f != nullptr && f->key < m) f = f->next()[l].load(std::memory_order_acquire);
        // Retried from the new link when a producer linked at the front meanwhile: retiring
        // below is safe only once no sentinel link leads below m.
        if (f == s || head_->next()[l].compare_exchange_strong(s, f, std::memory_order_seq_cst)) break;
      }
    }
    // 3b. Retire them.
    const uint64_t e = epoch_.load(std::memory_order_seq_cst);
    for (Arena* a : unlinking_) {
      a->retire_epoch = e;
      a->next_retired = retired_;
      retired_ = a;
    }
    unlinking_.clear();
  }
  uint64_t e = epoch_.load(std::memory_order_seq_cst);
  bool all_current = true;
  for (size_t p = 0; p < options_.producers; ++p) {
    const uint64_t a = producers_[p].announce.load(std::memory_order_seq_cst);
    all_current &= a == kIdle || a == e;
  }
  if (all_current) epoch_.store(++e, std::memory_order_seq_cst);
  bool freed = false;
  Arena** link = &retired_;
  while (*link != nullptr) {
    Arena* a = *link;
    if (a->retire_epoch + 2 <= e) {
      *link = a->next_retired;
      free_arena(a);
      freed = true;
    } else {
      link = &a->next_retired;
    }
  }
  reclaiming_.clear(std::memory_order_release);
  if (freed) freed_.notify();
}

}  // namespace pao::gate
