// The parametric operator (ops/parametric.h): its arguments and kinds, the stateful form hashing
// every tuple in order, the stateless form per tuple and thread-safe, its spin cost, and a hash of
// the values alone. Fixtures shared with test_keyed.cpp.
#include "keyed_fixtures.h"
#include "unit.h"

// --- The parametric operator ------------------------------------------------------------------

TEST(parametric_arguments_and_kinds) {
  std::mt19937_64 rng(13);
  const Batch d = random_input(rng, 5);
  const auto sch = d.schema();
  const auto invalid = ErrorKind::kInvalidInput;
  using O = ops::ParametricOptions;
  CHECK_THROWS_WITH(ops::make_stateful_parametric(sch, O{-1, 1, 0}), invalid, "cost_us must be a number at least 0");
  CHECK_THROWS_WITH(ops::make_stateful_parametric(sch, O{0, std::nan(""), 0}), invalid, "selectivity must be between");
  CHECK_THROWS_WITH(ops::make_stateful_parametric(sch, O{0, -0.5, 0}), invalid, "selectivity must be between");
  CHECK_THROWS_WITH(ops::make_stateful_parametric(sch, O{0, 1, -8}), invalid, "state_bytes must be at least 0");
  CHECK_THROWS_WITH(ops::make_stateless_parametric(sch, O{0, 1, 8}), invalid, "state_bytes needs state");
  CHECK_THROWS_WITH(ops::make_keyed_parametric(sch, {"nope"}, O{0, 1, 0}), invalid, "parametric: key column 'nope'");
  CHECK(ops::make_stateless_parametric(sch, O{0, 1, 0})->kind() == ops::OpKind::kStateless);
  CHECK(ops::make_stateful_parametric(sch, O{0, 1, 0})->kind() == ops::OpKind::kStateful);
  const auto keyed = ops::make_keyed_parametric(sch, {"ks"}, O{0, 1, 0});
  CHECK(keyed->kind() == ops::OpKind::kPartitioned);
  CHECK(keyed->key_columns() == (std::vector<size_t>{2}));
  CHECK(ops::make_stateless_parametric(sch, O{0, 1, 0})->selectivity() == ops::Selectivity::kExactlyOne);
  CHECK(ops::make_stateless_parametric(sch, O{0, 0.3, 0})->selectivity() == ops::Selectivity::kAtMostOne);
  CHECK(ops::make_stateless_parametric(sch, O{0, 1.5, 0})->selectivity() == ops::Selectivity::kAny);
  CHECK_EQ(keyed->output_schema()->to_string(), sch->to_string() + ", p_state: uint64");
}

TEST(stateful_parametric_hashes_every_tuple_in_order) {
  std::mt19937_64 rng(14);
  for (int i = 0; i < 8; ++i) {
    const Batch d = random_input(rng, static_cast<int64_t>(rng() % 400));
    for (double selectivity : {1.0, 0.5, 3.25}) {
      Out model;
      uint64_t state = ops::kParametricSeed;
      for (int64_t r = 0; r < d.num_rows(); ++r) {
        const uint64_t h = ops::parametric_tuple_hash(d, r);
        state = ops::parametric_fold(state, h);
        for (int64_t k = ops::parametric_copies(h, selectivity); k > 0; --k) {
          model.emplace_back(r, plus(cells(d, r), {"u" + std::to_string(state)}));
        }
      }
      const auto op = ops::make_stateful_parametric(d.schema(), {0.0, selectivity, 24});
      Out got;
      for (int64_t at = 0; at < d.num_rows();) {
        const int64_t length = std::min<int64_t>(d.num_rows() - at, 1 + static_cast<int64_t>(rng() % 50));
        const Batch out = op->process(d.slice(at, length));
        for (int64_t r = 0; r < out.num_rows(); ++r) got.emplace_back(-1, cells(out, r));
        at += length;
      }
      CHECK_EQ(op->finish().num_rows(), 0);
      for (auto& row : model) row.first = -1;
      same(got, model, "stateful parametric, selectivity " + std::to_string(selectivity));
    }
  }
}

