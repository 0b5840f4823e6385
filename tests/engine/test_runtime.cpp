// The ordered parallel runtime: random chains of test operators of every kind and selectivity,
// run under every combination of threads, heuristic, reorder scheme, partitioning and morsel
// size, must give exactly the output of a sequential run (one call per operator over the whole
// input). Also run under ThreadSanitizer (make tsan-test).
#include <atomic>
#include <cstring>
#include <chrono>
#include <functional>
#include <map>
#include <random>
#include <thread>

#include "core/error.h"
#include "gate/merge.h"
#include "helpers.h"
#include "ops/joins.h"
#include "ops/keyed.h"
#include "ops/multi_input.h"
#include "runtime/pipeline.h"
#include "unit.h"

using namespace pao;
using fixtures::ListSource;

namespace {

// Every test batch: int64 columns t (time), k (key), v (value), h (an order-sensitive checksum).
std::shared_ptr<const Schema> tkvh() {
  return fixtures::schema({{"t", fixtures::type(TypeId::kInt64), false},
                          {"k", fixtures::type(TypeId::kInt64), false},
                          {"v", fixtures::type(TypeId::kInt64), false},
                          {"h", fixtures::type(TypeId::kInt64), false}});
}

struct Rows {
  std::vector<int64_t> t, k, v, h;
  size_t size() const { return t.size(); }
  void add(const Rows& o, size_t i) {
    t.push_back(o.t[i]);
    k.push_back(o.k[i]);
    v.push_back(o.v[i]);
    h.push_back(o.h[i]);
  }
};

Batch make(const Rows& r) {
  auto st = std::make_shared<fixtures::Storage>();
  st->i64 = {r.t, r.k, r.v, r.h};
  std::vector<Column> cols(4);
  for (size_t c = 0; c < 4; ++c) {
    cols[c].values = st->i64[c].data();
    cols[c].null_count = 0;
  }
  return Batch(tkvh(), static_cast<int64_t>(r.size()), std::move(cols), st);
}

Rows read(const Batch& b) {
  Rows r;
  for (int64_t i = 0; i < b.num_rows(); ++i) {
    r.t.push_back(b.column(0).typed<int64_t>()[i]);
    r.k.push_back(b.column(1).typed<int64_t>()[i]);
    r.v.push_back(b.column(2).typed<int64_t>()[i]);
    r.h.push_back(b.column(3).typed<int64_t>()[i]);
  }
  return r;
}

uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x9e3779b97f4a7c15ull;
  return x ^ (x >> 29);
}

// How each row of a test operator maps to output rows: `copies(v)` outputs, each with
// v' = v * 3 + 1 + copy and h' updated by the kind's state.
int copies(int64_t v, ops::Selectivity s) {
  switch (s) {
    case ops::Selectivity::kExactlyOne: return 1;
    case ops::Selectivity::kAtMostOne: return (mix(static_cast<uint64_t>(v)) % 3) != 0 ? 1 : 0;
    case ops::Selectivity::kAny: return static_cast<int>(mix(static_cast<uint64_t>(v)) % 3);
  }
  return 1;
}

// A test operator: stateless (h' = mix(h ^ v)), partitioned by k (h' = running hash of the key's
// tuples so far) or stateful (h' = running hash of all tuples); `spin` busy-waits per tuple. The
// stateful kind also emits a summary row at finish(), the partitioned kind one row per key.
class TestOp final : public ops::Operator {
 public:
  // `summary`: the stateful and partitioned kinds emit summary rows at finish().
  // `fails`: what may_fail() says (the planner pushes only operators that cannot fail below a merge).
  TestOp(ops::OpKind kind, ops::Selectivity sel, int spin_ns, bool summary = true, bool fails = true)
      : kind_(kind), sel_(sel), spin_ns_(spin_ns), summary_(summary), fails_(fails) {}
  bool may_fail() const override { return fails_; }
  std::string name() const override { return "test"; }
  std::string describe() const override { return "test"; }
  ops::OpKind kind() const override { return kind_; }
  ops::Selectivity selectivity() const override { return sel_; }
  std::vector<size_t> key_columns() const override { return {1}; }
  const std::shared_ptr<const Schema>& input_schema() const override { return schema_; }
  const std::shared_ptr<const Schema>& output_schema() const override { return schema_; }
  void set_partitions(size_t p) override { keyed_.assign(p, {}); }
  // Output rows keep their input row's t; summary rows (t < 0) come at finish().
  bool preserves_time(const std::string& time) const override { return time == "t" && !summary_; }

  Batch process(const Batch& in) override {
    Rows r = read(in), out;
    std::vector<int64_t> src;
    apply(r, nullptr, out, src, 0);
    return make(out);
  }
  ops::Piece process_rows(const Batch& in, std::span<const int64_t> rows, size_t partition) override {
    Rows r = read(in), out;
    std::vector<int64_t> src;
    apply(r, &rows, out, src, partition);
    return {make(out), std::move(src)};
  }
  Batch finish() override {
    Rows out;
    if (!summary_) return make(out);
    if (kind_ == ops::OpKind::kStateful) {
      out.t = {-1}, out.k = {-1}, out.v = {static_cast<int64_t>(seen_)}, out.h = {static_cast<int64_t>(global_)};
    } else if (kind_ == ops::OpKind::kPartitioned) {
      std::map<int64_t, uint64_t> all;
      for (auto& m : keyed_) all.insert(m.begin(), m.end());
      for (auto& [k, h] : all) out.t.push_back(-2), out.k.push_back(k), out.v.push_back(0), out.h.push_back(static_cast<int64_t>(h));
    }
    return make(out);
  }

