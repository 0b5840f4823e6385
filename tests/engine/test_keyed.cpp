// The partitioned operators (ops/keyed.h) and the parametric operator (ops/parametric.h).
//
// For random inputs (keys of integers, strings, floats with -0.0 and NaN, bools, and of several
// columns; nulls in keys and values; a time column of every time type; morsels that are slices
// with offsets), every operator run with 1, 3 and 16 partitions over random morsels, rows routed
// by key id % partitions and each morsel's pieces merged by source row, equals the same operator
// run one tuple at a time on one partition; and that run equals a plain model of
// docs/pipeline.md written here, which reads the data with its own readers.
// GCC 12 reports a false -Wrestrict in std::string's inlined concatenations (GCC bug 105329);
// nothing here overlaps.
#pragma GCC diagnostic ignored "-Wrestrict"
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "core/exact_sum.h"
#include "core/builder.h"
#include "core/gather.h"
#include "helpers.h"
#include "ops/keyed.h"
#include "ops/parametric.h"
#include "unit.h"
#include "core/key_table.h"

using namespace pao;
using fixtures::type;
using window::AggKind;
using window::AggSpec;

namespace {

using Row = std::vector<std::string>;
// Output rows in output order, each with the row of the whole input that produced it.
using Out = std::vector<std::pair<int64_t, Row>>;

// --- Reading and rendering values (independent of the engine's readers) ---------------------

enum class Kind { kSigned, kUnsigned, kFloat, kBool, kString };

Kind kind_of(const DataType& t) {
  switch (t.id) {
    case TypeId::kUInt8: case TypeId::kUInt16: case TypeId::kUInt32: case TypeId::kUInt64: return Kind::kUnsigned;
    case TypeId::kFloat32: case TypeId::kFloat64: return Kind::kFloat;
    case TypeId::kBool: return Kind::kBool;
    case TypeId::kUtf8: case TypeId::kLargeUtf8: return Kind::kString;
    default: return Kind::kSigned;
  }
}

int64_t read_signed(const Column& c, const DataType& t, int64_t r) {
  const int64_t i = c.offset + r;
  switch (t.byte_width()) {
    case 1: return static_cast<const int8_t*>(c.values)[i];
    case 2: return static_cast<const int16_t*>(c.values)[i];
    case 4: return static_cast<const int32_t*>(c.values)[i];
    default: return static_cast<const int64_t*>(c.values)[i];
  }
}

uint64_t read_unsigned(const Column& c, const DataType& t, int64_t r) {
  const int64_t i = c.offset + r;
  switch (t.byte_width()) {
    case 1: return static_cast<const uint8_t*>(c.values)[i];
    case 2: return static_cast<const uint16_t*>(c.values)[i];
    case 4: return static_cast<const uint32_t*>(c.values)[i];
    default: return static_cast<const uint64_t*>(c.values)[i];
  }
}

double read_float(const Column& c, const DataType& t, int64_t r) {
  const int64_t i = c.offset + r;
  return t.id == TypeId::kFloat32 ? static_cast<double>(static_cast<const float*>(c.values)[i])
                                  : static_cast<const double*>(c.values)[i];
}

bool read_bool(const Column& c, int64_t r) {
  const int64_t i = c.offset + r;
  return (static_cast<const uint8_t*>(c.values)[i / 8] >> (i % 8)) & 1;
}

std::string read_string(const Column& c, const DataType& t, int64_t r) {
  const int64_t i = c.offset + r;
  int64_t b, e;
  if (t.id == TypeId::kLargeUtf8) {
    b = static_cast<const int64_t*>(c.values)[i];
    e = static_cast<const int64_t*>(c.values)[i + 1];
  } else {
    b = static_cast<const int32_t*>(c.values)[i];
    e = static_cast<const int32_t*>(c.values)[i + 1];
  }
  return std::string(reinterpret_cast<const char*>(c.data) + b, static_cast<size_t>(e - b));
}

std::string hex(double d) {
  // NaN's sign and payload are not part of any result: which operand's NaN an addition keeps is
  // the compiler's choice.
  if (std::isnan(d)) return "nan";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", d);  // exact, and tells -0.0 from 0.0
  return buf;
}

// The value as text that tells every value apart: "null", "i-3", "u7", "f0x1.8p+0", "b1", "sab".
std::string cell(const Batch& b, size_t col, int64_t r) {
  const Column& c = b.column(col);
  const DataType& t = b.schema()->fields[col].type;
  if (!c.is_valid(r)) return "null";
  switch (kind_of(t)) {
    case Kind::kSigned: return "i" + std::to_string(read_signed(c, t, r));
    case Kind::kUnsigned: return "u" + std::to_string(read_unsigned(c, t, r));
    case Kind::kFloat: return "f" + hex(read_float(c, t, r));
    case Kind::kBool: return read_bool(c, r) ? "b1" : "b0";
    case Kind::kString: return "s" + read_string(c, t, r);
  }
  return "?";
}

Row cells(const Batch& b, int64_t r) {
  Row row;
  for (size_t c = 0; c < b.num_columns(); ++c) row.push_back(cell(b, c, r));
  return row;
}

Row plus(Row row, const Row& more) {
  row.insert(row.end(), more.begin(), more.end());
  return row;
}

size_t index_of(const Batch& b, const std::string& name) { return *b.schema()->find(name); }

int64_t time_of(const Batch& b, int64_t r) { return read_signed(b.column(0), b.schema()->fields[0].type, r); }

// --- Random inputs ----------------------------------------------------------------------------

DataType timestamp(TimeUnit unit, std::string tz) {
  DataType t = type(TypeId::kTimestamp);
  t.unit = unit;
  t.timezone = std::move(tz);
  return t;
}

// Column 0 is the time "t" of `time_type`; then keys ki, ks, kf, kb; then values.
std::shared_ptr<const Schema> data_schema(const DataType& time_type) {
  return fixtures::schema({{"t", time_type, false},
                          {"ki", type(TypeId::kInt64), true},
                          {"ks", type(TypeId::kUtf8), true},
                          {"kf", type(TypeId::kFloat64), true},
                          {"kb", type(TypeId::kBool), true},
                          {"vi", type(TypeId::kInt32), true},
                          {"vl", type(TypeId::kInt64), true},
                          {"vu", type(TypeId::kUInt64), true},
                          {"vf", type(TypeId::kFloat64), true},
                          {"vg", type(TypeId::kFloat32), true},
                          {"vs", type(TypeId::kUtf8), true},
                          {"vL", type(TypeId::kLargeUtf8), true},
                          {"vb", type(TypeId::kBool), true},
                          {"vt", timestamp(TimeUnit::kMicro, "UTC"), true},
                          {"i16", type(TypeId::kInt16), true},
                          {"u8", type(TypeId::kUInt8), true}});
}

template <class T>
T pick(std::mt19937_64& rng, const std::vector<T>& pool) {
  return pool[rng() % pool.size()];
}

// n rows sorted by time, as a slice (offset 3) of a larger batch so that every reader must honour
// offsets. Keys take few values, so keys repeat; values include the extremes and float oddities.
Batch random_input(std::mt19937_64& rng, int64_t n) {
  const DataType time_types[] = {type(TypeId::kInt64), type(TypeId::kInt32), timestamp(TimeUnit::kMilli, ""),
                                 type(TypeId::kDate32)};
  const auto schema = data_schema(time_types[rng() % 4]);
  std::vector<ColumnBuilder> b;
  for (const Field& f : schema->fields) b.emplace_back(f.type);
  const double nan = std::nan("");
  const double inf = INFINITY;
  const std::vector<std::string> key_strings{"", "a", "b", "ab", std::string("a\0b", 3), "zz", "\xc3\xa9"};
  const std::vector<double> key_floats{0.0, -0.0, 1.5, nan, -inf, 2.0};
  const std::vector<double> floats{0.0, -0.0, 1.25, -3.5, nan, inf, -inf, 1e300, 0.1, 7.0, -7.0, 3e-5};
  const std::vector<int64_t> longs{0, 1, -1, 12345, INT64_MAX, INT64_MIN, INT64_MAX - 1, -999999};
  const std::vector<uint64_t> ulongs{0, 1, 7, UINT64_MAX, uint64_t{1} << 63, 1000};
  const std::vector<int64_t> items16{-3, -1, 0, 1, 2, 5, 300};
  const std::vector<uint64_t> items8{0, 1, 200, 255};
  const int64_t key_range = 1 + static_cast<int64_t>(rng() % 6);
  int64_t now = static_cast<int64_t>(rng() % 40) - 20;
  auto random_string = [&] {
    std::string s(rng() % 4, 'a');
    for (char& ch : s) ch = static_cast<char>('a' + rng() % 3);
    return s;
  };
  for (int64_t r = 0; r < n + 3; ++r) {
    const uint64_t step = rng() % 20;
    now += step < 14 ? static_cast<int64_t>(rng() % 3) : step < 19 ? static_cast<int64_t>(3 + rng() % 6) : 40;
    b[0].append_fixed(&now);  // the low bytes: int32 and date32 take the value's own width
    for (size_t c = 1; c < b.size(); ++c) {
      if (rng() % 100 < 15) {
        b[c].append_null();
        continue;
      }
      const std::string& name = schema->fields[c].name;
      if (name == "ki") {
        const int64_t v = static_cast<int64_t>(rng() % key_range) - 1;
        b[c].append_fixed(&v);
      } else if (name == "ks") {
        b[c].append_string(pick(rng, key_strings));
      } else if (name == "kf") {
        const double v = pick(rng, key_floats);
        b[c].append_fixed(&v);
      } else if (name == "kb" || name == "vb") {
        b[c].append_bool(rng() % 2);
      } else if (name == "vi") {
        const int64_t v = static_cast<int64_t>(rng() % 2001) - 1000;
        b[c].append_fixed(&v);
      } else if (name == "vl") {
        const int64_t v = rng() % 3 ? static_cast<int64_t>(rng() % 2000001) - 1000000 : pick(rng, longs);
        b[c].append_fixed(&v);
      } else if (name == "vu") {
        const uint64_t v = pick(rng, ulongs);
        b[c].append_fixed(&v);
      } else if (name == "vf") {
        const double v = rng() % 3 ? static_cast<double>(rng() % 1000) / 8.0 - 60.0 : pick(rng, floats);
        b[c].append_fixed(&v);
      } else if (name == "vg") {
        const auto v = static_cast<float>(rng() % 3 ? static_cast<double>(rng() % 1000) / 3.0 : pick(rng, floats));
        b[c].append_fixed(&v);
      } else if (name == "vs" || name == "vL") {
        b[c].append_string(random_string());
      } else if (name == "vt") {
        const int64_t v = pick(rng, longs);
        b[c].append_fixed(&v);
      } else if (name == "i16") {
        const int64_t v = pick(rng, items16);
        b[c].append_fixed(&v);
      } else if (name == "u8") {
        const uint64_t v = pick(rng, items8);
        b[c].append_fixed(&v);
      }
    }
  }
  return finish_batch(schema, b).slice(3, n);
}

const std::vector<std::vector<std::string>> kKeyChoices{
    {"ki"}, {"ks"}, {"kf"}, {"kb"}, {"i16"}, {"ks", "ki"}, {"kf", "kb", "ks"}, {"vs", "u8"}};

std::vector<size_t> indices(const Batch& b, const std::vector<std::string>& names) {
  std::vector<size_t> out;
  for (const std::string& n : names) out.push_back(index_of(b, n));
  return out;
}

// Each row's key id, by a key table over all rows: the routing the runtime does (any hash of the
// key would do; the id is one).
std::vector<uint32_t> key_ids(const Batch& data, const std::vector<std::string>& keys) {
  KeyTable table(*data.schema(), indices(data, keys));
  std::vector<uint32_t> ids;
  for (int64_t r = 0; r < data.num_rows(); ++r) ids.push_back(table.id(data, r));
  return ids;
}

// --- Running operators ------------------------------------------------------------------------

// Checks a piece of partition rows `rows` and appends its rows (source rows made global by `base`).
void take_piece(const ops::Operator& op, const ops::Piece& piece, const std::vector<int64_t>& rows, int64_t base,
                Out& out) {
  REQUIRE(piece.batch.schema() != nullptr);
  REQUIRE(static_cast<int64_t>(piece.source_rows.size()) == piece.batch.num_rows());
  const auto diff = schema_difference(*op.output_schema(), *piece.batch.schema());
  if (diff) unit::fail(__FILE__, __LINE__, "piece schema: " + *diff);
  for (size_t i = 0; i < piece.source_rows.size(); ++i) {
    const int64_t s = piece.source_rows[i];
    CHECK(i == 0 || piece.source_rows[i - 1] <= s);
    CHECK(std::binary_search(rows.begin(), rows.end(), s));
    out.emplace_back(base + s, cells(piece.batch, static_cast<int64_t>(i)));
  }
}

// The operator on one partition, each tuple a morsel of its own.
Out one_at_a_time(const ops::OperatorPtr& op, const Batch& data) {
  op->set_partitions(1);
  Out out;
  const std::vector<int64_t> zero{0};
  for (int64_t r = 0; r < data.num_rows(); ++r) take_piece(*op, op->process_rows(data.slice(r, 1), zero, 0), zero, r, out);
  CHECK_EQ(op->finish().num_rows(), 0);
  return out;
}

// The operator on `partitions` partitions over random morsels: each morsel's rows go to partition
// key id % partitions, the partitions are called in a random order (sometimes with no rows), by
// `threads` threads (each owning the partitions p % threads), and the pieces of each morsel are
// merged by source row as the runtime does.
Out partitioned(const ops::OperatorPtr& op, const Batch& data, const std::vector<uint32_t>& ids, size_t partitions,
                size_t threads, std::mt19937_64& rng) {
  op->set_partitions(partitions);
  const int64_t n = data.num_rows();
  struct Morsel {
    int64_t start, length;
    std::vector<std::vector<int64_t>> rows;  // per partition
    std::vector<size_t> order;               // the partitions called, in calling order
    std::vector<std::optional<ops::Piece>> pieces;
  };
  std::vector<Morsel> morsels;
  for (int64_t at = 0; at < n;) {
    const uint64_t shape = rng() % 4;
    int64_t length = shape == 0 ? 1 : shape == 3 ? n : 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(1 + n / 5));
    length = std::min(length, n - at);
    Morsel m{at, length, std::vector<std::vector<int64_t>>(partitions), {}, std::vector<std::optional<ops::Piece>>(partitions)};
    for (int64_t r = 0; r < length; ++r) m.rows[ids[at + r] % partitions].push_back(r);
    for (size_t p = 0; p < partitions; ++p) {
      if (!m.rows[p].empty() || rng() % 3 == 0) m.order.push_back(p);
    }
    std::shuffle(m.order.begin(), m.order.end(), rng);
    morsels.push_back(std::move(m));
    at += length;
  }
  auto work = [&](size_t thread) {
    for (Morsel& m : morsels) {
      const Batch slice = data.slice(m.start, m.length);
      for (size_t p : m.order) {
        if (p % threads == thread) m.pieces[p] = op->process_rows(slice, m.rows[p], p);
      }
    }
  };
  if (threads <= 1) {
    work(0);
  } else {
    std::vector<std::thread> pool;
    std::vector<std::string> errors(threads);
    for (size_t t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        try {
          work(t);
        } catch (const std::exception& e) {
          errors[t] = e.what();
        }
      });
    }
    for (std::thread& t : pool) t.join();
    for (const std::string& e : errors) {
      if (!e.empty()) unit::fail(__FILE__, __LINE__, "a worker threw: " + e);
    }
  }
  Out out;
  for (Morsel& m : morsels) {
    Out rows;
    for (size_t p : m.order) {
      REQUIRE(m.pieces[p].has_value());
      if (m.rows[p].empty()) CHECK_EQ(m.pieces[p]->batch.num_rows(), 0);
      take_piece(*op, *m.pieces[p], m.rows[p], m.start, rows);
    }
    std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    out.insert(out.end(), rows.begin(), rows.end());
  }
  CHECK_EQ(op->finish().num_rows(), 0);
  return out;
}

