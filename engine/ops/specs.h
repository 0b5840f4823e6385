#pragma once
// Operator specs: what a pipeline's operator is, as plain data, before it meets a schema. The
// Python API builds these (through the bindings, where each is a typed class), and a planner can
// read, rewrite and ship them; make_operator turns one into an operator for a given input schema.
// One struct per built-in operator, holding exactly its factory's arguments (see keyed.h,
// stateless.h, windowed.h, parametric.h for their meaning).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/expr.h"
#include "ops/joins.h"
#include "ops/multi_input.h"
#include "ops/operator.h"
#include "ops/parametric.h"
#include "window/aggregates.h"
#include "window/window_aggregate.h"

namespace pao::ops {

using NamedExprs = std::vector<std::pair<std::string, ExprPtr>>;

struct FilterSpec {
  ExprPtr predicate;
};
struct SelectSpec {
  NamedExprs columns;
};
struct WithColumnsSpec {
  NamedExprs columns;
};
struct SessionizeSpec {
  std::vector<std::string> keys;
  int64_t gap = 0;  // in the time column's unit
  std::string name = "session";
};
struct LagSpec {
  std::vector<std::string> keys;
  std::vector<std::string> columns;
  std::string suffix = "_prev";
};
struct DeltaSpec {
  std::vector<std::string> keys;
  std::vector<std::string> columns;  // empty: the time column
  std::string suffix = "_delta";
};
struct RunningSpec {
  std::vector<std::string> keys;
  std::vector<window::AggSpec> aggs;
};
struct DedupeSpec {
  std::vector<std::string> keys;
  std::optional<int64_t> within;
};
struct PairsSpec {
  std::vector<std::string> keys;
  std::string item;
  int64_t gap = 0;
};
struct WindowAggregateSpec {
  std::vector<std::string> keys;  // empty: one stateful operator
  window::WindowSpec window;
  std::vector<window::AggSpec> aggs;
  bool by_window = false;  // window sets leave together in window order (stateful; windowed.h)
  std::optional<int64_t> session_gap;  // session windows instead of `window` (stateful; windowed.h)
};
struct TopKSpec {
  int64_t k = 1;
  std::string by;
  std::optional<std::string> per;
  bool descending = true;
};
// The ordered-processing paper's synthetic operator, for its experiments (benchmarks/).
struct ParametricSpec {
  OpKind kind = OpKind::kStateless;
  std::vector<std::string> keys;  // kPartitioned only
  ParametricOptions options;
};

// The as-of join with a static right table (joins.h): one input, the table held as its batches.
struct LookupJoinSpec {
  std::vector<std::string> by;
  std::shared_ptr<const Schema> schema;  // the table's
  std::vector<Batch> table;
};

using OperatorSpec = std::variant<FilterSpec, SelectSpec, WithColumnsSpec, SessionizeSpec, LagSpec, DeltaSpec,
                                  RunningSpec, DedupeSpec, PairsSpec, WindowAggregateSpec, TopKSpec, ParametricSpec,
                                  LookupJoinSpec>;

// Operators of several inputs (multi_input.h, joins.h), one port per input in order.
struct UnionSpec {};
struct IntervalJoinSpec {
  std::vector<std::string> on;
  int64_t lo = 0;  // in the time column's unit
  int64_t hi = 0;
  JoinHow how = JoinHow::kInner;
};
struct AsofJoinSpec {
  std::vector<std::string> by;
  std::optional<int64_t> tolerance;  // in the time column's unit
};
using MultiInputSpec = std::variant<UnionSpec, IntervalJoinSpec, AsofJoinSpec>;

// The operator's name as errors, plans and statistics say it ("filter", "window_aggregate", ...).
const char* spec_name(const OperatorSpec& spec) noexcept;

const char* spec_name(const MultiInputSpec& spec) noexcept;

// The operator `spec` describes, reading `input`; `time` is the pipeline's time column. Throws
// what the operator's factory throws.
OperatorPtr make_operator(const std::shared_ptr<const Schema>& input, const std::string& time,
                          const OperatorSpec& spec);
// The same for an operator of several inputs, reading `inputs` (one schema per port).
std::shared_ptr<MultiInputOperator> make_operator(const std::vector<std::shared_ptr<const Schema>>& inputs,
                                                  const std::string& time, const MultiInputSpec& spec);

}  // namespace pao::ops