 private:
  void apply(const Rows& r, std::span<const int64_t>* rows, Rows& out, std::vector<int64_t>& src, size_t part) {
    const size_t n = rows ? rows->size() : r.size();
    for (size_t j = 0; j < n; ++j) {
      const size_t i = rows ? static_cast<size_t>((*rows)[j]) : j;
      if (spin_ns_ > 0) {
        auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(spin_ns_);
        while (std::chrono::steady_clock::now() < until) {
        }
      }
      uint64_t h;
      if (kind_ == ops::OpKind::kStateless) {
        h = mix(static_cast<uint64_t>(r.h[i]) ^ static_cast<uint64_t>(r.v[i]));
      } else if (kind_ == ops::OpKind::kPartitioned) {
        uint64_t& s = keyed_[part][r.k[i]];
        s = mix(s * 31 + static_cast<uint64_t>(r.v[i]) + static_cast<uint64_t>(r.h[i]));
        h = s;
      } else {
        global_ = mix(global_ * 31 + static_cast<uint64_t>(r.v[i]) + static_cast<uint64_t>(r.h[i]));
        ++seen_;
        h = global_;
      }
      const int c = copies(r.v[i], sel_);
      for (int x = 0; x < c; ++x) {
        out.t.push_back(r.t[i]);
        out.k.push_back(r.k[i]);
        // Wraps (in uint64) rather than overflowing: a chain of 100 operators triples v 100 times.
        out.v.push_back(static_cast<int64_t>(static_cast<uint64_t>(r.v[i]) * 3 + 1 + static_cast<uint64_t>(x)));
        out.h.push_back(static_cast<int64_t>(h));
        src.push_back(static_cast<int64_t>(i));
      }
    }
  }

  std::shared_ptr<const Schema> schema_ = tkvh();
  ops::OpKind kind_;
  ops::Selectivity sel_;
  int spin_ns_;
  bool summary_;
  bool fails_;
  std::vector<std::map<int64_t, uint64_t>> keyed_;
  uint64_t global_ = 0;
  uint64_t seen_ = 0;
};

struct OpSpec {
  ops::OpKind kind;
  ops::Selectivity sel;
  int spin_ns;
};

std::vector<ops::OperatorPtr> build(const std::vector<OpSpec>& specs) {
  std::vector<ops::OperatorPtr> out;
  for (const auto& s : specs) out.push_back(std::make_shared<TestOp>(s.kind, s.sel, s.spin_ns));
  return out;
}

// One operator over a whole stream, then finish(): the sequential run of a graph node.
Rows once(const ops::OperatorPtr& op, const Rows& input) {
  op->set_partitions(1);
  Batch b = make(input);
  Rows out;
  if (op->kind() == ops::OpKind::kPartitioned) {
    std::vector<int64_t> rows(input.size());
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
    out = read(op->process_rows(b, rows, 0).batch);
  } else {
    out = read(op->process(b));
  }
  Rows fin = read(op->finish());
  for (size_t i = 0; i < fin.size(); ++i) out.add(fin, i);
  return out;
}

// The sequential run: each operator once over the whole stream, then finish.
Rows sequential(const std::vector<OpSpec>& specs, const Rows& input) {
  Rows cur = input;
  for (auto& op : build(specs)) cur = once(op, cur);
  return cur;
}

Rows random_input(std::mt19937_64& rng, size_t n, int keys) {
  Rows r;
  std::uniform_int_distribution<int64_t> key(0, keys - 1), val(-1000, 1000);
  for (size_t i = 0; i < n; ++i) {
    r.t.push_back(static_cast<int64_t>(i / 3));
    r.k.push_back(key(rng));
    r.v.push_back(val(rng));
    r.h.push_back(0);
  }
  return r;
}

std::vector<Batch> split(std::mt19937_64& rng, const Rows& r) {
  std::vector<Batch> out;
  size_t at = 0;
  while (at < r.size()) {
    const size_t len = std::min<size_t>(r.size() - at, 1 + rng() % 300);
    Rows part;
    for (size_t i = at; i < at + len; ++i) part.add(r, i);
    out.push_back(make(part));
    at += len;
  }
  return out;
}

Rows run(const std::vector<OpSpec>& specs, const std::vector<Batch>& batches, runtime::PipelineOptions o) {
  runtime::Pipeline p(std::make_unique<ListSource>(tkvh(), batches), build(specs), o);
  Rows all;
  while (auto b = p.next()) {
    Rows part = read(*b);
    for (size_t i = 0; i < part.size(); ++i) all.add(part, i);
  }
  return all;
}

bool same(const Rows& a, const Rows& b) { return a.t == b.t && a.k == b.k && a.v == b.v && a.h == b.h; }

// The threading models and thread counts every random run goes through: the reader's thread alone
// (manual), the ordered runtime on 1, 2 and 4 workers, a thread per operator (dedicated), and the
// free-list scheduler on 1 and 3 (dynamic).
const std::pair<runtime::Threading, size_t> kModels[] = {
    {runtime::Threading::kManual, 1},    {runtime::Threading::kOrdered, 1}, {runtime::Threading::kOrdered, 2},
    {runtime::Threading::kOrdered, 4},   {runtime::Threading::kDedicated, 0}, {runtime::Threading::kDynamic, 1},
    {runtime::Threading::kDynamic, 3}};