std::string show(const std::pair<int64_t, Row>& row) {
  std::string s = "row " + std::to_string(row.first) + ":";
  for (const std::string& c : row.second) s += " " + c;
  return s;
}

// Records the first difference between two outputs.
void same(const Out& got, const Out& want, const std::string& what) {
  for (size_t i = 0; i < std::max(got.size(), want.size()); ++i) {
    if (i < got.size() && i < want.size() && got[i] == want[i]) continue;
    unit::fail(__FILE__, __LINE__,
               what + ": output row " + std::to_string(i) + " is " + (i < got.size() ? show(got[i]) : "missing") +
                   "; expected " + (i < want.size() ? show(want[i]) : "none") + " (" + std::to_string(got.size()) +
                   " rows, expected " + std::to_string(want.size()) + ")");
    return;
  }
}

int g_runs = 0;

// The differential check of one operator on one input: one tuple at a time against the model,
// then 1, 3 and 16 partitions (16 on two threads) against one tuple at a time.
void check(const std::function<ops::OperatorPtr()>& make, const Out& model, const Batch& data,
           const std::vector<uint32_t>& ids, std::mt19937_64& rng, const std::string& what) {
  const Out sequential = one_at_a_time(make(), data);
  same(sequential, model, what + ", one tuple at a time vs the model");
  for (size_t partitions : {size_t{1}, size_t{3}, size_t{16}}) {
    same(partitioned(make(), data, ids, partitions, partitions == 16 ? 2 : 1, rng), sequential,
         what + ", " + std::to_string(partitions) + " partitions vs one tuple at a time");
    ++g_runs;
  }
}

