// Stress tests of engine/sync: the ordered runtime's reorder buffers (reorder.h) and partition
// queues (queues.h), the fork-join (fork_join.h) and the dynamic scheduler's free list
// (port_list.h), driven by threads the way the engine drives them. Meant to run under
// ThreadSanitizer (make tsan-test) as well as normally: the state the
// structures promise to hand from thread to thread (a deposited item to the sink, a partition's
// state from one worker to the next) is plain memory here, so a missing happens-before shows up
// as a data race, while the checks that must hold in any build (order, exclusivity, exactly once)
// use relaxed atomics, which count violations without adding any ordering of their own.
//
// Every run is bounded by a timeout: a lost item or a stranded output stalls progress, and the
// test then fails instead of hanging.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/buffer_pool.h"
#include "sync/fork_join.h"
#include "sync/port_list.h"
#include "sync/queues.h"
#include "sync/reorder.h"
#include "unit.h"

using namespace pao::sync;

namespace {

#if defined(__SANITIZE_THREAD__)
constexpr bool kTsan = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kTsan = true;
#else
constexpr bool kTsan = false;
#endif
#else
constexpr bool kTsan = false;
#endif

// Items per run: ThreadSanitizer slows the threads down about tenfold, and its runs must stay
// within a minute on two cores.
constexpr uint64_t scaled(uint64_t normal, uint64_t tsan) { return kTsan ? tsan : normal; }

constexpr auto kTimeout = std::chrono::seconds(20);

uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x9e3779b97f4a7c15ull;
  x ^= x >> 29;
  x *= 0xbf58476d1ce4e5b9ull;
  return x ^ (x >> 32);
}

// A random pause: nothing, a yield, a short spin or (rarely) a short sleep, so that threads
// finish their items in shuffled order and sometimes get preempted in the middle of a protocol.
void jitter(std::mt19937_64& rng) {
  const uint64_t r = rng();
  switch (r % 8) {
    case 0:
    case 1:
    case 2: return;
    case 3:
    case 4: std::this_thread::yield(); return;
    case 5:
    case 6:
      for (uint64_t i = 0, n = (r >> 8) % 512; i < n; ++i) std::atomic_signal_fence(std::memory_order_seq_cst);
      return;
    default:
      if ((r >> 8) % 16 == 0) {
        std::this_thread::sleep_for(std::chrono::microseconds((r >> 12) % 50));
      } else {
        std::this_thread::yield();
      }
  }
}