TEST(random_pipelines_equal_the_sequential_run) {
  std::mt19937_64 rng(12345);
  const ops::OpKind kinds[] = {ops::OpKind::kStateless, ops::OpKind::kPartitioned, ops::OpKind::kStateful};
  const ops::Selectivity sels[] = {ops::Selectivity::kExactlyOne, ops::Selectivity::kAtMostOne, ops::Selectivity::kAny};
  const runtime::Heuristic hs[] = {runtime::Heuristic::kCT, runtime::Heuristic::kLP, runtime::Heuristic::kET,
                                   runtime::Heuristic::kQST};
  const sync::Partitioning ps[] = {sync::Partitioning::kHybrid, sync::Partitioning::kPartitioned,
                                   sync::Partitioning::kShared};
  int configs = 0;
  for (int trial = 0; trial < 12; ++trial) {
    std::vector<OpSpec> specs;
    const int len = 1 + static_cast<int>(rng() % 5);
    for (int i = 0; i < len; ++i) specs.push_back({kinds[rng() % 3], sels[rng() % 3], rng() % 4 == 0 ? 2000 : 0});
    const Rows input = random_input(rng, 200 + rng() % 1500, 1 + static_cast<int>(rng() % 40));
    const std::vector<Batch> batches = split(rng, input);
    const Rows expected = sequential(specs, input);
    for (const auto& [threading, threads] : kModels) {
      for (int combo = 0; combo < 4; ++combo) {
        runtime::PipelineOptions o;
        o.threads = threads;
        o.threading = threading;
        o.scheduler = hs[(trial + combo) % 4];
        o.reorder = combo % 2 ? sync::ReorderScheme::kLocked : sync::ReorderScheme::kNonBlocking;
        o.partitioning = ps[(trial + combo) % 3];
        o.morsel_rows = combo == 0 ? 1 : combo == 1 ? 7 : 0;  // one-tuple morsels are the debug setting
        o.reorder_capacity = combo == 0 ? 2 : 64;
        o.max_inflight = combo == 0 ? 4 : 0;
        o.partitions = combo == 3 ? 3 : 0;
        // Workers parked and woken as the level moves, every millisecond.
        o.elastic = combo == 2 && (threading == runtime::Threading::kOrdered || threading == runtime::Threading::kDynamic);
        o.elastic_period = std::chrono::milliseconds(1);
        const Rows got = run(specs, batches, o);
        ++configs;
        if (!same(got, expected)) {
          unit::fail(__FILE__, __LINE__, "trial " + std::to_string(trial) + " threads " + std::to_string(threads) +
                                             " combo " + std::to_string(combo) + ": " + std::to_string(got.size()) +
                                             " rows vs " + std::to_string(expected.size()));
        }
      }
    }
  }
  std::printf("  %d configurations\n", configs);
}

// An elastic run (runtime/elastic.h in the runtime): the level moves between 1 and the most
// workers while the run goes on, and the output is the sequential run's. A period of 1 ms and
// operators that spin make a run of many periods.
TEST(elastic_runs_equal_the_sequential_run_and_report_their_levels) {
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 4; ++trial) {
    const std::vector<OpSpec> specs{{ops::OpKind::kStateless, ops::Selectivity::kAtMostOne, 2000},
                                    {ops::OpKind::kPartitioned, ops::Selectivity::kExactlyOne, 2000},
                                    {ops::OpKind::kStateful, ops::Selectivity::kAny, 0}};
    const Rows input = random_input(rng, 3000, 20);
    const std::vector<Batch> batches = split(rng, input);
    runtime::PipelineOptions o;
    o.threads = 4;
    o.elastic = true;
    o.elastic_period = std::chrono::milliseconds(1);
    o.morsel_rows = 16;
    runtime::Pipeline p(std::make_unique<ListSource>(tkvh(), batches), build(specs), o);
    Rows got;
    while (auto b = p.next()) {
      Rows part = read(*b);
      for (size_t i = 0; i < part.size(); ++i) got.add(part, i);
    }
    CHECK(same(got, sequential(specs, input)));
    const runtime::PipelineStats st = p.stats();
    CHECK(!st.levels.empty());
    for (const auto& l : st.levels) CHECK(l.level >= 1 && l.level <= 4 && l.tuples_per_s >= 0);
    CHECK_EQ(st.levels.front().level, size_t{1});  // it starts at one worker
  }
}

// A run of more stages than a 64-bit mask has bits (100 stateful and partitioned operators, none
// fused) under every threading model equals the sequential run.
// Threads the runtime does not own (Pipeline::help: LiveInput pushers; the ingress does the same
// under back-pressure) run operators beside one worker, for ordered and dynamic threading: the
// output is the sequential run's (run under ThreadSanitizer by make tsan-test).
TEST(helpers_beside_the_workers_equal_the_sequential_run) {
  std::mt19937_64 rng(41);
  int64_t helper_steps = 0;
  for (int trial = 0; trial < 6; ++trial) {
    const std::vector<OpSpec> specs{{ops::OpKind::kStateless, ops::Selectivity::kAtMostOne, 500},
                                    {ops::OpKind::kPartitioned, ops::Selectivity::kExactlyOne, 500},
                                    {ops::OpKind::kStateful, ops::Selectivity::kAny, 0}};
    const Rows input = random_input(rng, 3000, 20);
    const std::vector<Batch> batches = split(rng, input);
    runtime::PipelineOptions o;
    o.threads = 1;
    o.morsel_rows = 16;
    o.max_inflight = 4;
    o.threading = trial % 2 == 0 ? runtime::Threading::kOrdered : runtime::Threading::kDynamic;
    runtime::Pipeline p(std::make_unique<ListSource>(tkvh(), batches), build(specs), o);
    std::atomic<bool> done{false};
    std::vector<std::thread> helpers;
    for (int h = 0; h < 2; ++h) {
      helpers.emplace_back([&] {
        while (!done.load(std::memory_order_relaxed)) {
          if (!p.help()) std::this_thread::yield();
        }
      });
    }
    Rows got;
    while (auto b = p.next()) {
      Rows part = read(*b);
      for (size_t i = 0; i < part.size(); ++i) got.add(part, i);
    }
    done.store(true, std::memory_order_relaxed);
    for (auto& t : helpers) t.join();
    CHECK(same(got, sequential(specs, input)));
    helper_steps += p.stats().helper_steps;
  }
  // One worker leaves a core to the helpers wherever there are two: over the six runs they take
  // steps. (Not in each run: on a machine busy with other work a run may end before a helper is
  // scheduled, as one in three did here beside two busy processes.)
  if (std::thread::hardware_concurrency() > 1) CHECK(helper_steps > 0);
}