// Runs `body` on random inputs of up to 300 rows (some empty) with every key choice.
void for_inputs(uint64_t seed, int inputs,
                const std::function<void(const Batch&, const std::vector<std::string>&, const std::vector<uint32_t>&,
                                         std::mt19937_64&, const std::string&)>& body) {
  g_runs = 0;
  std::mt19937_64 rng(seed);
  for (int i = 0; i < inputs; ++i) {
    const int64_t n = i == 0 ? 0 : static_cast<int64_t>(rng() % 300);
    const Batch data = random_input(rng, n);
    for (const auto& keys : kKeyChoices) {
      std::string what = "input " + std::to_string(i) + " (" + std::to_string(n) + " rows, time " +
                         data.schema()->fields[0].type.to_string() + "), key";
      for (const std::string& k : keys) what += " " + k;
      body(data, keys, key_ids(data, keys), rng, what);
    }
  }
  std::printf("  %d partitioned runs compared\n", g_runs);
}

// --- Models -----------------------------------------------------------------------------------

Out sessionize_model(const Batch& d, const std::vector<uint32_t>& ids, int64_t gap) {
  std::map<uint32_t, std::pair<int64_t, int64_t>> state;  // key -> (last time, session)
  Out out;
  for (int64_t r = 0; r < d.num_rows(); ++r) {
    const int64_t t = time_of(d, r);
    auto [it, fresh] = state.try_emplace(ids[r], t, 0);
    if (!fresh) {
      if (t - it->second.first > gap) ++it->second.second;
      it->second.first = t;
    }
    out.emplace_back(r, plus(cells(d, r), {"i" + std::to_string(it->second.second)}));
  }
  return out;
}

