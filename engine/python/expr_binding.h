#pragma once
// Expressions from Python: pyarrow_ops.Expr._to_ir() tuples to core/expr.h trees, and the test
// entry points that evaluate them.
#include <nanobind/nanobind.h>

#include "core/expr.h"

namespace pao::python {

// The expression an IR tuple describes:
//   ("col", name)
//   ("lit", value, type)           value: None, bool, int, float or str; type: a type name or None
//   ("call", op, arg, ...)         op: an op_name() ("add", "floordiv", "is_null", ...)
//   ("cast", arg, type)            type: a type name (parse_type_name)
//   ("contains", arg, pattern), ("starts_with", arg, prefix)
// Throws Error(kInvalidInput) naming the part it cannot read. Needs the GIL.
ExprPtr expr_from_python(nanobind::handle ir);

// Defines on `m`: evaluate(ir, batch) -> pa.Array, filter(ir, batch) -> pa.RecordBatch and
// render(ir) -> str (to_string of the expression), where batch is anything with
// __arrow_c_array__. For tests; pipelines use the operators of ops/stateless.h.
void bind_expr(nanobind::module_& m);

}  // namespace pao::python