// Runs fn(i) for i in [0, n) on n threads. Past `timeout` it sets `stop` (every fn polls it and
// returns) and returns false. Threads that have still not returned five seconds later are stuck
// inside the code under test (a lock never released): they cannot be recovered, so the test
// binary reports it and exits.
bool run_threads(size_t n, const std::function<void(size_t)>& fn, std::atomic<bool>& stop, const std::string& what) {
  std::atomic<size_t> exited{0};
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    threads.emplace_back([&fn, &exited, i] {
      fn(i);
      exited.fetch_add(1, std::memory_order_release);
    });
  }
  auto deadline = std::chrono::steady_clock::now() + kTimeout;
  bool ok = true;
  while (exited.load(std::memory_order_acquire) < n) {
    if (std::chrono::steady_clock::now() > deadline) {
      if (!ok) {
        std::fprintf(stderr, "  %s: threads still blocked 5 s after the timeout: hung\n", what.c_str());
        std::fprintf(stdout, "FAIL (hung)\n");
        std::fflush(nullptr);
        std::_Exit(2);
      }
      std::fprintf(stderr, "  %s: no progress within %lld s (a lost item or a stranded output?)\n", what.c_str(),
                   static_cast<long long>(kTimeout.count()));
      ok = false;
      stop.store(true, std::memory_order_relaxed);
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (auto& t : threads) t.join();
  return ok;
}

// Names the configuration of the checks that failed since `before`.
void context(int before, const std::string& what) {
  if (unit::failures() != before) std::fprintf(stderr, "    in %s\n", what.c_str());
}

// ------------------------------------------------------------------------------------------------
// Reorder buffers

struct Item {
  uint64_t serial = 0;
  uint64_t payload = 0;  // written by the sender before send(), read by the sink: plain memory
  bool left = false;     // written by the sink, read by the test after the threads are joined
};

// What the sink observes. `expected` and `seen` are touched only inside the sink, which the
// reorder buffer promises to call from one thread at a time, each call happening-after the
// previous: plain memory, so ThreadSanitizer checks that promise. The violation counters are
// relaxed atomics so that they count reliably even when the promise is broken.
struct SinkState {
  explicit SinkState(const std::vector<Item>& items) : items(items), seen(items.size(), 0) {}
  const std::vector<Item>& items;
  uint64_t expected = 0;
  std::vector<uint8_t> seen;
  std::atomic<int> in_sink{0};
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> overlaps{0};
  std::atomic<uint64_t> out_of_order{0};
  std::atomic<uint64_t> wrong_item{0};
  std::atomic<uint64_t> repeated{0};
};

struct CheckingSink {
  SinkState* st;
  void operator()(uint64_t serial, Item* item) const {
    if (st->in_sink.fetch_add(1, std::memory_order_relaxed) != 0) st->overlaps.fetch_add(1, std::memory_order_relaxed);
    st->calls.fetch_add(1, std::memory_order_relaxed);
    if (serial != st->expected) st->out_of_order.fetch_add(1, std::memory_order_relaxed);
    st->expected = serial + 1;
    if (serial >= st->items.size() || item != &st->items[serial] || item->serial != serial ||
        item->payload != mix(serial)) {
      st->wrong_item.fetch_add(1, std::memory_order_relaxed);
    } else {
      if (st->seen[serial]++ != 0) st->repeated.fetch_add(1, std::memory_order_relaxed);
      item->left = true;
    }
    // Widen the window in which a second, concurrent sink call would be noticed.
    for (int i = 0; i < 16; ++i) std::atomic_signal_fence(std::memory_order_seq_cst);
    st->in_sink.fetch_sub(1, std::memory_order_relaxed);
  }
};

std::vector<Item> make_items(uint64_t m) {
  std::vector<Item> items(m);
  for (uint64_t s = 0; s < m; ++s) items[s].serial = s;
  return items;
}

const char* scheme_name(ReorderScheme s) { return s == ReorderScheme::kLocked ? "locked" : "nonblocking"; }

// Workers take serials below `end` from a shared counter, as the runtime takes work: only a
// serial the buffer admits (otherwise they yield and look again), then pause at random and send
// it, except `hole`, which they take and drop (a cancelled input). Returns false on timeout.
//
// Admission also tells a worker that the sink has handled everything below next(): the runtime
// relies on it (try_finish reads next() and then what the sink linked), so a worker admitted for
// serial s reads, as plain memory, what the sink wrote for serial s - capacity; `unseen` counts
// the times that was not there yet.
bool drive_reorder(Reorder<Item>& r, std::vector<Item>& items, size_t threads, uint64_t end, uint64_t hole,
                   uint64_t seed, std::atomic<uint64_t>& unseen, const std::string& what) {
  std::atomic<uint64_t> counter{0};
  std::atomic<bool> stop{false};
  const uint64_t capacity = r.capacity();
  return run_threads(
      threads,
      [&](size_t t) {
        std::mt19937_64 rng(seed * 1000003 + t);
        while (!stop.load(std::memory_order_relaxed)) {
          uint64_t s = counter.load(std::memory_order_relaxed);
          if (s >= end) return;
          if (!r.admit(s)) {
            std::this_thread::yield();
            continue;
          }
          // next() only grows, so s stays admitted once seen admitted.
          if (!counter.compare_exchange_weak(s, s + 1, std::memory_order_relaxed)) continue;
          if (s >= capacity && !items[s - capacity].left) unseen.fetch_add(1, std::memory_order_relaxed);
          if (s == hole) continue;
          jitter(rng);
          items[s].payload = mix(s);
          r.send(s, &items[s]);
        }
      },
      stop, what);
}

void reorder_stress(ReorderScheme scheme) {
  const uint64_t m = scaled(300000, 80000);
  uint64_t seed = 1;
  for (uint64_t capacity : {1, 2, 7, 64}) {
    for (size_t threads : {2, 4, 8}) {
      const std::string what = std::string(scheme_name(scheme)) + " capacity " + std::to_string(capacity) +
                               " threads " + std::to_string(threads);
      const int before = unit::failures();
      std::vector<Item> items = make_items(m);
      SinkState st(items);
      auto r = make_reorder<Item>(scheme, capacity, CheckingSink{&st});
      std::atomic<uint64_t> unseen{0};
      const bool finished = drive_reorder(*r, items, threads, m, UINT64_MAX, seed++, unseen, what);
      CHECK(finished);
      CHECK_EQ(unseen.load(), 0u);
      CHECK_EQ(st.overlaps.load(), 0u);
      CHECK_EQ(st.out_of_order.load(), 0u);
      CHECK_EQ(st.wrong_item.load(), 0u);
      CHECK_EQ(st.repeated.load(), 0u);
      CHECK_EQ(st.calls.load(), m);
      CHECK_EQ(r->next(), m);
      CHECK(r->admit(m) && !r->admit(m + capacity));
      CHECK(std::all_of(items.begin(), items.end(), [](const Item& i) { return i.left; }));
      CHECK(r->take_all().empty());
      context(before, what);
      REQUIRE(finished);  // after a timeout the later configurations would only time out too
    }
  }
}

// The buffer pool (core/buffer_pool.h) shared by threads that allocate, write and free buffers of
// many classes at once: no block is handed to two owners (each owner's marks stay its own), and
// the idle bytes stay within the limit and are all released at the end. Run under ThreadSanitizer.
TEST(buffer_pool_threads_stress) {
  pao::pool_release();
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &errors] {
      struct Held {
        uint8_t* block;
        size_t bytes, capacity;
      };
      std::mt19937_64 rng(static_cast<uint64_t>(t) + 1);
      std::vector<Held> held;
      const auto mark = static_cast<uint8_t>(t + 1);
      for (int i = 0; i < 4000; ++i) {
        if (held.size() < 8 && (held.empty() || rng() % 2 == 0)) {
          const size_t bytes = (size_t{64} << 10) + (rng() % (size_t{4} << 20)) / 64 * 64;
          Held h{nullptr, bytes, 0};
          h.block = pao::pool_allocate(bytes, &h.capacity);
          std::memset(h.block, mark, 64);
          std::memset(h.block + bytes - 64, mark, 64);
          held.push_back(h);
        } else {
          const Held h = held[rng() % held.size()];
          std::erase_if(held, [&](const Held& x) { return x.block == h.block; });
          if (h.block[0] != mark || h.block[h.bytes - 1] != mark) errors.fetch_add(1);
          pao::pool_free(h.block, h.capacity);
        }
      }
      for (const Held& h : held) pao::pool_free(h.block, h.capacity);
    });
  }
  for (auto& th : threads) th.join();
  CHECK_EQ(errors.load(), 0);
  const uint64_t idle = pao::pool_stats().idle_bytes;
  CHECK(idle <= pao::pool_stats().idle_limit);
  CHECK_EQ(pao::pool_release(), idle);
  CHECK_EQ(pao::pool_stats().idle_bytes, 0u);
}

