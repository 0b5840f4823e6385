// Unit tests of core/expr (the expression IR, binder and evaluator) and ops/stateless (filter,
// select, with_columns).
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/builder.h"
#include "core/error.h"
#include "core/expr.h"
#include "helpers.h"
#include "ops/stateless.h"
#include "unit.h"

using namespace pao;
using fixtures::type;

namespace {

// A column of test data: its field and its values, nullopt for a null.
using Cell = std::variant<std::monostate, bool, int64_t, uint64_t, double, std::string>;
struct TestColumn {
  std::string name;
  DataType type;
  std::vector<Cell> cells;  // monostate = null
};

template <class T>
void append_as(ColumnBuilder& b, T v) {
  b.append_fixed(&v);
}

// A batch built from cells, converted to each column's type.
Batch make_batch(const std::vector<TestColumn>& cols) {
  Schema schema;
  std::vector<ColumnBuilder> builders;
  for (const TestColumn& c : cols) {
    schema.fields.push_back({c.name, c.type, true});
    ColumnBuilder b(c.type);
    for (const Cell& cell : c.cells) {
      if (std::holds_alternative<std::monostate>(cell)) {
        b.append_null();
      } else if (const bool* v = std::get_if<bool>(&cell)) {
        b.append_bool(*v);
      } else if (const std::string* s = std::get_if<std::string>(&cell)) {
        b.append_string(*s);
      } else if (c.type.id == TypeId::kFloat64) {
        append_as<double>(b, std::get<double>(cell));
      } else if (c.type.id == TypeId::kFloat32) {
        append_as<float>(b, static_cast<float>(std::get<double>(cell)));
      } else if (const uint64_t* u = std::get_if<uint64_t>(&cell)) {
        b.append_fixed(u);
      } else {
        const int64_t v = std::get<int64_t>(cell);
        b.append_fixed(&v);  // the low bytes: little-endian
      }
    }
    builders.push_back(std::move(b));
  }
  return finish_batch(std::make_shared<const Schema>(std::move(schema)), builders);
}

DataType timestamp(TimeUnit unit, std::string tz = "") {
  DataType t = type(TypeId::kTimestamp);
  t.unit = unit;
  t.timezone = std::move(tz);
  return t;
}

// Values of a computed column as cells (ints as int64, floats as double).
std::vector<Cell> cells(const Value& v) {
  std::vector<Cell> out;
  for (int64_t i = 0; i < v.length; ++i) {
    const Column& c = v.column;
    if (!c.is_valid(i)) {
      out.emplace_back();
      continue;
    }
    const int64_t at = c.offset + i;
    switch (v.type.id) {
      case TypeId::kBool: out.emplace_back(bool((static_cast<const uint8_t*>(c.values)[at >> 3] >> (at & 7)) & 1)); break;
      case TypeId::kInt8: out.emplace_back(int64_t(c.typed<int8_t>()[i])); break;
      case TypeId::kInt16: out.emplace_back(int64_t(c.typed<int16_t>()[i])); break;
      case TypeId::kInt32:
      case TypeId::kDate32: out.emplace_back(int64_t(c.typed<int32_t>()[i])); break;
      case TypeId::kInt64:
      case TypeId::kTimestamp: out.emplace_back(c.typed<int64_t>()[i]); break;
      case TypeId::kUInt8: out.emplace_back(int64_t(c.typed<uint8_t>()[i])); break;
      case TypeId::kUInt16: out.emplace_back(int64_t(c.typed<uint16_t>()[i])); break;
      case TypeId::kUInt32: out.emplace_back(int64_t(c.typed<uint32_t>()[i])); break;
      case TypeId::kUInt64: out.emplace_back(c.typed<uint64_t>()[i]); break;
      case TypeId::kFloat32: out.emplace_back(double(c.typed<float>()[i])); break;
      case TypeId::kFloat64: out.emplace_back(c.typed<double>()[i]); break;
      case TypeId::kUtf8: {
        const int32_t* o = c.typed<int32_t>();
        out.emplace_back(std::string(reinterpret_cast<const char*>(c.data) + o[i], size_t(o[i + 1] - o[i])));
        break;
      }
      case TypeId::kLargeUtf8: {
        const int64_t* o = c.typed<int64_t>();
        out.emplace_back(std::string(reinterpret_cast<const char*>(c.data) + o[i], size_t(o[i + 1] - o[i])));
        break;
      }
    }
  }
  return out;
}

std::string show(const std::vector<Cell>& cs) {
  std::string out = "[";
  for (const Cell& c : cs) {
    if (out.size() > 1) out += ", ";
    if (std::holds_alternative<std::monostate>(c)) out += "null";
    else if (const bool* b = std::get_if<bool>(&c)) out += *b ? "true" : "false";
    else if (const int64_t* i = std::get_if<int64_t>(&c)) out += std::to_string(*i);
    else if (const uint64_t* u = std::get_if<uint64_t>(&c)) out += std::to_string(*u) + "u";
    else if (const double* d = std::get_if<double>(&c)) out += std::to_string(*d);
    else out += "\"" + std::get<std::string>(c) + "\"";
  }
  return out + "]";
}

// Evaluates `e` over `b` and renders the result, e.g. "[1, null, 3]".
std::string eval_text(const ExprPtr& e, const Batch& b) { return show(cells(evaluate(bind(*e, *b.schema()), b))); }

ExprPtr bin(Op op, ExprPtr a, ExprPtr b) { return call(op, {std::move(a), std::move(b)}); }

const Cell N{};  // null

Batch numbers() {
  return make_batch({
      {"i32", type(TypeId::kInt32), {int64_t{1}, int64_t{-7}, N, int64_t{7}, int64_t{0}}},
      {"i64", type(TypeId::kInt64), {int64_t{2}, int64_t{2}, int64_t{3}, N, int64_t{-2}}},
      {"u8", type(TypeId::kUInt8), {int64_t{200}, int64_t{100}, N, int64_t{0}, int64_t{255}}},
      {"f64", type(TypeId::kFloat64), {1.5, -7.0, N, 7.5, 0.0}},
      {"b", type(TypeId::kBool), {true, false, N, true, false}},
      {"s", type(TypeId::kUtf8), {std::string("apple"), std::string("banana"), N, std::string(""), std::string("grape")}},
  });
}

}  // namespace

