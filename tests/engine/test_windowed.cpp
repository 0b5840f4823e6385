// top_k and window_aggregate as pipeline operators: hand-computed cases; on random inputs the
// output for random morsel sizes (and, keyed, 1, 3 or 8 partitions routed by key id) equals a
// one-tuple-at-a-time run; top_k equals a brute-force stable sort per group; the keyed
// window_aggregate's rows equal aggregate()'s (window::WindowAggregate) and each leaves right after
// the tuple of its key that closed it. Retained rows stay readable after their batches are dropped
// (run under ASan by `make asan-test`).
// GCC 12 reports a false -Wrestrict in std::string's inlined copies (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/builder.h"
#include "core/gather.h"
#include "core/values.h"
#include "helpers.h"
#include "ops/windowed.h"
#include "window/sessions.h"
#include "unit.h"
#include "core/key_table.h"

using namespace pao;
using ops::OperatorPtr;
using window::AggKind;
using window::AggSpec;

namespace {

using Row = std::vector<std::string>;
using Rows = std::vector<Row>;

// ---- building and reading batches --------------------------------------------------------------

// A cell to build: null, an integer (any integer-stored type), a double, a string, or a bool.
struct Cell {
  enum Kind { kNull, kInt, kFloat, kText, kBool } kind = kNull;
  int64_t i = 0;
  double f = 0;
  std::string s;
};
Cell null() { return {}; }
Cell num(int64_t v) { return {Cell::kInt, v, 0, {}}; }
Cell dbl(double v) { return {Cell::kFloat, 0, v, {}}; }
Cell text(std::string v) { return {Cell::kText, 0, 0, std::move(v)}; }

Batch make_batch(const std::shared_ptr<const Schema>& schema, const std::vector<std::vector<Cell>>& columns) {
  std::vector<ColumnBuilder> b;
  for (const Field& f : schema->fields) b.emplace_back(f.type);
  for (size_t c = 0; c < columns.size(); ++c) {
    for (const Cell& cell : columns[c]) {
      switch (cell.kind) {
        case Cell::kNull: b[c].append_null(); break;
        case Cell::kInt: b[c].append_fixed(&cell.i); break;
        case Cell::kFloat: b[c].append_fixed(&cell.f); break;
        case Cell::kText: b[c].append_string(cell.s); break;
        case Cell::kBool: b[c].append_bool(cell.i != 0); break;
      }
    }
  }
  return finish_batch(schema, b);
}

// A cell as text, exact: doubles by their bits, so -0.0, NaN and rounding all show.
std::string show(const Batch& b, size_t col, int64_t row) {
  const Column& c = b.column(col);
  if (c.validity != nullptr && !c.is_valid(row)) return "null";
  const DataType& t = b.schema()->fields[col].type;
  char buf[64];
  switch (t.id) {
    case TypeId::kInt64: case TypeId::kTimestamp: return std::to_string(c.typed<int64_t>()[row]);
    case TypeId::kInt32: case TypeId::kDate32: return std::to_string(c.typed<int32_t>()[row]);
    case TypeId::kUInt64: return std::to_string(c.typed<uint64_t>()[row]);
    case TypeId::kFloat64: {
      const double f = c.typed<double>()[row];
      std::snprintf(buf, sizeof buf, "%g/%016llx", f, static_cast<unsigned long long>(std::bit_cast<uint64_t>(f)));
      return buf;
    }
    case TypeId::kUtf8: return "'" + std::string(string_at(c, t, row)) + "'";
    default: return "?";
  }
}

Row row_of(const Batch& b, int64_t r) {
  Row row;
  for (size_t c = 0; c < b.num_columns(); ++c) row.push_back(show(b, c, r));
  return row;
}

void append_rows(const Batch& b, Rows& out) {
  for (int64_t r = 0; r < b.num_rows(); ++r) out.push_back(row_of(b, r));
}

std::string show_rows(const Rows& rows) {
  std::string s;
  for (const Row& r : rows) {
    for (const std::string& c : r) s += c + " ";
    s += "\n";
  }
  return s;
}

#define CHECK_ROWS(actual, expected)                                                                  \
  do {                                                                                                \
    const Rows unit_x = (actual), unit_y = (expected);                                                \
    if (unit_x != unit_y)                                                                             \
      unit::fail(__FILE__, __LINE__, "rows differ:\n" + show_rows(unit_x) + "expected:\n" + show_rows(unit_y)); \
  } while (0)

// An owned copy of rows [start, start + length) of `b`: a batch the caller may drop at once.
Batch copy_rows(const Batch& b, int64_t start, int64_t length) {
  const Segment s{0, start, length};
  return gather(b.schema(), std::span<const Batch>(&b, 1), std::span<const Segment>(&s, 1));
}

// Random morsel lengths covering n rows, with many single rows.
std::vector<int64_t> morsels(std::mt19937_64& rng, int64_t n) {
  std::vector<int64_t> out;
  for (int64_t at = 0; at < n;) {
    const int64_t len = std::min<int64_t>(n - at, rng() % 3 == 0 ? 1 : 1 + static_cast<int64_t>(rng() % 40));
    out.push_back(len);
    at += len;
  }
  return out;
}

// A stateful operator over `input` in the given morsels, each an owned copy dropped right after
// its call (so rows the operator keeps must keep their batch alive).
Rows run_stateful(const OperatorPtr& op, const Batch& input, const std::vector<int64_t>& lengths) {
  Rows out;
  int64_t at = 0;
  for (int64_t len : lengths) {
    append_rows(op->process(copy_rows(input, at, len)), out);
    at += len;
  }
  append_rows(op->finish(), out);
  return out;
}

Rows run_one_at_a_time(const OperatorPtr& op, const Batch& input) {
  return run_stateful(op, input, std::vector<int64_t>(static_cast<size_t>(input.num_rows()), 1));
}

// A partitioned operator the way the runtime drives it: morsels split by partition (key id modulo
// the partition count), partitions called in a random order, pieces merged back by source row.
// `sources`, when given, receives for each output row the input row that produced it (-1: finish).
Rows run_partitioned(const OperatorPtr& op, const Batch& input, const std::vector<int64_t>& lengths,
                     size_t partitions, std::mt19937_64& rng, std::vector<int64_t>* sources = nullptr) {
  op->set_partitions(partitions);
  KeyTable router(*input.schema(), op->key_columns());
  Rows out;
  int64_t at = 0;
  for (int64_t len : lengths) {
    const Batch morsel = copy_rows(input, at, len);
    std::vector<std::vector<int64_t>> rows(partitions);
    for (int64_t r = 0; r < len; ++r) rows[router.id(morsel, r) % partitions].push_back(r);
    std::vector<size_t> order(partitions);
    for (size_t p = 0; p < partitions; ++p) order[p] = p;
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<ops::Piece> pieces;
    for (size_t p : order) {
      if (!rows[p].empty()) pieces.push_back(op->process_rows(morsel, rows[p], p));
    }
    std::vector<std::tuple<int64_t, size_t, int64_t>> merged;  // source row, piece, row in piece
    for (size_t i = 0; i < pieces.size(); ++i) {
      CHECK_EQ(pieces[i].batch.num_rows(), static_cast<int64_t>(pieces[i].source_rows.size()));
      for (size_t r = 0; r < pieces[i].source_rows.size(); ++r) {
        merged.emplace_back(pieces[i].source_rows[r], i, static_cast<int64_t>(r));
      }
    }
    std::sort(merged.begin(), merged.end());
    for (const auto& [source, piece, r] : merged) {
      out.push_back(row_of(pieces[piece].batch, r));
      if (sources) sources->push_back(at + source);
    }
    at += len;
  }
  const Batch rest = op->finish();
  append_rows(rest, out);
  if (sources) sources->insert(sources->end(), static_cast<size_t>(rest.num_rows()), -1);
  return out;
}

// ---- top_k -------------------------------------------------------------------------------------

std::shared_ptr<const Schema> topk_schema() {
  using fixtures::type;
  return fixtures::schema({{"t", type(TypeId::kInt64), false},
                          {"g", type(TypeId::kInt64), true},
                          {"f", type(TypeId::kFloat64), true},
                          {"v", type(TypeId::kInt64), true},
                          {"s", type(TypeId::kUtf8), true}});
}

// The brute-force top_k: runs of equal g (null equal to null), each stably sorted, first k.
Rows brute_top_k(const Batch& in, int64_t k, const std::string& by, bool per, bool descending) {
  const size_t col = *in.schema()->find(by);
  const Column& c = in.column(col);
  const DataType& type = in.schema()->fields[col].type;
  const auto null = [&](int64_t r) { return c.validity != nullptr && !c.is_valid(r); };
  // Three-way comparison in the total order: -0.0 < 0.0, NaN above everything.
  const auto compare = [&](int64_t a, int64_t b) -> int {
    if (type.id == TypeId::kFloat64) {
      const double x = c.typed<double>()[a], y = c.typed<double>()[b];
      if (std::isnan(x) || std::isnan(y)) return std::isnan(x) - std::isnan(y);
      if (x != y) return x < y ? -1 : 1;
      return std::signbit(y) - std::signbit(x);
    }
    if (type.id == TypeId::kUtf8) {
      const std::string x(string_at(c, type, a)), y(string_at(c, type, b));
      return x < y ? -1 : x > y;
    }
    const int64_t x = c.typed<int64_t>()[a], y = c.typed<int64_t>()[b];
    return x < y ? -1 : x > y;
  };
  Rows out;
  const auto group_key = [&](int64_t r) { return show(in, 1, r); };
  int64_t start = 0;
  while (start < in.num_rows()) {
    int64_t end = start + 1;
    while (per && end < in.num_rows() && group_key(end) == group_key(start)) ++end;
    if (!per) end = in.num_rows();
    std::vector<int64_t> rows;
    for (int64_t r = start; r < end; ++r) rows.push_back(r);
    std::stable_sort(rows.begin(), rows.end(), [&](int64_t a, int64_t b) {
      if (null(a) || null(b)) return !null(a) && null(b);
      const int cmp = compare(a, b);
      return descending ? cmp > 0 : cmp < 0;
    });
    for (int64_t i = 0; i < std::min<int64_t>(k, static_cast<int64_t>(rows.size())); ++i) {
      Row row = row_of(in, rows[i]);
      row.push_back(std::to_string(i + 1));
      out.push_back(std::move(row));
    }
    start = end;
  }
  return out;
}

Batch random_topk_input(std::mt19937_64& rng, int64_t n) {
  const double specials[] = {0.0, -0.0, NAN, -NAN, INFINITY, -INFINITY, 1.5, -1.5};
  std::vector<std::vector<Cell>> cols(5);
  int64_t g = 0;
  for (int64_t r = 0; r < n; ++r) {
    cols[0].push_back(num(r));
    if (rng() % 6 == 0) g += 1 + rng() % 2;
    cols[1].push_back(g % 5 == 3 ? null() : num(g / 2));  // some runs null, some runs adjacent-equal
    const uint64_t pick = rng() % 10;
    cols[2].push_back(pick == 0 ? null() : pick < 4 ? dbl(specials[rng() % 8]) : dbl(static_cast<double>(rng() % 7)));
    cols[3].push_back(rng() % 8 == 0 ? null() : num(static_cast<int64_t>(rng() % 5) - 2));
    cols[4].push_back(rng() % 9 == 0 ? null() : text(std::string(1 + rng() % 2, static_cast<char>('a' + rng() % 3))));
  }
  return make_batch(topk_schema(), cols);
}

// ---- window_aggregate --------------------------------------------------------------------------

std::shared_ptr<const Schema> events_schema() {
  using fixtures::type;
  return fixtures::schema({{"t", type(TypeId::kInt64), false},
                          {"k", type(TypeId::kInt64), true},
                          {"s", type(TypeId::kUtf8), true},
                          {"v", type(TypeId::kInt64), true},
                          {"f", type(TypeId::kFloat64), true}});
}

std::vector<AggSpec> all_aggs() {
  return {{"n", AggKind::kCount, ""},   {"cv", AggKind::kCount, "v"}, {"sv", AggKind::kSum, "v"},
          {"sf", AggKind::kSum, "f"},   {"mf", AggKind::kMean, "f"},  {"mv", AggKind::kMean, "v"},
          {"lo", AggKind::kMin, "f"},   {"hi", AggKind::kMax, "v"},   {"fs", AggKind::kFirst, "s"},
          {"lf", AggKind::kLast, "f"}};
}

Batch random_events(std::mt19937_64& rng, int64_t n, int64_t keys) {
  std::vector<std::vector<Cell>> cols(5);
  int64_t now = static_cast<int64_t>(rng() % 20) - 10;
  for (int64_t r = 0; r < n; ++r) {
    now += static_cast<int64_t>(rng() % 4) + (rng() % 40 == 0 ? 30 : 0);  // ties and gaps
    cols[0].push_back(num(now));
    cols[1].push_back(rng() % 10 == 0 ? null() : num(static_cast<int64_t>(rng() % keys)));
    cols[2].push_back(rng() % 10 == 0 ? null() : text(std::string(1, static_cast<char>('a' + rng() % 3))));
    cols[3].push_back(rng() % 7 == 0 ? null() : num(static_cast<int64_t>(rng() % 1000) - 500));
    const uint64_t pick = rng() % 12;
    cols[4].push_back(pick == 0 ? null() : pick == 1 ? dbl(-0.0) : dbl(static_cast<double>(rng() % 10000) / 7.0 - 700));
  }
  return make_batch(events_schema(), cols);
}

// aggregate()'s result over one input: the window store the multiway designs use.
Rows aggregate_rows(const Batch& in, const window::WindowSpec& w, const std::vector<std::string>& keys) {
  window::AggregateQuery q{"t", keys, w, all_aggs(), std::nullopt};
  window::WindowAggregate agg(*in.schema(), q, 5);
  for (int64_t r = 0; r < in.num_rows(); ++r) agg.add(in, r, in.column(0).typed<int64_t>()[r]);
  agg.finish();
  Rows out;
  while (auto b = agg.take(true)) append_rows(*b, out);
  return out;
}

const window::WindowSpec kShapes[] = {{10, 3, 0}, {4, 4, 1}, {3, 7, -2}, {20, 2, 5}, {9, 6, 0}, {1, 1, 0}};

}  // namespace