TEST(reorder_nonblocking_stress) { reorder_stress(ReorderScheme::kNonBlocking); }
TEST(reorder_locked_stress) { reorder_stress(ReorderScheme::kLocked); }

// Deposits that cannot leave (an earlier serial never arrives) are what take_all() returns,
// exactly those, once; the ones that could leave have left.
TEST(reorder_take_all_gaps) {
  for (ReorderScheme scheme : {ReorderScheme::kNonBlocking, ReorderScheme::kLocked}) {
    const int before = unit::failures();
    std::vector<Item> items = make_items(16);
    for (auto& i : items) i.payload = mix(i.serial);
    SinkState st(items);
    auto r = make_reorder<Item>(scheme, 8, CheckingSink{&st});
    CHECK(r->take_all().empty());
    // Nothing can leave before serial 0.
    r->send(3, &items[3]);
    r->send(1, &items[1]);
    CHECK_EQ(r->next(), 0u);
    CHECK_EQ(st.calls.load(), 0u);
    std::vector<Item*> got = r->take_all();
    std::sort(got.begin(), got.end());
    CHECK(got == (std::vector<Item*>{&items[1], &items[3]}));
    CHECK(r->take_all().empty());
    // 0..2 leave; 3 was taken back, so 4, 6 and 10 (slot 2 again) stay behind the gap at 3.
    r->send(0, &items[0]);
    r->send(2, &items[2]);
    r->send(1, &items[1]);
    CHECK_EQ(r->next(), 3u);
    CHECK(r->admit(10) && !r->admit(11));
    r->send(6, &items[6]);
    r->send(10, &items[10]);
    r->send(4, &items[4]);
    CHECK_EQ(r->next(), 3u);
    CHECK_EQ(st.calls.load(), 3u);
    got = r->take_all();
    std::sort(got.begin(), got.end());
    CHECK(got == (std::vector<Item*>{&items[4], &items[6], &items[10]}));
    CHECK(r->take_all().empty());
    CHECK_EQ(st.out_of_order.load(), 0u);
    CHECK_EQ(st.wrong_item.load(), 0u);
    context(before, scheme_name(scheme));
  }
}