TEST(more_than_64_operators_run_under_every_model) {
  std::mt19937_64 rng(64);
  std::vector<OpSpec> specs;
  for (int i = 0; i < 100; ++i) {
    specs.push_back({i % 2 ? ops::OpKind::kStateful : ops::OpKind::kPartitioned,
                     i % 3 ? ops::Selectivity::kExactlyOne : ops::Selectivity::kAtMostOne, 0});
  }
  const Rows input = random_input(rng, 400, 9);
  const std::vector<Batch> batches = split(rng, input);
  const Rows expected = sequential(specs, input);
  for (const auto& [threading, threads] : kModels) {
    runtime::PipelineOptions o;
    o.threads = threads;
    o.threading = threading;
    o.morsel_rows = 16;
    CHECK(same(run(specs, batches, o), expected));
  }
}

TEST(an_operator_error_fails_the_run_and_stops_every_thread) {
  struct Boom final : ops::Operator {
    std::shared_ptr<const Schema> s = tkvh();
    int calls = 0;
    std::string name() const override { return "boom"; }
    std::string describe() const override { return "boom"; }
    ops::OpKind kind() const override { return ops::OpKind::kStateful; }
    ops::Selectivity selectivity() const override { return ops::Selectivity::kExactlyOne; }
    const std::shared_ptr<const Schema>& input_schema() const override { return s; }
    const std::shared_ptr<const Schema>& output_schema() const override { return s; }
    Batch process(const Batch& in) override {
      if (++calls == 3) throw Error(ErrorKind::kInvalidInput, "boom at call 3");
      return in;
    }
  };
  std::mt19937_64 rng(7);
  const Rows input = random_input(rng, 5000, 10);
  runtime::PipelineOptions o;
  o.threads = 2;
  o.morsel_rows = 10;
  runtime::Pipeline p(std::make_unique<ListSource>(tkvh(), split(rng, input)),
                      {std::make_shared<TestOp>(ops::OpKind::kStateless, ops::Selectivity::kExactlyOne, 0),
                       std::make_shared<Boom>()},
                      o);
  CHECK_THROWS_WITH(while (p.next()) {}, ErrorKind::kInvalidInput, "boom at call 3");
}

TEST(cancel_mid_run_releases_every_batch) {
  std::mt19937_64 rng(9);
  const Rows input = random_input(rng, 20000, 50);
  std::vector<Batch> batches = split(rng, input);
  std::weak_ptr<const void> first_owner = batches.front().owner();
  {
    runtime::PipelineOptions o;
    o.threads = 2;
    o.morsel_rows = 3;
    auto p = std::make_unique<runtime::Pipeline>(std::make_unique<ListSource>(tkvh(), std::move(batches)),
                                                 build({{ops::OpKind::kPartitioned, ops::Selectivity::kAny, 1000},
                                                        {ops::OpKind::kStateless, ops::Selectivity::kExactlyOne, 0}}),
                                                 o);
    CHECK(p->next().has_value());
    p->cancel();
    CHECK_THROWS_WITH(p->next(), ErrorKind::kUsage, "cancelled");
  }
  CHECK(first_owner.expired());
}

TEST(cancel_from_another_thread_while_the_consumer_reads_to_the_end) {
  // cancel() tells whether the run had ended by reading out_closed_, which the worker finishing
  // the last operator writes under out_mutex_: cancel() must hold that mutex too (it held only
  // error_mutex_; make tsan-test). Odd rounds: a canceller thread cancels after a random delay
  // while the consumer reads (mostly mid-run). Even rounds: the run finishes with nobody reading
  // (its few morsels fit the result queue), and then another thread cancels: nothing orders the
  // worker's write before that read but the mutex under test, which is what TSan needs to see
  // (a consumer's next() would order it through error_mutex_). Either way the consumer gets
  // every row, or the cancellation.
  std::mt19937_64 rng(21);
  int cancelled = 0, completed = 0;
  for (int round = 0; round < 40; ++round) {
    const Rows input = random_input(rng, 200 + rng() % 2000, 10);
    const std::vector<OpSpec> specs = {{ops::OpKind::kStateless, ops::Selectivity::kExactlyOne, 0},
                                       {ops::OpKind::kStateful, ops::Selectivity::kExactlyOne, 0}};
    const size_t expected = sequential(specs, input).size();
    const bool unread = round % 2 == 0;
    runtime::PipelineOptions o;
    o.threads = 2;
    o.morsel_rows = unread ? 512 : 16;
    runtime::Pipeline p(std::make_unique<ListSource>(tkvh(), split(rng, input)), build(specs), o);
    const auto delay = unread ? std::chrono::microseconds(50000) : std::chrono::microseconds(rng() % 3000);
    std::thread canceller([&p, delay] {
      std::this_thread::sleep_for(delay);
      p.cancel();
    });
    if (unread) canceller.join();
    size_t rows = 0;
    try {
      while (auto b = p.next()) rows += static_cast<size_t>(b->num_rows());
      CHECK_EQ(rows, expected);  // ended before the cancel: every row
      ++completed;
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::kUsage);
      ++cancelled;
    }
    if (!unread) canceller.join();
  }
  std::printf("  %d runs cancelled, %d completed first\n", cancelled, completed);
}

