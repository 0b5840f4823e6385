// The partitioned operators (ops/keyed.h); the parametric operator's tests are in
// test_parametric.cpp, the fixtures both use in keyed_fixtures.h.
//
// For random inputs (keys of integers, strings, floats with -0.0 and NaN, bools, and of several
// columns; nulls in keys and values; a time column of every time type; morsels that are slices
// with offsets), every operator run with 1, 3 and 16 partitions over random morsels, rows routed
// by key id % partitions and each morsel's pieces merged by source row, equals the same operator
// run one tuple at a time on one partition; and that run equals a plain model of
// docs/pipeline.md (keyed_fixtures.h), which reads the data with its own readers.
#include <unordered_map>

#include "keyed_fixtures.h"
#include "ops/fused.h"
#include "unit.h"

// --- Differential tests -------------------------------------------------------------------------

// A random ascending subset of the next 1 to `most` rows of `d` from row `r`, as a partition sees a
// morsel; `r` moves past them.
std::vector<int64_t> some_next_rows(std::mt19937_64& rng, const Batch& d, int64_t& r, int64_t most) {
  std::vector<int64_t> rows;
  const int64_t end = std::min<int64_t>(d.num_rows(), r + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(most)));
  for (; r < end; ++r)
    if (rng() % 4 != 0) rows.push_back(r);
  return rows;
}

// KeyTable::ids (the operators' bulk path, keys encoded column by column) numbers keys exactly as
// id() row by row does, and a table filled in bulk answers find(), less() and append() as one
// filled row by row: the two encodings of a key (a null included) are the same bytes.
TEST(key_table_bulk_ids_equal_row_ids) {
  std::mt19937_64 rng(41);
  for (int round = 0; round < 40; ++round) {
    const Batch d = random_input(rng, 1 + static_cast<int64_t>(rng() % 300));
    for (const auto& keys : kKeyChoices) {
      KeyTable one(*d.schema(), indices(d, keys));
      KeyTable bulk(*d.schema(), indices(d, keys));
      std::vector<uint32_t> got;
      for (int64_t r = 0; r < d.num_rows();) {
        const std::vector<int64_t> rows = some_next_rows(rng, d, r, 60);
        bulk.ids(d, rows, got);
        REQUIRE(got.size() == rows.size());
        for (size_t i = 0; i < rows.size(); ++i) CHECK_EQ(got[i], one.id(d, rows[i]));
      }
      CHECK_EQ(bulk.size(), one.size());
      for (int64_t r = 0; r < d.num_rows(); ++r) CHECK(bulk.find(d, r) == one.find(d, r));
      const auto n = static_cast<uint32_t>(one.size());
      for (uint32_t a = 0; a < n; ++a)
        for (uint32_t b = 0; b < n; ++b) CHECK_EQ(bulk.less(a, b), one.less(a, b));
      Schema key_fields;
      std::vector<ColumnBuilder> from_bulk, from_one;
      for (size_t k : indices(d, keys)) {
        key_fields.fields.push_back(d.schema()->fields[k]);
        from_bulk.emplace_back(d.schema()->fields[k].type);
        from_one.emplace_back(d.schema()->fields[k].type);
      }
      for (uint32_t id = 0; id < n; ++id) {
        bulk.append(id, from_bulk, 0);
        one.append(id, from_one, 0);
      }
      const auto key_schema = std::make_shared<const Schema>(key_fields);
      const Batch a = finish_batch(key_schema, from_bulk);
      const Batch b = finish_batch(key_schema, from_one);
      for (int64_t r = 0; r < a.num_rows(); ++r) CHECK(cells(a, r) == cells(b, r));
    }
  }
}

