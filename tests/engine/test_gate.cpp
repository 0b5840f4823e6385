// Unit tests of engine/gate: the sequential merge against a plain reference.
#include <algorithm>
#include <cstdio>
#include <random>
#include <thread>
#include <tuple>

#include "core/error.h"
#include "gate/lateness.h"
#include "gate/merge.h"
#include "helpers.h"
#include "unit.h"

using namespace pao;

namespace {

struct Row {
  int64_t t;
  size_t input;
  size_t pos;
  std::string s;
  bool valid;
  bool operator==(const Row&) const = default;
};

std::vector<Row> rows_of(const Batch& b) {
  std::vector<Row> out;
  const int64_t* t = b.column(0).typed<int64_t>();
  const Column& s = b.column(1);
  const int32_t* off = s.typed<int32_t>();
  for (int64_t i = 0; i < b.num_rows(); ++i) {
    const bool valid = s.is_valid(i);
    std::string str = valid ? std::string(reinterpret_cast<const char*>(s.data) + off[i],
                                          off[i + 1] - off[i])
                            : std::string();
    out.push_back({t[i], 0, 0, std::move(str), valid});
  }
  return out;
}

std::vector<Row> drain(BatchSource& src) {
  std::vector<Row> out;
  while (auto b = src.next()) {
    auto rows = rows_of(*b);
    out.insert(out.end(), rows.begin(), rows.end());
  }
  return out;
}

}  // namespace

// Every round twice: times near 0 (parts merge with 64-bit keys) and spread over the whole int64
// range (128-bit keys); one thread, or several with regions cut into parts of a few rows. Every
// seventh round has inputs of thousands of rows and batches of up to 2,000 (the marks a lane makes
// of each input's rows span many words), every third one streams its stores, and every fourth one
// has rare nulls (with 8 inputs or more, their bitmaps gather by exceptions).
TEST(merge_equals_reference_on_random_inputs) {
  std::mt19937_64 rng(12345);
  auto sch = fixtures::time_string_schema();
  for (int round = 0; round < 600; ++round) {
    const bool spread = round % 2 == 1;
    const size_t k = 1 + rng() % (round % 10 == 0 ? 20 : 6);
    const bool big = round % 7 == 3;
    const int64_t batch_size = 1 + static_cast<int64_t>(rng() % (big ? 2000 : 40));
    const uint64_t null_every = round % 4 == 0 ? 100 : 7;  // rare nulls: bitmaps gather by exceptions
    std::vector<Row> reference;
    std::vector<std::unique_ptr<BatchSource>> inputs;
    for (size_t i = 0; i < k; ++i) {
      const size_t n = rng() % (big ? 3000 : 60);
      std::vector<int64_t> times(n);
      int64_t t = static_cast<int64_t>(rng() % 5);
      for (size_t r = 0; r < n; ++r) {
        t += static_cast<int64_t>(rng() % 3);  // many ties, within and across inputs
        times[r] = spread ? (t < 60 ? INT64_MIN + t : INT64_MAX - 100000 + t) : t;  // monotone in t
      }
      std::vector<Batch> batches;
      size_t r = 0;
      while (r < n) {
        const size_t len = std::min(n - r, 1 + static_cast<size_t>(rng() % (big ? 800 : 25)));
        std::vector<int64_t> bt(times.begin() + r, times.begin() + r + len);
        std::vector<std::string> bs;
        std::vector<bool> valid;
        for (size_t j = 0; j < len; ++j) {
          bs.push_back(std::to_string(i) + ":" + std::to_string(r + j));
          valid.push_back(rng() % null_every != 0);
          reference.push_back({bt[j], i, r + j, valid.back() ? bs.back() : "", valid.back()});
        }
        batches.push_back(fixtures::time_string_batch(sch, bt, bs, valid));
        if (rng() % 5 == 0) batches.push_back(fixtures::time_string_batch(sch, {}, {}));
        r += len;
      }
      inputs.push_back(std::make_unique<fixtures::ListSource>(sch, std::move(batches)));
    }
    std::stable_sort(reference.begin(), reference.end(), [](const Row& a, const Row& b) {
      return std::tie(a.t, a.input, a.pos) < std::tie(b.t, b.input, b.pos);
    });
    for (Row& row : reference) row.input = row.pos = 0;
    gate::MergeOptions options{"t", batch_size};
    options.threads = 1 + static_cast<unsigned>(rng() % 4);
    options.part_rows = 1 + static_cast<int64_t>(rng() % (big ? 500 : 8));
    options.streamed = round % 3 == 0;
    auto merged = gate::make_merge(std::move(inputs), options);
    CHECK(drain(*merged) == reference);
  }
}