// ---- top_k -------------------------------------------------------------------------------------

// KeyTable's packed path gives dense ids while the values lie close (an array indexed by value)
// and hashes them once they spread. On value sequences that widen the dense range upward and
// downward, arrive in random order, switch to hashing midway, or sit at the ends of the value
// range, each row's id is its key's rank in first-seen order (nulls one key), and less() orders
// ids as their values with null last.
TEST(key_table_ids_are_first_seen_ranks_dense_or_hashed) {
  std::mt19937_64 rng(7);
  const auto sch = fixtures::schema({{"k", fixtures::type(TypeId::kUInt64), true}});
  const auto signed_sch = fixtures::schema({{"k", fixtures::type(TypeId::kInt64), true}});
  const uint64_t top = ~uint64_t{0};
  std::vector<std::pair<std::string, std::vector<std::optional<uint64_t>>>> cases;
  auto add = [&](std::string name, auto make) {
    std::vector<std::optional<uint64_t>> v;
    make(v);
    cases.emplace_back(std::move(name), std::move(v));
  };
  add("ascending", [](auto& v) { for (uint64_t i = 0; i < 20000; ++i) v.push_back(1000 + i); });
  add("descending", [](auto& v) { for (uint64_t i = 0; i < 20000; ++i) v.push_back(1000000 - 3 * i); });
  add("shuffled small range", [&](auto& v) {
    for (int i = 0; i < 30000; ++i) v.push_back(rng() % 40000);
  });
  add("dense then spread", [&](auto& v) {
    for (int i = 0; i < 5000; ++i) v.push_back(rng() % 3000);
    for (int i = 0; i < 5000; ++i) v.push_back(rng() % 3000 + (i % 7 == 0 ? rng() : 0));
  });
  add("ends of the range and nulls", [&](auto& v) {
    for (int i = 0; i < 3000; ++i) {
      const uint64_t r = rng() % 100;
      v.push_back(r % 13 == 0 ? std::nullopt : std::optional<uint64_t>(i % 2 ? top - r : r));
    }
  });
  add("top end, then downward", [&](auto& v) {
    for (int i = 0; i < 3000; ++i) v.push_back(top - static_cast<uint64_t>(i) * 5 - rng() % 5);
  });
  for (bool is_signed : {false, true}) {
    for (const auto& [name, values] : cases) {
      const auto& s = is_signed ? signed_sch : sch;
      std::vector<ColumnBuilder> b;
      b.emplace_back(s->fields[0].type);
      for (const auto& v : values) {
        if (v) {
          b[0].append_fixed(&*v);
        } else {
          b[0].append_null();
        }
      }
      const Batch batch = finish_batch(s, b);
      KeyTable table(*s, {0});
      std::map<std::optional<uint64_t>, uint32_t> rank;
      std::vector<std::optional<uint64_t>> of_id;
      for (int64_t r = 0; r < batch.num_rows(); ++r) {
        const auto& v = values[static_cast<size_t>(r)];
        const auto [it, fresh] = rank.try_emplace(v, static_cast<uint32_t>(rank.size()));
        if (fresh) of_id.push_back(v);
        const uint32_t id = table.id(batch, r);
        if (id != it->second) {
          unit::fail(__FILE__, __LINE__, name + (is_signed ? " (int64)" : " (uint64)") + ": row " +
                                             std::to_string(r) + " id " + std::to_string(id) +
                                             ", want " + std::to_string(it->second));
          break;
        }
      }
      REQUIRE(table.size() == rank.size());
      // Signed storage orders by the value as int64.
      auto order_key = [&](const std::optional<uint64_t>& v) {
        return is_signed ? static_cast<uint64_t>(static_cast<int64_t>(*v)) + (uint64_t{1} << 63) : *v;
      };
      for (int i = 0; i < 2000 && of_id.size() > 1; ++i) {
        const auto a = static_cast<uint32_t>(rng() % of_id.size());
        const auto c = static_cast<uint32_t>(rng() % of_id.size());
        const bool want = of_id[a].has_value() && (!of_id[c] || order_key(of_id[a]) < order_key(of_id[c]));
        CHECK_EQ(table.less(a, c), want);
      }
    }
  }
}