bool reorder_gap_run(ReorderScheme scheme, uint64_t capacity, size_t threads, uint64_t seed) {
  const uint64_t m = 2000;
  const std::string what = std::string(scheme_name(scheme)) + " capacity " + std::to_string(capacity) +
                           " threads " + std::to_string(threads) + " seed " + std::to_string(seed);
  const int before = unit::failures();
  const uint64_t hole = m / 4 + mix(seed) % 1000;
  const uint64_t end = hole + capacity;  // the first serial the hole keeps out
  std::vector<Item> items = make_items(m);
  SinkState st(items);
  auto r = make_reorder<Item>(scheme, capacity, CheckingSink{&st});
  std::atomic<uint64_t> unseen{0};
  const bool finished = drive_reorder(*r, items, threads, end, hole, seed, unseen, what);
  CHECK(finished);
  CHECK_EQ(unseen.load(), 0u);
  CHECK_EQ(r->next(), hole);
  CHECK_EQ(st.calls.load(), hole);
  CHECK_EQ(st.overlaps.load(), 0u);
  CHECK_EQ(st.out_of_order.load(), 0u);
  CHECK_EQ(st.wrong_item.load(), 0u);
  std::vector<Item*> got = r->take_all();
  std::sort(got.begin(), got.end());
  std::vector<Item*> want;
  for (uint64_t s = hole + 1; s < end; ++s) want.push_back(&items[s]);
  CHECK(got == want);
  CHECK(r->take_all().empty());
  bool left = true;
  for (uint64_t s = 0; s < m; ++s) left &= items[s].left == (s < hole);
  CHECK(left);
  context(before, what);
  return finished;
}

// The same under concurrency: serial `hole` is taken but never sent, so the buffer fills up behind
// it; once the workers have taken every admitted serial, next() is the hole, 0..hole-1 have left
// in order and take_all() returns exactly the deposits behind the hole. Short runs, many of them:
// the interesting moment is the buffer filling up.
TEST(reorder_take_all_gaps_concurrent) {
  uint64_t seed = 100;
  for (ReorderScheme scheme : {ReorderScheme::kNonBlocking, ReorderScheme::kLocked})
    for (uint64_t capacity : {1, 2, 7, 64})
      for (size_t threads : {2, 4, 8})
        for (uint64_t round = 0; round < scaled(20, 10); ++round)
          REQUIRE(reorder_gap_run(scheme, capacity, threads, seed++));
}

// ------------------------------------------------------------------------------------------------
// Partition queues

// An input (one serial) cut into pieces, one per partition its rows fall into, as the runtime
// cuts a morsel; the last piece to finish completes the input.
struct Input {
  uint64_t serial = 0;
  std::atomic<uint32_t> pending{0};
};

struct Piece {
  Input* input = nullptr;
  uint32_t partition = 0;
  uint64_t seq = 0;  // its place among its partition's pieces
  std::atomic<int> runs{0};
};

// A partition's state, handed from worker to worker by the queue: plain memory.
struct alignas(64) PartState {
  uint64_t next_seq = 0;
  uint64_t hash = 0;
  std::atomic<int> busy{0};
};

struct Tracker;