TEST(single_input_passes_through_untouched) {
  auto sch = fixtures::time_string_schema();
  Batch a = fixtures::time_string_batch(sch, {1, 2, 3}, {"a", "b", "c"});
  Batch b = fixtures::time_string_batch(sch, {3, 4}, {"d", "e"});
  std::vector<std::unique_ptr<BatchSource>> inputs;
  inputs.push_back(std::make_unique<fixtures::ListSource>(sch, std::vector<Batch>{a, b}));
  auto merged = gate::make_merge(std::move(inputs), {"t", 2});
  auto o1 = merged->next();
  auto o2 = merged->next();
  REQUIRE(o1 && o2);
  CHECK(!merged->next());
  CHECK_EQ(o1->num_rows(), 3);  // whole batches, even above batch_size
  CHECK_EQ(o1->column(0).values, a.column(0).values);
  CHECK_EQ(o1->column(1).data, a.column(1).data);
  CHECK_EQ(o2->column(0).values, b.column(0).values);
  CHECK_EQ(o1->owner().get(), a.owner().get());
}

TEST(long_runs_are_emitted_as_slices) {
  auto sch = fixtures::time_string_schema();
  std::vector<int64_t> early(100), late(100);
  std::vector<std::string> s(100, "x");
  for (int i = 0; i < 100; ++i) early[i] = i, late[i] = 1000 + i;
  Batch a = fixtures::time_string_batch(sch, early, s);
  Batch b = fixtures::time_string_batch(sch, late, s);
  std::vector<std::unique_ptr<BatchSource>> inputs;
  inputs.push_back(std::make_unique<fixtures::ListSource>(sch, std::vector<Batch>{b}));
  inputs.push_back(std::make_unique<fixtures::ListSource>(sch, std::vector<Batch>{a}));
  auto merged = gate::make_merge(std::move(inputs), {"t", 64});  // slices from 4 rows on
  auto o1 = merged->next();
  auto o2 = merged->next();
  REQUIRE(o1 && o2);
  CHECK_EQ(o1->column(0).values, a.column(0).values);
  CHECK_EQ(o2->column(0).values, b.column(0).values);
  CHECK(!merged->next());
}

TEST(unsorted_input_is_named_with_row_and_values) {
  auto sch = fixtures::time_string_schema();
  std::vector<std::unique_ptr<BatchSource>> inputs;
  inputs.push_back(std::make_unique<fixtures::ListSource>(
      sch, std::vector<Batch>{fixtures::time_string_batch(sch, {1, 2}, {"a", "b"})}));
  inputs.push_back(std::make_unique<fixtures::ListSource>(
      sch, std::vector<Batch>{fixtures::time_string_batch(sch, {1, 5}, {"a", "b"}),
                              fixtures::time_string_batch(sch, {4}, {"c"})}));
  auto merged = gate::make_merge(std::move(inputs), {"t", 1000});
  // The rows before the fault leave first (each batch leaves before the pull that may wait), then
  // the pull of input 1's second batch finds it.
  std::vector<int64_t> before;
  for (int call = 0; call < 2; ++call) {
    std::optional<Batch> b = merged->next();
    REQUIRE(b.has_value());
    for (int64_t r = 0; r < b->num_rows(); ++r) before.push_back(b->column(0).typed<int64_t>()[r]);
  }
  CHECK(before == (std::vector<int64_t>{1, 1, 2, 5}));
  CHECK_THROWS_WITH(merged->next(), ErrorKind::kUnsorted,
                    "input 1 is not sorted by 't': row 2 has 4, earlier than 5 at row 1");
  CHECK_THROWS_WITH(merged->next(), ErrorKind::kUnsorted, "row 2");
}