TEST(stateless_parametric_is_per_tuple_and_thread_safe) {
  std::mt19937_64 rng(15);
  const Batch d = random_input(rng, 3000);
  const auto op = ops::make_stateless_parametric(d.schema(), {0.0, 0.7, 0});
  // Morsels of 100 rows, taken by three threads in any order.
  std::vector<Batch> outputs(30);
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      for (size_t m; (m = next.fetch_add(1)) < outputs.size();) outputs[m] = op->process(d.slice(100 * static_cast<int64_t>(m), 100));
    });
  }
  for (std::thread& t : threads) t.join();
  Out got, model;
  for (const Batch& b : outputs) {
    for (int64_t r = 0; r < b.num_rows(); ++r) got.emplace_back(-1, cells(b, r));
  }
  int64_t kept = 0;
  for (int64_t r = 0; r < d.num_rows(); ++r) {
    const uint64_t h = ops::parametric_tuple_hash(d, r);
    for (int64_t k = ops::parametric_copies(h, 0.7); k > 0; --k) {
      model.emplace_back(-1, plus(cells(d, r), {"u" + std::to_string(h)}));
      ++kept;
    }
  }
  same(got, model, "stateless parametric");
  // The draw is uniform enough that the share kept is near the selectivity (deterministic data).
  CHECK(kept > 1900 && kept < 2300);
}

TEST(parametric_replaces_an_earlier_p_state) {
  std::mt19937_64 rng(16);
  const Batch d = random_input(rng, 50);
  const auto first = ops::make_stateful_parametric(d.schema(), {0.0, 1.0, 0});
  const Batch once = first->process(d);
  const auto second = ops::make_stateless_parametric(once.schema(), {0.0, 1.0, 0});
  CHECK_EQ(second->output_schema()->to_string(), first->output_schema()->to_string());
  const Batch twice = second->process(once);
  REQUIRE(twice.num_rows() == 50);
  const size_t p = twice.num_columns() - 1;
  for (int64_t r = 0; r < 50; ++r) {
    // The new p_state hashes the tuple including the old one.
    CHECK_EQ(cell(twice, p, r), "u" + std::to_string(ops::parametric_tuple_hash(once, r)));
    CHECK_EQ(cell(twice, 3, r), cell(d, 3, r));
  }
}

TEST(parametric_spins_at_least_its_cost) {
  std::mt19937_64 rng(17);
  const Batch d = random_input(rng, 40);
  const auto op = ops::make_keyed_parametric(d.schema(), {"ki"}, {50.0, 1.0, 0});
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int64_t> rows{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  for (int64_t at = 0; at < 40; at += 10) op->process_rows(d.slice(at, 10), rows, 0);
  // A lower bound only: the spin guarantees it on the steady clock, whatever the machine's load.
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::microseconds(40 * 50));
}

// The hash sees every column's value and no more: equal tuples in different batches and offsets
// hash equal, and the fold is order-sensitive.
TEST(parametric_hash_depends_on_the_values_only) {
  std::mt19937_64 rng(18);
  const Batch d = random_input(rng, 60);
  std::vector<Segment> backwards;  // a copy in other buffers, rows reversed
  for (int64_t r = 59; r >= 0; --r) backwards.push_back({0, r, 1});
  const Batch copy = gather(d.schema(), std::span(&d, 1), backwards);
  for (int64_t r = 0; r < 60; ++r) {
    CHECK_EQ(ops::parametric_tuple_hash(d.slice(r, 1), 0), ops::parametric_tuple_hash(d, r));
    CHECK_EQ(ops::parametric_tuple_hash(copy, 59 - r), ops::parametric_tuple_hash(d, r));
  }
  std::set<uint64_t> distinct;
  for (int64_t r = 0; r < 60; ++r) distinct.insert(ops::parametric_tuple_hash(d, r));
  CHECK(distinct.size() > 50);  // rows differ (random values in many columns), so hashes do
  const uint64_t a = ops::parametric_tuple_hash(d, 0), b = ops::parametric_tuple_hash(d, 1);
  CHECK(ops::parametric_fold(ops::parametric_fold(0, a), b) != ops::parametric_fold(ops::parametric_fold(0, b), a));
}

UNIT_MAIN()
