#pragma once
// Internals shared by the expression units (expr.cpp: the IR; expr_bind.cpp: binding;
// expr_eval.cpp: evaluation). Nothing outside core/expr*.cpp includes this.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/expr.h"

namespace pao {

// The bound tree. Arguments of binary operations already have the type the kernel computes in
// (the binder inserts the casts), so evaluation dispatches on one type per node.
struct BoundExpr::Node {
  enum class Kind : uint8_t { kColumn, kLiteral, kCast, kUnary, kBinary, kContains, kStartsWith };
  Kind kind = Kind::kLiteral;
  Op op = Op::kAdd;
  DataType type;  // of the result; for kBinary it may differ from the arguments' (comparisons)
  std::vector<std::shared_ptr<const Node>> args;
  size_t column = 0;  // kColumn
  std::string text;   // the source expression, for error messages
  std::string bytes;  // kLiteral: a string's bytes; kContains/kStartsWith: the pattern
  // kLiteral: the value as a one-row column (literal_column()): `fixed` holds a fixed-width value
  // in its low bytes or a bool in bit 0, `validity` is 0 for a null.
  uint64_t fixed = 0;
  uint8_t validity = 1;
  int32_t offsets32[2] = {0, 0};
  int64_t offsets64[2] = {0, 0};

  Column literal_column() const {
    Column c;
    c.validity = validity ? nullptr : &validity;
    c.null_count = validity ? 0 : 1;
    switch (type.layout()) {
      case Layout::kOffsets32: c.values = offsets32; break;
      case Layout::kOffsets64: c.values = offsets64; break;
      default: c.values = &fixed; break;
    }
    c.data = reinterpret_cast<const uint8_t*>(bytes.data());
    return c;
  }
};

namespace expr_detail {

using Node = BoundExpr::Node;
using NodePtr = std::shared_ptr<const Node>;

// The integer type a value of `t` is stored as, for casts that only relabel.
inline TypeId storage_id(const DataType& t) {
  if (t.id == TypeId::kDate32) return TypeId::kInt32;
  if (t.id == TypeId::kTimestamp) return TypeId::kInt64;
  return t.id;
}

// True when converting `from` to `to` leaves every stored value as it is (a relabel).
inline bool same_storage(const DataType& from, const DataType& to) {
  if (from.id == TypeId::kTimestamp && to.id == TypeId::kTimestamp) return from.unit == to.unit;
  return storage_id(from) == storage_id(to);
}

// The operator as the rendering writes it ("+", "//", "&"; "" for is_null / is_not_null).
const char* op_symbol(Op op) noexcept;

// A string as a Python literal in double quotes; pyarrow_ops/expr.py's _quote is the same.
std::string quote(std::string_view s);

// A float as Python's repr() writes it ("1.0", "1e+20", "nan", "inf"), for renderings and for
// casts of floats to strings.
std::string python_float(double v);

}  // namespace expr_detail
}  // namespace pao