TEST(stats_count_tuples_per_operator) {
  std::mt19937_64 rng(3);
  const Rows input = random_input(rng, 3000, 20);
  runtime::PipelineOptions o;
  o.threads = 2;
  runtime::Pipeline p(std::make_unique<ListSource>(tkvh(), split(rng, input)),
                      build({{ops::OpKind::kStateless, ops::Selectivity::kAtMostOne, 0},
                             {ops::OpKind::kPartitioned, ops::Selectivity::kExactlyOne, 0}}),
                      o);
  int64_t out = 0;
  while (auto b = p.next()) out += b->num_rows();
  const runtime::PipelineStats s = p.stats();
  CHECK_EQ(s.tuples_in, 3000);
  CHECK_EQ(s.operators[0].tuples_in, 3000);
  CHECK_EQ(s.operators[1].tuples_in, s.operators[0].tuples_out);
  CHECK_EQ(s.tuples_out, out);
  CHECK(!s.latencies_ns.empty());
}

}  // namespace

namespace {

void append(Rows& all, const Batch& b) {
  Rows r = read(b);
  for (size_t i = 0; i < r.size(); ++i) all.add(r, i);
}

// A batch's int64 columns as rows, nulls as -999.
std::vector<std::vector<int64_t>> flat(const std::vector<Batch>& bs) {
  std::vector<std::vector<int64_t>> rows;
  for (const Batch& x : bs) {
    for (int64_t r = 0; r < x.num_rows(); ++r) {
      std::vector<int64_t> row;
      for (size_t c = 0; c < x.num_columns(); ++c) {
        row.push_back(x.column(c).is_valid(r) ? x.column(c).typed<int64_t>()[r] : -999);
      }
      rows.push_back(row);
    }
  }
  return rows;
}

}  // namespace

// A graph with fan-out (A feeds an output, the union and the join), a union of two branches of
// one source and an interval join of the same two: every output equals the sequential run of its
// node, whatever the options. The outputs are read together (next_any).
TEST(random_graphs_equal_the_sequential_run) {
  std::mt19937_64 rng(777);
  const runtime::Heuristic hs[] = {runtime::Heuristic::kCT, runtime::Heuristic::kLP, runtime::Heuristic::kET,
                                   runtime::Heuristic::kQST};
  int configs = 0;
  for (int trial = 0; trial < 8; ++trial) {
    const Rows input = random_input(rng, 100 + rng() % 800, 1 + static_cast<int>(rng() % 20));
    const std::vector<Batch> batches = split(rng, input);
    const auto sel_a = rng() % 2 ? ops::Selectivity::kAtMostOne : ops::Selectivity::kExactlyOne;
    const auto sel_b = rng() % 2 ? ops::Selectivity::kAny : ops::Selectivity::kExactlyOne;
    // The expected outputs, node by node (each multi-input node given its whole inputs at once).
    const Rows a = once(std::make_shared<TestOp>(ops::OpKind::kStateless, sel_a, 0, false), input);
    const Rows b = once(std::make_shared<TestOp>(ops::OpKind::kPartitioned, sel_b, 0, false), input);
    auto u_ref = ops::make_union({tkvh(), tkvh()}, "t");
    auto j_ref = ops::make_interval_join(tkvh(), tkvh(), "t", {"k"}, -1, 1, ops::JoinHow::kLeft);
    std::vector<Batch> u_batches, j_batches;
    for (size_t p = 0; p < 2; ++p) {
      u_batches.push_back(u_ref->push(p, make(p == 0 ? a : b), INT64_MAX));
      j_batches.push_back(j_ref->push(p, make(p == 0 ? a : b), INT64_MAX));
    }
    for (const auto& [threading, threads] : kModels) {
      for (int combo = 0; combo < 3; ++combo) {
        runtime::Graph g;
        g.time = "t";
        g.sources.push_back(std::make_unique<ListSource>(tkvh(), batches));
        g.nodes.push_back({nullptr, {}, 0});
        g.nodes.push_back({std::make_shared<TestOp>(ops::OpKind::kStateless, sel_a, 0, false), {0}, 0});
        g.nodes.push_back({std::make_shared<TestOp>(ops::OpKind::kPartitioned, sel_b, 0, false), {0}, 0});
        g.nodes.push_back({ops::make_union({tkvh(), tkvh()}, "t"), {1, 2}, 0});
        g.nodes.push_back({ops::make_interval_join(tkvh(), tkvh(), "t", {"k"}, -1, 1, ops::JoinHow::kLeft), {1, 2}, 0});
        g.outputs = {1, 3, 4};
        runtime::PipelineOptions o;
        o.threads = threads;
        o.threading = threading;
        o.scheduler = hs[(trial + combo) % 4];
        o.morsel_rows = combo == 0 ? 1 : combo == 1 ? 7 : 0;
        o.max_inflight = combo == 0 ? 8 : 0;
        o.reorder_capacity = combo == 0 ? 2 : 64;
        runtime::Pipeline p(std::move(g), o);
        std::vector<std::vector<Batch>> got(3);
        std::vector<int> ends(3, 0);
        while (auto r = p.next_any()) {
          if (r->second) {
            got[r->first].push_back(*r->second);
          } else {
            ++ends[r->first];
          }
        }
        CHECK(ends == std::vector<int>({1, 1, 1}));
        Rows got_a;
        for (const Batch& x : got[0]) append(got_a, x);
        ++configs;
        REQUIRE(same(got_a, a));
        REQUIRE(flat(got[1]) == flat(u_batches));
        REQUIRE(flat(got[2]) == flat(j_batches));
      }
    }
  }
  CHECK_EQ(configs, 8 * 7 * 3);
}