Out lag_model(const Batch& d, const std::vector<uint32_t>& ids, const std::vector<std::string>& columns) {
  std::map<uint32_t, int64_t> previous;
  Out out;
  for (int64_t r = 0; r < d.num_rows(); ++r) {
    Row added;
    auto it = previous.find(ids[r]);
    for (const std::string& c : columns) added.push_back(it == previous.end() ? "null" : cell(d, index_of(d, c), it->second));
    previous[ids[r]] = r;
    out.emplace_back(r, plus(cells(d, r), added));
  }
  return out;
}

Out delta_model(const Batch& d, const std::vector<uint32_t>& ids, const std::vector<std::string>& columns) {
  std::map<uint32_t, int64_t> previous;
  Out out;
  for (int64_t r = 0; r < d.num_rows(); ++r) {
    Row added;
    auto it = previous.find(ids[r]);
    for (const std::string& name : columns) {
      const size_t ci = index_of(d, name);
      const Column& c = d.column(ci);
      const DataType& t = d.schema()->fields[ci].type;
      if (it == previous.end() || !c.is_valid(r) || !c.is_valid(it->second)) {
        added.push_back("null");
      } else if (kind_of(t) == Kind::kFloat) {
        added.push_back("f" + hex(read_float(c, t, r) - read_float(c, t, it->second)));
      } else {
        auto as_u64 = [&](int64_t row) {
          return kind_of(t) == Kind::kSigned ? static_cast<uint64_t>(read_signed(c, t, row)) : read_unsigned(c, t, row);
        };
        added.push_back("i" + std::to_string(static_cast<int64_t>(as_u64(r) - as_u64(it->second))));
      }
    }
    previous[ids[r]] = r;
    out.emplace_back(r, plus(cells(d, r), added));
  }
  return out;
}