TEST(rendering_matches_python) {
  CHECK_EQ(to_string(*bin(Op::kAdd, col("a"), lit(int64_t{1}))), std::string("(col(\"a\") + lit(1))"));
  CHECK_EQ(to_string(*call(Op::kNot, {bin(Op::kAnd, col("x"), lit(true))})),
           std::string("(~(col(\"x\") & lit(True)))"));
  CHECK_EQ(to_string(*cast(col("a"), type(TypeId::kInt32))), std::string("col(\"a\").cast(\"int32\")"));
  CHECK_EQ(to_string(*lit(std::monostate{}, type(TypeId::kInt64))), std::string("lit(None, \"int64\")"));
  CHECK_EQ(to_string(*contains(col("s"), "a\"b\\")), std::string("col(\"s\").str.contains(\"a\\\"b\\\\\")"));
  CHECK_EQ(to_string(*starts_with(col("s"), "x\n")), std::string("col(\"s\").str.starts_with(\"x\\n\")"));
  CHECK_EQ(to_string(*call(Op::kIsNull, {col("a")})), std::string("col(\"a\").is_null()"));
  CHECK_EQ(to_string(*call(Op::kNeg, {col("a")})), std::string("(-col(\"a\"))"));
  // floats as Python's repr
  CHECK_EQ(to_string(*lit(1.0)), std::string("lit(1.0)"));
  CHECK_EQ(to_string(*lit(0.1)), std::string("lit(0.1)"));
  CHECK_EQ(to_string(*lit(1e16)), std::string("lit(1e+16)"));
  CHECK_EQ(to_string(*lit(1e15)), std::string("lit(1000000000000000.0)"));
  CHECK_EQ(to_string(*lit(1.5e-5)), std::string("lit(1.5e-05)"));
  CHECK_EQ(to_string(*lit(-0.0)), std::string("lit(-0.0)"));
  CHECK_EQ(to_string(*lit(0.0001)), std::string("lit(0.0001)"));
  CHECK_EQ(to_string(*lit(std::numeric_limits<double>::infinity())), std::string("lit(inf)"));
  CHECK_EQ(to_string(*bin(Op::kFloorDiv, col("a"), lit(std::string("x")))),
           std::string("(col(\"a\") // lit(\"x\"))"));
}

TEST(op_names_round_trip) {
  for (int i = 0; i <= static_cast<int>(Op::kOr); ++i) {
    const auto op = static_cast<Op>(i);
    CHECK(op_from_name(op_name(op)) == op);
  }
  CHECK(!op_from_name("pow"));
  CHECK_THROWS_WITH(call(Op::kAdd, {col("a")}), ErrorKind::kInvalidInput, "takes 2 argument(s), got 1");
}

TEST(type_names_parse) {
  CHECK(parse_type_name("double") == type(TypeId::kFloat64));
  CHECK(parse_type_name("float32") == type(TypeId::kFloat32));
  CHECK(parse_type_name("large_string") == type(TypeId::kLargeUtf8));
  CHECK(parse_type_name("timestamp[ms, tz=UTC]") == timestamp(TimeUnit::kMilli, "UTC"));
  CHECK(parse_type_name("timestamp[ns]") == timestamp(TimeUnit::kNano));
  CHECK(!parse_type_name("timestamp[xs]"));
  CHECK(!parse_type_name("timestamp["));
  CHECK(!parse_type_name(""));
  CHECK(!parse_type_name("decimal128(10, 2)"));
}

