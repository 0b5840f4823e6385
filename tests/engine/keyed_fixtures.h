#pragma once
// The fixtures of the partitioned and parametric operators' tests (test_keyed.cpp,
// test_parametric.cpp): readers and renderers of values independent of the engine's, random
// inputs, operator drivers and the plain models of docs/pipeline.md. Each test file uses some of
// them; the rest would warn as unused.
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
#include "core/key_table.h"
#include "unit.h"

using namespace pao;
using fixtures::type;
using window::AggKind;
using window::AggSpec;

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
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
#pragma GCC diagnostic pop
