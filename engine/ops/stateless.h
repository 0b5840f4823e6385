#pragma once
// The stateless operators of a pipeline whose work is an expression (core/expr.h): filter, select
// and with_columns. Each binds its expressions to the input schema once, when it is made (so a
// bad name or type fails before the run), and then evaluates them per morsel with no state:
// process() is thread-safe and any worker may run any morsel.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/expr.h"
#include "ops/operator.h"

namespace pao::ops {

// Keeps the rows where `predicate` is true; null counts as false. The output has the input
// schema. A morsel whose kept rows form one run leaves as a zero-copy slice of the input;
// otherwise the kept rows are gathered into new buffers. Throws Error(kUnsupportedType) when the
// predicate is not bool, and bind()'s errors.
OperatorPtr make_filter(std::shared_ptr<const Schema> input_schema, ExprPtr predicate);

// Outputs exactly `columns`, in order: each a name and the expression computing it. A bare column
// reference is passed on without copying. Throws Error(kInvalidInput) for a repeated name, and
// bind()'s errors.
OperatorPtr make_select(std::shared_ptr<const Schema> input_schema,
                        std::vector<std::pair<std::string, ExprPtr>> columns);

// Outputs the input columns with those named in `columns` replaced in place and the others
// appended, in the order given. Expressions see the input, never each other's results. Throws
// Error(kInvalidInput) for a repeated name, and bind()'s errors.
OperatorPtr make_with_columns(std::shared_ptr<const Schema> input_schema,
                              std::vector<std::pair<std::string, ExprPtr>> columns);

}  // namespace pao::ops