TEST(top_k_by_hand) {
  using fixtures::type;
  auto sch = fixtures::schema({{"g", type(TypeId::kInt64), true}, {"x", type(TypeId::kFloat64), true}});
  const Batch in = make_batch(sch, {{num(1), num(1), num(1), num(1), num(2), num(2), null(), null(), num(1)},
                                    {dbl(3), dbl(5), null(), dbl(5), dbl(-0.0), dbl(0.0), dbl(NAN), dbl(1), dbl(7)}});
  // Group 1: 5 (row 1), 5 (row 3, later), 3; group 2: 0.0 above -0.0; group null: NaN above 1;
  // group 1 again is a new run.
  const auto x = [&](int64_t r, int64_t rank) {
    Row row = row_of(in, r);
    row.push_back(std::to_string(rank));
    return row;
  };
  const Rows expected{x(1, 1), x(3, 2), x(5, 1), x(4, 2), x(6, 1), x(7, 2), x(8, 1)};
  CHECK_ROWS(run_one_at_a_time(ops::make_top_k(sch, 2, "x", "g", true), in), expected);
  // Ascending, whole input: nulls last, -0.0 before 0.0, NaN last of the values.
  const Rows ascending{x(4, 1), x(5, 2), x(7, 3)};
  CHECK_ROWS(run_stateful(ops::make_top_k(sch, 3, "x", std::nullopt, false), in, {4, 5}), ascending);
  // Emission happens in the call of the row that ends the group: nothing before it.
  OperatorPtr op = ops::make_top_k(sch, 1, "x", "g", true);
  CHECK_EQ(op->process(in.slice(0, 4)).num_rows(), 0);
  const Batch out = op->process(in.slice(4, 1));
  CHECK_EQ(out.num_rows(), 1);
  CHECK_ROWS(Rows{row_of(out, 0)}, Rows{x(1, 1)});
  CHECK_EQ(op->output_schema()->fields.back().name, std::string("rank"));
  CHECK(op->kind() == ops::OpKind::kStateful);
  CHECK(op->selectivity() == ops::Selectivity::kAny);
}