TEST(column_reference_is_zero_copy) {
  Batch b = numbers();
  Value v = evaluate(bind(*col("i64"), *b.schema()), b);
  CHECK_EQ(v.column.values, b.column(1).values);
  CHECK_EQ(v.owner.get(), b.owner().get());
  CHECK(v.type == type(TypeId::kInt64));
}

TEST(arithmetic_with_nulls_and_promotion) {
  Batch b = numbers();
  CHECK_EQ(eval_text(bin(Op::kAdd, col("i32"), col("i64")), b), std::string("[3, -5, null, null, -2]"));
  CHECK(bind(*bin(Op::kAdd, col("i32"), col("i64")), *b.schema()).type() == type(TypeId::kInt64));
  CHECK_EQ(eval_text(bin(Op::kMul, lit(int64_t{2}), col("i32")), b), std::string("[2, -14, null, 14, 0]"));
  CHECK_EQ(eval_text(bin(Op::kSub, col("i32"), lit(int64_t{1})), b), std::string("[0, -8, null, 6, -1]"));
  CHECK_EQ(eval_text(call(Op::kNeg, {col("f64")}), b), show({-1.5, 7.0, N, -7.5, -0.0}));
  // a null scalar makes every row null
  CHECK_EQ(eval_text(bin(Op::kAdd, col("i32"), lit(std::monostate{})), b), std::string("[null, null, null, null, null]"));
  CHECK(bind(*bin(Op::kAdd, lit(std::monostate{}), col("u8")), *b.schema()).type() == type(TypeId::kUInt8));
  // literals only: computed once, broadcast
  CHECK_EQ(eval_text(bin(Op::kAdd, lit(int64_t{2}), lit(int64_t{3})), b), std::string("[5, 5, 5, 5, 5]"));
}

TEST(promotion_rule) {
  auto promoted = [](TypeId x, TypeId y) {
    Schema s{{{"x", type(x)}, {"y", type(y)}}};
    return bind(*bin(Op::kAdd, col("x"), col("y")), s).type().id;
  };
  CHECK(promoted(TypeId::kInt8, TypeId::kUInt8) == TypeId::kInt16);
  CHECK(promoted(TypeId::kUInt8, TypeId::kInt16) == TypeId::kInt16);
  CHECK(promoted(TypeId::kInt32, TypeId::kUInt32) == TypeId::kInt64);
  CHECK(promoted(TypeId::kInt64, TypeId::kUInt64) == TypeId::kInt64);
  CHECK(promoted(TypeId::kUInt16, TypeId::kUInt32) == TypeId::kUInt32);
  CHECK(promoted(TypeId::kInt16, TypeId::kInt8) == TypeId::kInt16);
  CHECK(promoted(TypeId::kFloat32, TypeId::kFloat32) == TypeId::kFloat32);
  CHECK(promoted(TypeId::kFloat32, TypeId::kInt8) == TypeId::kFloat64);
  CHECK(promoted(TypeId::kUInt64, TypeId::kFloat64) == TypeId::kFloat64);
  Schema s{{{"x", type(TypeId::kInt8)}, {"y", type(TypeId::kInt8)}}};
  CHECK(bind(*bin(Op::kDiv, col("x"), col("y")), s).type().id == TypeId::kFloat64);
}

TEST(integer_arithmetic_wraps) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  Batch b = make_batch({{"i8", type(TypeId::kInt8), {int64_t{100}, int64_t{-128}}},
                        {"i64", type(TypeId::kInt64), {kMax, kMin}},
                        {"u8", type(TypeId::kUInt8), {int64_t{0}, int64_t{255}}}});
  CHECK_EQ(eval_text(bin(Op::kAdd, col("i8"), col("i8")), b), std::string("[-56, 0]"));
  CHECK_EQ(eval_text(bin(Op::kMul, col("i8"), col("i8")), b), std::string("[16, 0]"));
  CHECK_EQ(eval_text(call(Op::kNeg, {col("i8")}), b), std::string("[-100, -128]"));
  CHECK_EQ(eval_text(call(Op::kNeg, {col("u8")}), b), std::string("[0, 1]"));
  CHECK_EQ(eval_text(bin(Op::kAdd, col("i64"), lit(int64_t{1})), b), show({kMin, kMin + 1}));
  CHECK_EQ(eval_text(bin(Op::kFloorDiv, col("i64"), lit(int64_t{-1})), b), show({-kMax, kMin}));
  CHECK_EQ(eval_text(bin(Op::kMod, col("i64"), lit(int64_t{-1})), b), std::string("[0, 0]"));
  Schema s8{{{"i8", type(TypeId::kInt8)}, {"j8", type(TypeId::kInt8)}}};
  Batch c = make_batch({{"i8", type(TypeId::kInt8), {int64_t{-128}}}, {"j8", type(TypeId::kInt8), {int64_t{-1}}}});
  CHECK_EQ(eval_text(bin(Op::kFloorDiv, col("i8"), col("j8")), c), std::string("[-128]"));
}

