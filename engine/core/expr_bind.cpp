// Binding an expression to a schema: names to columns, the promotion and cast rules of expr.h.
#include "core/expr_node.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace pao {

const DataType& BoundExpr::type() const noexcept { return root_->type; }
const std::string& BoundExpr::text() const noexcept { return root_->text; }

using namespace expr_detail;

namespace {

bool is_int(TypeId id) { return is_signed_integer(id) || is_unsigned_integer(id); }
bool is_float(TypeId id) { return id == TypeId::kFloat32 || id == TypeId::kFloat64; }
bool is_numeric(TypeId id) { return is_int(id) || is_float(id); }
bool is_temporal(TypeId id) { return id == TypeId::kTimestamp || id == TypeId::kDate32; }

DataType of(TypeId id) {
  DataType t;
  t.id = id;
  return t;
}

TypeId int_type(bool is_signed, int width) {
  switch (width) {
    case 1: return is_signed ? TypeId::kInt8 : TypeId::kUInt8;
    case 2: return is_signed ? TypeId::kInt16 : TypeId::kUInt16;
    case 4: return is_signed ? TypeId::kInt32 : TypeId::kUInt32;
    default: return is_signed ? TypeId::kInt64 : TypeId::kUInt64;
  }
}

// The numeric promotion rule stated in expr.h.
DataType promote(const DataType& a, const DataType& b) {
  if (is_float(a.id) || is_float(b.id)) {
    return of(a.id == TypeId::kFloat32 && b.id == TypeId::kFloat32 ? TypeId::kFloat32 : TypeId::kFloat64);
  }
  const int wa = a.byte_width();
  const int wb = b.byte_width();
  if (is_signed_integer(a.id) == is_signed_integer(b.id)) return of(int_type(is_signed_integer(a.id), std::max(wa, wb)));
  const int ws = is_signed_integer(a.id) ? wa : wb;
  const int wu = is_signed_integer(a.id) ? wb : wa;
  return of(int_type(true, ws > wu ? ws : std::min(2 * wu, 8)));
}

bool cast_allowed(const DataType& from, const DataType& to) {
  const TypeId f = from.id;
  const TypeId t = to.id;
  const bool f_num = is_numeric(f) || f == TypeId::kBool;
  const bool t_num = is_numeric(t) || t == TypeId::kBool;
  if (from == to || (f_num && t_num)) return true;
  if ((is_temporal(f) && is_int(t)) || (is_int(f) && is_temporal(t))) return true;
  if (f == TypeId::kTimestamp && t == TypeId::kTimestamp) return true;
  if (is_string(t) && (is_string(f) || f_num)) return true;
  return is_string(f) && is_numeric(t);
}

[[noreturn]] void type_error(const std::string& message) { throw Error(ErrorKind::kUnsupportedType, message); }

bool is_untyped_null(const Expr& e) {
  return e.kind == Expr::Kind::kLiteral && std::holds_alternative<std::monostate>(e.value) && !e.type;
}

NodePtr make_cast(NodePtr arg, const DataType& to) {
  if (arg->type == to) return arg;
  auto n = std::make_shared<Node>();
  n->kind = Node::Kind::kCast;
  n->type = to;
  n->text = arg->text;
  n->args = {std::move(arg)};
  return n;
}

// Stores an integer literal of `type` after checking that it fits.
template <class T>
void store_int(Node& n, const Expr& e, int64_t si, uint64_t ui, bool is_unsigned) {
  const bool fits = is_unsigned ? ui <= static_cast<uint64_t>(std::numeric_limits<T>::max())
                                : si >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                                      (si < 0 || static_cast<uint64_t>(si) <=
                                                     static_cast<uint64_t>(std::numeric_limits<T>::max()));
  if (!fits) {
    throw Error(ErrorKind::kInvalidInput, to_string(e) + ": " + (is_unsigned ? std::to_string(ui) : std::to_string(si)) +
                                              " does not fit " + n.type.to_string());
  }
  const T v = is_unsigned ? static_cast<T>(ui) : static_cast<T>(si);
  std::memcpy(&n.fixed, &v, sizeof v);
}

NodePtr bind_literal(const Expr& e, const std::optional<DataType>& hint) {
  auto n = std::make_shared<Node>();
  n->kind = Node::Kind::kLiteral;
  n->text = to_string(e);
  const Literal& v = e.value;
  if (e.type) {
    n->type = *e.type;
  } else if (std::holds_alternative<std::monostate>(v)) {
    if (!hint) {
      type_error("cannot tell the type of " + n->text + " here; give it one, e.g. lit(None, \"int64\")");
    }
    n->type = *hint;
  } else if (std::holds_alternative<bool>(v)) {
    n->type = of(TypeId::kBool);
  } else if (std::holds_alternative<int64_t>(v)) {
    n->type = of(TypeId::kInt64);
  } else if (std::holds_alternative<uint64_t>(v)) {
    n->type = of(TypeId::kUInt64);
  } else if (std::holds_alternative<double>(v)) {
    n->type = of(TypeId::kFloat64);
  } else {
    n->type = of(TypeId::kUtf8);
  }
  const TypeId t = n->type.id;
  auto mismatch = [&](const char* what) {
    type_error(n->text + ": a " + what + " literal cannot have type " + n->type.to_string());
  };
  if (std::holds_alternative<std::monostate>(v)) {
    n->validity = 0;
  } else if (const bool* b = std::get_if<bool>(&v)) {
    if (t != TypeId::kBool) mismatch("bool");
    n->fixed = *b ? 1 : 0;
  } else if (std::holds_alternative<int64_t>(v) || std::holds_alternative<uint64_t>(v)) {
    const bool is_u = std::holds_alternative<uint64_t>(v);
    const int64_t si = is_u ? 0 : std::get<int64_t>(v);
    const uint64_t ui = is_u ? std::get<uint64_t>(v) : 0;
    if (is_float(t)) {
      const double d = is_u ? static_cast<double>(ui) : static_cast<double>(si);
      if (t == TypeId::kFloat32) {
        const auto f = static_cast<float>(d);
        std::memcpy(&n->fixed, &f, sizeof f);
      } else {
        std::memcpy(&n->fixed, &d, sizeof d);
      }
    } else {
      switch (storage_id(n->type)) {
        case TypeId::kInt8: store_int<int8_t>(*n, e, si, ui, is_u); break;
        case TypeId::kInt16: store_int<int16_t>(*n, e, si, ui, is_u); break;
        case TypeId::kInt32: store_int<int32_t>(*n, e, si, ui, is_u); break;
        case TypeId::kInt64: store_int<int64_t>(*n, e, si, ui, is_u); break;
        case TypeId::kUInt8: store_int<uint8_t>(*n, e, si, ui, is_u); break;
        case TypeId::kUInt16: store_int<uint16_t>(*n, e, si, ui, is_u); break;
        case TypeId::kUInt32: store_int<uint32_t>(*n, e, si, ui, is_u); break;
        case TypeId::kUInt64:
          if (!is_u && si < 0) {
            throw Error(ErrorKind::kInvalidInput, n->text + ": " + std::to_string(si) + " does not fit uint64");
          }
          n->fixed = is_u ? ui : static_cast<uint64_t>(si);
          break;
        default: mismatch("integer");
      }
    }
  } else if (const double* d = std::get_if<double>(&v)) {
    if (t == TypeId::kFloat32) {
      const auto f = static_cast<float>(*d);
      std::memcpy(&n->fixed, &f, sizeof f);
    } else if (t == TypeId::kFloat64) {
      std::memcpy(&n->fixed, d, sizeof *d);
    } else {
      mismatch("float");
    }
  } else {
    if (!is_string(t)) mismatch("string");
    n->bytes = std::get<std::string>(v);
    if (t == TypeId::kUtf8 && n->bytes.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
      throw Error(ErrorKind::kInvalidInput, "a string literal of more than 2 GiB needs type large_string");
    }
    n->offsets32[1] = static_cast<int32_t>(n->bytes.size());
    n->offsets64[1] = static_cast<int64_t>(n->bytes.size());
  }
  return n;
}

NodePtr bind_node(const Expr& e, const Schema& schema, const std::optional<DataType>& hint);

// "int64 and string" (or "int64" for one argument), for messages.
std::string types_text(const NodePtr& a, const NodePtr& b) {
  return b ? a->type.to_string() + " and " + b->type.to_string() : a->type.to_string();
}

[[noreturn]] void op_error(const Expr& e, const NodePtr& a, const NodePtr& b, const std::string& hint = "") {
  const std::string what = e.op == Op::kIsNull || e.op == Op::kIsNotNull ? op_name(e.op) : op_symbol(e.op);
  type_error("cannot apply " + what + " to " + types_text(a, b) + " in " + to_string(e) + hint);
}

// The type two arguments compare in: nullopt when they do not compare. Strings compare as they are.
std::optional<DataType> comparison_type(const DataType& a, const DataType& b) {
  if (is_numeric(a.id) && is_numeric(b.id)) return promote(a, b);
  if (a.id == TypeId::kBool && b.id == TypeId::kBool) return a;
  if (is_string(a.id) && is_string(b.id)) return a;
  if (a.id == TypeId::kTimestamp && b.id == TypeId::kTimestamp) {
    if (a.unit != b.unit || a.timezone.empty() != b.timezone.empty()) return std::nullopt;
    return of(TypeId::kInt64);
  }
  if (a.id == TypeId::kDate32 && b.id == TypeId::kDate32) return of(TypeId::kInt32);
  if ((is_temporal(a.id) && is_int(b.id)) || (is_int(a.id) && is_temporal(b.id))) return of(TypeId::kInt64);
  return std::nullopt;
}

NodePtr bind_binary(const Expr& e, const Schema& schema) {
  const Expr& ea = *e.args[0];
  const Expr& eb = *e.args[1];
  const bool logic = e.op == Op::kAnd || e.op == Op::kOr;
  NodePtr a, b;
  // An untyped null takes the type of the other side (or bool under and/or).
  if (is_untyped_null(ea) && is_untyped_null(eb) && !logic) {
    type_error("cannot tell the types of the nulls in " + to_string(e) + "; give one a type, e.g. lit(None, \"int64\")");
  } else if (is_untyped_null(ea)) {
    b = bind_node(eb, schema, logic ? std::optional(of(TypeId::kBool)) : std::nullopt);
    a = bind_node(ea, schema, logic ? of(TypeId::kBool) : b->type);
  } else {
    a = bind_node(ea, schema, logic ? std::optional(of(TypeId::kBool)) : std::nullopt);
    b = bind_node(eb, schema, logic ? of(TypeId::kBool) : a->type);
  }
  const DataType& ta = a->type;
  const DataType& tb = b->type;
  auto n = std::make_shared<Node>();
  n->kind = Node::Kind::kBinary;
  n->op = e.op;
  n->text = to_string(e);
  DataType compute;
  switch (e.op) {
    case Op::kAdd:
    case Op::kSub:
    case Op::kMul: {
      const bool ts_a = ta.id == TypeId::kTimestamp;
      const bool ts_b = tb.id == TypeId::kTimestamp;
      if (is_numeric(ta.id) && is_numeric(tb.id)) {
        compute = n->type = promote(ta, tb);
      } else if (e.op == Op::kSub && ts_a && ts_b) {
        if (ta.unit != tb.unit) {
          op_error(e, a, b, "; cast one side so both have the same unit");
        }
        compute = n->type = of(TypeId::kInt64);
      } else if ((e.op == Op::kAdd && ((ts_a && is_int(tb.id)) || (is_int(ta.id) && ts_b))) ||
                 (e.op == Op::kSub && ts_a && is_int(tb.id))) {
        compute = of(TypeId::kInt64);
        n->type = ts_a ? ta : tb;
      } else {
        op_error(e, a, b);
      }
      break;
    }
    case Op::kDiv:
      if (!is_numeric(ta.id) || !is_numeric(tb.id)) op_error(e, a, b);
      compute = n->type = of(TypeId::kFloat64);
      break;
    case Op::kFloorDiv:
    case Op::kMod:
      if (!is_numeric(ta.id) || !is_numeric(tb.id)) op_error(e, a, b);
      compute = n->type = promote(ta, tb);
      break;
    case Op::kEq:
    case Op::kNe:
    case Op::kLt:
    case Op::kLe:
    case Op::kGt:
    case Op::kGe: {
      std::optional<DataType> c = comparison_type(ta, tb);
      if (!c) {
        op_error(e, a, b, ta.id == TypeId::kTimestamp && tb.id == TypeId::kTimestamp
                              ? "; timestamps compare only with the same unit, both with or both without "
                                "a time zone: cast one side"
                              : "");
      }
      n->type = of(TypeId::kBool);
      if (is_string(c->id)) {  // the string kernels read either offset width: no casts
        n->args = {a, b};
        return n;
      }
      compute = *c;
      break;
    }
    case Op::kAnd:
    case Op::kOr:
      if (ta.id != TypeId::kBool || tb.id != TypeId::kBool) op_error(e, a, b);
      compute = n->type = of(TypeId::kBool);
      break;
    default:
      op_error(e, a, b);
  }
  n->args = {make_cast(a, compute), make_cast(b, compute)};
  return n;
}

NodePtr bind_node(const Expr& e, const Schema& schema, const std::optional<DataType>& hint) {
  switch (e.kind) {
    case Expr::Kind::kColumn: {
      const std::optional<size_t> i = schema.find(e.text);
      if (!i) {
        std::string names;
        for (const Field& f : schema.fields) names += (names.empty() ? "" : ", ") + f.name;
        throw Error(ErrorKind::kInvalidInput, "unknown column '" + e.text + "' in " + to_string(e) +
                                                  "; available columns: " + (names.empty() ? "(none)" : names));
      }
      auto n = std::make_shared<Node>();
      n->kind = Node::Kind::kColumn;
      n->column = *i;
      n->type = schema.fields[*i].type;
      n->text = to_string(e);
      return n;
    }
    case Expr::Kind::kLiteral:
      return bind_literal(e, hint);
    case Expr::Kind::kCast: {
      NodePtr a = bind_node(*e.args[0], schema, e.type);
      if (!cast_allowed(a->type, *e.type)) {
        type_error("cannot cast " + a->type.to_string() + " to " + e.type->to_string() + " in " + to_string(e));
      }
      auto n = std::make_shared<Node>();
      n->kind = Node::Kind::kCast;
      n->type = *e.type;
      n->text = to_string(e);
      n->args = {std::move(a)};
      return n;
    }
    case Expr::Kind::kContains:
    case Expr::Kind::kStartsWith: {
      NodePtr a = bind_node(*e.args[0], schema, of(TypeId::kUtf8));
      if (!is_string(a->type.id)) {
        type_error(std::string(e.kind == Expr::Kind::kContains ? "str.contains" : "str.starts_with") +
                   " needs a string, got " + a->type.to_string() + " in " + to_string(e));
      }
      auto n = std::make_shared<Node>();
      n->kind = e.kind == Expr::Kind::kContains ? Node::Kind::kContains : Node::Kind::kStartsWith;
      n->type = of(TypeId::kBool);
      n->text = to_string(e);
      n->bytes = e.text;
      n->args = {std::move(a)};
      return n;
    }
    case Expr::Kind::kCall:
      break;
  }
  if (!is_unary(e.op)) return bind_binary(e, schema);
  auto n = std::make_shared<Node>();
  n->kind = Node::Kind::kUnary;
  n->op = e.op;
  n->text = to_string(e);
  switch (e.op) {
    case Op::kNeg: {
      NodePtr a = bind_node(*e.args[0], schema, hint);
      if (!is_numeric(a->type.id)) op_error(e, a, nullptr);
      n->type = a->type;
      n->args = {std::move(a)};
      break;
    }
    case Op::kNot: {
      NodePtr a = bind_node(*e.args[0], schema, of(TypeId::kBool));
      if (a->type.id != TypeId::kBool) op_error(e, a, nullptr);
      n->type = a->type;
      n->args = {std::move(a)};
      break;
    }
    default:  // is_null, is_not_null: any type; an untyped null may as well be a bool
      n->args = {bind_node(*e.args[0], schema, of(TypeId::kBool))};
      n->type = of(TypeId::kBool);
      break;
  }
  return n;
}

}  // namespace