// Operators below the merge (runtime/planner.h, push_below_merges): a merge of several inputs
// feeding a stateless filter that cannot fail, then a partitioned operator. Taken apart (a source
// and a filter per input, a union in the merge's place) or not, every run equals the sequential
// run over the merged stream; statistics count the filter's copies as one operator.
TEST(operators_below_a_merge_equal_the_merged_run) {
  std::mt19937_64 rng(2929);
  int configs = 0;
  for (int trial = 0; trial < 6; ++trial) {
    const size_t k = 2 + rng() % 4;
    std::vector<std::vector<Batch>> inputs(k);
    for (auto& in : inputs) in = split(rng, random_input(rng, rng() % 600, 1 + static_cast<int>(rng() % 10)));
    auto merged_of = [&] {
      std::vector<std::unique_ptr<BatchSource>> sources;
      for (const auto& in : inputs) sources.push_back(std::make_unique<ListSource>(tkvh(), in));
      return gate::make_merge(std::move(sources), {"t", 1 + static_cast<int64_t>(rng() % 100)});
    };
    Rows merged;
    for (auto m = merged_of(); auto b = m->next();) append(merged, *b);
    const auto filter = [] {
      return std::make_shared<TestOp>(ops::OpKind::kStateless, ops::Selectivity::kAtMostOne, 0, false, false);
    };
    const auto keyed = [] {
      return std::make_shared<TestOp>(ops::OpKind::kPartitioned, ops::Selectivity::kExactlyOne, 0, false);
    };
    // The union in the merge's place feeds a stateless operator (not pushed: it may fail), so its
    // output leaves as plans gathered by that operator's workers (Stage::planned).
    const auto mapped = [] { return std::make_shared<TestOp>(ops::OpKind::kStateless, ops::Selectivity::kExactlyOne, 0); };
    const Rows expected = once(keyed(), once(mapped(), once(filter(), merged)));
    for (size_t threads : {1, 2, 4}) {
      for (bool push_down : {true, false}) {
        runtime::Graph g;
        g.time = "t";
        g.sources.push_back(merged_of());
        g.nodes.push_back({nullptr, {}, 0});
        g.nodes.push_back({filter(), {0}, 0});
        g.nodes.push_back({mapped(), {1}, 0});
        g.nodes.push_back({keyed(), {2}, 0});
        g.outputs = {3};
        runtime::PipelineOptions o;
        o.threads = threads;
        o.push_down = push_down;
        o.morsel_rows = threads == 2 ? 3 : 0;
        runtime::Pipeline p(std::move(g), o);
        Rows got;
        while (auto b = p.next()) append(got, *b);
        REQUIRE(same(got, expected));
        const runtime::PipelineStats st = p.stats();
        REQUIRE(st.operators.size() == (push_down ? size_t{4} : size_t{3}));
        CHECK_EQ(st.operators[0].copies, push_down ? k : size_t{1});
        CHECK_EQ(st.operators[0].tuples_in, static_cast<int64_t>(merged.size()));
        if (push_down) CHECK(st.operators[3].name == "union");
        ++configs;
      }
    }
  }
  CHECK_EQ(configs, 6 * 3 * 2);
}