// The completion tracker's sink: inputs complete in serial order, each once, fully.
struct TrackerSink {
  Tracker* t;
  void operator()(uint64_t serial, Input* input) const;
};

struct Tracker {
  uint64_t expected = 0;  // sink only: plain
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> bad{0};
};

void TrackerSink::operator()(uint64_t serial, Input* input) const {
  t->calls.fetch_add(1, std::memory_order_relaxed);
  if (serial != t->expected || input->serial != serial || input->pending.load(std::memory_order_relaxed) != 0)
    t->bad.fetch_add(1, std::memory_order_relaxed);
  t->expected = serial + 1;
}

const char* partitioning_name(Partitioning p) {
  switch (p) {
    case Partitioning::kHybrid: return "hybrid";
    case Partitioning::kPartitioned: return "partitioned";
    case Partitioning::kShared: return "shared";
  }
  return "?";
}

// A skewed key: a third of the pieces go to key 0, a sixth to key 1, the rest spread over 1000.
uint64_t skewed_key(std::mt19937_64& rng) {
  const uint64_t r = rng() % 6;
  if (r < 2) return 0;
  if (r == 2) return 1;
  return 2 + rng() % 1000;
}

struct PartitionConfig {
  Partitioning scheme;
  size_t partitions;
  size_t workers;
  uint64_t window;     // the completion tracker's capacity: an item may start below next + window
  size_t max_pieces;   // pieces (distinct partitions) per input, at most
  // Who pushes: a dedicated thread, or (as in the runtime) the sink of an upstream reorder buffer
  // of this scheme, on whichever worker drains it; the workers then also run the upstream stage.
  std::optional<ReorderScheme> upstream;
  uint64_t inputs;
  uint64_t seed;

  std::string describe() const {
    return std::string(partitioning_name(scheme)) + " partitions " + std::to_string(partitions) + " workers " +
           std::to_string(workers) + " window " + std::to_string(window) + " pieces " + std::to_string(max_pieces) +
           " producer " + (upstream ? std::string(scheme_name(*upstream)) + " reorder sink" : std::string("thread"));
  }
};