BoundExpr bind(const Expr& e, const Schema& schema) { return BoundExpr(bind_node(e, schema, std::nullopt)); }

namespace {

bool node_may_fail(const Node& n) {
  for (const NodePtr& a : n.args) {
    if (node_may_fail(*a)) return true;
  }
  switch (n.kind) {
    case Node::Kind::kBinary: {
      if (n.op != Op::kFloorDiv && n.op != Op::kMod) return false;
      const DataType& t = n.args[0]->type;
      if (!is_signed_integer(t.id) && !is_unsigned_integer(t.id)) return false;  // floats give inf / nan
      const Node& divisor = *n.args[1];
      return !(divisor.kind == Node::Kind::kLiteral && divisor.validity != 0 && divisor.fixed != 0);
    }
    case Node::Kind::kCast: {
      const DataType& from = n.args[0]->type;
      const bool to_integer = is_signed_integer(n.type.id) || is_unsigned_integer(n.type.id);
      return (is_string(from.id) && !is_string(n.type.id)) ||
             ((from.id == TypeId::kFloat32 || from.id == TypeId::kFloat64) && to_integer);
    }
    default:
      return false;
  }
}

}  // namespace

bool may_fail(const BoundExpr& bound) { return node_may_fail(*bound.root()); }

}  // namespace pao