// A single int64 key column moves between the dense array and the hash table as its keys spread
// and fill their range (a few far-apart keys, then many in between, then one far outside, then
// many more): every value keeps its id, new values get the next id, find() agrees, bulk and row
// by row alike, and the keys sort by value.
TEST(key_table_keeps_ids_across_dense_and_hashed) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 6; ++round) {
    std::vector<int64_t> values;
    const int64_t range = int64_t{1} << (17 + round % 3);
    values.push_back(0);
    values.push_back(range - 1);  // spread: hashed from here
    for (int i = 0; i < 60000; ++i) values.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(range)));
    values.push_back(int64_t{1} << 50);  // far outside: hashed again
    for (int i = 0; i < 20000; ++i) values.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(range)) - range / 2);
    for (int i = 0; i < 200; ++i) values.push_back(static_cast<int64_t>(rng()));
    DataType i64;
    i64.id = TypeId::kInt64;
    const auto sch = std::make_shared<const Schema>(Schema{{{"k", i64, false}}});
    std::vector<ColumnBuilder> builders;
    builders.emplace_back(i64);
    for (int64_t v : values) builders[0].append_fixed(&v);
    const Batch b = finish_batch(sch, builders);
    KeyTable one(*sch, {0}), bulk(*sch, {0});
    std::unordered_map<int64_t, uint32_t> model;
    std::vector<uint32_t> got;
    for (int64_t r = 0; r < b.num_rows();) {
      std::vector<int64_t> rows;
      const int64_t end = std::min<int64_t>(b.num_rows(), r + 1 + static_cast<int64_t>(rng() % 3000));
      for (; r < end; ++r) rows.push_back(r);
      bulk.ids(b, rows, got);
      for (size_t i = 0; i < rows.size(); ++i) {
        const int64_t v = values[static_cast<size_t>(rows[i])];
        const auto [it, added] = model.emplace(v, static_cast<uint32_t>(model.size()));
        (void)added;
        CHECK_EQ(got[i], it->second);
        CHECK_EQ(one.id(b, rows[i]), it->second);
      }
    }
    CHECK_EQ(bulk.size(), model.size());
    for (int64_t r = 0; r < b.num_rows(); ++r) {
      CHECK(bulk.find(b, r) == std::optional<uint32_t>(model.at(values[static_cast<size_t>(r)])));
    }
    std::vector<uint32_t> ids, order;
    std::vector<int64_t> by_id(model.size());
    for (const auto& [v, id] : model) by_id[id] = v;
    for (uint32_t id = 0; id < model.size(); ++id) ids.push_back(id);
    bulk.sort(ids.data(), order);
    for (size_t i = 1; i < order.size(); ++i) CHECK(by_id[ids[order[i - 1]]] < by_id[ids[order[i]]]);
  }
}

// Keyed fusion's lent keys (KeyTable::lend): a table that borrows another's keys piece by piece,
// and takes them in now and then (by a lookup of its own, or settle()), numbers every key as the
// lender does and then reads like it (find, less, append); a reader called with keys lent and not
// taken in is refused.
TEST(a_key_table_that_borrows_keys_reads_like_its_lender) {
  std::mt19937_64 rng(53);
  for (int round = 0; round < 30; ++round) {
    const Batch d = random_input(rng, 1 + static_cast<int64_t>(rng() % 300));
    for (const auto& keys : kKeyChoices) {
      KeyTable lender(*d.schema(), indices(d, keys));
      KeyTable borrower(*d.schema(), indices(d, keys));
      std::vector<uint32_t> given, own;
      for (int64_t r = 0; r < d.num_rows();) {
        const std::vector<int64_t> rows = some_next_rows(rng, d, r, 40);
        lender.ids(d, rows, given);
        switch (rng() % 4) {
          case 0:  // the piece looked up by the borrower itself: the lent keys go in first
            borrower.ids(d, rows, own);
            CHECK(own == given);
            break;
          case 1:
            borrower.lend(lender);
            borrower.settle();
            break;
          default:
            borrower.lend(lender);
        }
        CHECK_EQ(borrower.size(), lender.size());
      }
      if (borrower.size() > 0 && !keys.empty()) {
        borrower.lend(lender);
        std::vector<ColumnBuilder> out;
        for (size_t k : indices(d, keys)) out.emplace_back(d.schema()->fields[k].type);
        // Lent keys are taken in by the lookups, not by the readers.
        KeyTable fresh(*d.schema(), indices(d, keys));
        fresh.lend(lender);
        int64_t seen = 0;  // a row whose key the lender has
        while (!lender.find(d, seen)) ++seen;
        CHECK_THROWS_WITH(fresh.append(0, out, 0), ErrorKind::kUsage, "lent keys not taken in");
        CHECK_THROWS_WITH(fresh.find(d, seen), ErrorKind::kUsage, "lent keys not taken in");
        CHECK_EQ(fresh.id(d, seen), *lender.find(d, seen));
      }
      borrower.settle();
      for (int64_t r = 0; r < d.num_rows(); ++r) CHECK(borrower.find(d, r) == lender.find(d, r));
      const auto n = static_cast<uint32_t>(lender.size());
      for (uint32_t a = 0; a < n; ++a)
        for (uint32_t b = 0; b < n; ++b) CHECK_EQ(borrower.less(a, b), lender.less(a, b));
    }
  }
}