// With several threads, batches of 65,536 rows or more are validated together, on the merge's
// threads, after the pulls of a region: the error is still the one a check at each pull would have
// found first, the lowest input's, and comes before any row.
TEST(batches_validated_together_report_the_first_input_with_an_error) {
  auto sch = fixtures::time_string_schema();
  const int64_t n = 70000;
  auto input = [&](int64_t descent_at) {
    std::vector<int64_t> t(static_cast<size_t>(n));
    std::vector<std::string> s(static_cast<size_t>(n), "x");
    for (int64_t r = 0; r < n; ++r) t[static_cast<size_t>(r)] = r;
    if (descent_at > 0) t[static_cast<size_t>(descent_at)] = -1;
    return fixtures::time_string_batch(sch, t, s);
  };
  // A source whose first next() fails (as a Python iterator that raises).
  class Failing final : public BatchSource {
   public:
    explicit Failing(std::shared_ptr<const Schema> s) : schema_(std::move(s)) {}
    const std::shared_ptr<const Schema>& schema() const noexcept override { return schema_; }
    std::optional<Batch> next() override { throw Error(ErrorKind::kInvalidInput, "the source broke"); }

   private:
    std::shared_ptr<const Schema> schema_;
  };
  for (unsigned threads : {1u, 2u, 3u}) {
    gate::MergeOptions options{"t", 4096};
    options.threads = threads;
    std::vector<std::unique_ptr<BatchSource>> in;
    for (int64_t descent : {0, 50000, 0, 20000}) {
      in.push_back(std::make_unique<fixtures::ListSource>(sch, std::vector<Batch>{input(descent)}));
    }
    auto merged = gate::make_merge(std::move(in), options);
    CHECK_THROWS_WITH(merged->next(), ErrorKind::kUnsorted, "input 1 is not sorted by 't': row 50000 has -1");

    std::vector<std::unique_ptr<BatchSource>> broken;
    broken.push_back(std::make_unique<fixtures::ListSource>(sch, std::vector<Batch>{input(0)}));
    broken.push_back(std::make_unique<fixtures::ListSource>(sch, std::vector<Batch>{input(30000)}));
    broken.push_back(std::make_unique<Failing>(sch));
    auto first = gate::make_merge(std::move(broken), options);
    CHECK_THROWS_WITH(first->next(), ErrorKind::kUnsorted, "input 1 is not sorted by 't': row 30000 has -1");

    std::vector<std::unique_ptr<BatchSource>> fine;
    fine.push_back(std::make_unique<fixtures::ListSource>(sch, std::vector<Batch>{input(0)}));
    fine.push_back(std::make_unique<Failing>(sch));
    auto second = gate::make_merge(std::move(fine), options);
    CHECK_THROWS_WITH(second->next(), ErrorKind::kInvalidInput, "the source broke");
  }
}

TEST(null_time_is_named) {
  auto ts = fixtures::schema({{"t", fixtures::type(TypeId::kInt64)}, {"s", fixtures::type(TypeId::kUtf8)}});
  Batch b = fixtures::time_string_batch(ts, {1, 2}, {"a", "b"});
  std::vector<Column> cols{b.column(0), b.column(1)};
  static const uint8_t kOnlyFirstValid = 0b01;
  cols[0].validity = &kOnlyFirstValid;
  cols[0].null_count = 1;
  std::vector<std::unique_ptr<BatchSource>> in2;
  in2.push_back(std::make_unique<fixtures::ListSource>(
      ts, std::vector<Batch>{Batch(ts, 2, cols, b.owner())}));
  auto merged = gate::make_merge(std::move(in2), {"t", 10});
  CHECK_THROWS_WITH(merged->next(), ErrorKind::kNullTime,
                    "input 0 has a null time in column 't' at row 1");
}