TEST(floor_division_and_modulo_take_the_divisors_sign) {
  Batch b = make_batch({{"a", type(TypeId::kInt32), {int64_t{-7}, int64_t{7}, int64_t{7}, int64_t{-7}, int64_t{6}}},
                        {"d", type(TypeId::kInt32), {int64_t{2}, int64_t{-2}, int64_t{2}, int64_t{-2}, int64_t{3}}},
                        {"x", type(TypeId::kFloat64), {-7.0, 7.5, 1.0, -0.0, 5.0}},
                        {"y", type(TypeId::kFloat64), {2.0, -2.0, 0.1, 3.0, 0.0}}});
  CHECK_EQ(eval_text(bin(Op::kFloorDiv, col("a"), col("d")), b), std::string("[-4, -4, 3, 3, 2]"));
  CHECK_EQ(eval_text(bin(Op::kMod, col("a"), col("d")), b), std::string("[1, -1, 1, -1, 0]"));
  const std::vector<Cell> q = cells(evaluate(bind(*bin(Op::kFloorDiv, col("x"), col("y")), *b.schema()), b));
  CHECK_EQ(std::get<double>(q[0]), -4.0);
  CHECK_EQ(std::get<double>(q[1]), -4.0);
  CHECK_EQ(std::get<double>(q[2]), 9.0);  // as Python: 1.0 // 0.1 == 9.0
  CHECK(std::signbit(std::get<double>(q[3])));
  CHECK(std::isinf(std::get<double>(q[4])));
  const std::vector<Cell> r = cells(evaluate(bind(*bin(Op::kMod, col("x"), col("y")), *b.schema()), b));
  CHECK_EQ(std::get<double>(r[0]), 1.0);
  CHECK_EQ(std::get<double>(r[1]), -0.5);
  CHECK(std::isnan(std::get<double>(r[4])));
  // true division: always double, x / 0 is inf
  CHECK_EQ(eval_text(bin(Op::kDiv, col("a"), col("d")), b), show({-3.5, -3.5, 3.5, 3.5, 2.0}));
  CHECK_EQ(eval_text(bin(Op::kDiv, col("a"), lit(int64_t{0})), b),
           show({-HUGE_VAL, HUGE_VAL, HUGE_VAL, -HUGE_VAL, HUGE_VAL}));
}

TEST(integer_division_by_zero_names_the_expression) {
  Batch b = make_batch({{"a", type(TypeId::kInt64), {int64_t{1}, int64_t{2}, int64_t{3}}},
                        {"d", type(TypeId::kInt64), {int64_t{1}, N, int64_t{0}}}});
  CHECK_THROWS_WITH(evaluate(bind(*bin(Op::kFloorDiv, col("a"), col("d")), *b.schema()), b), ErrorKind::kInvalidInput,
                    "integer division by zero in (col(\"a\") // col(\"d\"))");
  // The row of the batch travels with the error, for the runtime to name within the input.
  try {
    evaluate(bind(*bin(Op::kFloorDiv, col("a"), col("d")), *b.schema()), b);
    CHECK(false);
  } catch (const Error& e) {
    CHECK_EQ(e.row(), 2);
  }
  CHECK_THROWS_WITH(evaluate(bind(*bin(Op::kMod, col("a"), lit(int64_t{0})), *b.schema()), b), ErrorKind::kInvalidInput,
                    "(col(\"a\") % lit(0))");
  // a zero divisor in a null row is no error
  Batch c = b.slice(0, 2);
  CHECK_EQ(eval_text(bin(Op::kFloorDiv, col("a"), col("d")), c), std::string("[1, null]"));
  Batch z = make_batch(
      {{"a", type(TypeId::kInt64), {N, int64_t{4}}}, {"d", type(TypeId::kInt64), {int64_t{0}, int64_t{2}}}});
  CHECK_EQ(eval_text(bin(Op::kMod, col("a"), col("d")), z), std::string("[null, 0]"));
}

TEST(comparisons) {
  Batch b = numbers();
  CHECK_EQ(eval_text(bin(Op::kLt, col("i32"), col("i64")), b), std::string("[true, true, null, null, false]"));
  CHECK_EQ(eval_text(bin(Op::kGe, lit(int64_t{1}), col("i32")), b), std::string("[true, true, null, false, true]"));
  CHECK_EQ(eval_text(bin(Op::kEq, col("u8"), lit(int64_t{200})), b), std::string("[true, false, null, false, false]"));
  CHECK_EQ(eval_text(bin(Op::kNe, col("f64"), col("i32")), b), std::string("[true, false, null, true, false]"));
  CHECK_EQ(eval_text(bin(Op::kGt, col("s"), lit(std::string("b"))), b), std::string("[false, true, null, false, true]"));
  CHECK_EQ(eval_text(bin(Op::kLe, col("b"), lit(false)), b), std::string("[false, true, null, false, true]"));
  CHECK_EQ(eval_text(bin(Op::kLt, col("b"), lit(true)), b), std::string("[false, true, null, false, true]"));
  CHECK_EQ(eval_text(bin(Op::kEq, col("b"), col("b")), b), std::string("[true, true, null, true, true]"));
  // NaN compares false except with !=
  Batch n = make_batch({{"x", type(TypeId::kFloat64), {std::nan("")}}});
  CHECK_EQ(eval_text(bin(Op::kEq, col("x"), col("x")), n), std::string("[false]"));
  CHECK_EQ(eval_text(bin(Op::kNe, col("x"), col("x")), n), std::string("[true]"));
}

