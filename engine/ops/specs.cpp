#include "ops/specs.h"

#include "core/error.h"
#include "ops/keyed.h"
#include "ops/stateless.h"
#include "ops/windowed.h"

namespace pao::ops {
namespace {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace

const char* spec_name(const OperatorSpec& spec) noexcept {
  return std::visit(Overloaded{
                        [](const FilterSpec&) { return "filter"; },
                        [](const SelectSpec&) { return "select"; },
                        [](const WithColumnsSpec&) { return "with_columns"; },
                        [](const SessionizeSpec&) { return "sessionize"; },
                        [](const LagSpec&) { return "lag"; },
                        [](const DeltaSpec&) { return "delta"; },
                        [](const RunningSpec&) { return "running"; },
                        [](const DedupeSpec&) { return "dedupe"; },
                        [](const PairsSpec&) { return "pairs"; },
                        [](const WindowAggregateSpec&) { return "window_aggregate"; },
                        [](const TopKSpec&) { return "top_k"; },
                        [](const ParametricSpec&) { return "parametric"; },
                        [](const LookupJoinSpec&) { return "join_asof"; },
                    },
                    spec);
}

const char* spec_name(const MultiInputSpec& spec) noexcept {
  return std::visit(Overloaded{
                        [](const UnionSpec&) { return "union"; },
                        [](const IntervalJoinSpec&) { return "join"; },
                        [](const AsofJoinSpec&) { return "join_asof"; },
                    },
                    spec);
}

OperatorPtr make_operator(const std::shared_ptr<const Schema>& in, const std::string& time,
                          const OperatorSpec& spec) {
  return std::visit(
      Overloaded{
          [&](const FilterSpec& s) { return make_filter(in, s.predicate); },
          [&](const SelectSpec& s) { return make_select(in, s.columns); },
          [&](const WithColumnsSpec& s) { return make_with_columns(in, s.columns); },
          [&](const SessionizeSpec& s) { return make_sessionize(in, s.keys, time, s.gap, s.name); },
          [&](const LagSpec& s) { return make_lag(in, s.keys, s.columns, s.suffix, time); },
          [&](const DeltaSpec& s) { return make_delta(in, s.keys, time, s.columns, s.suffix); },
          [&](const RunningSpec& s) { return make_running(in, s.keys, s.aggs, time); },
          [&](const DedupeSpec& s) { return make_dedupe(in, s.keys, time, s.within); },
          [&](const PairsSpec& s) { return make_pairs(in, s.keys, time, s.item, s.gap); },
          [&](const WindowAggregateSpec& s) {
            return make_window_aggregate(in, time, s.window, s.aggs, s.keys, s.by_window, s.session_gap);
          },
          [&](const TopKSpec& s) { return make_top_k(in, s.k, s.by, s.per, s.descending); },
          [&](const ParametricSpec& s) -> OperatorPtr {
            switch (s.kind) {
              case OpKind::kStateless:
                return make_stateless_parametric(in, s.options);
              case OpKind::kStateful:
                return make_stateful_parametric(in, s.options);
              case OpKind::kPartitioned:
                if (s.keys.empty()) throw Error(ErrorKind::kInvalidInput, "a partitioned parametric operator needs keys");
                return make_keyed_parametric(in, s.keys, s.options);
            }
            throw Error(ErrorKind::kInvalidInput, "unknown parametric kind");
          },
          [&](const LookupJoinSpec& s) { return make_lookup_join(in, s.schema, s.table, time, s.by); },
      },
      spec);
}

std::shared_ptr<MultiInputOperator> make_operator(const std::vector<std::shared_ptr<const Schema>>& inputs,
                                                  const std::string& time, const MultiInputSpec& spec) {
  auto two = [&](const char* name) {
    if (inputs.size() != 2) {
      throw Error(ErrorKind::kInvalidInput, std::string(name) + " takes two inputs, got " + std::to_string(inputs.size()));
    }
  };
  return std::visit(
      Overloaded{
          [&](const UnionSpec&) { return make_union(inputs, time); },
          [&](const IntervalJoinSpec& s) {
            two("join");
            return make_interval_join(inputs[0], inputs[1], time, s.on, s.lo, s.hi, s.how);
          },
          [&](const AsofJoinSpec& s) {
            two("join_asof");
            return make_asof_join(inputs[0], inputs[1], time, s.by, s.tolerance);
          },
      },
      spec);
}

}  // namespace pao::ops