TEST(sessionize_equals_the_model_on_any_partitions) {
  for_inputs(1, 7, [](const Batch& d, const auto& keys, const auto& ids, auto& rng, const std::string& what) {
    for (int64_t gap : {0, 2, 7}) {
      auto make = [&] { return ops::make_sessionize(d.schema(), keys, "t", gap, "session"); };
      check(make, sessionize_model(d, ids, gap), d, ids, rng, "sessionize gap " + std::to_string(gap) + ", " + what);
    }
  });
}

TEST(lag_equals_the_model_on_any_partitions) {
  const std::vector<std::string> columns{"t", "vi", "vl", "vu", "vf", "vg", "vs", "vL", "vb", "vt", "i16", "u8", "ks"};
  for_inputs(2, 7, [&](const Batch& d, const auto& keys, const auto& ids, auto& rng, const std::string& what) {
    auto make = [&] { return ops::make_lag(d.schema(), keys, columns, "_prev"); };
    check(make, lag_model(d, ids, columns), d, ids, rng, "lag, " + what);
  });
}

TEST(delta_equals_the_model_on_any_partitions) {
  const std::vector<std::string> columns{"t", "vi", "vl", "vu", "vf", "vg", "vt", "i16", "u8"};
  for_inputs(3, 7, [&](const Batch& d, const auto& keys, const auto& ids, auto& rng, const std::string& what) {
    auto make = [&] { return ops::make_delta(d.schema(), keys, "t", columns, "_delta"); };
    check(make, delta_model(d, ids, columns), d, ids, rng, "delta, " + what);
    auto make_time = [&] { return ops::make_delta(d.schema(), keys, "t", {}, "_d"); };  // the time column alone
    check(make_time, delta_model(d, ids, {"t"}), d, ids, rng, "delta of time, " + what);
  });
}

TEST(running_equals_the_model_on_any_partitions) {
  const std::vector<AggSpec> aggs{
      agg("n", AggKind::kCount, ""),     agg("n_vs", AggKind::kCount, "vs"),  agg("s_vi", AggKind::kSum, "vi"),
      agg("s_vl", AggKind::kSum, "vl"),  agg("s_vu", AggKind::kSum, "vu"),    agg("s_vf", AggKind::kSum, "vf"),
      agg("s_vg", AggKind::kSum, "vg"),  agg("m_vl", AggKind::kMean, "vl"),   agg("m_vu", AggKind::kMean, "vu"),
      agg("m_vf", AggKind::kMean, "vf"), agg("lo_vf", AggKind::kMin, "vf"),   agg("hi_vf", AggKind::kMax, "vf"),
      agg("lo_vg", AggKind::kMin, "vg"), agg("hi_vg", AggKind::kMax, "vg"),   agg("lo_vb", AggKind::kMin, "vb"),
      agg("hi_vb", AggKind::kMax, "vb"), agg("lo_vl", AggKind::kMin, "vl"),   agg("hi_vu", AggKind::kMax, "vu"),
      agg("lo_vt", AggKind::kMin, "vt"), agg("hi_t", AggKind::kMax, "t"),     agg("f_vs", AggKind::kFirst, "vs"),
      agg("l_vs", AggKind::kLast, "vs"), agg("f_vL", AggKind::kFirst, "vL"),  agg("l_vf", AggKind::kLast, "vf"),
      agg("l_vb", AggKind::kLast, "vb"), agg("f_i16", AggKind::kFirst, "i16")};
  for_inputs(4, 6, [&](const Batch& d, const auto& keys, const auto& ids, auto& rng, const std::string& what) {
    auto make = [&] { return ops::make_running(d.schema(), keys, aggs); };
    check(make, running_model(d, ids, aggs), d, ids, rng, "running, " + what);
  });
}