TEST(top_k_per_groups_keys_equal_as_keys) {
  using fixtures::type;
  auto sch = fixtures::schema({{"g", type(TypeId::kFloat64), true}, {"x", type(TypeId::kInt64), true}});
  // -0.0 and 0.0 are one run, as are two NaNs; nulls are a run of their own.
  const Batch in = make_batch(sch, {{dbl(-0.0), dbl(0.0), dbl(NAN), dbl(NAN), null(), null()},
                                    {num(1), num(2), num(3), num(4), num(5), num(6)}});
  Rows out = run_one_at_a_time(ops::make_top_k(sch, 5, "x", "g", true), in);
  Rows ranks;
  for (const Row& r : out) ranks.push_back({r[1], r[2]});
  CHECK_ROWS(ranks, (Rows{{"2", "1"}, {"1", "2"}, {"4", "1"}, {"3", "2"}, {"6", "1"}, {"5", "2"}}));
}

TEST(top_k_random_equals_brute_force_for_every_morsel_size) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 40; ++round) {
    const Batch in = random_topk_input(rng, 1 + static_cast<int64_t>(rng() % 300));
    const char* by = std::array{"f", "v", "s"}[round % 3];
    const bool per = round % 4 != 0;
    const bool descending = round % 2 == 0;
    const int64_t k = 1 + static_cast<int64_t>(rng() % 6);
    const std::optional<std::string> per_column = per ? std::optional<std::string>("g") : std::nullopt;
    const Rows expected = brute_top_k(in, k, by, per, descending);
    CHECK_ROWS(run_one_at_a_time(ops::make_top_k(in.schema(), k, by, per_column, descending), in), expected);
    CHECK_ROWS(run_stateful(ops::make_top_k(in.schema(), k, by, per_column, descending), in, morsels(rng, in.num_rows())),
               expected);
  }
}