TEST(construction_checks_columns_and_schemas) {
  auto sch = fixtures::time_string_schema();
  auto other = fixtures::schema({{"t", fixtures::type(TypeId::kInt64)}, {"s", fixtures::type(TypeId::kLargeUtf8)}});
  auto make = [&](auto s0, auto s1, std::string time) {
    std::vector<std::unique_ptr<BatchSource>> inputs;
    inputs.push_back(std::make_unique<fixtures::ListSource>(s0, std::vector<Batch>{}));
    inputs.push_back(std::make_unique<fixtures::ListSource>(s1, std::vector<Batch>{}));
    return gate::make_merge(std::move(inputs), {time, 10});
  };
  CHECK_THROWS_WITH(make(sch, sch, "time"), ErrorKind::kInvalidInput,
                    "time column 'time' not found in input 0; its columns are: t: int64, s: string");
  CHECK_THROWS_WITH(make(sch, other, "t"), ErrorKind::kSchemaMismatch,
                    "input 1 does not match input 0: column 's' has type large_string; expected string");
  CHECK_THROWS_WITH(gate::make_merge({}, {"t", 10}), ErrorKind::kInvalidInput, "at least one input");
  auto strings = fixtures::schema({{"s", fixtures::type(TypeId::kUtf8)}, {"t", fixtures::type(TypeId::kUtf8)}});
  std::vector<std::unique_ptr<BatchSource>> one;
  one.push_back(std::make_unique<fixtures::ListSource>(strings, std::vector<Batch>{}));
  CHECK_THROWS_WITH(gate::make_merge(std::move(one), {"t", 10}), ErrorKind::kInvalidInput,
                    "time column 't' of input 0 has type string");
}

UNIT_MAIN()

// --- Lateness: inputs out of order within a bound --------------------------------------------------

namespace {

// The plain model of gate/lateness.h's definition, row by row: the rows that leave, in order, and
// the late rows' arrival positions.
struct LatenessModel {
  std::vector<size_t> out;   // arrival positions, in leaving order
  std::vector<size_t> late;  // arrival positions
};
LatenessModel lateness_model(const std::vector<int64_t>& times, int64_t bound) {
  LatenessModel m;
  int64_t latest = INT64_MIN;
  std::vector<std::pair<int64_t, size_t>> kept;
  for (size_t r = 0; r < times.size(); ++r) {
    const int64_t watermark = latest == INT64_MIN ? INT64_MIN : latest - bound;
    if (times[r] < watermark) {
      m.late.push_back(r);
      continue;
    }
    latest = std::max(latest, times[r]);
    kept.push_back({times[r], r});
  }
  std::stable_sort(kept.begin(), kept.end(), [](auto& a, auto& b) { return a.first < b.first; });
  for (auto& [t, r] : kept) m.out.push_back(r);
  return m;
}

}  // namespace