// running over keys + [session] right after sessionize, keyed by epoch (the planner's
// key_by_epochs): routed by the keys alone, one state per key restarting at each new session,
// the output equals the model of running over keys + [session].
TEST(running_keyed_by_epoch_equals_running_per_key_and_session) {
  const std::vector<AggSpec> aggs{agg("n", AggKind::kCount, ""), agg("s_vf", AggKind::kSum, "vf"),
                                  agg("s_vl", AggKind::kSum, "vl"), agg("f_vs", AggKind::kFirst, "vs"),
                                  agg("hi_vg", AggKind::kMax, "vg")};
  for_inputs(9, 6, [&](const Batch& d, const auto& keys, const auto&, auto& rng, const std::string& what) {
    if (d.num_rows() == 0) return;
    for (int64_t gap : {0, 3}) {
      const ops::OperatorPtr sessions = ops::make_sessionize(d.schema(), keys, "t", gap, "session");
      sessions->set_partitions(1);
      std::vector<int64_t> all(static_cast<size_t>(d.num_rows()));
      for (size_t r = 0; r < all.size(); ++r) all[r] = static_cast<int64_t>(r);
      const Batch sd = sessions->process_rows(d, all, 0).batch;
      REQUIRE(sessions->epoch_column() == std::optional<std::string>("session"));
      std::vector<std::string> with_session = keys;
      with_session.insert(with_session.begin() + static_cast<std::ptrdiff_t>(rng() % (keys.size() + 1)), "session");
      auto make = [&] { return ops::make_running(sd.schema(), with_session, aggs, "t")->keyed_by_epoch(keys, "session"); };
      REQUIRE(make() != nullptr);
      CHECK_EQ(make()->key_columns().size(), keys.size());
      check(make, running_model(sd, key_ids(sd, with_session), aggs), sd, key_ids(sd, keys), rng,
            "running keyed by epoch, gap " + std::to_string(gap) + ", " + what);
      // No such form where the keys differ from keys + [epoch], or it is keyed by epoch already.
      CHECK(ops::make_running(sd.schema(), keys, aggs, "t")->keyed_by_epoch(keys, "session") == nullptr);
      CHECK(ops::make_running(sd.schema(), with_session, aggs, "t")->keyed_by_epoch(with_session, "session") == nullptr);
      CHECK(make()->keyed_by_epoch(keys, "session") == nullptr);
    }
  });
}

