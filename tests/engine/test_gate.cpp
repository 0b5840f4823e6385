// Unit tests of engine/gate: the sequential merge against a plain reference.
#include <algorithm>
#include <random>
#include <tuple>

#include "core/error.h"
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
// range (128-bit keys); one thread, or several with regions cut into parts of a few rows.
TEST(merge_equals_reference_on_random_inputs) {
  std::mt19937_64 rng(12345);
  auto sch = fixtures::time_string_schema();
  for (int round = 0; round < 600; ++round) {
    const bool spread = round % 2 == 1;
    const size_t k = 1 + rng() % (round % 10 == 0 ? 20 : 6);
    const int64_t batch_size = 1 + static_cast<int64_t>(rng() % 40);
    std::vector<Row> reference;
    std::vector<std::unique_ptr<BatchSource>> inputs;
    for (size_t i = 0; i < k; ++i) {
      const size_t n = rng() % 60;
      std::vector<int64_t> times(n);
      int64_t t = static_cast<int64_t>(rng() % 5);
      for (size_t r = 0; r < n; ++r) {
        t += static_cast<int64_t>(rng() % 3);  // many ties, within and across inputs
        times[r] = spread ? (t < 60 ? INT64_MIN + t : INT64_MAX - 1000 + t) : t;  // monotone in t
      }
      std::vector<Batch> batches;
      size_t r = 0;
      while (r < n) {
        const size_t len = std::min(n - r, 1 + static_cast<size_t>(rng() % 25));
        std::vector<int64_t> bt(times.begin() + r, times.begin() + r + len);
        std::vector<std::string> bs;
        std::vector<bool> valid;
        for (size_t j = 0; j < len; ++j) {
          bs.push_back(std::to_string(i) + ":" + std::to_string(r + j));
          valid.push_back(rng() % 7 != 0);
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
    options.part_rows = 1 + static_cast<int64_t>(rng() % 8);
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