// Live inputs with heartbeats (BatchSource::bound, ready): a producer thread pushes every input's
// batches with heartbeats between them (each at most the next batch's first time) in a random
// interleaving; merged whole or taken apart below the merge (a union, which hears the heartbeats
// as pulses through the pushed filter), every run equals the sequential run over the merged rows.
TEST(live_inputs_with_heartbeats_equal_the_merged_run) {
  std::mt19937_64 rng(4242);
  int configs = 0;
  for (int trial = 0; trial < 8; ++trial) {
    const size_t k = 2 + rng() % 3;
    std::vector<std::vector<Batch>> inputs(k);
    for (auto& in : inputs) in = split(rng, random_input(rng, rng() % 400, 1 + static_cast<int>(rng() % 10)));
    std::vector<std::unique_ptr<BatchSource>> lists;
    for (const auto& in : inputs) lists.push_back(std::make_unique<ListSource>(tkvh(), in));
    Rows merged;
    for (auto m = gate::make_merge(std::move(lists), {"t", 64}); auto b = m->next();) append(merged, *b);
    const auto filter = [] {
      return std::make_shared<TestOp>(ops::OpKind::kStateless, ops::Selectivity::kAtMostOne, 0, false, false);
    };
    const auto keyed = [] {
      return std::make_shared<TestOp>(ops::OpKind::kPartitioned, ops::Selectivity::kExactlyOne, 0, false);
    };
    const Rows expected = once(keyed(), once(filter(), merged));
    for (size_t threads : {1, 2}) {
      for (bool push_down : {true, false}) {
        std::vector<fixtures::LiveSource*> live;
        std::vector<std::unique_ptr<BatchSource>> sources;
        for (size_t i = 0; i < k; ++i) {
          auto s = std::make_unique<fixtures::LiveSource>(tkvh());
          live.push_back(s.get());
          sources.push_back(std::move(s));
        }
        runtime::Graph g;
        g.time = "t";
        g.sources.push_back(gate::make_merge(std::move(sources), {"t", 1 + static_cast<int64_t>(rng() % 100)}));
        g.nodes.push_back({nullptr, {}, 0});
        g.nodes.push_back({filter(), {0}, 0});
        g.nodes.push_back({keyed(), {1}, 0});
        g.outputs = {2};
        runtime::PipelineOptions o;
        o.threads = threads;
        o.push_down = push_down;
        runtime::Pipeline p(std::move(g), o);
        std::thread producer([&, seed = rng()] {
          std::mt19937_64 r(seed);
          std::vector<size_t> next(k, 0);
          std::vector<int64_t> floor(k, 0);  // the least time each input may still send
          for (;;) {
            std::vector<size_t> open;
            for (size_t i = 0; i < k; ++i)
              if (next[i] < inputs[i].size()) open.push_back(i);
            if (open.empty()) break;
            const size_t i = open[r() % open.size()];
            const Batch& b = inputs[i][next[i]];
            if (b.num_rows() > 0 && r() % 2 == 0) {  // a heartbeat up to the batch's first time
              const int64_t first = b.column(0).typed<int64_t>()[0];
              floor[i] += static_cast<int64_t>(r() % static_cast<uint64_t>(first - floor[i] + 1));
              live[i]->heartbeat(floor[i]);
            }
            if (b.num_rows() > 0) floor[i] = b.column(0).typed<int64_t>()[b.num_rows() - 1];
            live[i]->push(b);
            ++next[i];
          }
          for (size_t i = 0; i < k; ++i) {
            live[i]->heartbeat(floor[i] + 5);
            live[i]->close();
          }
        });
        Rows got;
        while (auto b = p.next()) append(got, *b);
        producer.join();
        REQUIRE(same(got, expected));
        ++configs;
      }
    }
  }
  CHECK_EQ(configs, 8 * 2 * 2);
}

// Two live sources, each through a keyed operator of its own (partitioned: heartbeats reach the
// union after it as pulses carried by one empty piece), then a union: every run equals the union,
// in the merged order, of the operator's sequential output over each input.
TEST(heartbeats_pass_partitioned_operators_to_a_union) {
  std::mt19937_64 rng(777);
  int configs = 0;
  for (int trial = 0; trial < 6; ++trial) {
    std::vector<std::vector<Batch>> inputs(2);
    for (auto& in : inputs) in = split(rng, random_input(rng, rng() % 500, 1 + static_cast<int>(rng() % 10)));
    const auto keyed = [] {
      return std::make_shared<TestOp>(ops::OpKind::kPartitioned, ops::Selectivity::kAtMostOne, 0, false);
    };
    std::vector<std::unique_ptr<BatchSource>> outs;
    for (const auto& in : inputs) {
      Rows all;
      for (const Batch& b : in) append(all, b);
      outs.push_back(std::make_unique<ListSource>(tkvh(), std::vector<Batch>{make(once(keyed(), all))}));
    }
    Rows expected;
    for (auto m = gate::make_merge(std::move(outs), {"t", 64}); auto b = m->next();) append(expected, *b);
    for (size_t threads : {1, 2, 3}) {
      std::vector<fixtures::LiveSource*> live;
      runtime::Graph g;
      g.time = "t";
      for (size_t i = 0; i < 2; ++i) {
        auto s = std::make_unique<fixtures::LiveSource>(tkvh());
        live.push_back(s.get());
        std::vector<std::unique_ptr<BatchSource>> one;
        one.push_back(std::move(s));
        g.sources.push_back(gate::make_merge(std::move(one), {"t", 64}));
        g.nodes.push_back({nullptr, {}, i});
      }
      g.nodes.push_back({keyed(), {0}, 0});
      g.nodes.push_back({keyed(), {1}, 0});
      g.nodes.push_back({ops::make_union({tkvh(), tkvh()}, "t"), {2, 3}, 0});
      g.outputs = {4};
      runtime::PipelineOptions o;
      o.threads = threads;
      runtime::Pipeline p(std::move(g), o);
      std::thread producer([&, seed = rng()] {
        std::mt19937_64 r(seed);
        std::vector<size_t> next(2, 0);
        std::vector<int64_t> floor(2, 0);
        while (next[0] < inputs[0].size() || next[1] < inputs[1].size()) {
          const size_t i = next[0] < inputs[0].size() && (next[1] == inputs[1].size() || r() % 2 == 0) ? 0 : 1;
          const Batch& b = inputs[i][next[i]++];
          const int64_t first = b.column(0).typed<int64_t>()[0];
          floor[i] += static_cast<int64_t>(r() % static_cast<uint64_t>(first - floor[i] + 1));
          live[i]->heartbeat(floor[i]);
          floor[i] = b.column(0).typed<int64_t>()[b.num_rows() - 1];
          live[i]->push(b);
        }
        for (size_t i = 0; i < 2; ++i) live[i]->close();
      });
      Rows got;
      while (auto b = p.next()) append(got, *b);
      producer.join();
      REQUIRE(same(got, expected));
      ++configs;
    }
  }
  CHECK_EQ(configs, 6 * 3);
}

