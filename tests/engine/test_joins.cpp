// Operators over several streams (ops/multi_input.h, ops/joins.h): union and the joins, fed their
// ports in random interleavings and chunkings, with and without pulses, must give exactly the
// output of a brute-force formulation of their semantics (docs/graphs.md).
#include <algorithm>
#include <map>
#include <random>
#include <tuple>

#include "core/error.h"
#include "helpers.h"
#include "ops/joins.h"
#include "ops/multi_input.h"
#include "unit.h"

using namespace pao;

namespace {

using Row = std::vector<int64_t>;  // int64 columns; a null is kNull
constexpr int64_t kNull = INT64_MIN;

std::shared_ptr<const Schema> int_schema(const std::vector<std::string>& names) {
  std::vector<Field> fields;
  for (const std::string& n : names) fields.push_back({n, fixtures::type(TypeId::kInt64), true});
  return fixtures::schema(fields);
}

Batch make(const std::shared_ptr<const Schema>& s, const std::vector<Row>& rows) {
  auto st = std::make_shared<fixtures::Storage>();
  const size_t cols = s->fields.size();
  st->i64.assign(cols, {});
  st->bytes.assign(cols, {});
  std::vector<Column> columns(cols);
  for (size_t c = 0; c < cols; ++c) {
    st->bytes[c].assign((rows.size() + 8) / 8, 0);
    int64_t nulls = 0;
    for (size_t r = 0; r < rows.size(); ++r) {
      st->i64[c].push_back(rows[r][c] == kNull ? 0 : rows[r][c]);
      if (rows[r][c] != kNull) st->bytes[c][r / 8] |= uint8_t(1) << (r % 8);
      nulls += rows[r][c] == kNull;
    }
    st->i64[c].push_back(0);  // never an empty buffer
    columns[c].values = st->i64[c].data();
    columns[c].validity = nulls ? st->bytes[c].data() : nullptr;
    columns[c].null_count = nulls;
  }
  return Batch(s, static_cast<int64_t>(rows.size()), std::move(columns), st);
}

std::vector<Row> read(const Batch& b) {
  std::vector<Row> out;
  for (int64_t r = 0; r < b.num_rows(); ++r) {
    Row row;
    for (size_t c = 0; c < b.num_columns(); ++c) {
      row.push_back(b.column(c).is_valid(r) ? b.column(c).typed<int64_t>()[r] : kNull);
    }
    out.push_back(row);
  }
  return out;
}

// Sorted rows (column 0 is the time) with `keys` distinct keys (some null) and a value column.
std::vector<Row> random_rows(std::mt19937_64& rng, size_t n, int keys, int64_t step) {
  std::vector<Row> rows;
  int64_t t = static_cast<int64_t>(rng() % 5);
  for (size_t i = 0; i < n; ++i) {
    t += static_cast<int64_t>(rng() % static_cast<uint64_t>(step + 1));
    const int64_t k = rng() % 9 == 0 ? kNull : static_cast<int64_t>(rng() % static_cast<uint64_t>(keys));
    rows.push_back({t, k, static_cast<int64_t>(rng() % 1000)});
  }
  return rows;
}

// Feeds `streams` to `op` in random chunks and a random interleaving of ports, each chunk followed
// by its last time as bound, sometimes by a pulse alone (a later bound, at most the next time),
// and finally each stream's end; returns every output row in order.
std::vector<Row> feed(ops::MultiInputOperator& op, const std::vector<std::shared_ptr<const Schema>>& schemas,
                      const std::vector<std::vector<Row>>& streams, std::mt19937_64& rng, size_t most = 6) {
  std::vector<size_t> next(streams.size(), 0);
  std::vector<bool> ended(streams.size(), false);
  std::vector<Row> out;
  auto take = [&](const Batch& b) {
    for (Row& r : read(b)) out.push_back(std::move(r));
  };
  for (;;) {
    std::vector<size_t> open;
    for (size_t p = 0; p < streams.size(); ++p)
      if (!ended[p]) open.push_back(p);
    if (open.empty()) break;
    const size_t p = open[rng() % open.size()];
    const std::vector<Row>& s = streams[p];
    if (next[p] == s.size()) {
      take(op.push(p, make(schemas[p], {}), INT64_MAX));
      ended[p] = true;
      continue;
    }
    const size_t len = std::min(s.size() - next[p], static_cast<size_t>(1 + rng() % most));
    std::vector<Row> chunk(s.begin() + static_cast<std::ptrdiff_t>(next[p]),
                           s.begin() + static_cast<std::ptrdiff_t>(next[p] + len));
    next[p] += len;
    int64_t bound = chunk.back()[0];
    take(op.push(p, make(schemas[p], chunk), rng() % 2 ? bound : INT64_MIN));
    if (rng() % 3 == 0 && next[p] < s.size()) {
      bound = chunk.back()[0] + static_cast<int64_t>(rng() % static_cast<uint64_t>(s[next[p]][0] - chunk.back()[0] + 1));
      take(op.push(p, make(schemas[p], {}), bound));
    }
  }
  return out;
}

// ---- brute-force formulations ---------------------------------------------------------------

// A tuple's place in the merged order of the streams: (time, rank of its stream, position).
using Pos = std::tuple<int64_t, int64_t, int64_t>;

std::vector<Row> union_expected(const std::vector<std::vector<Row>>& streams) {
  std::vector<std::pair<Pos, Row>> all;
  for (size_t p = 0; p < streams.size(); ++p)
    for (size_t i = 0; i < streams[p].size(); ++i)
      all.push_back({{streams[p][i][0], static_cast<int64_t>(p), static_cast<int64_t>(i)}, streams[p][i]});
  std::sort(all.begin(), all.end());
  std::vector<Row> out;
  for (auto& [pos, row] : all) out.push_back(row);
  return out;
}

// Columns: t (pair time), k, a, t_right, b, t_left.
std::vector<Row> interval_expected(const std::vector<Row>& left, const std::vector<Row>& right, int64_t lo,
                                   int64_t hi, bool left_join) {
  auto pos_l = [&](size_t i) { return Pos{left[i][0], 0, static_cast<int64_t>(i)}; };
  auto pos_r = [&](size_t j) { return Pos{right[j][0], 1, static_cast<int64_t>(j)}; };
  // Emission key: (point, phase, other): phase 0 = an unmatched left row just before `point`,
  // 1 = a pair at `point` (ordered by the other tuple), 2 = an unmatched left right after `point`.
  std::vector<std::pair<std::tuple<Pos, int, Pos>, Row>> out;
  for (size_t i = 0; i < left.size(); ++i) {
    bool matched = false;
    for (size_t j = 0; j < right.size(); ++j) {
      const int64_t d = right[j][0] - left[i][0];
      if (left[i][1] == kNull || left[i][1] != right[j][1] || d < lo || d > hi) continue;
      matched = true;
      const bool right_later = pos_r(j) > pos_l(i);
      const Pos later = right_later ? pos_r(j) : pos_l(i), other = right_later ? pos_l(i) : pos_r(j);
      out.push_back({{later, 1, other},
                     {std::max(left[i][0], right[j][0]), left[i][1], left[i][2], right[j][0], right[j][2], left[i][0]}});
    }
    if (!matched && left_join) {
      const Row row{std::max(left[i][0], left[i][0] + hi), left[i][1], left[i][2], kNull, kNull, left[i][0]};
      if (hi < 0) {
        out.push_back({{pos_l(i), 2, pos_l(i)}, row});
        continue;
      }
      const int64_t d = left[i][0] + hi;
      Pos point{INT64_MAX, 0, 0};
      for (size_t k = 0; k < left.size(); ++k)
        if (left[k][0] > d) point = std::min(point, pos_l(k));
      for (size_t k = 0; k < right.size(); ++k)
        if (right[k][0] > d) point = std::min(point, pos_r(k));
      out.push_back({{point, 0, pos_l(i)}, row});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Row> rows;
  for (auto& [key, row] : out) rows.push_back(row);
  return rows;
}

// Columns: t, k, a, t_right, b.
std::vector<Row> asof_expected(const std::vector<Row>& left, const std::vector<Row>& right,
                               std::optional<int64_t> tolerance) {
  std::vector<Row> out;
  for (const Row& l : left) {
    std::optional<size_t> best;
    for (size_t j = 0; j < right.size(); ++j) {
      if (l[1] == kNull || right[j][1] != l[1] || right[j][0] > l[0]) continue;
      if (tolerance && l[0] - right[j][0] > *tolerance) continue;
      if (!best || right[j][0] >= right[*best][0]) best = j;  // >=: the last of equal times
    }
    out.push_back({l[0], l[1], l[2], best ? right[*best][0] : kNull, best ? right[*best][2] : kNull});
  }
  return out;
}

bool same(const std::vector<Row>& a, const std::vector<Row>& b) {
  if (a == b) return true;
  std::fprintf(stderr, "    got %zu rows, expected %zu\n", a.size(), b.size());
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    auto show = [](const std::vector<Row>& v, size_t i) {
      std::string s;
      if (i >= v.size()) return std::string("-");
      for (int64_t x : v[i]) s += (x == kNull ? std::string("null") : std::to_string(x)) + " ";
      return s;
    };
    if (i >= a.size() || i >= b.size() || a[i] != b[i]) {
      std::fprintf(stderr, "    first difference at row %zu: got [%s] expected [%s]\n", i, show(a, i).c_str(),
                   show(b, i).c_str());
      break;
    }
  }
  return false;
}

const auto kLeft = int_schema({"t", "k", "a"});
const auto kRight = int_schema({"t", "k", "b"});

}  // namespace

TEST(union_is_the_merged_order_whatever_the_feeding) {
  std::mt19937_64 rng(1);
  for (int round = 0; round < 600; ++round) {
    // Up to 6 ports (a tournament with padding leaves); in some rounds long streams whose time
    // steps differ by port (long runs of one port: the galloping path), in some times spread over
    // 2^62 (too wide for narrow tournament keys), and in some long streams in batches of up to
    // 400 rows, so that a push makes hundreds of rows ready (the drain's two lanes).
    const size_t ports = 1 + rng() % 6;
    const bool long_runs = round % 3 == 1;
    const bool wide = round % 4 == 3;
    const bool big = round % 5 == 2 && !wide;  // wide times scale the times by 2^52: short streams only
    std::vector<std::vector<Row>> streams;
    std::vector<std::shared_ptr<const Schema>> schemas(ports, kLeft);
    for (size_t p = 0; p < ports; ++p) {
      const int64_t step = long_runs && !wide ? int64_t{1} << (rng() % 6) : 3;
      streams.push_back(random_rows(rng, rng() % (big ? 3000 : long_runs ? 300 : 20), 3, step));
      if (wide) {
        for (Row& r : streams.back()) r[0] = (r[0] - 500) * (int64_t{1} << 52);
      }
    }
    auto op = ops::make_union(schemas, "t");
    REQUIRE(same(feed(*op, schemas, streams, rng, big ? 400 : 6), union_expected(streams)));
    CHECK_EQ(op->output_bound(), INT64_MAX);
  }
}

TEST(union_refuses_unsorted_and_mismatched_inputs) {
  auto op = ops::make_union({kLeft, kLeft}, "t");
  op->push(0, make(kLeft, {{5, 1, 1}}), INT64_MIN);
  CHECK_THROWS_WITH(op->push(0, make(kLeft, {{4, 1, 1}}), INT64_MIN), ErrorKind::kUnsorted,
                    "union's input 0 is not sorted by 't': row 1 has 4");
  CHECK_THROWS_WITH(ops::make_union({kLeft, kRight}, "t"), ErrorKind::kSchemaMismatch, "input 1");
  CHECK_THROWS_WITH(ops::make_union({kLeft}, "time"), ErrorKind::kInvalidInput, "no time column 'time'");
}

TEST(union_waits_for_a_port_that_may_still_send_earlier_rows) {
  auto op = ops::make_union({kLeft, kLeft}, "t");
  CHECK_EQ(op->push(0, make(kLeft, {{5, 1, 1}, {9, 1, 2}}), 9).num_rows(), 0);  // port 1 unknown
  // Port 1 promises nothing below 7: the row at 5 is ready, the one at 9 is not.
  CHECK_EQ(op->push(1, make(kLeft, {}), 7).num_rows(), 1);
  CHECK_EQ(op->output_bound(), 7);
  // A row at 9 on port 1 sorts after port 0's row at 9 (ties by port): both leave once port 1 ends.
  CHECK_EQ(op->push(1, make(kLeft, {{9, 2, 3}}), INT64_MAX).num_rows(), 1);
  CHECK_EQ(op->push(0, make(kLeft, {}), INT64_MAX).num_rows(), 1);
}

TEST(interval_join_matches_brute_force_whatever_the_feeding) {
  std::mt19937_64 rng(2);
  const std::pair<int64_t, int64_t> windows[] = {{-3, 3}, {0, 4}, {-4, -1}, {1, 5}, {0, 0}, {-2, 0}};
  for (int round = 0; round < 600; ++round) {
    const auto [lo, hi] = windows[rng() % std::size(windows)];
    const bool left_join = rng() % 2;
    const auto left = random_rows(rng, rng() % 15, 3, 3), right = random_rows(rng, rng() % 15, 3, 3);
    auto op = ops::make_interval_join(kLeft, kRight, "t", {"k"}, lo, hi,
                                      left_join ? ops::JoinHow::kLeft : ops::JoinHow::kInner);
    const std::vector<Row> got = feed(*op, {kLeft, kRight}, {left, right}, rng);
    if (!same(got, interval_expected(left, right, lo, hi, left_join))) {
      std::fprintf(stderr, "    round %d: within (%lld, %lld), %s\n", round, static_cast<long long>(lo),
                   static_cast<long long>(hi), left_join ? "left" : "inner");
      REQUIRE(false);
    }
    // The output is sorted by its time.
    for (size_t i = 1; i < got.size(); ++i) CHECK(got[i - 1][0] <= got[i][0]);
  }
}

TEST(interval_join_schema_and_errors) {
  auto op = ops::make_interval_join(kLeft, kRight, "t", {"k"}, -1, 1, ops::JoinHow::kLeft);
  CHECK_EQ(op->output_schema()->to_string(), "t: int64, k: int64, a: int64, t_right: int64, b: int64, t_left: int64");
  CHECK_THROWS_WITH(ops::make_interval_join(kLeft, kRight, "t", {"k"}, 2, 1, ops::JoinHow::kInner),
                    ErrorKind::kInvalidInput, "lo <= hi");
  CHECK_THROWS_WITH(ops::make_interval_join(kLeft, kRight, "t", {"x"}, 0, 1, ops::JoinHow::kInner),
                    ErrorKind::kInvalidInput, "key column 'x'");
}

TEST(asof_join_matches_brute_force_whatever_the_feeding) {
  std::mt19937_64 rng(3);
  for (int round = 0; round < 600; ++round) {
    const std::optional<int64_t> tolerance = rng() % 2 ? std::optional<int64_t>(rng() % 4) : std::nullopt;
    const auto left = random_rows(rng, rng() % 15, 3, 2), right = random_rows(rng, rng() % 15, 3, 2);
    auto op = ops::make_asof_join(kLeft, kRight, "t", {"k"}, tolerance);
    REQUIRE(same(feed(*op, {kLeft, kRight}, {left, right}, rng), asof_expected(left, right, tolerance)));
  }
}

TEST(lookup_join_takes_each_keys_last_row) {
  const auto table = int_schema({"k", "b"});
  auto op = ops::make_lookup_join(kLeft, table, {make(table, {{1, 10}, {2, 20}, {1, 11}, {kNull, 99}})}, "t", {"k"});
  CHECK_EQ(op->output_schema()->to_string(), "t: int64, k: int64, a: int64, b: int64");
  const std::vector<Row> got = read(op->process(make(kLeft, {{1, 1, 5}, {2, 2, 6}, {3, 3, 7}, {4, kNull, 8}})));
  CHECK(same(got, {{1, 1, 5, 11}, {2, 2, 6, 20}, {3, 3, 7, kNull}, {4, kNull, 8, kNull}}));
}

UNIT_MAIN()