// Random inputs shuffled within and beyond the bound, random batch sizes (empty batches too), each
// policy: what leaves equals the model's order, the late set equals the model's; nothing leaves
// above the watermark or before it could (every row at or below the watermark has left after each
// push), and the watermark never goes back.
TEST(lateness_equals_the_model_on_random_disorder) {
  std::mt19937_64 rng(2031);
  auto sch = fixtures::time_string_schema();
  int configurations = 0;
  for (int round = 0; round < 400; ++round) {
    const int64_t bound = static_cast<int64_t>(rng() % 4 == 0 ? 0 : rng() % 20);
    const size_t n = rng() % 300;
    std::vector<int64_t> times(n);
    int64_t t = static_cast<int64_t>(rng() % 100) - 50;
    for (size_t r = 0; r < n; ++r) {
      t += static_cast<int64_t>(rng() % 3);
      // Most rows a little out of order, some far beyond the bound.
      const int64_t back = rng() % 10 == 0 ? static_cast<int64_t>(rng() % 60) : static_cast<int64_t>(rng() % (bound + 1));
      times[r] = t - back;
    }
    const LatenessModel model = lateness_model(times, bound);
    for (gate::LatePolicy policy : {gate::LatePolicy::kDrop, gate::LatePolicy::kSide, gate::LatePolicy::kError}) {
      ++configurations;
      auto late = std::make_shared<gate::LateRows>();
      gate::Lateness lateness(3, "input 3", sch, "t", {bound, policy}, late);
      std::vector<size_t> out;
      std::vector<Batch> released;
      int64_t watermark = INT64_MIN;
      bool failed = false;
      size_t r = 0;
      while (r < n && !failed) {
        const size_t len = std::min(n - r, static_cast<size_t>(rng() % 30));
        std::vector<int64_t> bt(times.begin() + r, times.begin() + r + len);
        std::vector<std::string> bs;
        for (size_t j = 0; j < len; ++j) bs.push_back(std::to_string(r + j));
        released.clear();
        try {
          lateness.push(fixtures::time_string_batch(sch, bt, bs), released);
        } catch (const Error& e) {
          CHECK(policy == gate::LatePolicy::kError);
          CHECK(e.kind() == ErrorKind::kUnsorted);
          CHECK(!model.late.empty());
          // The first late row is named, with its arrival position.
          CHECK(std::string(e.what()).find("input 3 is not sorted by 't' within its lateness: row " +
                                           std::to_string(model.late[0]) + " has") != std::string::npos);
          CHECK(model.late[0] >= r && model.late[0] < r + len);
          failed = true;
          break;
        }
        CHECK(lateness.watermark() >= watermark);
        watermark = lateness.watermark();
        for (const Batch& b : released) {
          for (const Row& row : rows_of(b)) {
            CHECK(row.t <= watermark);
            out.push_back(std::stoul(row.s));
          }
        }
        // Every row seen that is not late and at or below the watermark has left.
        size_t due = 0;
        for (size_t k = 0; k < r + len; ++k)
          if (std::find(model.late.begin(), model.late.end(), k) == model.late.end() && times[k] <= watermark) ++due;
        CHECK_EQ(out.size(), due);
        CHECK_EQ(lateness.held(), static_cast<int64_t>(r + len - out.size()) -
                                      static_cast<int64_t>(std::count_if(model.late.begin(), model.late.end(),
                                                                         [&](size_t k) { return k < r + len; })));
        r += len;
      }
      if (failed) continue;
      CHECK(policy != gate::LatePolicy::kError || model.late.empty());
      released.clear();
      lateness.finish(released);
      for (const Batch& b : released)
        for (const Row& row : rows_of(b)) out.push_back(std::stoul(row.s));
      CHECK(out == model.out);
      CHECK_EQ(late->count(), static_cast<int64_t>(model.late.size()));
      CHECK_EQ(late->count(3), static_cast<int64_t>(model.late.size()));
      std::vector<size_t> side;
      for (const auto& chunk : late->take()) {
        CHECK_EQ(chunk.input, uint32_t{3});
        const auto rows = rows_of(chunk.batch);
        CHECK_EQ(rows.size(), chunk.rows.size());
        for (size_t k = 0; k < rows.size(); ++k) {
          CHECK_EQ(std::stoul(rows[k].s), static_cast<unsigned long>(chunk.rows[k]));
          CHECK_EQ(rows[k].t, times[static_cast<size_t>(chunk.rows[k])]);
          side.push_back(static_cast<size_t>(chunk.rows[k]));
        }
      }
      CHECK(side == (policy == gate::LatePolicy::kSide ? model.late : std::vector<size_t>{}));
    }
  }
  std::printf("  %d configurations\n", configurations);
}

// Sorted input with a bound passes rows on as zero-copy slices once they are old enough, and a
// heartbeat releases what it proves; a heartbeat that goes back is refused, a row below it is late.
TEST(lateness_slices_heartbeats_and_errors) {
  auto sch = fixtures::time_string_schema();
  std::vector<int64_t> times(1000);
  std::vector<std::string> strings(1000);
  for (int64_t i = 0; i < 1000; ++i) {
    times[static_cast<size_t>(i)] = i;
    strings[static_cast<size_t>(i)] = std::to_string(i);
  }
  auto late = std::make_shared<gate::LateRows>();
  gate::Lateness lateness(0, "input 0", sch, "t", {100, gate::LatePolicy::kError}, late);
  std::vector<Batch> out;
  const Batch batch = fixtures::time_string_batch(sch, times, strings);
  lateness.push(batch, out);
  CHECK_EQ(out.size(), size_t{1});
  CHECK_EQ(out[0].num_rows(), int64_t{900});  // times 0..899, at or below 999 - 100
  CHECK(out[0].column(0).values == batch.column(0).values);  // a slice, not a copy
  CHECK_EQ(lateness.watermark(), int64_t{899});
  CHECK_EQ(lateness.held(), int64_t{100});
  out.clear();
  lateness.heartbeat(950, out);
  CHECK_EQ(out.size(), size_t{1});
  CHECK_EQ(out[0].num_rows(), int64_t{51});  // 900..950
  CHECK_THROWS_WITH(lateness.heartbeat(940, out), ErrorKind::kUnsorted, "earlier than its previous heartbeat at 950");
  out.clear();
  CHECK_THROWS_WITH(lateness.push(fixtures::time_string_batch(sch, {960, 949}, {"a", "b"}), out), ErrorKind::kUnsorted,
                    "input 0 is not sorted by 't' within its lateness: row 1001 has 949, earlier than its heartbeat at 950");
  CHECK_THROWS_WITH(lateness.push(fixtures::time_string_batch(sch, {2000, 1899}, {"a", "b"}), out), ErrorKind::kUnsorted,
                    "row 1001 has 1899, earlier than its latest time before it, 2000, less the lateness of 100");
  CHECK_EQ(lateness.held(), int64_t{49});  // the failed pushes took nothing
  CHECK_EQ(lateness.rows(), int64_t{1000});
  // Nulls in the time column are named; a negative bound and a missing column are refused.
  gate::Lateness other(1, "input 1", sch, "t", {5, gate::LatePolicy::kDrop}, nullptr);
  std::vector<Column> cols{batch.column(0), batch.column(1)};
  static const uint8_t kOnlyFirstValid = 0b01;
  cols[0].validity = &kOnlyFirstValid;
  cols[0].null_count = 1;
  CHECK_THROWS_WITH(other.push(Batch(sch, 2, cols, batch.owner()), out), ErrorKind::kNullTime,
                    "input 1 has a null time in column 't' at row 1");
  CHECK_THROWS_WITH(gate::Lateness(0, "input 0", sch, "t", {-1, gate::LatePolicy::kDrop}, nullptr), ErrorKind::kUsage,
                    "lateness must not be negative");
  CHECK_THROWS_WITH(gate::Lateness(0, "input 0", sch, "nope", {1, gate::LatePolicy::kDrop}, nullptr),
                    ErrorKind::kInvalidInput, "time column 'nope' not found in input 0");
}