// The total order of min and max: NaN above every number, -0.0 below 0.0.
bool float_less(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return !std::isnan(a) && std::isnan(b);
  return a < b || (a == b && std::signbit(a) && !std::signbit(b));
}

// One aggregate over the rows `rows` of `d`, recomputed from scratch.
std::string aggregate_model(const Batch& d, const AggSpec& spec, const std::vector<int64_t>& rows) {
  if (spec.column.empty()) return "i" + std::to_string(rows.size());
  const size_t ci = index_of(d, spec.column);
  const Column& c = d.column(ci);
  const DataType& t = d.schema()->fields[ci].type;
  std::vector<int64_t> values;
  for (int64_t r : rows) {
    if (c.is_valid(r)) values.push_back(r);
  }
  const Kind kind = kind_of(t);
  switch (spec.kind) {
    case AggKind::kCount:
      return "i" + std::to_string(values.size());
    case AggKind::kFirst:
      return cell(d, ci, rows.front());
    case AggKind::kLast:
      return cell(d, ci, rows.back());
    default:
      break;
  }
  if (values.empty()) return "null";
  if (spec.kind == AggKind::kSum || spec.kind == AggKind::kMean) {
    const double n = static_cast<double>(values.size());
    if (kind == Kind::kFloat) {  // the exact sum, rounded once (WideSum: test_core checks it)
      WideSum exact;
      ExactSum flags{};
      for (int64_t r : values) {
        const double x = read_float(c, t, r);
        if (std::isfinite(x)) exact.add(x); else flags.add(x);
      }
      const double s = flags.value(exact.round());
      return "f" + hex(spec.kind == AggKind::kSum ? s : s / n);
    }
    __int128 s = 0;
    uint64_t wrapped = 0;
    for (int64_t r : values) {
      const __int128 v = kind == Kind::kSigned ? __int128{read_signed(c, t, r)} : __int128{read_unsigned(c, t, r)};
      s += v;
      wrapped += static_cast<uint64_t>(v);
    }
    if (spec.kind == AggKind::kMean) return "f" + hex(static_cast<double>(s) / n);
    return kind == Kind::kSigned ? "i" + std::to_string(static_cast<int64_t>(wrapped)) : "u" + std::to_string(wrapped);
  }
  auto less = [&](int64_t a, int64_t b) {
    switch (kind) {
      case Kind::kFloat: return float_less(read_float(c, t, a), read_float(c, t, b));
      case Kind::kUnsigned: return read_unsigned(c, t, a) < read_unsigned(c, t, b);
      case Kind::kBool: return read_bool(c, a) < read_bool(c, b);
      default: return read_signed(c, t, a) < read_signed(c, t, b);
    }
  };
  int64_t best = values.front();
  for (int64_t r : values) {
    if (spec.kind == AggKind::kMin ? less(r, best) : less(best, r)) best = r;
  }
  return cell(d, ci, best);
}