// A keyed fused chain (ops/fused.h): sessionize, running keyed by its epoch and lag over the same
// keys, one operator on the same pieces, the later ones given the first one's key ids and new
// sessions. Its output equals the three run one after the other over whole batches, on any
// partitions and morsels. The later members hold the first one's keys lent (KeyTable::lend):
// the lag, lent by running, borrows from sessionize's table.
TEST(a_keyed_fused_chain_equals_its_operators_run_one_after_another) {
  // Fixed-width results only in the middle (FusedChain::keyed_fusible); the last member may
  // append strings.
  const std::vector<AggSpec> aggs{agg("n", AggKind::kCount, ""), agg("s_vf", AggKind::kSum, "vf"),
                                  agg("f_vl", AggKind::kFirst, "vl"), agg("hi_vg", AggKind::kMax, "vg")};
  for_inputs(12, 6, [&](const Batch& d, const auto& keys, const auto& ids, auto& rng, const std::string& what) {
    if (d.num_rows() == 0) return;
    std::vector<int64_t> all(static_cast<size_t>(d.num_rows()));
    for (size_t r = 0; r < all.size(); ++r) all[r] = static_cast<int64_t>(r);
    std::vector<std::string> with_session = keys;
    with_session.push_back("session");
    auto chain = [&] {
      const ops::OperatorPtr sessions = ops::make_sessionize(d.schema(), keys, "t", 2, "session");
      const ops::OperatorPtr runs =
          ops::make_running(sessions->output_schema(), with_session, aggs, "t")->keyed_by_epoch(keys, "session");
      return std::vector<ops::OperatorPtr>{sessions, runs,
                                           ops::make_lag(runs->output_schema(), keys, {"vf", "session", "vs"}, "_prev")};
    };
    // The model: each operator over the whole batch, on one partition.
    Batch cur = d;
    Out model;
    const std::vector<ops::OperatorPtr> unfused = chain();
    for (size_t i = 0; i < unfused.size(); ++i) {
      if (i + 1 == unfused.size()) {
        model = one_at_a_time(unfused[i], cur);
      } else {
        unfused[i]->set_partitions(1);
        cur = unfused[i]->process_rows(cur, all, 0).batch;
      }
    }
    REQUIRE(ops::FusedChain::keyed_fusible(chain()));
    auto make = [&]() -> ops::OperatorPtr { return std::make_shared<ops::FusedChain>(chain()); };
    CHECK(make()->kind() == ops::OpKind::kPartitioned);
    CHECK_EQ(make()->output_schema()->to_string(), unfused.back()->output_schema()->to_string());
    check(make, model, d, ids, rng, "sessionize+running+lag, " + what);
  });
}

TEST(dedupe_equals_the_model_on_any_partitions) {
  for_inputs(5, 7, [](const Batch& d, const auto& keys, const auto& ids, auto& rng, const std::string& what) {
    for (std::optional<int64_t> within : {std::optional<int64_t>(), std::optional<int64_t>(0), std::optional<int64_t>(3)}) {
      auto make = [&] { return ops::make_dedupe(d.schema(), keys, "t", within); };
      check(make, dedupe_model(d, ids, within), d, ids, rng,
            "dedupe within " + (within ? std::to_string(*within) : std::string("none")) + ", " + what);
    }
  });
}

TEST(pairs_equal_the_model_on_any_partitions) {
  for_inputs(6, 7, [](const Batch& d, const auto& keys, const auto& ids, auto& rng, const std::string& what) {
    for (const char* item : {"i16", "vs", "u8", "vL"}) {
      for (int64_t gap : {0, 4}) {
        auto make = [&] { return ops::make_pairs(d.schema(), keys, "t", item, gap); };
        check(make, pairs_model(d, ids, keys, item, gap), d, ids, rng,
              std::string("pairs of ") + item + " gap " + std::to_string(gap) + ", " + what);
      }
    }
  });
}

TEST(keyed_parametric_equals_the_model_on_any_partitions) {
  for_inputs(7, 6, [](const Batch& d, const auto& keys, const auto& ids, auto& rng, const std::string& what) {
    for (double selectivity : {1.0, 0.4, 2.5}) {
      for (int64_t state_bytes : {0, 40}) {
        auto make = [&] {
          return ops::make_keyed_parametric(d.schema(), keys, ops::ParametricOptions{0.0, selectivity, state_bytes});
        };
        check(make, parametric_model(d, ids, selectivity), d, ids, rng,
              "parametric selectivity " + std::to_string(selectivity) + ", " + what);
      }
    }
  });
}

// --- Schemas, kinds and arguments -------------------------------------------------------------

