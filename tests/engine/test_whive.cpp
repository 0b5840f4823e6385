// The W-Hive: sliced windows equal the unsliced store, sequentially and with many updaters racing
// an output thread (shared keys as WiML uses it, partitioned keys as TuMLMC does). Run under
// ThreadSanitizer by `make tsan-test`: nothing emitted early, nothing lost, nothing twice.
// GCC 12 reports a false -Wrestrict in std::string's inlined copy of the aggregate names (GCC bug
// 105329); nothing here overlaps.
#pragma GCC diagnostic ignored "-Wrestrict"
#include <algorithm>
#include <atomic>
#include <random>
#include <thread>
#include <tuple>

#include "helpers.h"
#include "unit.h"
#include "window/whive.h"

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

UNIT_MAIN()