// A run with two outputs: a stateless operator over `input`, and the input itself; 2 workers, at
// most 16 morsels alive.
std::unique_ptr<runtime::Pipeline> two_outputs(std::mt19937_64& rng, const Rows& input) {
  runtime::Graph g;
  g.time = "t";
  g.sources.push_back(std::make_unique<ListSource>(tkvh(), split(rng, input)));
  g.nodes.push_back({nullptr, {}, 0});
  g.nodes.push_back({std::make_shared<TestOp>(ops::OpKind::kStateless, ops::Selectivity::kExactlyOne, 0, false), {0}, 0});
  g.outputs = {1, 0};
  runtime::PipelineOptions o;
  o.threads = 2;
  o.max_inflight = 16;
  o.morsel_rows = 100;
  return std::make_unique<runtime::Pipeline>(std::move(g), o);
}

// An output nobody reads holds at most max_inflight batches; the run then waits, and reading both
// together lets both finish with the whole stream.
TEST(an_output_nobody_reads_bounds_memory_and_the_run_waits) {
  std::mt19937_64 rng(5);
  const Rows input = random_input(rng, 20000, 5);
  const auto run = two_outputs(rng, input);
  runtime::Pipeline& p = *run;
  size_t first = 0;
  for (int i = 0; i < 5; ++i) {
    auto b = p.next(0);
    REQUIRE(b.has_value());
    first += static_cast<size_t>(b->num_rows());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const runtime::PipelineStats s = p.stats();
  CHECK(s.peak_inflight <= 16 + 8);  // the bound, plus what one input batch adds at once
  CHECK(static_cast<size_t>(s.tuples_in) < input.size());  // waiting, not reading on
  size_t other = 0;
  while (auto r = p.next_any()) {
    if (r->second) (r->first == 0 ? first : other) += static_cast<size_t>(r->second->num_rows());
  }
  CHECK_EQ(other, input.size());
  CHECK_EQ(first, input.size());
}

// Closing (discarding) an output nobody will read lets the others run to the end.
TEST(a_discarded_output_never_holds_the_run_back) {
  std::mt19937_64 rng(6);
  const Rows input = random_input(rng, 20000, 5);
  const auto run = two_outputs(rng, input);
  runtime::Pipeline& p = *run;
  p.discard(1);
  size_t rows = 0;
  while (auto b = p.next(0)) rows += static_cast<size_t>(b->num_rows());
  CHECK_EQ(rows, input.size());
  CHECK(!p.next(1).has_value());
}

// Checkpoints (Pipeline::cut): a run of keyed operators over a merge of three inputs, cut from the
// reader's thread after a random number of batches under every threading model, then restored
// from the cut over the inputs less the rows it counts (and cut and restored once more), reads the
// uninterrupted run's rows exactly. Under ThreadSanitizer: the pause, drain and resume against workers.
TEST(a_run_cut_and_restored_reads_the_sequential_rows) {
  std::mt19937_64 rng(77);
  int cuts = 0;
  for (int trial = 0; trial < 6; ++trial) {
    std::vector<std::vector<Batch>> inputs;
    for (int i = 0; i < 3; ++i) inputs.push_back(split(rng, random_input(rng, 300 + rng() % 900, 1 + static_cast<int>(rng() % 30))));
    // A run over the inputs, each less its first rows[i] rows (empty: from the start).
    auto start = [&](const std::vector<int64_t>& rows, const runtime::PipelineOptions& o) {
      std::vector<std::unique_ptr<BatchSource>> parts;
      for (size_t i = 0; i < inputs.size(); ++i) {
        std::vector<Batch> rest;
        int64_t skip = rows.empty() ? 0 : rows[i];
        for (const Batch& b : inputs[i]) {
          if (skip < b.num_rows()) rest.push_back(b.slice(skip, b.num_rows() - skip));
          skip = std::max<int64_t>(0, skip - b.num_rows());
        }
        parts.push_back(std::make_unique<ListSource>(tkvh(), std::move(rest)));
      }
      ops::OperatorPtr s = ops::make_sessionize(tkvh(), {"k"}, "t", 2, "session");
      ops::OperatorPtr r = ops::make_running(s->output_schema(), {"k"}, {{"n", window::AggKind::kCount, ""},
                                                                           {"s", window::AggKind::kSum, "v"}});
      return std::make_unique<runtime::Pipeline>(gate::make_merge(std::move(parts), {"t", 97}),
                                                 std::vector<ops::OperatorPtr>{s, r}, o);
    };
    std::vector<int64_t> expected;
    for (auto p = start({}, {}); auto b = p->next();) fixtures::append_values(*b, expected);
    for (const auto& [threading, threads] : kModels) {
      runtime::PipelineOptions o;
      o.threading = threading;
      o.threads = threads;
      o.morsel_rows = 1 + static_cast<int64_t>(rng() % 64);
      o.max_inflight = 1 + rng() % 4;
      std::vector<int64_t> got;
      for (int leg = 0; leg < 3; ++leg) {  // cut after a few batches, twice, then read to the end
        auto p = start(o.resume ? o.resume->rows[0] : std::vector<int64_t>{}, o);
        const size_t take = leg == 2 ? SIZE_MAX : rng() % 5;
        for (size_t k = 0; k < take; ++k) {
          std::optional<Batch> b = p->next();
          if (!b) break;
          fixtures::append_values(*b, got);
        }
        if (leg == 2) break;
        std::optional<runtime::Cut> c = p->cut();
        REQUIRE(c.has_value());
        ++cuts;
        o.resume = std::make_shared<const runtime::Cut>(std::move(*c));
      }
      CHECK(got == expected);
    }
  }
  std::printf("  %d cuts\n", cuts);
}

int main() { return unit::run_all(); }