TEST(output_schemas_kinds_and_key_columns) {
  std::mt19937_64 rng(11);
  const Batch d = random_input(rng, 5);
  const std::string in = d.schema()->to_string();
  const auto s = ops::make_sessionize(d.schema(), {"ks", "ki"}, "t", 3, "sess");
  CHECK_EQ(s->output_schema()->to_string(), in + ", sess: int64");
  CHECK(s->kind() == ops::OpKind::kPartitioned);
  CHECK(s->selectivity() == ops::Selectivity::kExactlyOne);
  CHECK(s->key_columns() == (std::vector<size_t>{2, 1}));
  CHECK_EQ(s->name(), std::string("sessionize"));
  CHECK(!s->output_schema()->fields.back().nullable);

  CHECK_EQ(ops::make_lag(d.schema(), {"ki"}, {"vg", "vs", "vt"}, "_p")->output_schema()->to_string(),
           in + ", vg_p: float, vs_p: string, vt_p: timestamp[us, tz=UTC]");
  CHECK_EQ(ops::make_delta(d.schema(), {"ki"}, "t", {"vg", "vu", "t"}, "_d")->output_schema()->to_string(),
           in + ", vg_d: double, vu_d: int64, t_d: int64");
  CHECK_EQ(ops::make_running(d.schema(), {"ki"},
                             {agg("n", AggKind::kCount, ""), agg("s", AggKind::kSum, "vu"), agg("m", AggKind::kMean, "vi"),
                              agg("lo", AggKind::kMin, "vg"), agg("l", AggKind::kLast, "vL")})
               ->output_schema()
               ->to_string(),
           in + ", n: int64, s: uint64, m: double, lo: float, l: large_string");
  const auto dd = ops::make_dedupe(d.schema(), {"ki"}, "t", std::nullopt);
  CHECK_EQ(dd->output_schema()->to_string(), in);
  CHECK(dd->selectivity() == ops::Selectivity::kAtMostOne);
  const auto p = ops::make_pairs(d.schema(), {"ks", "kb"}, "t", "vL", 5);
  CHECK_EQ(p->output_schema()->to_string(), "ks: string, kb: bool, t: " + d.schema()->fields[0].type.to_string() +
                                                ", item_a: large_string, item_b: large_string");
  CHECK(p->selectivity() == ops::Selectivity::kAny);
  for (const auto& op : {s, dd, p}) CHECK(op->describe().size() > 10);
}

