// The multiway windowed aggregate in every design (MQ, MQLF, TuMLSC, sliced, TuMLMC, WiML): results equal a sequential
// reference under concurrent pushers (random batch sizes, heartbeats, closes) and engine
// producers; cancel and interrupt stop every thread. Run under ThreadSanitizer by
// `make tsan-test`, which is what the stress cases are for: the queues, the gate, the W-Hive and
// WiML's held rows are shared between the pushing threads and the output thread.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <random>
#include <stdexcept>
#include <thread>
#include <tuple>

#include "core/error.h"
#include "helpers.h"
#include "ops/multiway.h"
#include "unit.h"

using namespace pao;
using pao::ops::Design;
using pao::ops::MultiwayAggregate;
using pao::ops::MultiwayOptions;

namespace {

constexpr Design kDesigns[] = {Design::kMQ,     Design::kMQLF,   Design::kTuMLSC,
                                Design::kSliced, Design::kTuMLMC, Design::kWiML};

const char* name(Design d) { return ops::design_name(d); }

// Input rows: time t, group key k, value v (all int64; v identifies the row, so first and last
// check the merged order).
std::shared_ptr<const Schema> input_schema() {
  using fixtures::type;
  return fixtures::schema({{"t", type(TypeId::kInt64), false},
                          {"k", type(TypeId::kInt64), false},
                          {"v", type(TypeId::kInt64), false}});
}

struct Rows {
  std::vector<int64_t> t, k, v;
  size_t size() const { return t.size(); }
};

Batch make_batch(const std::shared_ptr<const Schema>& schema, const Rows& rows, size_t from, size_t n) {
  auto st = std::make_shared<fixtures::Storage>();
  st->i64.emplace_back(rows.t.begin() + from, rows.t.begin() + from + n);
  st->i64.emplace_back(rows.k.begin() + from, rows.k.begin() + from + n);
  st->i64.emplace_back(rows.v.begin() + from, rows.v.begin() + from + n);
  std::vector<Column> cols(3);
  for (size_t c = 0; c < 3; ++c) {
    cols[c].values = st->i64[c].data();
    cols[c].null_count = 0;
  }
  return Batch(schema, static_cast<int64_t>(n), std::move(cols), st);
}

// Random sorted inputs: times step by 0-2 (ties within and across inputs), 7 keys.
std::vector<Rows> random_inputs(std::mt19937_64& rng, size_t inputs, size_t max_rows) {
  std::vector<Rows> out(inputs);
  for (size_t i = 0; i < inputs; ++i) {
    const size_t n = rng() % (max_rows + 1);
    int64_t t = static_cast<int64_t>(rng() % 20) - 10;
    for (size_t p = 0; p < n; ++p) {
      t += static_cast<int64_t>(rng() % 3);
      out[i].t.push_back(t);
      out[i].k.push_back(static_cast<int64_t>(rng() % 7));
      out[i].v.push_back(static_cast<int64_t>(i * 1000000 + p));
    }
  }
  return out;
}

MultiwayOptions options(Design design, int64_t batch_size, bool flush = false) {
  MultiwayOptions o;
  o.query.time_column = "t";
  o.query.keys = {"k"};
  o.query.window = {20, 7, 3};  // sliding: every tuple falls in 2 or 3 windows
  o.query.aggs = {{"n", window::AggKind::kCount, ""},
                  {"s", window::AggKind::kSum, "v"},
                  {"f", window::AggKind::kFirst, "v"},
                  {"l", window::AggKind::kLast, "v"}};
  o.design = design;
  o.batch_size = batch_size;
  o.flush_each_window = flush;
  return o;
}

struct Row {
  int64_t start, end, key, n, sum, first, last;
  auto operator<=>(const Row&) const = default;
};

// Count, sum, first and last of v per window and key, taking the tuples in the merged order
// (time, input, position); rows by window start, then key: what every design must give.
std::vector<Row> reference(const std::vector<Rows>& inputs, const window::WindowSpec& w) {
  std::vector<std::tuple<int64_t, size_t, size_t>> order;
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (size_t p = 0; p < inputs[i].size(); ++p) order.emplace_back(inputs[i].t[p], i, p);
  }
  std::sort(order.begin(), order.end());
  std::map<std::pair<int64_t, int64_t>, Row> acc;
  for (const auto& [t, i, p] : order) {
    for (int64_t k = w.first_k(t); k <= w.last_k(t); ++k) {
      Row& r = acc[{w.start(k), inputs[i].k[p]}];
      if (r.n++ == 0) r = {w.start(k), w.end(k), inputs[i].k[p], 1, 0, inputs[i].v[p], 0};
      r.sum += inputs[i].v[p];
      r.last = inputs[i].v[p];
    }
  }
  std::vector<Row> out;
  for (const auto& [key, r] : acc) out.push_back(r);
  return out;
}