// One producer pushes `inputs` inputs' pieces, serials in order, partition = hash(key) % P with
// skewed keys; the workers consume() with the limit the completion tracker allows, as the
// runtime's workers do. `work` checks that a partition is never run by two threads at once, that
// its pieces run in push order (a per-partition sequence number and an order-sensitive hash,
// both plain memory handed over by the queue), that each piece runs once and only below the
// limit; the last piece of an input completes it in the tracker, a NonBlockingReorder, whose sink
// checks that inputs complete in serial order. Returns false if the run stalled.
bool run_partition(const PartitionConfig& c) {
  const std::string what = c.describe();
  const int before = unit::failures();
  const uint64_t m = c.inputs;
  std::mt19937_64 gen(c.seed);

  // The inputs and their pieces, and what each partition's state must end as.
  std::vector<Input> inputs(m);
  std::vector<std::vector<size_t>> pieces_of(m);
  std::vector<uint64_t> per_part(c.partitions, 0);
  std::vector<uint64_t> want_hash(c.partitions, 0);
  std::vector<std::pair<uint32_t, uint64_t>> layout;  // (partition, seq) per piece
  for (uint64_t s = 0; s < m; ++s) {
    inputs[s].serial = s;
    std::vector<uint32_t> parts;
    for (size_t k = 0, n = 1 + gen() % c.max_pieces; k < n; ++k) {
      const auto p = static_cast<uint32_t>(mix(skewed_key(gen)) % c.partitions);
      if (std::find(parts.begin(), parts.end(), p) == parts.end()) parts.push_back(p);
    }
    for (uint32_t p : parts) {
      pieces_of[s].push_back(layout.size());
      layout.push_back({p, per_part[p]++});
      want_hash[p] = mix(want_hash[p] ^ s);
    }
    inputs[s].pending.store(static_cast<uint32_t>(parts.size()), std::memory_order_relaxed);
  }
  const size_t total = layout.size();
  std::vector<Piece> pieces(total);
  for (uint64_t s = 0; s < m; ++s) {
    for (size_t i : pieces_of[s]) {
      pieces[i].input = &inputs[s];
      pieces[i].partition = layout[i].first;
      pieces[i].seq = layout[i].second;
    }
  }
  std::vector<PartState> state(c.partitions);

  Tracker tracker;
  NonBlockingReorder<Input, TrackerSink> done(c.window, TrackerSink{&tracker});
  auto q = make_partition_queue<Piece>(c.scheme, c.partitions);
  const auto push = [&](uint64_t s) {
    for (size_t i : pieces_of[s]) q->push({&pieces[i], pieces[i].partition, s});
  };

  // The upstream stage, in the chained form: its sink links an input into the queue, as the
  // runtime's Pipeline::link does.
  std::atomic<uint64_t> upstream_taken{0};
  std::atomic<uint64_t> upstream_misordered{0};
  uint64_t upstream_expected = 0;  // upstream sink only: plain
  const auto link = [&](uint64_t s, Input*) {
    if (s != upstream_expected) upstream_misordered.fetch_add(1, std::memory_order_relaxed);
    upstream_expected = s + 1;
    push(s);
  };
  std::unique_ptr<Reorder<Input>> upstream;
  if (c.upstream) upstream = make_reorder<Input>(*c.upstream, 4, link);

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> overlaps{0}, repeats{0}, misordered{0}, outside_window{0}, consumed{0};
  const size_t threads = c.workers + (c.upstream ? 0 : 1);
  const bool finished = run_threads(
      threads,
      [&](size_t t) {
        std::mt19937_64 rng(c.seed * 7919 + t);
        if (t == c.workers) {
          // The dedicated producer, pausing now and then so that the workers also find the
          // queue empty.
          for (uint64_t s = 0; s < m && !stop.load(std::memory_order_relaxed); ++s) {
            push(s);
            if (rng() % 4 == 0) jitter(rng);
          }
          return;
        }
        const std::function<void(Piece*)> work = [&](Piece* pc) {
          const uint32_t p = pc->partition;
          PartState& ps = state[p];
          if (ps.busy.fetch_add(1, std::memory_order_relaxed) != 0) overlaps.fetch_add(1, std::memory_order_relaxed);
          if (pc->runs.fetch_add(1, std::memory_order_relaxed) != 0) repeats.fetch_add(1, std::memory_order_relaxed);
          // It started below the limit the worker passed, which is at most this.
          if (pc->input->serial >= done.next() + c.window) outside_window.fetch_add(1, std::memory_order_relaxed);
          if (ps.next_seq != pc->seq) misordered.fetch_add(1, std::memory_order_relaxed);
          ps.next_seq = pc->seq + 1;
          ps.hash = mix(ps.hash ^ pc->input->serial);
          jitter(rng);
          ps.busy.fetch_sub(1, std::memory_order_relaxed);
          if (pc->input->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            // Only a queue that broke the limit gets here unadmitted (counted above): wait
            // rather than overwrite a slot of the tracker. The run may then stall (every worker
            // waiting), and the timeout ends it; the counts above say why.
            while (!done.admit(pc->input->serial) && !stop.load(std::memory_order_relaxed)) std::this_thread::yield();
            if (done.admit(pc->input->serial)) done.send(pc->input->serial, pc->input);
          }
        };
        while (!stop.load(std::memory_order_relaxed) && done.next() < m) {
          bool did = false;
          if (upstream && rng() % 2 == 0) {
            // Take an upstream input the way drive_reorder() does, and "process" it.
            uint64_t s = upstream_taken.load(std::memory_order_relaxed);
            if (s < m && upstream->admit(s) &&
                upstream_taken.compare_exchange_strong(s, s + 1, std::memory_order_relaxed)) {
              jitter(rng);
              upstream->send(s, &inputs[s]);
              did = true;
            }
          }
          const uint64_t limit = done.next() + c.window;
          const size_t budget = rng() % 4 == 0 ? 8 : 1;
          const size_t n = q->consume(limit, budget, t, work);
          consumed.fetch_add(n, std::memory_order_relaxed);
          if (n == 0 && !did) std::this_thread::yield();
        }
      },
      stop, what);
  CHECK(finished);
  CHECK_EQ(overlaps.load(), 0u);
  CHECK_EQ(repeats.load(), 0u);
  CHECK_EQ(misordered.load(), 0u);
  CHECK_EQ(outside_window.load(), 0u);
  CHECK_EQ(upstream_misordered.load(), 0u);
  CHECK_EQ(consumed.load(), total);
  CHECK_EQ(done.next(), m);
  CHECK_EQ(tracker.calls.load(), m);
  CHECK_EQ(tracker.bad.load(), 0u);
  size_t ran_once = 0;
  for (const Piece& pc : pieces) ran_once += pc.runs.load() == 1;
  CHECK_EQ(ran_once, total);
  bool states = true;
  for (size_t p = 0; p < c.partitions; ++p)
    if (state[p].hash != want_hash[p] || state[p].next_seq != per_part[p]) states = false;
  CHECK(states);
  CHECK_EQ(q->size(), 0);
  CHECK(!q->ready(UINT64_MAX));
  std::vector<Piece*> rest;
  q->take_all(rest);
  CHECK(rest.empty());
  if (upstream) {
    CHECK_EQ(upstream->next(), m);
    CHECK(upstream->take_all().empty());
  }
  context(before, what);
  return finished;
}

