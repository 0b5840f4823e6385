// The W-Hive: sliced windows equal the unsliced store, sequentially and with many updaters racing
// an output thread (shared keys as WiML uses it, partitioned keys as TuMLMC does). Run under
// ThreadSanitizer by `make tsan-test`: nothing emitted early, nothing lost, nothing twice.
// GCC 12 reports a false -Wrestrict in std::string's inlined copy of the aggregate names (GCC bug
// 105329); nothing here overlaps.
#pragma GCC diagnostic ignored "-Wrestrict"
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <atomic>
#include <random>
#include <thread>
#include <tuple>

#include "helpers.h"
#include "unit.h"
#include "window/whive.h"
#include "window/window_states.h"

using namespace pao;
using window::AggKind;
using window::AggregateQuery;
using window::HiveMode;
using window::WHive;
using window::WindowAggregate;
using window::WindowOutput;

namespace {

using Row = std::vector<int64_t>;  // window_start, window_end, key, then every aggregate

std::shared_ptr<const Schema> tkv_schema() {
  using fixtures::type;
  return fixtures::schema({{"t", type(TypeId::kInt64), false},
                          {"k", type(TypeId::kInt64), false},
                          {"v", type(TypeId::kInt64), false}});
}

// One batch of (t, k, v) rows.
Batch tkv_batch(const std::vector<int64_t>& t, const std::vector<int64_t>& k, const std::vector<int64_t>& v) {
  auto st = std::make_shared<fixtures::Storage>();
  st->i64 = {t, k, v};
  std::vector<Column> cols(3);
  for (size_t c = 0; c < 3; ++c) {
    cols[c].values = st->i64[c].data();
    cols[c].null_count = 0;
  }
  return Batch(tkv_schema(), static_cast<int64_t>(t.size()), std::move(cols), st);
}

AggregateQuery query(int64_t size, int64_t advance, int64_t offset, bool order_sensitive) {
  AggregateQuery q;
  q.time_column = "t";
  q.keys = {"k"};
  q.window = {size, advance, offset};
  const std::pair<const char*, AggKind> aggs[] = {{"n", AggKind::kCount}, {"s", AggKind::kSum},  {"lo", AggKind::kMin},
                                                  {"hi", AggKind::kMax},  {"f", AggKind::kFirst}, {"l", AggKind::kLast}};
  for (const auto& [name, kind] : aggs) {
    if (order_sensitive || !window::order_sensitive(kind)) {
      window::AggSpec spec;
      spec.name = name;
      spec.kind = kind;
      if (kind != AggKind::kCount) spec.column = "v";
      q.aggs.push_back(std::move(spec));
    }
  }
  return q;
}

std::vector<Row> drain(WindowOutput& out) {
  std::vector<Row> rows;
  while (auto b = out.take(true)) {
    for (int64_t r = 0; r < b->num_rows(); ++r) {
      Row row;
      for (size_t c = 0; c < b->num_columns(); ++c) row.push_back(static_cast<const int64_t*>(b->column(c).values)[r]);
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

// Random inputs: sorted times with ties and gaps, a few keys.
struct Inputs {
  std::vector<Batch> batches;  // one per input
  std::vector<std::vector<int64_t>> times;
};

Inputs random_inputs(std::mt19937_64& rng, size_t inputs, int64_t rows, int64_t keys) {
  Inputs in;
  for (size_t i = 0; i < inputs; ++i) {
    std::vector<int64_t> t, k, v;
    int64_t now = static_cast<int64_t>(rng() % 20) - 10;
    for (int64_t r = 0; r < rows; ++r) {
      now += static_cast<int64_t>(rng() % 4) + (rng() % 50 == 0 ? 40 : 0);  // ties and gaps
      t.push_back(now);
      k.push_back(static_cast<int64_t>(rng() % keys));
      v.push_back(static_cast<int64_t>(rng() % 1000) - 500);
    }
    in.times.push_back(t);
    in.batches.push_back(tkv_batch(t, k, v));
  }
  return in;
}

// The merged order: (time, input, position).
std::vector<std::tuple<int64_t, size_t, int64_t>> merged(const Inputs& in) {
  std::vector<std::tuple<int64_t, size_t, int64_t>> order;
  for (size_t i = 0; i < in.times.size(); ++i) {
    for (int64_t r = 0; r < static_cast<int64_t>(in.times[i].size()); ++r) order.emplace_back(in.times[i][r], i, r);
  }
  std::sort(order.begin(), order.end());
  return order;
}

// The output thread: emits at the least published progress until every source has ended.
void emit_until_done(WHive& hive, std::vector<std::atomic<int64_t>>& progress) {
  for (;;) {
    int64_t w = INT64_MAX;
    for (auto& p : progress) w = std::min(w, p.load(std::memory_order_acquire));
    hive.emit(w);
    if (w == INT64_MAX) return;
  }
}

std::vector<Row> unsliced(const Inputs& in, const AggregateQuery& q) {
  WindowAggregate agg(*tkv_schema(), q, 7);
  for (const auto& [t, i, r] : merged(in)) agg.add(in.batches[i], r, t);
  agg.finish();
  return drain(agg);
}

}  // namespace

TEST(sliced_single_thread_equals_unsliced) {
  std::mt19937_64 rng(7);
  const int64_t shapes[][3] = {{10, 3, 0}, {4, 4, 1}, {3, 7, -2}, {20, 2, 5}, {9, 6, 0}, {1, 1, 0}};
  for (const auto& [size, advance, offset] : shapes) {
    const Inputs in = random_inputs(rng, 3, 300, 5);
    const AggregateQuery q = query(size, advance, offset, true);
    WHive hive(*tkv_schema(), q, 7, 1, HiveMode::kSingle);
    for (const auto& [t, i, r] : merged(in)) {
      hive.emit(t);
      CHECK(hive.update(0, in.batches[i], r, OrderKey{t, 0}));
    }
    hive.emit(INT64_MAX);
    CHECK(drain(hive) == unsliced(in, q));
  }
}

// Shared keys (WiML): each updater owns some inputs and applies them in its own order, publishing
// each input's progress; the output thread emits concurrently at the least progress. first and
// last must still keep the merged order's tuple: each update carries its OrderKey.
TEST(stress_shared_updaters_race_the_output_thread) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    std::mt19937_64 rng(seed);
    const size_t inputs = 2 + seed % 5;
    const size_t updaters = 1 + seed % 3;
    const int64_t size = 2 + static_cast<int64_t>(seed % 9), advance = 1 + static_cast<int64_t>(seed % 4);
    // Few keys on even seeds: every key in most slices, so the output thread folds windows from
    // block prefixes and suffixes (whive.h) while updaters race it; many keys fold directly.
    const Inputs in = random_inputs(rng, inputs, 3000, seed % 2 == 0 ? 3 : 40);
    const AggregateQuery q = query(size, advance, 0, true);
    WHive hive(*tkv_schema(), q, 64, updaters, HiveMode::kShared);
    std::vector<std::atomic<int64_t>> progress(inputs);
    for (auto& p : progress) p.store(INT64_MIN);
    std::vector<std::thread> threads;
    for (size_t u = 0; u < updaters; ++u) {
      threads.emplace_back([&, u] {
        std::vector<int64_t> next(inputs, 0);
        for (;;) {  // round robin over my inputs, a few rows each, so they advance unevenly
          bool left = false;
          for (size_t i = u; i < inputs; i += updaters) {
            const auto n = static_cast<int64_t>(in.times[i].size());
            for (int step = 0; step < 1 + static_cast<int>(i % 7) && next[i] < n; ++step) {
              const int64_t t = in.times[i][next[i]];
              const auto at = OrderKey::of(t, static_cast<uint32_t>(i), next[i]);
              if (!hive.update(u, in.batches[i], next[i], at)) {
                progress[i].store(t, std::memory_order_release);  // busy: let the output catch up
                break;
              }
              ++next[i];
              if (next[i] < n) progress[i].store(in.times[i][next[i]] , std::memory_order_release);
            }
            if (next[i] == n) {
              progress[i].store(INT64_MAX, std::memory_order_release);
            } else {
              left = true;
            }
          }
          if (!left) return;
          std::this_thread::yield();
        }
      });
    }
    emit_until_done(hive, progress);  // the output thread, racing the updaters
    for (auto& t : threads) t.join();
    CHECK(drain(hive) == unsliced(in, q));
  }
}

// Partitioned keys (TuMLMC): every updater walks the whole merged order and applies its own
// keys; order-sensitive first and last stay exact.
TEST(stress_partitioned_updaters_race_the_output_thread) {
  for (uint64_t seed = 11; seed <= 15; ++seed) {
    std::mt19937_64 rng(seed);
    const size_t updaters = 2 + seed % 3;
    const int64_t size = 3 + static_cast<int64_t>(seed % 7), advance = 1 + static_cast<int64_t>(seed % 3);
    const Inputs in = random_inputs(rng, 4, 2000, seed % 2 == 0 ? 3 : 30);  // as above
    const auto order = merged(in);
    const AggregateQuery q = query(size, advance, 0, true);
    WHive hive(*tkv_schema(), q, 64, updaters, HiveMode::kPartitioned);
    std::vector<std::atomic<int64_t>> progress(updaters);
    for (auto& p : progress) p.store(INT64_MIN);
    std::vector<std::thread> threads;
    for (size_t u = 0; u < updaters; ++u) {
      threads.emplace_back([&, u] {
        for (const auto& [t, i, r] : order) {
          progress[u].store(t, std::memory_order_release);
          while (!hive.update(u, in.batches[i], r, OrderKey{t, 0})) std::this_thread::yield();
        }
        progress[u].store(INT64_MAX, std::memory_order_release);
      });
    }
    emit_until_done(hive, progress);
    for (auto& t : threads) t.join();
    CHECK(drain(hive) == unsliced(in, q));
  }
}

namespace {

// (t, k, v, x) rows: x a float whose magnitudes span about 600 binary orders, so that some sums
// are WideSums, and some are NaN or infinite.
std::shared_ptr<const Schema> tkvx_schema() {
  using fixtures::type;
  return fixtures::schema({{"t", type(TypeId::kInt64), false},
                          {"k", type(TypeId::kInt64), false},
                          {"v", type(TypeId::kInt64), false},
                          {"x", type(TypeId::kFloat64), false}});
}

Batch with_x(const Batch& tkv, std::mt19937_64& rng) {
  auto st = std::make_shared<fixtures::Storage>();
  const int64_t n = tkv.num_rows();
  st->i64.resize(4);
  for (size_t c = 0; c < 3; ++c) st->i64[c].assign(tkv.column(c).typed<int64_t>(), tkv.column(c).typed<int64_t>() + n);
  for (int64_t r = 0; r < n; ++r) {
    const double special[] = {std::numeric_limits<double>::infinity(), std::nan("")};
    const double x = rng() % 97 == 0 ? special[rng() % 2]
                                     : std::ldexp(static_cast<double>(static_cast<int64_t>(rng() % 2001) - 1000),
                                                  static_cast<int>(rng() % 600) - 300);
    st->i64[3].push_back(std::bit_cast<int64_t>(x));
  }
  std::vector<Column> cols(4);
  for (size_t c = 0; c < 4; ++c) {
    cols[c].values = st->i64[c].data();
    cols[c].null_count = 0;
  }
  return Batch(tkvx_schema(), n, std::move(cols), st);
}

// An integer mean (a 128-bit sum), a float sum and a float mean, beside query()'s aggregates.
void add_means_and_sums(AggregateQuery& q) {
  const std::pair<const char*, AggKind> more[] = {{"mv", AggKind::kMean}, {"sx", AggKind::kSum}, {"mx", AggKind::kMean}};
  for (const auto& [name, kind] : more) {
    window::AggSpec spec;
    spec.name = name;
    spec.kind = kind;
    spec.column = name[1] == 'v' ? "v" : "x";
    q.aggs.push_back(std::move(spec));
  }
}

std::vector<std::string> texts(const Batch& b, size_t column) {
  std::vector<std::string> out;
  const auto* o = b.column(column).typed<int32_t>();
  for (int64_t r = 0; r < b.num_rows(); ++r) {
    out.emplace_back(reinterpret_cast<const char*>(b.column(column).data) + o[r], static_cast<size_t>(o[r + 1] - o[r]));
  }
  return out;
}

}  // namespace

// Window states (window/window_states.h), the form a live aggregation's checkpoint saves: the rows
// before a cut, folded per input into states, saved and loaded into a fresh store (unsliced, and
// the sliced W-Hive) that then takes the rows from the cut on, give the whole run's output. Saving
// the loaded states again gives the same text.
TEST(window_states_loaded_at_a_cut_equal_the_whole_run) {
  for (uint64_t seed = 21; seed <= 60; ++seed) {
    std::mt19937_64 rng(seed);
    const auto size = static_cast<int64_t>(2 + rng() % 12);
    const auto advance = static_cast<int64_t>(1 + rng() % static_cast<uint64_t>(size + 2));
    const int64_t offset = static_cast<int64_t>(rng() % 5) - 2;
    Inputs in = random_inputs(rng, 3, 200, 6);
    for (Batch& b : in.batches) b = with_x(b, rng);
    AggregateQuery q = query(size, advance, offset, true);
    add_means_and_sums(q);
    const auto schema = tkvx_schema();
    // Every fifth run, every row before the cut: windows only states fill are emitted too.
    const int64_t cut = seed % 5 == 0 ? INT64_MAX : in.times[rng() % 3][rng() % 200];
    window::WindowStates states(*schema, q);
    for (uint32_t i = 0; i < 3; ++i) {
      const auto& t = in.times[i];
      const auto before = static_cast<int64_t>(std::lower_bound(t.begin(), t.end(), cut) - t.begin());
      // In two parts, the second numbered on from the first, as a live run's logs hand them over.
      const int64_t half = before / 2;
      states.add(in.batches[i].slice(0, half), i, 0);
      states.add(in.batches[i].slice(half, before - half), i, static_cast<uint64_t>(half));
    }
    const Batch saved = states.save_states(INT64_MIN);
    window::WindowStates again(*schema, q);
    again.load_states(saved);
    const Batch resaved = again.save_states(INT64_MIN);
    CHECK(resaved.num_rows() == saved.num_rows());
    for (size_t c = 4; c < saved.num_columns(); ++c) CHECK(texts(resaved, c) == texts(saved, c));

    WindowAggregate agg(*schema, q, 7);
    WHive hive(*schema, q, 7, 1, HiveMode::kSingle);
    agg.load_states(saved);
    hive.load_states(saved);
    WindowAggregate whole(*schema, q, 7);
    for (const auto& [t, i, r] : merged(in)) {
      whole.add(in.batches[i], r, t);
      if (t < cut) continue;
      agg.add(in.batches[i], r, t);
      hive.emit(t);
      CHECK(hive.update(0, in.batches[i], r, OrderKey{t, 0}));
    }
    whole.finish();
    agg.finish();
    hive.emit(INT64_MAX);
    const std::vector<Row> expected = drain(whole);
    CHECK(drain(agg) == expected);
    CHECK(drain(hive) == expected);
  }
}

// Sessions (window/sessions.h): the rows before a cut, in the merged order, folded into a
// SessionStates and advanced to the cut, give the sessions the cut closed as rows and the open
// ones as states; those loaded into a fresh SessionAggregate that then takes the rows from the cut
// on give, after the closed rows, the whole run's output.
TEST(sessions_loaded_at_a_cut_equal_the_whole_run) {
  for (uint64_t seed = 61; seed <= 90; ++seed) {
    std::mt19937_64 rng(seed);
    Inputs in = random_inputs(rng, 3, 200, 6);
    for (Batch& b : in.batches) b = with_x(b, rng);
    AggregateQuery q = query(1, 1, 0, true);
    q.session_gap = static_cast<int64_t>(rng() % 30);
    add_means_and_sums(q);
    const auto schema = tkvx_schema();
    const int64_t cut = seed % 5 == 0 ? INT64_MAX : in.times[rng() % 3][rng() % 200];
    window::SessionStates states(*schema, q);
    window::SessionAggregate whole(*schema, q, 7);
    window::SessionAggregate restored(*schema, q, 7);
    const auto order = merged(in);
    for (const auto& [t, i, r] : order) {
      whole.add(in.batches[i], r, t);
      if (t < cut) states.add(in.batches[i], r, t);
    }
    whole.finish();
    states.advance(cut);
    std::vector<Row> got = drain(states);  // closed by the cut
    const Batch saved = states.save_sessions();
    window::SessionStates again(*schema, q);
    again.load_sessions(saved);
    const Batch resaved = again.save_sessions();
    CHECK(resaved.num_rows() == saved.num_rows());
    for (size_t c = 4; c < saved.num_columns(); ++c) CHECK(texts(resaved, c) == texts(saved, c));
    restored.load_sessions(saved);
    for (const auto& [t, i, r] : order) {
      if (t >= cut) restored.add(in.batches[i], r, t);
    }
    restored.finish();
    for (Row& row : drain(restored)) got.push_back(std::move(row));
    CHECK(got == drain(whole));
  }
}

UNIT_MAIN()