TEST(top_k_holds_only_the_batches_of_retained_rows) {
  std::mt19937_64 rng(5);
  const Batch in = random_topk_input(rng, 400);
  OperatorPtr op = ops::make_top_k(in.schema(), 3, "f", std::nullopt, true);
  std::vector<std::weak_ptr<const void>> owners;
  int64_t at = 0;
  for (int64_t len : morsels(rng, in.num_rows())) {
    const Batch morsel = copy_rows(in, at, len);
    owners.push_back(morsel.owner());
    CHECK_EQ(op->process(morsel).num_rows(), 0);
    at += len;
  }
  int64_t live = 0;
  for (const auto& w : owners) live += !w.expired();
  CHECK(live <= 3);
  Rows out;
  append_rows(op->finish(), out);
  CHECK_ROWS(out, brute_top_k(in, 3, "f", false, true));
  for (const auto& w : owners) CHECK(w.expired());
}

TEST(top_k_rejects_bad_arguments) {
  auto sch = topk_schema();
  CHECK_THROWS_WITH(ops::make_top_k(sch, 0, "f", std::nullopt, true), ErrorKind::kInvalidInput, "k >= 1");
  CHECK_THROWS_WITH(ops::make_top_k(sch, 2, "nope", std::nullopt, true), ErrorKind::kInvalidInput, "'nope' not found");
  CHECK_THROWS_WITH(ops::make_top_k(sch, 2, "f", "gg", true), ErrorKind::kInvalidInput, "'per' column 'gg'");
  auto ranked = fixtures::schema({{"rank", fixtures::type(TypeId::kInt64), true}});
  CHECK_THROWS_WITH(ops::make_top_k(ranked, 2, "rank", std::nullopt, true), ErrorKind::kInvalidInput,
                    "already has one");
}