void partition_stress(Partitioning scheme) {
  uint64_t seed = 7;
  for (size_t partitions : {1, 3, 16, 64}) {
    for (size_t workers : {2, 4}) {
      for (uint64_t window : {1, 8, 64}) {
        for (size_t max_pieces : {1, 3}) {
          const PartitionConfig c{scheme, partitions, workers, window, max_pieces, std::nullopt,
                                  scaled(30000, 6000), seed++};
          REQUIRE(run_partition(c));  // after a timeout the later configurations would only time out too
        }
      }
    }
  }
}

TEST(partition_hybrid_stress) { partition_stress(Partitioning::kHybrid); }
TEST(partition_partitioned_stress) { partition_stress(Partitioning::kPartitioned); }
TEST(partition_shared_stress) { partition_stress(Partitioning::kShared); }

// The runtime's arrangement: the queue's producer is the sink of the upstream operator's reorder
// buffer, so pushes come from whichever worker drains, and the same workers alternate between the
// upstream stage and the partitioned one.
TEST(partition_chained_stress) {
  uint64_t seed = 500;
  for (Partitioning scheme : {Partitioning::kHybrid, Partitioning::kPartitioned, Partitioning::kShared}) {
    for (ReorderScheme upstream : {ReorderScheme::kNonBlocking, ReorderScheme::kLocked}) {
      for (size_t partitions : {1, 3, 16, 64}) {
        for (size_t workers : {2, 4}) {
          const PartitionConfig c{scheme, partitions, workers, 8, 3, upstream, scaled(20000, 6000), seed++};
          REQUIRE(run_partition(c));
        }
      }
    }
  }
}

// One thread: consume() starts only items below the limit, each partition's in order, and
// take_all() (cancellation) returns exactly the items not started.
TEST(partition_limit_and_take_all) {
  for (Partitioning scheme : {Partitioning::kHybrid, Partitioning::kPartitioned, Partitioning::kShared}) {
    const int before = unit::failures();
    std::vector<Piece> pieces(12);
    auto q = make_partition_queue<Piece>(scheme, 3);
    for (uint64_t s = 0; s < 12; ++s) {
      pieces[s].partition = static_cast<uint32_t>(mix(s) % 3);
      q->push({&pieces[s], pieces[s].partition, s});
    }
    CHECK_EQ(q->size(), 12);
    CHECK(!q->ready(0));
    CHECK(q->ready(1));
    std::vector<Piece*> ran;
    const std::function<void(Piece*)> work = [&](Piece* pc) { ran.push_back(pc); };
    size_t n = 0;
    for (size_t round = 0; round < 10; ++round) n += q->consume(5, 1, round % 3, work);
    CHECK_EQ(n, 5u);
    CHECK_EQ(ran.size(), 5u);
    std::vector<Piece*> want;
    for (size_t s = 0; s < 5; ++s) want.push_back(&pieces[s]);
    std::vector<Piece*> sorted = ran;
    std::sort(sorted.begin(), sorted.end());
    CHECK(sorted == want);
    for (size_t i = 0; i < ran.size(); ++i)
      for (size_t j = i + 1; j < ran.size(); ++j)
        if (ran[i]->partition == ran[j]->partition) CHECK(ran[i] < ran[j]);
    CHECK_EQ(q->size(), 7);
    CHECK(!q->ready(5));
    CHECK(q->ready(6));
    std::vector<Piece*> rest;
    q->take_all(rest);
    std::sort(rest.begin(), rest.end());
    want.clear();
    for (size_t s = 5; s < 12; ++s) want.push_back(&pieces[s]);
    CHECK(rest == want);
    CHECK_EQ(q->size(), 0);
    CHECK(!q->ready(UINT64_MAX));
    rest.clear();
    q->take_all(rest);
    CHECK(rest.empty());
    context(before, partitioning_name(scheme));
  }
}

}  // namespace

