#include "python/expr_binding.h"

#include <nanobind/stl/string.h>

#include <string>

#include "core/error.h"
#include "ops/stateless.h"
#include "python/capsules.h"
#include "python/gil.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace pao::python {
namespace {

[[noreturn]] void bad_ir(const std::string& what, nb::handle part) {
  throw Error(ErrorKind::kInvalidInput,
              "not an expression: " + what + " in " + nb::cast<std::string>(nb::repr(part)));
}

std::string string_at(const nb::tuple& t, size_t i, const char* what) {
  if (!nb::isinstance<nb::str>(t[i])) bad_ir(std::string("expected ") + what + " as a str", t);
  return nb::cast<std::string>(t[i]);
}

DataType type_at(const nb::tuple& t, size_t i) {
  const std::string name = string_at(t, i, "a type name");
  std::optional<DataType> type = parse_type_name(name);
  if (!type) {
    throw Error(ErrorKind::kUnsupportedType,
                "unknown type '" + name + "'; expected one of bool, int8-64, uint8-64, float, double, "
                "date32[day], timestamp[unit(, tz=zone)], string, large_string");
  }
  return *type;
}

Literal literal_from_python(nb::handle v) {
  if (v.is_none()) return std::monostate{};
  if (PyBool_Check(v.ptr())) return v.ptr() == Py_True;  // before int: bool is an int subclass
  if (PyLong_Check(v.ptr())) {
    int overflow = 0;
    const long long i = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
    if (overflow == 0) {
      if (i == -1 && PyErr_Occurred()) throw nb::python_error();
      return static_cast<int64_t>(i);
    }
    if (overflow > 0) {
      const unsigned long long u = PyLong_AsUnsignedLongLong(v.ptr());
      if (!(u == static_cast<unsigned long long>(-1) && PyErr_Occurred())) return static_cast<uint64_t>(u);
      PyErr_Clear();
    }
    throw Error(ErrorKind::kInvalidInput,
                "the integer literal " + nb::cast<std::string>(nb::str(v)) + " is out of the int64 and uint64 range");
  }
  if (PyFloat_Check(v.ptr())) return PyFloat_AsDouble(v.ptr());
  if (PyUnicode_Check(v.ptr())) return nb::cast<std::string>(v);
  throw Error(ErrorKind::kUnsupportedType, "a literal must be None, bool, int, float or str, not " +
                                               nb::cast<std::string>(nb::str(v.type().attr("__name__"))));
}

}  // namespace

ExprPtr expr_from_python(nb::handle ir) {
  if (!nb::isinstance<nb::tuple>(ir) || nb::len(ir) == 0) bad_ir("expected a non-empty tuple", ir);
  const nb::tuple t = nb::borrow<nb::tuple>(ir);
  const size_t n = nb::len(t);
  const std::string tag = string_at(t, 0, "the node kind");
  auto want = [&](size_t size) {
    if (n != size) bad_ir("'" + tag + "' takes " + std::to_string(size - 1) + " field(s)", ir);
  };
  if (tag == "col") {
    want(2);
    return col(string_at(t, 1, "a column name"));
  }
  if (tag == "lit") {
    want(3);
    std::optional<DataType> type;
    if (!t[2].is_none()) type = type_at(t, 2);
    return lit(literal_from_python(t[1]), std::move(type));
  }
  if (tag == "call") {
    if (n < 2) bad_ir("'call' needs an operation", ir);
    const std::string name = string_at(t, 1, "an operation name");
    const std::optional<Op> op = op_from_name(name);
    if (!op) bad_ir("unknown operation '" + name + "'", ir);
    std::vector<ExprPtr> args;
    for (size_t i = 2; i < n; ++i) args.push_back(expr_from_python(t[i]));
    return call(*op, std::move(args));
  }
  if (tag == "cast") {
    want(3);
    return cast(expr_from_python(t[1]), type_at(t, 2));
  }
  if (tag == "contains" || tag == "starts_with") {
    want(3);
    ExprPtr arg = expr_from_python(t[1]);
    std::string pattern = string_at(t, 2, "a pattern");
    return tag == "contains" ? contains(std::move(arg), std::move(pattern))
                             : starts_with(std::move(arg), std::move(pattern));
  }
  bad_ir("unknown node kind '" + tag + "'", ir);
}

namespace {

// `work(expr, batch)` without the GIL, an error about one row naming that row of the batch; the
// result goes back as a pyarrow RecordBatch over our Batch handle (PyCapsule import, no copy).
template <class Work>
nb::object on_batch(nb::handle ir, nb::handle batch, Work work) {
  const ExprPtr e = expr_from_python(ir);
  const Batch in = import_py_batch(batch, "the batch");
  Batch out = without_gil([&] {
    try {
      return work(e, in);
    } catch (const Error& err) {
      if (err.row() < 0) throw;
      throw Error(err.kind(), "row " + std::to_string(err.row()) + " of the batch: " + err.what());
    }
  });
  return nb::module_::import_("pyarrow").attr("record_batch")(nb::cast(BatchHandle{std::move(out)}));
}

}  // namespace

void bind_expr(nb::module_& m) {
  m.def(
      "evaluate",
      [](nb::handle ir, nb::handle batch) {
        return on_batch(ir, batch, [](const ExprPtr& e, const Batch& in) {
                 const Value v = evaluate(bind(*e, *in.schema()), in);
                 auto schema = std::make_shared<const Schema>(Schema{{{"result", v.type, true}}});
                 return Batch(std::move(schema), v.length, {v.column}, v.owner);
               })
            .attr("column")(0);
      },
      "ir"_a, "batch"_a, "The expression `ir` (Expr._to_ir()) over a record batch, as a pyarrow Array.");
  m.def(
      "filter",
      [](nb::handle ir, nb::handle batch) {
        return on_batch(ir, batch, [](const ExprPtr& e, const Batch& in) { return ops::make_filter(in.schema(), e)->process(in); });
      },
      "ir"_a, "batch"_a, "The rows of a record batch where the predicate `ir` is true, as a pyarrow RecordBatch.");
  m.def(
      "render", [](nb::handle ir) { return to_string(*expr_from_python(ir)); }, "ir"_a,
      "The expression `ir` as the engine writes it in messages.");
}

}  // namespace pao::python