// ---- window_aggregate --------------------------------------------------------------------------

TEST(keyed_window_aggregate_by_hand) {
  using fixtures::type;
  auto sch = fixtures::schema({{"t", type(TypeId::kInt32), false}, {"k", type(TypeId::kUtf8), true},
                              {"v", type(TypeId::kInt64), true}});
  // Tumbling windows of 10. Key a: t 1, 5, 12 (closes [0,10)), 31 (closes [10,20)); key b: 3, 25
  // (closes [0,10)); null key: 8. At the end: [20,30) b, [30,40) a; and [0,10) of the null key.
  const Batch in = make_batch(sch, {{num(1), num(3), num(5), num(8), num(12), num(25), num(31)},
                                    {text("a"), text("b"), text("a"), null(), text("a"), text("b"), text("a")},
                                    {num(1), num(2), num(3), num(4), num(5), num(6), num(7)}});
  OperatorPtr op = ops::make_window_aggregate(sch, "t", {10, 10, 0}, {{"n", AggKind::kCount, ""}, {"s", AggKind::kSum, "v"}},
                                              {"k"});
  CHECK(op->kind() == ops::OpKind::kPartitioned);
  CHECK(op->key_columns() == std::vector<size_t>{1});
  std::mt19937_64 rng(1);
  std::vector<int64_t> sources;
  const Rows out = run_partitioned(op, in, {7}, 2, rng, &sources);
  CHECK_ROWS(out, (Rows{{"0", "10", "'a'", "2", "4"},
                        {"0", "10", "'b'", "1", "2"},
                        {"10", "20", "'a'", "1", "5"},
                        {"0", "10", "null", "1", "4"},
                        {"20", "30", "'b'", "1", "6"},
                        {"30", "40", "'a'", "1", "7"}}));
  CHECK(sources == (std::vector<int64_t>{4, 5, 6, -1, -1, -1}));
  CHECK_EQ(op->output_schema()->to_string(),
           std::string("window_start: int32, window_end: int32, k: string, n: int64, s: int64"));
}

TEST(keyed_window_aggregate_random_partitions_and_morsels) {
  std::mt19937_64 rng(3);
  for (const window::WindowSpec& w : kShapes) {
    for (const std::vector<std::string>& keys :
         {std::vector<std::string>{"k"}, std::vector<std::string>{"s", "k"}}) {
      const Batch in = random_events(rng, 400, 6);
      const auto make = [&] { return ops::make_window_aggregate(in.schema(), "t", w, all_aggs(), keys); };
      std::vector<int64_t> sources;
      const Rows one = run_partitioned(make(), in, std::vector<int64_t>(400, 1), 1, rng, &sources);
      for (size_t partitions : {1, 3, 8}) {
        CHECK_ROWS(run_partitioned(make(), in, morsels(rng, in.num_rows()), partitions, rng), one);
      }
      // The same rows as aggregate(), and finish() in aggregate()'s order (window start, key).
      const Rows all = aggregate_rows(in, w, keys);
      Rows a = one, b = all;
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      CHECK(a == b);
      Rows at_end;
      for (size_t i = 0; i < one.size(); ++i) {
        if (sources[i] < 0) at_end.push_back(one[i]);
      }
      Rows expected_end;
      for (const Row& r : all) {
        if (std::find(at_end.begin(), at_end.end(), r) != at_end.end()) expected_end.push_back(r);
      }
      CHECK_ROWS(at_end, expected_end);
      // A row leaves with a tuple of its key at or past the window's end, and that tuple is the
      // key's first one there: the key's previous tuple lies inside the window.
      for (size_t i = 0; i < one.size(); ++i) {
        if (sources[i] < 0) continue;
        const int64_t r = sources[i];
        const Row tuple = row_of(in, r);
        CHECK(std::stoll(one[i][1]) <= std::stoll(tuple[0]));
        for (size_t c = 0; c < keys.size(); ++c) CHECK_EQ(one[i][2 + c], tuple[*in.schema()->find(keys[c])]);
        int64_t previous = r - 1;
        const auto same_key = [&](int64_t x) {
          for (const std::string& k : keys) {
            const size_t c = *in.schema()->find(k);
            if (show(in, c, x) != show(in, c, r)) return false;
          }
          return true;
        };
        while (previous >= 0 && !same_key(previous)) --previous;
        REQUIRE(previous >= 0);
        CHECK(std::stoll(one[i][1]) > std::stoll(row_of(in, previous)[0]));
      }
    }
  }
}