void append_rows(const Batch& b, std::vector<Row>& out) {
  auto col = [&](size_t c) { return b.column(c).typed<int64_t>(); };
  for (int64_t r = 0; r < b.num_rows(); ++r) {
    out.push_back({col(0)[r], col(1)[r], col(2)[r], col(3)[r], col(4)[r], col(5)[r], col(6)[r]});
  }
}

std::vector<Row> read_all(MultiwayAggregate& op) {
  std::vector<Row> out;
  while (std::optional<Batch> b = op.next()) append_rows(*b, out);
  return out;
}

// One pushing thread feeding the inputs it owns. It pushes the owned input whose next tuple
// sorts first, in batches of random size (some empty, some longer than a T-Gate arena), and
// before each push heartbeats the other owned inputs at their next time: a push may wait for
// room, and the output thread must not then be waiting on an input this thread holds back.
// An input with no rows ("heartbeat only") is heartbeated past everything pushed so far.
void pusher(MultiwayAggregate& op, const std::shared_ptr<const Schema>& schema, const std::vector<Rows>& inputs,
            std::vector<uint32_t> owned, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<size_t> next(inputs.size(), 0);
  std::vector<uint32_t> silent;  // owned inputs without rows
  std::vector<uint32_t> open;
  for (uint32_t i : owned) (inputs[i].size() == 0 ? silent : open).push_back(i);
  int64_t highest = INT64_MIN;
  while (!open.empty()) {
    auto key = [&](uint32_t i) { return std::pair(inputs[i].t[next[i]], i); };
    const uint32_t i = *std::min_element(open.begin(), open.end(), [&](uint32_t a, uint32_t b) { return key(a) < key(b); });
    const size_t left = inputs[i].size() - next[i];
    const size_t n = std::min(left, rng() % 8 == 0 ? size_t(rng() % 6000) : size_t(rng() % 200));
    for (uint32_t o : open) {
      if (o != i || rng() % 4 == 0) op.heartbeat(o, inputs[o].t[next[o]]);  // at most its next time
    }
    if (n > 0) highest = std::max(highest, inputs[i].t[next[i] + n - 1]);
    for (uint32_t s : silent) {
      if (highest != INT64_MIN) op.heartbeat(s, highest + 1);
    }
    op.push(i, make_batch(schema, inputs[i], next[i], n));
    next[i] += n;
    if (next[i] == inputs[i].size()) {
      op.close(i);
      open.erase(std::find(open.begin(), open.end(), i));
    }
  }
  for (uint32_t s : silent) op.close(s);
}

// A pulled input that never ends: `rows` rows per batch, times counting up.
class EndlessSource final : public BatchSource {
 public:
  EndlessSource(std::shared_ptr<const Schema> schema, int64_t rows) : schema_(std::move(schema)), rows_(rows) {}
  const std::shared_ptr<const Schema>& schema() const noexcept override { return schema_; }
  std::optional<Batch> next() override {
    Rows r;
    for (int64_t i = 0; i < rows_; ++i) {
      r.t.push_back(t_++);
      r.k.push_back(i % 5);
      r.v.push_back(i);
    }
    return make_batch(schema_, r, 0, r.size());
  }

 private:
  std::shared_ptr<const Schema> schema_;
  int64_t rows_;
  int64_t t_ = 0;
};

}  // namespace