TEST(strings_of_both_offset_widths) {
  Batch b = make_batch({{"s", type(TypeId::kUtf8), {std::string("apple"), N, std::string("pineapple"), std::string("")}},
                        {"l", type(TypeId::kLargeUtf8),
                         {std::string("apple"), std::string("x"), std::string("pine"), std::string("")}}});
  CHECK_EQ(eval_text(contains(col("s"), "app"), b), std::string("[true, null, true, false]"));
  CHECK_EQ(eval_text(contains(col("l"), ""), b), std::string("[true, true, true, true]"));
  CHECK_EQ(eval_text(starts_with(col("s"), "pine"), b), std::string("[false, null, true, false]"));
  CHECK_EQ(eval_text(starts_with(col("l"), "pine"), b), std::string("[false, false, true, false]"));
  CHECK_EQ(eval_text(bin(Op::kEq, col("s"), col("l")), b), std::string("[true, null, false, true]"));
  CHECK_EQ(eval_text(bin(Op::kLt, col("l"), col("s")), b), std::string("[false, null, true, false]"));
  CHECK_EQ(eval_text(contains(lit(std::string("abc")), "b"), b), std::string("[true, true, true, true]"));
  CHECK_THROWS_WITH(bind(*contains(col("s"), "x"), Schema{{{"s", type(TypeId::kInt32)}}}), ErrorKind::kUnsupportedType,
                    "str.contains needs a string, got int32 in col(\"s\").str.contains(\"x\")");
}

TEST(kleene_logic) {
  // every pair of (true, false, null)
  Batch b = make_batch({{"p", type(TypeId::kBool), {true, true, true, false, false, false, N, N, N}},
                        {"q", type(TypeId::kBool), {true, false, N, true, false, N, true, false, N}}});
  CHECK_EQ(eval_text(bin(Op::kAnd, col("p"), col("q")), b),
           std::string("[true, false, null, false, false, false, null, false, null]"));
  CHECK_EQ(eval_text(bin(Op::kOr, col("p"), col("q")), b),
           std::string("[true, true, true, true, false, null, true, null, null]"));
  CHECK_EQ(eval_text(call(Op::kNot, {col("q")}), b), std::string("[false, true, null, false, true, null, false, true, null]"));
  // scalars on either side, nulls included
  const std::string all_false = "[false, false, false, false, false, false, false, false, false]";
  CHECK_EQ(eval_text(bin(Op::kAnd, col("p"), lit(false)), b), all_false);
  CHECK_EQ(eval_text(bin(Op::kOr, lit(std::monostate{}), col("p")), b),
           std::string("[true, true, true, null, null, null, null, null, null]"));
  CHECK_EQ(eval_text(bin(Op::kAnd, lit(std::monostate{}), lit(false)), b), all_false);
  CHECK_EQ(eval_text(call(Op::kIsNull, {col("q")}), b),
           std::string("[false, false, true, false, false, true, false, false, true]"));
  CHECK_EQ(eval_text(call(Op::kIsNotNull, {lit(std::monostate{})}), b.slice(0, 2)), std::string("[false, false]"));
}

TEST(bitmaps_at_unaligned_offsets) {
  // 150 rows: validity and values cross words; slices start off byte boundaries.
  std::vector<Cell> p, q;
  for (int i = 0; i < 150; ++i) {
    p.push_back(i % 7 == 0 ? N : Cell(i % 3 == 0));
    q.push_back(i % 11 == 0 ? N : Cell(i % 2 == 0));
  }
  Batch whole = make_batch({{"p", type(TypeId::kBool), p}, {"q", type(TypeId::kBool), q}});
  for (int64_t start : {0, 3, 8, 13}) {
    Batch b = whole.slice(start, 150 - start - 2);
    const ExprPtr and_not = bin(Op::kAnd, col("p"), call(Op::kNot, {col("q")}));
    const std::vector<Cell> got = cells(evaluate(bind(*and_not, *b.schema()), b));
    const std::vector<Cell> eq = cells(evaluate(bind(*bin(Op::kEq, col("p"), col("q")), *b.schema()), b));
    for (int64_t i = 0; i < b.num_rows(); ++i) {
      const Cell& x = p[start + i];
      const Cell& y = q[start + i];
      // Kleene and with not
      Cell want;
      const bool xf = std::holds_alternative<bool>(x) && !std::get<bool>(x);
      const bool yt = std::holds_alternative<bool>(y) && std::get<bool>(y);
      if (xf || yt) want = false;
      else if (std::holds_alternative<bool>(x) && std::holds_alternative<bool>(y)) want = true;
      CHECK(got[i] == want);
      Cell want_eq;
      if (std::holds_alternative<bool>(x) && std::holds_alternative<bool>(y)) {
        want_eq = std::get<bool>(x) == std::get<bool>(y);
      }
      CHECK(eq[i] == want_eq);
    }
    // true_bits agrees with a row-by-row scan: set where the value is true, clear past the rows
    Value v = evaluate(bind(*col("p"), *b.schema()), b);
    BatchMemory scratch;
    const uint64_t* bits = true_bits(v, scratch);
    for (int64_t i = 0; i < (b.num_rows() + 63) / 64 * 64; ++i) {
      const bool on = i < b.num_rows() && std::holds_alternative<bool>(p[start + i]) && std::get<bool>(p[start + i]);
      CHECK_EQ(((bits[i / 64] >> (i % 64)) & 1) != 0, on);
    }
  }
}