TEST(arguments_are_checked_against_the_schema) {
  std::mt19937_64 rng(12);
  const Batch d = random_input(rng, 5);
  const auto sch = d.schema();
  const auto invalid = ErrorKind::kInvalidInput;
  const auto type_error = ErrorKind::kUnsupportedType;
  CHECK_THROWS_WITH(ops::make_sessionize(sch, {"nope"}, "t", 5), invalid,
                    "sessionize: key column 'nope' not found; the columns are: t: ");
  CHECK_THROWS_WITH(ops::make_sessionize(sch, {}, "t", 5), invalid, "needs at least one key column");
  CHECK_THROWS_WITH(ops::make_sessionize(sch, {"ki"}, "time", 5), invalid, "time column 'time' not found");
  CHECK_THROWS_WITH(ops::make_sessionize(sch, {"ki"}, "vs", 5), type_error,
                    "time column 'vs' has type string; expected timestamp, date32, int32 or int64");
  CHECK_THROWS_WITH(ops::make_sessionize(sch, {"ki"}, "vf", 5), type_error, "has type double");
  CHECK_THROWS_WITH(ops::make_sessionize(sch, {"ki"}, "t", -1), invalid, "gap must be at least 0");
  CHECK_THROWS_WITH(ops::make_sessionize(sch, {"ki"}, "t", 1, "vi"), invalid, "two columns named 'vi'");
  CHECK_THROWS_WITH(ops::make_lag(sch, {"ki"}, {}), invalid, "lag: needs at least one column");
  CHECK_THROWS_WITH(ops::make_lag(sch, {"ki"}, {"zz"}), invalid, "lag: column 'zz' not found; the columns are");
  CHECK_THROWS_WITH(ops::make_lag(sch, {"ki"}, {"vi", "vi"}), invalid, "two columns named 'vi_prev'");
  CHECK_THROWS_WITH(ops::make_lag(sch, {"ki"}, {"vi"}, ""), invalid, "pass another suffix");
  CHECK_THROWS_WITH(ops::make_delta(sch, {"ki"}, "t", {"vs"}), type_error, "delta: column 'vs' has type string");
  CHECK_THROWS_WITH(ops::make_delta(sch, {"ki"}, "t", {"vb"}), type_error, "delta needs a numeric");
  CHECK_THROWS_WITH(ops::make_delta(sch, {"ki"}, "vi_x", {"vi"}), invalid, "time column 'vi_x' not found");
  CHECK_THROWS_WITH(ops::make_running(sch, {"ki"}, {}), invalid, "needs at least one aggregate");
  CHECK_THROWS_WITH(ops::make_running(sch, {"ki"}, {agg("s", AggKind::kSum, "vs")}), type_error, "needs a numeric column");
  CHECK_THROWS_WITH(ops::make_running(sch, {"ki"}, {agg("s", AggKind::kMin, "zz")}), invalid, "reads column 'zz'");
  CHECK_THROWS_WITH(ops::make_running(sch, {"ki"}, {agg("vi", AggKind::kSum, "vi")}), invalid, "two columns named 'vi'");
  CHECK_THROWS_WITH(ops::make_dedupe(sch, {"ki"}, "t", -1), invalid, "within must be at least 0");
  CHECK_THROWS_WITH(ops::make_dedupe(sch, {"kq"}, "t", 1), invalid, "dedupe: key column 'kq' not found");
  CHECK_THROWS_WITH(ops::make_pairs(sch, {"ki"}, "t", "vf", 3), type_error,
                    "pairs: item column 'vf' has type double; expected an integer or string type");
  CHECK_THROWS_WITH(ops::make_pairs(sch, {"ki"}, "t", "vt", 3), type_error, "expected an integer or string type");
  CHECK_THROWS_WITH(ops::make_pairs(sch, {"ki"}, "t", "vb", 3), type_error, "expected an integer or string type");
  CHECK_THROWS_WITH(ops::make_pairs(sch, {"ki"}, "t", "zz", 3), invalid, "item column 'zz' not found");
  CHECK_THROWS_WITH(ops::make_pairs(sch, {"ki"}, "t", "vi", -2), invalid, "gap must be at least 0");
  CHECK_THROWS_WITH(ops::make_pairs(sch, {"t"}, "t", "vi", 2), invalid, "two columns named 't'");

  const auto op = ops::make_sessionize(sch, {"ki"}, "t", 1);
  op->set_partitions(2);
  const std::vector<int64_t> rows{0};
  CHECK_THROWS_WITH(op->process_rows(d, rows, 2), ErrorKind::kUsage, "partition 2 of 2");

  // A null time (only an operator that rewrote the time column can make one) is an error.
  const auto nullable = fixtures::schema({{"t", type(TypeId::kInt64), true}, {"k", type(TypeId::kInt64), true}});
  std::vector<ColumnBuilder> b = builders_of({type(TypeId::kInt64), type(TypeId::kInt64)});
  b[0].append_null();
  b[1].append_null();
  const Batch null_time = finish_batch(nullable, b);
  CHECK_THROWS_WITH(ops::make_sessionize(nullable, {"k"}, "t", 1)->process_rows(null_time, rows, 0),
                    ErrorKind::kNullTime, "a null in time column 't'");
  CHECK_THROWS_WITH(ops::make_pairs(nullable, {"k"}, "t", "k", 1)->process_rows(null_time, rows, 0),
                    ErrorKind::kNullTime, "a null in time column 't'");
}

UNIT_MAIN()
