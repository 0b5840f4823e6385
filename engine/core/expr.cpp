// The expression IR: operation names, constructors, and the rendering every message uses.
#include "core/expr_node.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <type_traits>

#include "core/builder.h"
#include "core/error.h"

namespace pao {

// Bitmaps are combined 64 rows at a time by loading 8 bytes into a uint64_t, which puts row 0 in
// the lowest bit only on little-endian machines.
static_assert(std::endian::native == std::endian::little, "word-wise bitmap code assumes little-endian");

// A double as Python's repr() writes it (shortest round-trip digits; positional for exponents in
// [-4, 16), scientific otherwise), so renderings match pyarrow_ops.Expr.__repr__.
std::string expr_detail::python_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));  // [-]d[.ddd]e(+|-)dd
  std::string out;
  if (sci[0] == '-') {
    out = "-";
    sci.remove_prefix(1);
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (const char c : sci.substr(0, e)) {
    if (c != '.') digits += c;
  }
  int exp = 0;
  std::string_view exp_text = sci.substr(e + 1);
  if (exp_text[0] == '+') exp_text.remove_prefix(1);
  std::from_chars(exp_text.data(), exp_text.data() + exp_text.size(), exp);
  if (exp >= -4 && exp < 16) {
    if (exp < 0) return out + "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    const auto whole = static_cast<size_t>(exp) + 1;
    if (digits.size() <= whole) return out + digits + std::string(whole - digits.size(), '0') + ".0";
    return out + digits.substr(0, whole) + "." + digits.substr(whole);
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out.append(".").append(digits, 1);
  char tail[16];
  std::snprintf(tail, sizeof tail, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return out + tail;
}

// A string as a Python literal in double quotes; pyarrow_ops/expr.py's _quote is the same.
std::string expr_detail::quote(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

using expr_detail::python_float;
using expr_detail::quote;

namespace {

struct OpInfo {
  Op op;
  const char* name;    // in the Python IR
  const char* symbol;  // in the rendering
  int arity;
};

constexpr OpInfo kOps[] = {
    {Op::kNeg, "neg", "-", 1},        {Op::kNot, "not", "~", 1},
    {Op::kIsNull, "is_null", "", 1},  {Op::kIsNotNull, "is_not_null", "", 1},
    {Op::kAdd, "add", "+", 2},        {Op::kSub, "sub", "-", 2},
    {Op::kMul, "mul", "*", 2},        {Op::kDiv, "div", "/", 2},
    {Op::kFloorDiv, "floordiv", "//", 2}, {Op::kMod, "mod", "%", 2},
    {Op::kEq, "eq", "==", 2},         {Op::kNe, "ne", "!=", 2},
    {Op::kLt, "lt", "<", 2},          {Op::kLe, "le", "<=", 2},
    {Op::kGt, "gt", ">", 2},          {Op::kGe, "ge", ">=", 2},
    {Op::kAnd, "and", "&", 2},        {Op::kOr, "or", "|", 2},
};

constexpr bool ops_in_enum_order() {
  for (size_t i = 0; i < std::size(kOps); ++i) {
    if (static_cast<size_t>(kOps[i].op) != i) return false;
  }
  return true;
}
static_assert(ops_in_enum_order(), "kOps is indexed by Op");

const OpInfo& info(Op op) noexcept { return kOps[static_cast<size_t>(op)]; }



std::string literal_text(const Literal& v) {
  struct Render {
    std::string operator()(std::monostate) const { return "None"; }
    std::string operator()(bool b) const { return b ? "True" : "False"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(uint64_t u) const { return std::to_string(u); }
    std::string operator()(double d) const { return python_float(d); }
    std::string operator()(const std::string& s) const { return quote(s); }
  };
  return std::visit(Render{}, v);
}

std::shared_ptr<Expr> node(Expr::Kind kind) {
  auto e = std::make_shared<Expr>();
  e->kind = kind;
  return e;
}

}  // namespace

const char* op_name(Op op) noexcept { return info(op).name; }
const char* expr_detail::op_symbol(Op op) noexcept { return info(op).symbol; }

std::optional<Op> op_from_name(std::string_view name) noexcept {
  for (const OpInfo& i : kOps) {
    if (name == i.name) return i.op;
  }
  return std::nullopt;
}

bool is_unary(Op op) noexcept { return info(op).arity == 1; }

ExprPtr col(std::string name) {
  auto e = node(Expr::Kind::kColumn);
  e->text = std::move(name);
  return e;
}

ExprPtr lit(Literal value, std::optional<DataType> type) {
  auto e = node(Expr::Kind::kLiteral);
  e->value = std::move(value);
  e->type = std::move(type);
  return e;
}

ExprPtr call(Op op, std::vector<ExprPtr> args) {
  if (static_cast<int>(args.size()) != info(op).arity) {
    throw Error(ErrorKind::kInvalidInput, std::string("'") + op_name(op) + "' takes " +
                                              std::to_string(info(op).arity) + " argument(s), got " +
                                              std::to_string(args.size()));
  }
  for (const ExprPtr& a : args) {
    if (!a) throw Error(ErrorKind::kInvalidInput, std::string("'") + op_name(op) + "' got a null argument");
  }
  auto e = node(Expr::Kind::kCall);
  e->op = op;
  e->args = std::move(args);
  return e;
}

ExprPtr cast(ExprPtr arg, DataType type) {
  auto e = node(Expr::Kind::kCast);
  e->type = std::move(type);
  e->args = {std::move(arg)};
  return e;
}

ExprPtr contains(ExprPtr arg, std::string pattern) {
  auto e = node(Expr::Kind::kContains);
  e->text = std::move(pattern);
  e->args = {std::move(arg)};
  return e;
}

ExprPtr starts_with(ExprPtr arg, std::string prefix) {
  auto e = node(Expr::Kind::kStartsWith);
  e->text = std::move(prefix);
  e->args = {std::move(arg)};
  return e;
}

std::string to_string(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kColumn:
      return "col(" + quote(e.text) + ")";
    case Expr::Kind::kLiteral:
      return "lit(" + literal_text(e.value) + (e.type ? ", " + quote(e.type->to_string()) : "") + ")";
    case Expr::Kind::kCast:
      return to_string(*e.args[0]) + ".cast(" + quote(e.type->to_string()) + ")";
    case Expr::Kind::kContains:
      return to_string(*e.args[0]) + ".str.contains(" + quote(e.text) + ")";
    case Expr::Kind::kStartsWith:
      return to_string(*e.args[0]) + ".str.starts_with(" + quote(e.text) + ")";
    case Expr::Kind::kCall:
      break;
  }
  const std::string a = to_string(*e.args[0]);
  switch (e.op) {
    case Op::kIsNull: return a + ".is_null()";
    case Op::kIsNotNull: return a + ".is_not_null()";
    case Op::kNeg:
    case Op::kNot: return std::string("(") + info(e.op).symbol + a + ")";
    default: return "(" + a + " " + info(e.op).symbol + " " + to_string(*e.args[1]) + ")";
  }
}

}  // namespace pao