TEST(casts) {
  Batch b = make_batch({{"f", type(TypeId::kFloat64), {1.7, -1.7, N, 0.0}},
                        {"i", type(TypeId::kInt64), {int64_t{300}, int64_t{-1}, N, int64_t{0}}},
                        {"s", type(TypeId::kUtf8), {std::string("12"), std::string("-3"), N, std::string("+4")}},
                        {"b", type(TypeId::kBool), {true, false, N, true}}});
  CHECK_EQ(eval_text(cast(col("f"), type(TypeId::kInt32)), b), std::string("[1, -1, null, 0]"));
  CHECK_EQ(eval_text(cast(col("i"), type(TypeId::kInt8)), b), std::string("[44, -1, null, 0]"));
  CHECK_EQ(eval_text(cast(col("i"), type(TypeId::kUInt8)), b), std::string("[44, 255, null, 0]"));
  CHECK_EQ(eval_text(cast(col("i"), type(TypeId::kBool)), b), std::string("[true, true, null, false]"));
  CHECK_EQ(eval_text(cast(col("b"), type(TypeId::kFloat64)), b), show({1.0, 0.0, N, 1.0}));
  CHECK_EQ(eval_text(cast(col("s"), type(TypeId::kInt16)), b), std::string("[12, -3, null, 4]"));
  CHECK_EQ(eval_text(cast(col("f"), type(TypeId::kUtf8)), b), std::string("[\"1.7\", \"-1.7\", null, \"0.0\"]"));
  CHECK_EQ(eval_text(cast(col("i"), type(TypeId::kLargeUtf8)), b), std::string("[\"300\", \"-1\", null, \"0\"]"));
  CHECK_EQ(eval_text(cast(col("b"), type(TypeId::kUtf8)), b), std::string("[\"true\", \"false\", null, \"true\"]"));
  CHECK_EQ(eval_text(cast(col("s"), type(TypeId::kLargeUtf8)), b), std::string("[\"12\", \"-3\", null, \"+4\"]"));
  CHECK_EQ(eval_text(cast(lit(std::monostate{}), type(TypeId::kInt32)), b.slice(0, 1)), std::string("[null]"));
  // failures name the expression, the value and the row
  Batch big = make_batch({{"f", type(TypeId::kFloat64), {1.0, 3e9, std::nan("")}},
                          {"s", type(TypeId::kUtf8), {std::string("1"), std::string("x"), N}}});
  CHECK_THROWS_WITH(evaluate(bind(*cast(col("f"), type(TypeId::kInt32)), *big.schema()), big), ErrorKind::kInvalidInput,
                    "cannot cast 3000000000.0 to int32 in col(\"f\").cast(\"int32\")");
  CHECK_THROWS_WITH(evaluate(bind(*cast(col("f"), type(TypeId::kInt64)), *big.schema()), big.slice(2, 1)),
                    ErrorKind::kInvalidInput, "cannot cast nan to int64");
  CHECK_THROWS_WITH(evaluate(bind(*cast(col("s"), type(TypeId::kFloat64)), *big.schema()), big), ErrorKind::kInvalidInput,
                    "cannot parse \"x\" as double");
  CHECK_THROWS_WITH(bind(*cast(col("b"), type(TypeId::kDate32)), *b.schema()), ErrorKind::kUnsupportedType,
                    "cannot cast bool to date32[day] in col(\"b\").cast(\"date32[day]\")");
}