UNIT_MAIN()

// The fork-join (fork_join.h): every task of every round runs exactly once, its plain writes are
// visible to the caller when run() returns, rounds of every size follow one another without a
// late helper claiming a finished round's task, the first exception comes back, and the pool is
// reusable after it. Helpers may start after the first round was posted (made just before it).
TEST(fork_join_runs_every_task_once_per_round) {
  std::mt19937_64 rng(5);
  for (unsigned helpers = 0; helpers <= 3; ++helpers) {
    ForkJoin pool(helpers);
    std::vector<int> hits;  // plain memory: published by run()'s return
    for (int round = 0; round < 2000; ++round) {
      const size_t n = rng() % 9;
      hits.assign(n, 0);
      pool.run(n, [&](size_t i) { hits[i] += 1 + static_cast<int>(i); });
      for (size_t i = 0; i < n; ++i) CHECK_EQ(hits[i], 1 + static_cast<int>(i));
    }
    bool threw = false;
    try {
      pool.run(5, [&](size_t i) {
        if (i == 3) throw std::runtime_error("task 3");
      });
    } catch (const std::runtime_error& e) {
      threw = std::string(e.what()) == "task 3";
    }
    CHECK(threw);
    std::atomic<int> ran{0};
    pool.run(4, [&](size_t) { ran.fetch_add(1, std::memory_order_relaxed); });
    CHECK_EQ(ran.load(), 4);
  }
}

// The dynamic scheduler's free list (port_list.h). Threads take ports and offer them back after a
// "run" that bumps the port's plain counter (the handoff must order it: ThreadSanitizer checks);
// only the taker offers a port back, so a port has at most one holder at a time; at the end every
// port is on the list exactly once and the counters add up. Offers of a port already listed are
// no-ops, and the ring never overflows.
TEST(port_list_hands_each_port_to_one_thread_at_a_time) {
  constexpr size_t kPorts = 7;
  constexpr int kThreads = 4;
  constexpr int kRounds = 20000;
  PortList list(kPorts);
  for (uint32_t p = 0; p < kPorts; ++p) {
    list.offer(p);
    list.offer(p);  // already listed: no second entry
  }
  std::vector<int64_t> runs(kPorts, 0);  // plain: handed over by the list
  std::vector<std::atomic<int>> holders(kPorts);
  std::atomic<int> violations{0};
  std::atomic<int64_t> total{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      int64_t mine = 0;
      for (int r = 0; r < kRounds; ++r) {
        const std::optional<uint32_t> p = list.take();
        if (!p) {
          std::this_thread::yield();
          continue;
        }
        if (holders[*p].fetch_add(1, std::memory_order_relaxed) != 0) violations.fetch_add(1, std::memory_order_relaxed);
        ++runs[*p];
        ++mine;
        holders[*p].fetch_sub(1, std::memory_order_relaxed);
        list.offer(*p);
      }
      total.fetch_add(mine, std::memory_order_relaxed);
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK_EQ(violations.load(), 0);
  std::vector<int> listed(kPorts, 0);
  while (const std::optional<uint32_t> p = list.take()) ++listed[*p];
  for (size_t p = 0; p < kPorts; ++p) CHECK_EQ(listed[p], 1);
  int64_t sum = 0;
  for (int64_t r : runs) sum += r;
  CHECK_EQ(sum, total.load());
  CHECK(sum > 0);
}