TEST(global_window_aggregate_equals_aggregate_for_every_morsel_size) {
  std::mt19937_64 rng(9);
  for (const window::WindowSpec& w : kShapes) {
    const Batch in = random_events(rng, 300, 4);
    const auto make = [&] { return ops::make_window_aggregate(in.schema(), "t", w, all_aggs(), {}); };
    CHECK(make()->kind() == ops::OpKind::kStateful);
    const Rows one = run_one_at_a_time(make(), in);
    CHECK_ROWS(one, aggregate_rows(in, w, {}));
    CHECK_ROWS(run_stateful(make(), in, morsels(rng, in.num_rows())), one);
  }
}

TEST(global_window_aggregate_closes_on_the_pipeline_time) {
  using fixtures::type;
  auto sch = fixtures::schema({{"t", type(TypeId::kInt64), false}, {"v", type(TypeId::kInt64), true}});
  const Batch in = make_batch(sch, {{num(0), num(4), num(5), num(11)}, {num(1), num(2), num(3), num(4)}});
  OperatorPtr op = ops::make_window_aggregate(sch, "t", {5, 5, 0}, {{"s", AggKind::kSum, "v"}}, {});
  CHECK_EQ(op->process(in.slice(0, 2)).num_rows(), 0);
  Rows out;
  append_rows(op->process(in.slice(2, 1)), out);  // t = 5 closes [0, 5)
  CHECK_ROWS(out, (Rows{{"0", "5", "3"}}));
  out.clear();
  append_rows(op->process(in.slice(3, 1)), out);  // t = 11 closes [5, 10)
  CHECK_ROWS(out, (Rows{{"5", "10", "3"}}));
  out.clear();
  append_rows(op->finish(), out);
  CHECK_ROWS(out, (Rows{{"10", "15", "4"}}));
}

TEST(window_aggregate_rejects_bad_arguments_and_time_going_back) {
  auto sch = events_schema();
  const std::vector<AggSpec> n{{"n", AggKind::kCount, ""}};
  CHECK_THROWS_WITH(ops::make_window_aggregate(sch, "time", {5, 5, 0}, n, {}), ErrorKind::kInvalidInput,
                    "time column 'time' not found");
  CHECK_THROWS_WITH(ops::make_window_aggregate(sch, "f", {5, 5, 0}, n, {}), ErrorKind::kInvalidInput,
                    "needs timestamp, date32, int32 or int64");
  CHECK_THROWS_WITH(ops::make_window_aggregate(sch, "t", {0, 5, 0}, n, {"k"}), ErrorKind::kInvalidInput,
                    "at least 1");
  CHECK_THROWS_WITH(ops::make_window_aggregate(sch, "t", {5, 5, 0}, n, {"kk"}), ErrorKind::kInvalidInput,
                    "'kk' not found");
  CHECK_THROWS_WITH(ops::make_window_aggregate(sch, "t", {5, 5, 0}, {{"x", AggKind::kSum, "s"}}, {"k"}),
                    ErrorKind::kUnsupportedType, "numeric");
  CHECK_THROWS_WITH(ops::make_window_aggregate(sch, "t", {5, 5, 0}, {{"k", AggKind::kCount, ""}}, {"k"}),
                    ErrorKind::kInvalidInput, "two columns named 'k'");

  const Batch back = make_batch(sch, {{num(5), num(3)}, {num(1), num(1)}, {null(), null()}, {null(), null()},
                                      {null(), null()}});
  OperatorPtr global = ops::make_window_aggregate(sch, "t", {5, 5, 0}, n, {});
  CHECK_THROWS_WITH(global->process(back), ErrorKind::kUnsorted, "went back from 5 to 3");
  OperatorPtr keyed = ops::make_window_aggregate(sch, "t", {5, 5, 0}, n, {"k"});
  const int64_t rows[] = {0, 1};
  CHECK_THROWS_WITH(keyed->process_rows(back, rows, 0), ErrorKind::kUnsorted, "key's previous tuple");
}