TEST(timestamps) {
  const DataType ms = timestamp(TimeUnit::kMilli);
  Batch b = make_batch({{"t", ms, {int64_t{1000}, int64_t{2500}, N}},
                        {"u", ms, {int64_t{500}, int64_t{2500}, int64_t{0}}},
                        {"z", timestamp(TimeUnit::kMilli, "UTC"), {int64_t{1}, int64_t{2}, int64_t{3}}},
                        {"d", type(TypeId::kDate32), {int64_t{1}, int64_t{2}, int64_t{3}}}});
  CHECK_EQ(eval_text(bin(Op::kLt, col("u"), col("t")), b), std::string("[true, false, null]"));
  CHECK_EQ(eval_text(bin(Op::kGe, col("t"), lit(int64_t{2000})), b), std::string("[false, true, null]"));
  CHECK_EQ(eval_text(bin(Op::kSub, col("t"), col("u")), b), std::string("[500, 0, null]"));
  CHECK(bind(*bin(Op::kSub, col("t"), col("u")), *b.schema()).type() == type(TypeId::kInt64));
  CHECK(bind(*bin(Op::kAdd, lit(int64_t{5}), col("t")), *b.schema()).type() == ms);
  CHECK_EQ(eval_text(bin(Op::kAdd, col("t"), lit(int64_t{5})), b), std::string("[1005, 2505, null]"));
  CHECK_EQ(eval_text(bin(Op::kEq, col("d"), lit(int64_t{2})), b), std::string("[false, true, false]"));
  CHECK_EQ(eval_text(cast(col("t"), timestamp(TimeUnit::kSecond)), b), std::string("[1, 2, null]"));
  CHECK_EQ(eval_text(cast(col("t"), timestamp(TimeUnit::kMicro)), b), std::string("[1000000, 2500000, null]"));
  CHECK_EQ(eval_text(cast(col("d"), type(TypeId::kInt64)), b), std::string("[1, 2, 3]"));
  CHECK_THROWS_WITH(bind(*bin(Op::kLt, col("t"), col("z")), *b.schema()), ErrorKind::kUnsupportedType,
                    "cannot apply < to timestamp[ms] and timestamp[ms, tz=UTC] in (col(\"t\") < col(\"z\"))");
  CHECK_THROWS_WITH(bind(*bin(Op::kAdd, col("t"), col("u")), *b.schema()), ErrorKind::kUnsupportedType,
                    "cannot apply + to timestamp[ms] and timestamp[ms]");
  CHECK_THROWS_WITH(bind(*bin(Op::kLt, col("t"), col("d")), *b.schema()), ErrorKind::kUnsupportedType, "date32[day]");
}

TEST(bind_errors_name_columns_expressions_and_types) {
  Batch b = numbers();
  CHECK_THROWS_WITH(bind(*bin(Op::kAdd, col("nope"), lit(int64_t{1})), *b.schema()), ErrorKind::kInvalidInput,
                    "unknown column 'nope' in col(\"nope\"); available columns: i32, i64, u8, f64, b, s");
  CHECK_THROWS_WITH(bind(*bin(Op::kAdd, col("i32"), col("s")), *b.schema()), ErrorKind::kUnsupportedType,
                    "cannot apply + to int32 and string in (col(\"i32\") + col(\"s\"))");
  CHECK_THROWS_WITH(bind(*bin(Op::kAnd, col("b"), col("i32")), *b.schema()), ErrorKind::kUnsupportedType,
                    "cannot apply & to bool and int32 in (col(\"b\") & col(\"i32\"))");
  CHECK_THROWS_WITH(bind(*call(Op::kNot, {col("i32")}), *b.schema()), ErrorKind::kUnsupportedType,
                    "cannot apply ~ to int32 in (~col(\"i32\"))");
  CHECK_THROWS_WITH(bind(*call(Op::kNeg, {col("b")}), *b.schema()), ErrorKind::kUnsupportedType, "cannot apply - to bool");
  CHECK_THROWS_WITH(bind(*bin(Op::kEq, col("s"), lit(int64_t{1})), *b.schema()), ErrorKind::kUnsupportedType,
                    "cannot apply == to string and int64 in (col(\"s\") == lit(1))");
  CHECK_THROWS_WITH(bind(*lit(std::monostate{}), *b.schema()), ErrorKind::kUnsupportedType, "cannot tell the type of lit(None)");
  CHECK_THROWS_WITH(bind(*lit(int64_t{300}, type(TypeId::kInt8)), *b.schema()), ErrorKind::kInvalidInput,
                    "lit(300, \"int8\"): 300 does not fit int8");
  CHECK_THROWS_WITH(bind(*lit(std::string("x"), type(TypeId::kInt8)), *b.schema()), ErrorKind::kUnsupportedType,
                    "a string literal cannot have type int8");
  CHECK(bind(*lit(int64_t{7}, timestamp(TimeUnit::kSecond)), *b.schema()).type() == timestamp(TimeUnit::kSecond));
  CHECK(bind(*lit(uint64_t{1} << 63), *b.schema()).type() == type(TypeId::kUInt64));
}