TEST(push_form_with_concurrent_pushers_equals_the_reference) {
  // 7 inputs, 3 pushing threads (inputs i % 3), one input heartbeat-only, the output thread
  // reading concurrently; for each design, several rounds of random data.
  auto schema = input_schema();
  std::mt19937_64 rng(11);
  for (Design design : kDesigns) {
    for (int round = 0; round < 3; ++round) {
      constexpr size_t kInputs = 7, kThreads = 3;
      std::vector<Rows> inputs = random_inputs(rng, kInputs, 4000);
      inputs[5] = Rows{};  // heartbeats only
      MultiwayOptions o = options(design, int64_t(1 + rng() % 100), round == 1);
      const std::vector<Row> expected = reference(inputs, o.query.window);
      MultiwayAggregate op(schema, kInputs, std::move(o));
      std::vector<std::thread> threads;
      for (size_t p = 0; p < kThreads; ++p) {
        std::vector<uint32_t> owned;
        for (uint32_t i = static_cast<uint32_t>(p); i < kInputs; i += kThreads) owned.push_back(i);
        threads.emplace_back([&, owned, seed = rng()] { pusher(op, schema, inputs, owned, seed); });
      }
      std::vector<Row> got = read_all(op);
      for (auto& t : threads) t.join();
      if (got != expected) std::fprintf(stderr, "  design %s, round %d\n", name(design), round);
      CHECK_EQ(got.size(), expected.size());
      CHECK(got == expected);
      const bool gate = design == Design::kTuMLSC || design == Design::kSliced || design == Design::kTuMLMC;
      CHECK(op.peak_live_arenas().has_value() == gate);
    }
  }
}

TEST(one_thread_pushes_every_input_then_reads) {
  // No reader while the pushes run: every design must take them without waiting (the T-Gate and
  // the queues buffer; WiML holds what the W-Hive cannot take yet, before any watermark too).
  // Batches of 50 rows, a few per input, alternating inputs; then the closes, then the reads.
  auto schema = input_schema();
  std::mt19937_64 rng(5);
  for (Design design : kDesigns) {
    std::vector<Rows> inputs = random_inputs(rng, 3, 400);
    MultiwayOptions o = options(design, 13);
    const std::vector<Row> expected = reference(inputs, o.query.window);
    MultiwayAggregate op(schema, 3, std::move(o));
    std::vector<size_t> next(3, 0);
    for (bool more = true; more;) {
      more = false;
      for (uint32_t i = 0; i < 3; ++i) {
        const size_t n = std::min<size_t>(50, inputs[i].size() - next[i]);
        if (n == 0) continue;
        op.push(i, make_batch(schema, inputs[i], next[i], n));
        next[i] += n;
        more = true;
      }
    }
    for (uint32_t i = 0; i < 3; ++i) op.close(i);
    const std::vector<Row> got = read_all(op);
    if (got != expected) std::fprintf(stderr, "  design %s\n", name(design));
    CHECK(got == expected);
  }
}