UNIT_MAIN()

// ---- session windows ---------------------------------------------------------------------------

// window_aggregate with a session gap (window/sessions.h) against a plain model: per key (null one
// key), a new session where a tuple is more than `gap` after the key's previous one; rows
// (start, last + gap, key, count, sum of t, max of t) sorted by end, then key with null last. One
// tuple at a time and in random morsels (each an owned copy dropped after its call), gaps 0 to 40.
TEST(session_window_aggregate_equals_a_plain_model) {
  std::mt19937_64 rng(31);
  const std::vector<AggSpec> aggs{{"n", AggKind::kCount, ""}, {"s", AggKind::kSum, "t"}, {"hi", AggKind::kMax, "t"}};
  for (int round = 0; round < 40; ++round) {
    const int64_t gap = round % 5 == 0 ? 0 : static_cast<int64_t>(rng() % 40);
    const Batch in = random_events(rng, 200 + static_cast<int64_t>(rng() % 200), 1 + static_cast<int64_t>(rng() % 6));
    struct Open {
      int64_t start, last, n, sum;
    };
    std::map<std::optional<int64_t>, Open> open;
    std::vector<std::tuple<int64_t, int, int64_t, Row>> closed;  // (end, null last, key, row)
    const auto close = [&](const std::optional<int64_t>& key, const Open& o) {
      const std::string k = key ? std::to_string(*key) : "null";
      closed.emplace_back(o.last + gap, key ? 0 : 1, key.value_or(0),
                          Row{std::to_string(o.start), std::to_string(o.last + gap), k, std::to_string(o.n),
                              std::to_string(o.sum), std::to_string(o.last)});
    };
    const Column& kc = in.column(1);
    for (int64_t r = 0; r < in.num_rows(); ++r) {
      const int64_t t = in.column(0).typed<int64_t>()[r];
      const std::optional<int64_t> key = kc.is_valid(r) ? std::optional<int64_t>(kc.typed<int64_t>()[r]) : std::nullopt;
      auto it = open.find(key);
      if (it != open.end() && t - it->second.last > gap) {
        close(key, it->second);
        open.erase(it);
        it = open.end();
      }
      if (it == open.end()) it = open.emplace(key, Open{t, t, 0, 0}).first;
      it->second.last = t;
      ++it->second.n;
      it->second.sum += t;
    }
    for (const auto& [key, o] : open) close(key, o);
    std::sort(closed.begin(), closed.end(), [](const auto& a, const auto& b) {
      return std::tie(std::get<0>(a), std::get<1>(a), std::get<2>(a)) < std::tie(std::get<0>(b), std::get<1>(b), std::get<2>(b));
    });
    Rows want;
    for (const auto& c : closed) want.push_back(std::get<3>(c));
    const auto make = [&] { return ops::make_window_aggregate(in.schema(), "t", {1, 1, 0}, aggs, {"k"}, false, gap); };
    CHECK(make()->kind() == ops::OpKind::kStateful);
    CHECK_ROWS(run_one_at_a_time(make(), in), want);
    CHECK_ROWS(run_stateful(make(), in, morsels(rng, in.num_rows())), want);
  }
}

TEST(session_window_aggregate_closes_on_the_pipeline_time) {
  using fixtures::type;
  auto sch = fixtures::schema({{"t", type(TypeId::kInt64), false}, {"k", type(TypeId::kInt64), true}});
  const Batch in = make_batch(sch, {{num(0), num(2), num(5), num(8), num(20)}, {num(1), num(2), num(1), num(2), num(3)}});
  OperatorPtr op = ops::make_window_aggregate(sch, "t", {1, 1, 0}, {{"n", AggKind::kCount, ""}}, {"k"}, false, 6);
  CHECK_EQ(op->process(in.slice(0, 4)).num_rows(), 0);  // key 1: 0, 5 (end 11); key 2: 2, 8 (end 14)
  Rows out;
  append_rows(op->process(in.slice(4, 1)), out);  // t = 20 passes both ends
  CHECK_ROWS(out, (Rows{{"0", "11", "1", "2"}, {"2", "14", "2", "2"}}));
  out.clear();
  append_rows(op->finish(), out);
  CHECK_ROWS(out, (Rows{{"20", "26", "3", "1"}}));
  // A query with a session gap goes to no other window store.
  window::AggregateQuery q{"t", {"k"}, {1, 1, 0}, {{"n", AggKind::kCount, ""}}, 4};
  CHECK_THROWS_WITH(window::WindowAggregate(*sch, q, 8), ErrorKind::kInvalidInput, "session windows are computed by");
}