TEST(filter_slices_one_run_and_gathers_several) {
  auto schema = fixtures::schema({{"t", type(TypeId::kInt64)}, {"s", type(TypeId::kUtf8)}});
  Batch b = make_batch({{"t", type(TypeId::kInt64), {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, N}},
                        {"s", type(TypeId::kUtf8), {std::string("a"), std::string("bb"), N, std::string("d"), std::string("e")}}})
                .with_schema(schema);
  ops::OperatorPtr one = ops::make_filter(schema, bin(Op::kGe, col("t"), lit(int64_t{2})));
  CHECK(one->kind() == ops::OpKind::kStateless);
  CHECK(one->selectivity() == ops::Selectivity::kAtMostOne);
  CHECK_EQ(one->name(), std::string("filter"));
  CHECK_EQ(one->describe(), std::string("keeps the rows where (col(\"t\") >= lit(2)) is true"));
  Batch out = one->process(b);
  REQUIRE(out.num_rows() == 3);  // rows 1-3: the null in row 4 counts as false
  CHECK_EQ(out.column(0).values, b.column(0).values);  // a zero-copy slice
  CHECK_EQ(out.column(0).offset, 1);
  CHECK(out.schema() == schema);

  ops::OperatorPtr several = ops::make_filter(schema, call(Op::kNot, {contains(col("s"), "b")}));
  Batch g = several->process(b);
  REQUIRE(g.num_rows() == 3);  // rows 0, 3, 4
  CHECK(g.column(0).values != b.column(0).values);
  Value t = evaluate(bind(*col("t"), *schema), g);
  CHECK_EQ(show(cells(t)), std::string("[1, 4, null]"));
  CHECK_EQ(show(cells(evaluate(bind(*col("s"), *schema), g))), std::string("[\"a\", \"d\", \"e\"]"));

  CHECK_EQ(ops::make_filter(schema, lit(false))->process(b).num_rows(), 0);
  CHECK_EQ(ops::make_filter(schema, lit(std::monostate{}, type(TypeId::kBool)))->process(b).num_rows(), 0);
  CHECK_EQ(ops::make_filter(schema, lit(true))->process(b).num_rows(), 5);
  CHECK_EQ(ops::make_filter(schema, lit(true))->process(b.slice(0, 0)).num_rows(), 0);
  CHECK_THROWS_WITH(ops::make_filter(schema, bin(Op::kAdd, col("t"), lit(int64_t{1}))), ErrorKind::kUnsupportedType,
                    "filter needs a bool predicate; (col(\"t\") + lit(1)) has type int64");
  CHECK_THROWS_WITH(ops::make_filter(schema, col("x")), ErrorKind::kInvalidInput, "unknown column 'x'");
}

TEST(select_and_with_columns) {
  auto schema = fixtures::schema({{"a", type(TypeId::kInt32), false}, {"b", type(TypeId::kFloat64)}});
  Batch in = make_batch({{"a", type(TypeId::kInt32), {int64_t{1}, int64_t{2}}}, {"b", type(TypeId::kFloat64), {0.5, N}}})
                 .with_schema(schema);
  ops::OperatorPtr sel = ops::make_select(schema, {{"b2", bin(Op::kMul, col("b"), lit(2.0))}, {"a", col("a")}});
  CHECK(sel->selectivity() == ops::Selectivity::kExactlyOne);
  CHECK(sel->kind() == ops::OpKind::kStateless);
  CHECK_EQ(sel->output_schema()->to_string(), std::string("b2: double, a: int32"));
  CHECK(!sel->output_schema()->fields[1].nullable);  // a bare reference keeps nullability
  CHECK_EQ(sel->describe(), std::string("b2 = (col(\"b\") * lit(2.0)), a = col(\"a\")"));
  Batch s = sel->process(in);
  REQUIRE(s.num_columns() == 2);
  CHECK_EQ(s.column(1).values, in.column(0).values);
  CHECK_EQ(show(cells(evaluate(bind(*col("b2"), *s.schema()), s))), show({1.0, N}));

  ops::OperatorPtr with = ops::make_with_columns(
      schema, {{"c", lit(std::string("k"))}, {"a", bin(Op::kAdd, col("a"), col("a"))}, {"d", col("b")}});
  CHECK_EQ(with->output_schema()->to_string(), std::string("a: int32, b: double, c: string, d: double"));
  Batch w = with->process(in);
  CHECK_EQ(w.column(1).values, in.column(1).values);  // passed on
  CHECK_EQ(w.column(3).values, in.column(1).values);
  CHECK_EQ(show(cells(evaluate(bind(*col("a"), *w.schema()), w))), std::string("[2, 4]"));
  CHECK_EQ(show(cells(evaluate(bind(*col("c"), *w.schema()), w))), std::string("[\"k\", \"k\"]"));

  CHECK_THROWS_WITH(ops::make_select(schema, {{"x", col("a")}, {"x", col("b")}}), ErrorKind::kInvalidInput,
                    "select: the column name 'x' is given twice");
  CHECK_THROWS_WITH(ops::make_with_columns(schema, {{"x", col("zz")}}), ErrorKind::kInvalidInput, "unknown column 'zz'");
  CHECK_EQ(std::string(ops::kind_name(ops::OpKind::kPartitioned)), std::string("partitioned"));
  CHECK_EQ(std::string(ops::selectivity_name(ops::Selectivity::kAtMostOne)), std::string("at most one"));
}

UNIT_MAIN()
