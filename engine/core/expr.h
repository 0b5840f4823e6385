#pragma once
// Expressions over the columns of a batch: the IR that filter predicates and derived columns are
// written in, the binder that resolves it against a schema, and a vectorized evaluator with
// Arrow's null semantics.
//
// An Expr is a tree built once (from Python, by expr_from_python) and shared read-only; bind()
// checks it against a schema once per operator, and evaluate() then runs the bound tree over each
// batch, one kernel call per node, with the type dispatch done once per column, never per value.
//
// The rules, in one place (docs/pipeline.md "Expressions" states them for users):
//   Nulls: every operation is null where any argument is null, except `and`/`or` (Kleene logic:
//     false and null = false, true or null = true), is_null/is_not_null (never null) and filter
//     (a null predicate drops the row). NaN is a value, not a null.
//   Numeric promotion of two arguments: any float with any integer -> double; float with float ->
//     float only when both are float, else double. Integers of the same signedness -> the wider;
//     a signed of width s with an unsigned of width u -> the signed one when s > u, else the
//     signed integer of width 2u, at most int64 (so int64 with uint64 is int64, wrapping values
//     above 2^63 - 1, as pyarrow does). A Python int literal is int64, a float literal double.
//   Arithmetic: + - * on integers wrap (two's complement, like pyarrow's unchecked add); `/` is
//     true division, always double (x / 0 is inf or nan); `//` and `%` floor (Python's sign rule:
//     the remainder takes the divisor's sign) and, on integers, fail on a zero divisor in a non-null
//     row, naming the expression. On floats `//` and `%` follow numpy (x // 0 = x / 0, x % 0 = nan).
//   Temporal: timestamps compare with timestamps of the same unit (both naive or both with a time
//     zone) and with integers (raw values in the timestamp's unit); timestamp - timestamp (same
//     unit) is int64 in that unit; timestamp + integer, integer + timestamp and timestamp -
//     integer are timestamps. date32 compares with date32 and with integers (days).
//   Casts: numeric <-> numeric (integers wrap, floats truncate toward zero; a NaN or
//     out-of-range float is an error naming the expression and the value), bool <-> numeric,
//     timestamp/date32 <-> integer (the raw value), timestamp -> timestamp (unit scaling,
//     truncating toward zero), string <-> large_string, numbers and bools -> string, string ->
//     numbers (an unparsable string is an error).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/batch.h"
#include "core/types.h"

namespace pao {

// The operations of Kind::kCall nodes. Casts and string predicates carry a parameter (a type, a
// pattern) and are node kinds of their own.
enum class Op : uint8_t {
  kNeg, kNot, kIsNull, kIsNotNull,                 // unary
  kAdd, kSub, kMul, kDiv, kFloorDiv, kMod,         // arithmetic
  kEq, kNe, kLt, kLe, kGt, kGe,                    // comparisons
  kAnd, kOr,                                       // Kleene logic
};

// The operation's name in the Python IR ("add", "floordiv", "is_null", ...).
const char* op_name(Op op) noexcept;
// The operation of an IR name, or nullopt for an unknown name.
std::optional<Op> op_from_name(std::string_view name) noexcept;
// True for the operations that take one argument.
bool is_unary(Op op) noexcept;

// A literal as written: null, bool, integer, float or string. uint64 holds integers above the
// int64 range only; every other integer is int64.
using Literal = std::variant<std::monostate, bool, int64_t, uint64_t, double, std::string>;

struct Expr;
// Expressions are immutable once built and shared between operators and threads.
using ExprPtr = std::shared_ptr<const Expr>;

struct Expr {
  enum class Kind : uint8_t { kColumn, kLiteral, kCall, kCast, kContains, kStartsWith };
  Kind kind = Kind::kLiteral;
  std::string text;              // kColumn: the column name; kContains/kStartsWith: the pattern
  Literal value;                 // kLiteral
  std::optional<DataType> type;  // kLiteral: the type the user gave, if any; kCast: the target
  Op op = Op::kAdd;              // kCall
  std::vector<ExprPtr> args;     // kCall: one or two; kCast, kContains, kStartsWith: one
};

// A reference to the column `name`.
ExprPtr col(std::string name);
// A literal; without `type` a null has the type of what it meets (lit(None) + col("a") has a's
// type) and the others their default (bool, int64, uint64, double, string).
ExprPtr lit(Literal value, std::optional<DataType> type = std::nullopt);
// An operation; throws Error(kInvalidInput) when the number of arguments does not fit `op`.
ExprPtr call(Op op, std::vector<ExprPtr> args);
// `arg` converted to `type` (the conversions are listed at the top of this file).
ExprPtr cast(ExprPtr arg, DataType type);
// Whether the string `arg` contains `pattern` (a literal substring, not a regular expression).
ExprPtr contains(ExprPtr arg, std::string pattern);
// Whether the string `arg` starts with `prefix`.
ExprPtr starts_with(ExprPtr arg, std::string prefix);

// The expression as Python would write it with pyarrow_ops.expr, e.g. `(col("a") + lit(1))`,
// `col("s").str.contains("x")`, `col("a").cast("int32")`. Every error message names expressions
// this way, and pyarrow_ops.Expr.__repr__ renders identically.
std::string to_string(const Expr& e);

// An expression resolved against a schema: column indices, types and implicit casts fixed.
// Immutable; evaluate() may run it on any number of threads at once.
class BoundExpr {
 public:
  struct Node;  // defined in expr.cpp: opaque to everyone else

  explicit BoundExpr(std::shared_ptr<const Node> root) : root_(std::move(root)) {}
  // The type of the result.
  const DataType& type() const noexcept;
  // The source expression, rendered as by to_string().
  const std::string& text() const noexcept;
  const std::shared_ptr<const Node>& root() const noexcept { return root_; }

 private:
  std::shared_ptr<const Node> root_;
};

// Resolves names and types. Throws Error(kInvalidInput) for an unknown column (naming it and the
// schema's columns) and Error(kUnsupportedType) for an operation its arguments' types do not
// allow (naming the expression and the types).
BoundExpr bind(const Expr& e, const Schema& schema);

// Whether evaluate() may throw for some row's values: an integer // or % whose divisor is not a
// non-zero literal, a cast from a float to an integer, or a cast from a string. Other
// expressions fail only on a bug.
bool may_fail(const BoundExpr& bound);

// A computed column: `length` values of `type` in `column`, whose buffers `owner` keeps alive.
struct Value {
  DataType type;
  int64_t length = 0;
  Column column;
  std::shared_ptr<const void> owner;
};

// Evaluates `bound` over `batch`, which must have the schema it was bound to (or one of the same
// layout). A bare column reference returns the batch's column without copying. Throws
// Error(kInvalidInput) for a data-dependent failure (integer division by zero, a cast that does
// not fit), naming the expression and the row.
Value evaluate(const BoundExpr& bound, const Batch& batch);

// The rows where a bool value is true (a null counts as false), the rows a filter keeps: bit i of
// word i / 64 for row i, in (length + 63) / 64 words (at least one) that `scratch` owns, bits past
// the value's length zero. gather_kept() (core/gather.h) takes them.
const uint64_t* true_bits(const Value& value, BatchMemory& scratch);

}  // namespace pao