// Live inputs with heartbeats pulled straight from the merge (as a Python reader does), a producer
// thread feeding them: the rows equal the merge of the same batches without heartbeats.
TEST(merge_of_live_inputs_with_heartbeats_equals_the_plain_merge) {
  std::mt19937_64 rng(99);
  auto sch = fixtures::time_string_schema();
  for (int round = 0; round < 300; ++round) {
    const size_t k = 2 + rng() % 3;
    std::vector<std::vector<Batch>> batches(k);
    for (size_t i = 0; i < k; ++i) {
      int64_t t = 0;
      for (size_t b = 0, n = rng() % 6; b < n; ++b) {
        std::vector<int64_t> times;
        std::vector<std::string> strings;
        for (size_t r = 0, m = 1 + rng() % 4; r < m; ++r) {
          t += static_cast<int64_t>(rng() % 4);
          times.push_back(t);
          strings.push_back(std::to_string(i));
        }
        batches[i].push_back(fixtures::time_string_batch(sch, times, strings));
      }
    }
    std::vector<std::unique_ptr<BatchSource>> plain;
    for (size_t i = 0; i < k; ++i) plain.push_back(std::make_unique<fixtures::ListSource>(sch, batches[i]));
    const std::vector<Row> expected = drain(*gate::make_merge(std::move(plain), {"t", 64}));
    std::vector<fixtures::LiveSource*> live;
    std::vector<std::unique_ptr<BatchSource>> sources;
    for (size_t i = 0; i < k; ++i) {
      auto s = std::make_unique<fixtures::LiveSource>(sch);
      live.push_back(s.get());
      sources.push_back(std::move(s));
    }
    auto merged = gate::make_merge(std::move(sources), {"t", 64});
    std::thread producer([&, seed = rng()] {
      std::mt19937_64 r(seed);
      std::vector<size_t> next(k, 0);
      std::vector<int64_t> floor(k, 0);
      for (;;) {
        std::vector<size_t> open;
        for (size_t i = 0; i < k; ++i)
          if (next[i] < batches[i].size()) open.push_back(i);
        if (open.empty()) break;
        const size_t i = open[r() % open.size()];
        const Batch& b = batches[i][next[i]++];
        const int64_t first = b.column(0).typed<int64_t>()[0];
        if (r() % 2 == 0 && first > floor[i]) {
          floor[i] += 1 + static_cast<int64_t>(r() % static_cast<uint64_t>(first - floor[i]));
          live[i]->heartbeat(floor[i]);
        }
        floor[i] = std::max(floor[i], b.column(0).typed<int64_t>()[b.num_rows() - 1]);
        live[i]->push(b);
      }
      for (size_t i = 0; i < k; ++i) live[i]->close();
    });
    const std::vector<Row> got = drain(*merged);
    producer.join();
    REQUIRE(got == expected);
  }
}