TEST(wiml_pushes_beyond_the_backlog_bound_race_the_reader) {
  // Input 0's pusher runs far ahead of input 1's, which starts late and pushes slowly: input 0's
  // rows are held (more than kBacklogRows of them, so its pushes wait), while the reader emits
  // as input 1 comes and drains the held rows under input 0's push lock, racing its pusher.
  auto schema = input_schema();
  for (int round = 0; round < 3; ++round) {
    Rows a, b;
    for (int64_t t = 0; t < 150000; ++t) {
      a.t.push_back(t);
      a.k.push_back(t % 7);
      a.v.push_back(t);
      if (t % 3 == round) {
        b.t.push_back(t);
        b.k.push_back(t % 5);
        b.v.push_back(-t);
      }
    }
    const std::vector<Rows> inputs{a, b};
    MultiwayOptions o = options(Design::kWiML, 4096);
    const std::vector<Row> expected = reference(inputs, o.query.window);
    MultiwayAggregate op(schema, 2, std::move(o));
    std::vector<Row> got;
    std::thread reader([&] { got = read_all(op); });
    std::thread ahead([&] {
      for (size_t r = 0; r < a.size(); r += 3000) op.push(0, make_batch(schema, a, r, std::min<size_t>(3000, a.size() - r)));
      op.close(0);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    for (size_t r = 0; r < b.size(); r += 500) {
      op.push(1, make_batch(schema, b, r, std::min<size_t>(500, b.size() - r)));
      if (r < 10000) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    op.close(1);
    ahead.join();
    reader.join();
    if (got != expected) std::fprintf(stderr, "  round %d\n", round);
    CHECK(got == expected);
  }
}

TEST(pulled_inputs_with_engine_producers_equal_the_reference) {
  // Inputs pulled by 1-3 engine producer threads, in batches of random size (empty ones too).
  auto schema = input_schema();
  std::mt19937_64 rng(12);
  for (Design design : kDesigns) {
    for (int round = 0; round < 3; ++round) {
      const size_t k = 1 + rng() % 8;
      std::vector<Rows> inputs = random_inputs(rng, k, 5000);
      MultiwayOptions o = options(design, int64_t(1 + rng() % 300));
      o.threads = 1 + rng() % 3;
      const std::vector<Row> expected = reference(inputs, o.query.window);
      std::vector<std::unique_ptr<BatchSource>> sources;
      for (const Rows& in : inputs) {
        std::vector<Batch> batches;
        for (size_t from = 0; from < in.size() || batches.empty();) {
          const size_t n = std::min(in.size() - from, rng() % 5 == 0 ? size_t(rng() % 9000) : size_t(rng() % 300));
          batches.push_back(make_batch(schema, in, from, n));
          from += n;
        }
        sources.push_back(std::make_unique<fixtures::ListSource>(schema, std::move(batches)));
      }
      MultiwayAggregate op(schema, k, std::move(o));
      op.start(std::move(sources));
      std::vector<Row> got = read_all(op);
      if (got != expected) std::fprintf(stderr, "  design %s, round %d\n", name(design), round);
      CHECK_EQ(got.size(), expected.size());
      CHECK(got == expected);
    }
  }
}

TEST(stats_from_another_thread_while_the_reader_reads) {
  // stats() on one thread while next() counts tuples and appends latencies on another: a
  // snapshot, not a copy of what next() is writing (TSan flagged the copy; make tsan-test).
  auto schema = input_schema();
  std::mt19937_64 rng(31);
  for (Design design : kDesigns) {
    const size_t k = 3;
    std::vector<Rows> inputs = random_inputs(rng, k, 4000);
    size_t total = 0;
    for (const Rows& in : inputs) total += in.size();
    MultiwayOptions o = options(design, 64, /*flush=*/true);  // flush: latencies are recorded
    o.threads = 2;
    std::vector<std::unique_ptr<BatchSource>> sources;
    for (const Rows& in : inputs) {
      std::vector<Batch> batches;
      for (size_t from = 0; from < in.size(); from += 100) batches.push_back(make_batch(schema, in, from, std::min<size_t>(100, in.size() - from)));
      sources.push_back(std::make_unique<fixtures::ListSource>(schema, std::move(batches)));
    }
    MultiwayAggregate op(schema, k, std::move(o));
    op.start(std::move(sources));
    std::atomic<bool> done{false};
    std::atomic<bool> watching{false};
    int64_t seen_tuples = 0;
    size_t snapshots = 0;
    std::thread watcher([&] {
      // At least one snapshot, and the reader starts only after the first: a fast run would
      // otherwise end before this thread is scheduled (it did on a 2-core CI machine).
      do {
        const ops::MultiwayStats s = op.stats();
        CHECK(s.tuples >= seen_tuples);  // counters only grow
        seen_tuples = s.tuples;
        ++snapshots;
        watching.store(true, std::memory_order_release);
      } while (!done.load(std::memory_order_acquire));
    });
    while (!watching.load(std::memory_order_acquire)) std::this_thread::yield();
    const std::vector<Row> got = read_all(op);
    done.store(true, std::memory_order_release);
    watcher.join();
    CHECK(got == reference(inputs, options(design, 64).query.window));
    CHECK_EQ(op.stats().tuples, static_cast<int64_t>(total));
    CHECK(snapshots > 0);
  }
}

TEST(cancel_while_pushers_wait_and_the_reader_reads) {
  // Pushers push without end; the reader reads a while and then stops, so the pushes fill the
  // engine and wait. cancel() from a third thread must release the waiting pushes, and the
  // reader must then reach the end. A hang here is the failure.
  auto schema = input_schema();
  for (Design design : kDesigns) {
    constexpr uint32_t kInputs = 4;
    MultiwayAggregate op(schema, kInputs, options(design, 16));
    std::atomic<bool> stop{false};
    std::atomic<int> batches_read{0};
    std::atomic<bool> reader_paused{false}, resume{false};
    std::vector<std::thread> pushers;
    for (uint32_t i = 0; i < kInputs; ++i) {
      pushers.emplace_back([&, i] {
        Rows r;
        int64_t t = 0;
        while (!stop.load()) {
          r = Rows{};
          for (int j = 0; j < 100; ++j) {  // 100 rows: a waiting push may hold part of its batch
            r.t.push_back(t++);
            r.k.push_back(j % 3);
            r.v.push_back(j);
          }
          op.push(i, make_batch(schema, r, 0, r.size()));
        }
      });
    }
    std::thread reader([&] {
      while (batches_read.load() < 20) {
        if (!op.next()) break;
        ++batches_read;
      }
      reader_paused.store(true);
      while (!resume.load()) std::this_thread::yield();
      while (op.next()) {
      }
    });
    while (!reader_paused.load()) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the pushes fill up and wait
    std::thread canceller([&] { op.cancel(); });
    canceller.join();
    stop.store(true);
    for (auto& t : pushers) t.join();  // every waiting push returned
    resume.store(true);
    reader.join();
    CHECK_EQ(batches_read.load(), 20);
  }
}

TEST(cancel_releases_a_waiting_reader_and_pulling_producers) {
  // Engine producers pull endless inputs; the reader either reads on (busy) or waits on an input
  // whose producer it starves; cancel() from another thread ends next() and the producers.
  auto schema = input_schema();
  for (Design design : kDesigns) {
    MultiwayOptions o = options(design, 64);
    o.threads = 2;
    MultiwayAggregate op(schema, 3, std::move(o));
    std::vector<std::unique_ptr<BatchSource>> sources;
    for (int i = 0; i < 3; ++i) sources.push_back(std::make_unique<EndlessSource>(schema, 1 + 97 * i));
    op.start(std::move(sources));
    std::atomic<int> batches{0};
    std::thread reader([&] {
      while (op.next()) ++batches;
    });
    while (batches.load() < 10) std::this_thread::yield();
    op.cancel();
    reader.join();
    CHECK(op.stop(std::nullopt));  // the producers returned and are joined
  }
  // The push form: nothing ever arrives, the reader waits; cancel ends it.
  for (Design design : kDesigns) {
    MultiwayAggregate op(schema, 2, options(design, 64));
    std::thread reader([&] { CHECK(!op.next().has_value()); });
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    op.cancel();
    reader.join();
  }
}

TEST(interrupt_fails_the_run_and_stops_the_producers) {
  // check_interrupt (Ctrl-C in Python) is polled while next() works and waits; what it throws
  // ends the run: next() throws it now and again later, and the producers stop by themselves.
  auto schema = input_schema();
  for (Design design : kDesigns) {
    for (int rows : {1, 4096}) {  // slow inputs (the reader mostly waits) and fast ones (busy)
      std::atomic<int> polls{0};
      MultiwayOptions o = options(design, 1 << 20);
      o.query.window = {int64_t(1) << 40, int64_t(1) << 40, 0};  // no window completes
      o.threads = 2;
      o.check_interrupt = [&] {
        if (++polls == 3) throw std::runtime_error("interrupted");
      };
      MultiwayAggregate op(schema, 3, std::move(o));
      std::vector<std::unique_ptr<BatchSource>> sources;
      for (int i = 0; i < 3; ++i) sources.push_back(std::make_unique<EndlessSource>(schema, rows));
      op.start(std::move(sources));
      for (int call = 0; call < 2; ++call) {
        bool thrown = false;
        try {
          op.next();
        } catch (const std::runtime_error& e) {
          thrown = std::string(e.what()) == "interrupted";
        }
        CHECK(thrown);
      }
      CHECK_EQ(polls.load(), 3);
      CHECK(op.stop(std::nullopt));
    }
  }
}

TEST(bad_push_fails_the_run_for_every_thread) {
  // An unsorted batch from one pusher: push throws there, and the reader gets the same error.
  auto schema = input_schema();
  for (Design design : kDesigns) {
    MultiwayAggregate op(schema, 2, options(design, 8));
    Rows good{{1, 2, 3}, {0, 0, 0}, {1, 2, 3}}, bad{{5, 4}, {0, 0}, {1, 2}};
    op.push(0, make_batch(schema, good, 0, 3));
    CHECK_THROWS_WITH(op.push(1, make_batch(schema, bad, 0, 2)), ErrorKind::kUnsorted, "input 1");
    CHECK_THROWS_WITH(read_all(op), ErrorKind::kUnsorted, "input 1");
  }
}

UNIT_MAIN()