Out running_model(const Batch& d, const std::vector<uint32_t>& ids, const std::vector<AggSpec>& aggs) {
  std::map<uint32_t, std::vector<int64_t>> so_far;
  Out out;
  for (int64_t r = 0; r < d.num_rows(); ++r) {
    std::vector<int64_t>& rows = so_far[ids[r]];
    rows.push_back(r);
    Row added;
    for (const AggSpec& spec : aggs) added.push_back(aggregate_model(d, spec, rows));
    out.emplace_back(r, plus(cells(d, r), added));
  }
  return out;
}

Out dedupe_model(const Batch& d, const std::vector<uint32_t>& ids, std::optional<int64_t> within) {
  std::map<uint32_t, int64_t> last_passed;
  Out out;
  for (int64_t r = 0; r < d.num_rows(); ++r) {
    const int64_t t = time_of(d, r);
    auto it = last_passed.find(ids[r]);
    if (it == last_passed.end() || (within && t - it->second > *within)) {
      last_passed[ids[r]] = t;
      out.emplace_back(r, cells(d, r));
    }
  }
  return out;
}

Out pairs_model(const Batch& d, const std::vector<uint32_t>& ids, const std::vector<std::string>& keys,
                const std::string& item, int64_t gap) {
  struct Item {
    __int128 number;
    std::string bytes;
    std::string text;  // cell()
  };
  struct State {
    int64_t last;
    std::vector<Item> items;
    std::set<std::string> seen;
  };
  const size_t ci = index_of(d, item);
  const Column& c = d.column(ci);
  const DataType& t = d.schema()->fields[ci].type;
  const Kind kind = kind_of(t);
  std::map<uint32_t, State> state;
  Out out;
  for (int64_t r = 0; r < d.num_rows(); ++r) {
    const int64_t now = time_of(d, r);
    auto [it, fresh] = state.try_emplace(ids[r], State{now, {}, {}});
    State& s = it->second;
    if (!fresh && now - s.last > gap) {
      s.items.clear();
      s.seen.clear();
    }
    s.last = now;
    if (!c.is_valid(r)) continue;
    Item x{kind == Kind::kSigned ? __int128{read_signed(c, t, r)}
           : kind == Kind::kUnsigned ? __int128{read_unsigned(c, t, r)} : 0,
           kind == Kind::kString ? read_string(c, t, r) : std::string(), cell(d, ci, r)};
    if (!s.seen.insert(x.text).second) continue;
    Row prefix;
    for (const std::string& k : keys) prefix.push_back(cell(d, index_of(d, k), r));
    prefix.push_back(cell(d, 0, r));
    for (const Item& e : s.items) {
      const bool x_less = kind == Kind::kString ? x.bytes < e.bytes : x.number < e.number;
      out.emplace_back(r, plus(prefix, {x_less ? x.text : e.text, x_less ? e.text : x.text}));
    }
    s.items.push_back(x);
  }
  return out;
}

// The keyed parametric operator: per key the running hash of its tuples, copies by selectivity.
Out parametric_model(const Batch& d, const std::vector<uint32_t>& ids, double selectivity) {
  std::map<uint32_t, uint64_t> state;
  Out out;
  for (int64_t r = 0; r < d.num_rows(); ++r) {
    const uint64_t h = ops::parametric_tuple_hash(d, r);
    auto [it, fresh] = state.try_emplace(ids[r], ops::kParametricSeed);
    it->second = ops::parametric_fold(it->second, h);
    for (int64_t k = ops::parametric_copies(h, selectivity); k > 0; --k) {
      out.emplace_back(r, plus(cells(d, r), {"u" + std::to_string(it->second)}));
    }
  }
  return out;
}

AggSpec agg(const std::string& name, AggKind kind, const std::string& column) { return AggSpec{name, kind, column}; }

}  // namespace

// --- Differential tests -------------------------------------------------------------------------

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
        // A random ascending subset of the next rows, as a partition sees a morsel.
        std::vector<int64_t> rows;
        const int64_t end = std::min<int64_t>(d.num_rows(), r + 1 + static_cast<int64_t>(rng() % 60));
        for (; r < end; ++r)
          if (rng() % 4 != 0) rows.push_back(r);
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
