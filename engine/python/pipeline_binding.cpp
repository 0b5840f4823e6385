#include "python/pipeline_binding.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <variant>

#include "core/builder.h"
#include "core/error.h"
#include "gate/merge.h"
#include "ops/specs.h"
#include "python/capsules.h"
#include "python/expr_binding.h"
#include "python/gil.h"
#include "python/stream.h"
#include "runtime/pipeline.h"
#include "runtime/planner.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace pao::python {
namespace {

// map_batches: a Python function from pa.RecordBatch to pa.RecordBatch. Stateless, but it runs
// under the GIL, so two workers would only take turns: max_parallelism() is 1. The workers drop
// the GIL everywhere else, so the rest of the pipeline runs in parallel with it.
class PyMapBatches final : public ops::Operator {
 public:
  // `declared`: the output schema the user gave, or null to learn it from fn.
  PyMapBatches(std::shared_ptr<const Schema> input, nb::handle fn, std::shared_ptr<const Schema> declared,
               size_t index)
      : input_(std::move(input)), fn_(nb::borrow(fn)), index_(index) {
    if (!PyCallable_Check(fn.ptr())) throw Error(ErrorKind::kInvalidInput, where() + ": fn must be callable");
    if (declared) {
      output_ = std::move(declared);
    } else {
      // The output schema is what fn makes of an empty batch of the input schema.
      std::vector<ColumnBuilder> builders;
      for (const Field& f : input_->fields) builders.emplace_back(f.type);
      Batch empty = finish_batch(input_, builders);
      output_ = call(empty, /*expected=*/nullptr).schema();
    }
  }
  ~PyMapBatches() override {
    if (!Py_IsInitialized()) {
      fn_.release();
      return;
    }
    nb::gil_scoped_acquire gil;
    fn_.reset();
  }
  std::string name() const override { return "map_batches"; }
  std::string describe() const override {
    nb::gil_scoped_acquire gil;
    return "map_batches(" + nb::cast<std::string>(nb::repr(fn_)) + ")";
  }
  ops::OpKind kind() const override { return ops::OpKind::kStateless; }
  ops::Selectivity selectivity() const override { return ops::Selectivity::kAny; }
  size_t max_parallelism() const override { return 1; }
  bool may_fail() const override { return false; }  // its errors name no row (fn's reach the caller as raised)
  const std::shared_ptr<const Schema>& input_schema() const override { return input_; }
  const std::shared_ptr<const Schema>& output_schema() const override { return output_; }
  Batch process(const Batch& in) override {
    nb::gil_scoped_acquire gil;
    return call(in, output_.get());
  }

 private:
  std::string where() const { return "map_batches (operator " + std::to_string(index_) + ")"; }

  // Needs the GIL. Python exceptions propagate as nb::python_error and reach the caller of
  // Pipeline.run() unchanged.
  Batch call(const Batch& in, const Schema* expected) {
    nb::object rb = nb::module_::import_("pyarrow").attr("record_batch")(nb::cast(BatchHandle{in}));
    nb::object result = fn_(rb);
    if (!nb::hasattr(result, "__arrow_c_array__"))
      throw Error(ErrorKind::kInvalidInput, where() + ": fn must return a pyarrow.RecordBatch, got " +
                                                nb::cast<std::string>(nb::str(result.type().attr("__name__"))));
    Batch out = import_py_batch(result, where() + " result");
    if (expected != nullptr) {
      if (auto diff = schema_difference(*expected, *out.schema()))
        throw Error(ErrorKind::kSchemaMismatch, where() + ": fn returned a batch whose schema differs from " +
                                                    (expected == output_.get() ? "the first one's" : "the declared one") +
                                                    ": " + *diff);
      out = out.with_schema(output_);
    }
    return out;
  }

  std::shared_ptr<const Schema> input_;
  std::shared_ptr<const Schema> output_;
  nb::object fn_;
  size_t index_;
};

// A map_batches operator as Python specifies it: the one spec that holds Python objects, so it
// lives here rather than in ops/specs.h.
struct MapBatchesSpec {
  nb::object fn;
  std::shared_ptr<const Schema> schema;  // null: what fn makes of an empty batch
};

using PySpec = std::variant<ops::OperatorSpec, MapBatchesSpec>;

const char* spec_name(const PySpec& spec) {
  if (const auto* s = std::get_if<ops::OperatorSpec>(&spec)) return ops::spec_name(*s);
  return "map_batches";
}

// One operator from its spec over `input`; `index` numbers it in errors and for map_batches.
ops::OperatorPtr build_operator(const std::shared_ptr<const Schema>& input, const std::string& time, const PySpec& spec,
                                size_t index) {
  if (const auto* s = std::get_if<ops::OperatorSpec>(&spec)) return ops::make_operator(input, time, *s);
  const auto& m = std::get<MapBatchesSpec>(spec);
  return std::make_shared<PyMapBatches>(input, m.fn, m.schema, index);
}

// The operators `specs` describe, chained from `input`. `time` is the pipeline's time column.
// With `carry` (an int64 input column; pyarrow_ops.spark's row numbers) every operator must keep
// that column: partitioned operators that would drop it get ops::carry_column, any other that
// drops it is an error. Needs the GIL (map_batches calls fn on an empty batch).
std::vector<ops::OperatorPtr> build_operators(std::shared_ptr<const Schema> input, const std::string& time,
                                              const std::vector<PySpec>& specs, const std::string& carry) {
  std::vector<ops::OperatorPtr> out;
  std::shared_ptr<const Schema> schema = std::move(input);
  for (size_t index = 0; index < specs.size(); ++index) {
    const PySpec& spec = specs[index];
    try {
      out.push_back(build_operator(schema, time, spec, index));
      if (!carry.empty() && !out.back()->output_schema()->find(carry)) {
        out.back() = ops::carry_column(out.back(), carry);
      }
    } catch (const Error& e) {
      // Name the operator: "operator 2 (sessionize): time column 'ts' not found ..."
      throw Error(e.kind(), "operator " + std::to_string(index) + " (" + spec_name(spec) + "): " + e.what());
    }
    schema = out.back()->output_schema();
  }
  if (out.empty()) throw Error(ErrorKind::kInvalidInput, "the pipeline has no operators; add one, e.g. .filter(...)");
  return out;
}

ops::NamedExprs named_exprs(const std::vector<std::pair<std::string, nb::tuple>>& items) {
  ops::NamedExprs out;
  for (const auto& [name, ir] : items) out.emplace_back(name, expr_from_python(ir));
  return out;
}

std::shared_ptr<const Schema> schema_from(nb::capsule capsule) {
  return std::make_shared<const Schema>(arrow::import_schema(*from_capsule<ArrowSchema>(capsule, "arrow_schema")));
}

// A node of a graph as Python describes it: a source (its index among the input groups), an
// operator over one node, or an operator over several (union, joins), with its input nodes.
struct SourceSpec {
  size_t index = 0;
};
using NodeSpec = std::variant<SourceSpec, ops::OperatorSpec, MapBatchesSpec, ops::MultiInputSpec>;
struct GraphNodeSpec {
  NodeSpec spec;
  std::vector<size_t> inputs;
};

const char* node_name(const NodeSpec& spec) {
  if (std::holds_alternative<SourceSpec>(spec)) return "source";
  if (const auto* m = std::get_if<ops::MultiInputSpec>(&spec)) return ops::spec_name(*m);
  if (const auto* o = std::get_if<ops::OperatorSpec>(&spec)) return ops::spec_name(*o);
  return "map_batches";
}

// The runtime's graph for `nodes` over `groups` (each source's streams, merged by (time, input,
// position) into batches of up to batch_size rows). Operators are numbered in node order, sources
// aside, as the runtime numbers them in errors. Needs the GIL (map_batches).
// `source(i)` makes source i's BatchSource.
template <class MakeSource>
runtime::Graph build_graph(MakeSource source, const std::string& time, const std::vector<GraphNodeSpec>& nodes,
                           const std::vector<size_t>& outputs) {
  runtime::Graph g;
  g.time = time;
  g.outputs = outputs;
  std::vector<std::shared_ptr<const Schema>> schema;
  size_t op_index = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const GraphNodeSpec& node = nodes[i];
    for (size_t in : node.inputs) {
      if (in >= i) throw Error(ErrorKind::kUsage, "graph node " + std::to_string(i) + " reads a later node");
    }
    if (const auto* src = std::get_if<SourceSpec>(&node.spec)) {
      g.sources.push_back(source(src->index));
      schema.push_back(g.sources.back()->schema());
      g.nodes.push_back(runtime::GraphNode{nullptr, {}, g.sources.size() - 1});
      continue;
    }
    try {
      ops::OperatorPtr op;
      if (const auto* m = std::get_if<ops::MultiInputSpec>(&node.spec)) {
        std::vector<std::shared_ptr<const Schema>> in;
        for (size_t k : node.inputs) in.push_back(schema[k]);
        op = ops::make_operator(in, time, *m);
      } else {
        if (node.inputs.size() != 1) throw Error(ErrorKind::kUsage, "takes one input");
        const PySpec spec = std::holds_alternative<ops::OperatorSpec>(node.spec)
                                ? PySpec(std::get<ops::OperatorSpec>(node.spec))
                                : PySpec(std::get<MapBatchesSpec>(node.spec));
        op = build_operator(schema[node.inputs[0]], time, spec, op_index);
      }
      schema.push_back(op->output_schema());
      g.nodes.push_back(runtime::GraphNode{std::move(op), node.inputs, 0});
    } catch (const Error& e) {
      throw Error(e.kind(), "operator " + std::to_string(op_index) + " (" + node_name(node.spec) + "): " + e.what());
    }
    ++op_index;
  }
  return g;
}

// A source known by its schema alone, for planning.
struct SchemaOnly final : BatchSource {
  explicit SchemaOnly(std::shared_ptr<const Schema> s) : schema_(std::move(s)) {}
  const std::shared_ptr<const Schema>& schema() const noexcept override { return schema_; }
  std::optional<Batch> next() override { return std::nullopt; }
  std::shared_ptr<const Schema> schema_;
};

// What the operator model says of `op` (the plan's per-operator entry): name, description, kind,
// selectivity, keys, max_parallelism (1 when it runs on one worker: stateful, or `sequential`) and
// output schema.
nb::dict operator_data(const ops::Operator& op, bool sequential) {
  nb::object import_schema = nb::module_::import_("pyarrow").attr("Schema").attr("_import_from_c_capsule");
  nb::dict d;
  d["name"] = op.name();
  d["description"] = op.describe();
  d["kind"] = ops::kind_name(op.kind());
  d["selectivity"] = ops::selectivity_name(op.selectivity());
  d["keys"] = ops::key_names(op);
  d["max_parallelism"] = sequential || op.kind() == ops::OpKind::kStateful ? size_t{1} : op.max_parallelism();
  d["output_schema"] = import_schema(schema_capsule(*op.output_schema()));
  return d;
}

// The plan of a built graph as Python reads it (pyarrow_ops.pipeline.explain formats it).
nb::dict plan_data(const runtime::Graph& g, const runtime::Plan& p) {
  std::vector<size_t> number(g.nodes.size(), SIZE_MAX);
  nb::list operators, nodes;
  size_t count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const runtime::GraphNode& n = g.nodes[i];
    nb::dict node;
    if (!n.op) {
      // A source the planner took out of a merge (push_below_merges) names its merge and input.
      const bool split = !g.source_origin.empty() && g.source_origin[n.source].second != SIZE_MAX;
      node["source"] = g.source_origin.empty() ? n.source : g.source_origin[n.source].first;
      node["input"] = split ? nb::cast(g.source_origin[n.source].second) : nb::none();
      nodes.append(node);
      continue;
    }
    number[i] = count++;
    node["operator"] = number[i];
    nodes.append(node);
    nb::dict d = operator_data(*n.op, n.inputs.size() > 1);
    d["inputs"] = n.inputs;  // graph node indices
    d["number"] = n.number;  // in errors and statistics (copies of one operator share it)
    const ops::Operator& op = *n.op;
    d["preserves_time"] = op.preserves_time(g.time);
    d["region"] = p.region_of[i] >= 0 ? nb::cast(p.region_of[i]) : nb::none();
    d["fused"] = p.fused_of[i] >= 0 ? nb::cast(p.fused_of[i]) : nb::none();
    operators.append(d);
  }
  auto numbers = [&](const std::vector<size_t>& ids) {
    std::vector<size_t> out;
    for (size_t i : ids) out.push_back(number[i]);
    return out;
  };
  nb::list regions, fused, shuffles;
  for (const runtime::Region& r : p.regions) {
    nb::dict d;
    d["operators"] = numbers(r.nodes);
    d["key"] = r.key;
    d["routing"] = runtime::routing_name(r.routing);
    d["ordering"] = runtime::ordering_name(r.ordering);
    regions.append(d);
  }
  for (const auto& chain : p.fused) fused.append(numbers(chain));
  for (const runtime::Shuffle& s : p.shuffles) {
    nb::dict d;
    d["from"] = s.from;
    d["to"] = s.to;
    d["key"] = s.key;
    shuffles.append(d);
  }
  nb::dict out;
  out["nodes"] = nodes;
  out["operators"] = operators;
  out["regions"] = regions;
  out["sequential"] = numbers(p.sequential);
  out["fused"] = fused;
  out["shuffles"] = shuffles;
  out["outputs"] = g.outputs;
  return out;
}

// One output of a shared run, as a BatchSource (the result stream Python holds).
struct OutputSource final : BatchSource {
  OutputSource(std::shared_ptr<runtime::Pipeline> run, size_t index) : p(std::move(run)), i(index) {}
  // Closed or dropped unread: the run stops keeping results for it (the other outputs go on).
  ~OutputSource() override { p->discard(i); }
  const std::shared_ptr<const Schema>& schema() const noexcept override { return p->schema(i); }
  std::optional<Batch> next() override { return p->next(i); }
  std::shared_ptr<runtime::Pipeline> p;
  size_t i;
};

// The operator spec classes: one per ops/specs.h struct, constructed with the factory's arguments.
void bind_specs(nb::module_& m) {
  nb::enum_<ops::OpKind>(m, "OperatorKind", "State kinds (the auto-parallelization paper's operator model).")
      .value("stateless", ops::OpKind::kStateless)
      .value("partitioned", ops::OpKind::kPartitioned)
      .value("stateful", ops::OpKind::kStateful);
  nb::class_<ops::FilterSpec>(m, "FilterSpec")
      .def("__init__", [](ops::FilterSpec* self, nb::tuple predicate) {
        new (self) ops::FilterSpec{expr_from_python(predicate)};
      }, "predicate"_a);
  nb::class_<ops::SelectSpec>(m, "SelectSpec")
      .def("__init__", [](ops::SelectSpec* self, const std::vector<std::pair<std::string, nb::tuple>>& columns) {
        new (self) ops::SelectSpec{named_exprs(columns)};
      }, "columns"_a);
  nb::class_<ops::WithColumnsSpec>(m, "WithColumnsSpec")
      .def("__init__", [](ops::WithColumnsSpec* self, const std::vector<std::pair<std::string, nb::tuple>>& columns) {
        new (self) ops::WithColumnsSpec{named_exprs(columns)};
      }, "columns"_a);
  nb::class_<ops::SessionizeSpec>(m, "SessionizeSpec")
      .def(nb::init<std::vector<std::string>, int64_t, std::string>(), "keys"_a, "gap"_a, "name"_a)
      .def_rw("keys", &ops::SessionizeSpec::keys);
  nb::class_<ops::LagSpec>(m, "LagSpec")
      .def(nb::init<std::vector<std::string>, std::vector<std::string>, std::string>(), "keys"_a, "columns"_a,
           "suffix"_a)
      .def_rw("keys", &ops::LagSpec::keys);
  nb::class_<ops::DeltaSpec>(m, "DeltaSpec")
      .def(nb::init<std::vector<std::string>, std::vector<std::string>, std::string>(), "keys"_a, "columns"_a,
           "suffix"_a)
      .def_rw("keys", &ops::DeltaSpec::keys);
  nb::class_<ops::RunningSpec>(m, "RunningSpec")
      .def(nb::init<std::vector<std::string>, std::vector<window::AggSpec>>(), "keys"_a, "aggs"_a)
      .def_rw("keys", &ops::RunningSpec::keys);
  nb::class_<ops::DedupeSpec>(m, "DedupeSpec")
      .def(nb::init<std::vector<std::string>, std::optional<int64_t>>(), "keys"_a, "within"_a.none())
      .def_rw("keys", &ops::DedupeSpec::keys);
  nb::class_<ops::PairsSpec>(m, "PairsSpec")
      .def(nb::init<std::vector<std::string>, std::string, int64_t>(), "keys"_a, "item"_a, "gap"_a)
      .def_rw("keys", &ops::PairsSpec::keys);
  nb::class_<ops::WindowAggregateSpec>(m, "WindowAggregateSpec")
      .def(nb::init<std::vector<std::string>, window::WindowSpec, std::vector<window::AggSpec>, bool,
                    std::optional<int64_t>>(),
           "keys"_a, "window"_a, "aggs"_a, "by_window"_a = false, "session_gap"_a = nb::none())
      .def_rw("keys", &ops::WindowAggregateSpec::keys);
  nb::class_<ops::TopKSpec>(m, "TopKSpec")
      .def(nb::init<int64_t, std::string, std::optional<std::string>, bool>(), "k"_a, "by"_a, "per"_a.none(),
           "descending"_a);
  nb::class_<ops::ParametricSpec>(m, "ParametricSpec")
      .def("__init__",
           [](ops::ParametricSpec* self, ops::OpKind kind, std::vector<std::string> keys, double cost_us,
              double selectivity, int64_t state_bytes) {
             new (self) ops::ParametricSpec{kind, std::move(keys), {cost_us, selectivity, state_bytes}};
           },
           "kind"_a, "keys"_a, "cost_us"_a, "selectivity"_a, "state_bytes"_a);
  nb::class_<ops::LookupJoinSpec>(m, "LookupJoinSpec")
      .def("__init__",
           [](ops::LookupJoinSpec* self, std::vector<std::string> by, Stream* table) {
             std::unique_ptr<BatchSource> src = table->take();
             std::vector<Batch> batches;
             while (std::optional<Batch> b = src->next()) batches.push_back(std::move(*b));
             new (self) ops::LookupJoinSpec{std::move(by), src->schema(), std::move(batches)};
           },
           "by"_a, "table"_a, "join_asof with a static right table (read whole, now).");
  nb::enum_<ops::JoinHow>(m, "JoinHow").value("inner", ops::JoinHow::kInner).value("left", ops::JoinHow::kLeft);
  nb::class_<ops::UnionSpec>(m, "UnionSpec").def(nb::init<>());
  nb::class_<ops::IntervalJoinSpec>(m, "JoinSpec")
      .def(nb::init<std::vector<std::string>, int64_t, int64_t, ops::JoinHow>(), "on"_a, "lo"_a, "hi"_a, "how"_a);
  nb::class_<ops::AsofJoinSpec>(m, "AsofJoinSpec")
      .def(nb::init<std::vector<std::string>, std::optional<int64_t>>(), "by"_a, "tolerance"_a.none());
  nb::class_<SourceSpec>(m, "SourceSpec").def(nb::init<size_t>(), "index"_a);
  nb::class_<GraphNodeSpec>(m, "GraphNode")
      .def(nb::init<NodeSpec, std::vector<size_t>>(), "spec"_a, "inputs"_a,
           "A node of a graph: a SourceSpec, an operator spec over one input node, or a UnionSpec, JoinSpec or "
           "AsofJoinSpec over several (input node indices, earlier nodes).");
  nb::class_<MapBatchesSpec>(m, "MapBatchesSpec")
      .def("__init__",
           [](MapBatchesSpec* self, nb::callable fn, std::optional<nb::capsule> schema) {
             new (self) MapBatchesSpec{fn, schema ? schema_from(*schema) : nullptr};
           },
           "fn"_a, "schema"_a.none());
}

// A cut (runtime::Cut) as Python holds it for a checkpoint: a dict of lists, batches as _engine.Batch
// (origin's SIZE_MAX as -1), and back.
nb::list batch_list(const std::vector<Batch>& batches) {
  nb::list out;
  for (const Batch& b : batches) out.append(BatchHandle{b});
  return out;
}
nb::object cut_to_python(const runtime::Cut& c) {
  nb::dict d;
  d["stages"] = c.stages;
  nb::list states, held, queued, origin;
  for (const auto& s : c.states) states.append(batch_list(s));
  for (const auto& s : c.held) held.append(batch_list(s));
  for (const auto& s : c.queued) queued.append(batch_list(s));
  for (const auto& [group, input] : c.origin) {
    origin.append(nb::make_tuple(group, input == SIZE_MAX ? int64_t{-1} : static_cast<int64_t>(input)));
  }
  std::vector<bool> finished(c.finished.begin(), c.finished.end());
  d["states"] = states;
  d["finished"] = finished;
  d["rows"] = c.rows;
  d["held"] = held;
  d["origin"] = origin;
  d["queued"] = queued;
  nb::list inputs;
  for (const auto& source : c.inputs) {
    nb::list per;
    for (const auto& in : source) per.append(nb::make_tuple(batch_list(in.state), batch_list(in.pending)));
    inputs.append(per);
  }
  d["inputs"] = inputs;
  return d;
}
std::vector<std::vector<Batch>> batch_lists(nb::handle lists, const std::string& what) {
  std::vector<std::vector<Batch>> out;
  for (nb::handle list : lists) {
    out.emplace_back();
    for (nb::handle b : list) out.back().push_back(import_py_batch(b, "a checkpoint's " + what));
  }
  return out;
}
runtime::Cut cut_from(nb::handle d) {
  runtime::Cut c;
  c.stages = nb::cast<std::vector<std::string>>(d["stages"]);
  c.states = batch_lists(d["states"], "operator state");
  for (bool f : nb::cast<std::vector<bool>>(d["finished"])) c.finished.push_back(f ? 1 : 0);
  c.rows = nb::cast<std::vector<std::vector<int64_t>>>(d["rows"]);
  c.held = batch_lists(d["held"], "held rows");
  for (nb::handle o : d["origin"]) {
    const auto [group, input] = nb::cast<std::pair<int64_t, int64_t>>(o);
    c.origin.emplace_back(static_cast<size_t>(group), input < 0 ? SIZE_MAX : static_cast<size_t>(input));
  }
  c.queued = batch_lists(d["queued"], "output rows");
  c.inputs.resize(c.rows.size());  // the inputs' own states go to their sources (within_lateness), not to the run
  return c;
}

// A running pipeline's handle: Python keeps it for stats() and cancel(); the result stream shares
// the pipeline.
struct PipelineHandle {
  std::shared_ptr<runtime::Pipeline> pipeline;
};

}  // namespace

void bind_pipeline(nb::module_& m) {
  bind_specs(m);
  m.def(
      "plan",
      [](nb::capsule schema, std::string time, const std::vector<PySpec>& operators, std::string carry) {
        std::vector<ops::OperatorPtr> ops = build_operators(schema_from(schema), time, operators, carry);
        nb::list out;
        for (const auto& op : ops) out.append(operator_data(*op, false));
        return out;
      },
      "schema"_a, "time"_a, "operators"_a, "carry"_a = "",
      "The operators a pipeline over `schema` (an arrow_schema capsule) would run, for explain().");
  m.def(
      "run_pipeline",
      [](std::vector<Stream*> inputs, std::string time, const std::vector<PySpec>& operators,
         runtime::PipelineOptions options, int64_t batch_size, bool merge, std::string carry) {
        options.check_interrupt = interrupt_check();
        std::vector<std::unique_ptr<BatchSource>> sources;
        for (Stream* s : inputs) sources.push_back(s->take());
        // merge=false: one input already in the order to process (a later stage of
        // pyarrow_ops.spark.run, sorted by sequence numbers), read as it comes.
        if (!merge && sources.size() != 1) throw Error(ErrorKind::kUsage, "merge=False takes exactly one input");
        std::unique_ptr<BatchSource> merged =
            merge ? gate::make_merge(std::move(sources), {time, batch_size}) : std::move(sources[0]);
        std::vector<ops::OperatorPtr> ops = build_operators(merged->schema(), time, operators, carry);
        auto p = shared_without_gil(new runtime::Pipeline(std::move(merged), std::move(ops), std::move(options)));
        return std::make_pair(Stream{std::make_unique<SharedSource<runtime::Pipeline>>(p)}, PipelineHandle{p});
      },
      "inputs"_a, "time"_a, "operators"_a, "options"_a, "batch_size"_a = 65536, "merge"_a = true, "carry"_a = "",
      "Runs a pipeline over time-sorted streams merged by (time, input, position) (batch_size: rows per "
      "merged batch); consumes the inputs.");

  m.def(
      "run_graph",
      [](std::vector<std::vector<Stream*>> sources, std::string time, const std::vector<GraphNodeSpec>& nodes,
         std::vector<size_t> outputs, runtime::PipelineOptions options, int64_t batch_size, nb::object resume) {
        options.check_interrupt = interrupt_check();
        if (!resume.is_none()) options.resume = std::make_shared<const runtime::Cut>(cut_from(resume));
        auto source = [&](size_t i) {
          if (i >= sources.size()) throw Error(ErrorKind::kUsage, "a graph node names a missing source");
          std::vector<std::unique_ptr<BatchSource>> streams;
          for (Stream* st : sources[i]) streams.push_back(st->take());
          return gate::make_merge(std::move(streams), {time, batch_size});
        };
        runtime::Graph g = build_graph(source, time, nodes, outputs);
        auto p = shared_without_gil(new runtime::Pipeline(std::move(g), std::move(options)));
        std::vector<Stream> streams;
        for (size_t o = 0; o < outputs.size(); ++o) streams.push_back(Stream{std::make_unique<OutputSource>(p, o)});
        return std::make_pair(std::move(streams), PipelineHandle{p});
      },
      "sources"_a, "time"_a, "nodes"_a, "outputs"_a, "options"_a, "batch_size"_a = 65536, "resume"_a = nb::none(),
      "Runs a graph: `sources` are groups of time-sorted streams, each group merged by (time, input, position) "
      "(batch_size rows per merged batch); `nodes` in topological order; one result stream per output node. "
      "Consumes the inputs. `resume`: a cut (PipelineHandle.cut()) the run goes on from, its sources' inputs "
      "less the rows the cut counts.");

  m.def(
      "plan_graph",
      [](std::vector<nb::capsule> sources, std::string time, const std::vector<GraphNodeSpec>& nodes,
         std::vector<size_t> outputs, bool fuse, std::vector<size_t> inputs, bool push_down) {
        auto source = [&](size_t i) -> std::unique_ptr<BatchSource> {
          if (i >= sources.size()) throw Error(ErrorKind::kUsage, "a graph node names a missing source");
          // A source of several inputs is their merge, which the planner may take apart.
          std::vector<std::unique_ptr<BatchSource>> streams;
          const size_t k = i < inputs.size() ? std::max<size_t>(inputs[i], 1) : 1;
          for (size_t j = 0; j < k; ++j) streams.push_back(std::make_unique<SchemaOnly>(schema_from(sources[i])));
          return gate::make_merge(std::move(streams), {time, 65536});
        };
        runtime::Graph g = runtime::key_by_epochs(build_graph(source, time, nodes, outputs));
        if (push_down) g = runtime::push_below_merges(std::move(g));
        runtime::Plan p = runtime::plan(g, fuse);
        return plan_data(g, p);
      },
      "sources"_a, "time"_a, "nodes"_a, "outputs"_a, "fuse"_a = true, "inputs"_a = std::vector<size_t>{},
      "push_down"_a = true,
      "The plan of a graph over sources of the given schemas (arrow_schema capsules; `inputs`: how many inputs "
      "each source merges, 1 if not given): operators, parallel regions with routing and ordering, fused chains, "
      "shuffles, and operators run on each input before a merge (runtime/planner.h).");

  nb::class_<PipelineHandle>(m, "PipelineHandle")
      .def(
          "next_any",
          [](PipelineHandle& h) -> std::optional<std::pair<size_t, std::optional<BatchHandle>>> {
            auto r = without_gil([&] { return h.pipeline->next_any(); });
            if (!r) return std::nullopt;
            std::optional<BatchHandle> b;
            if (r->second) b = BatchHandle{std::move(*r->second)};
            return std::make_pair(r->first, std::move(b));
          },
          "The next batch of whichever output has one, as (output, batch), or (output, None) once at each "
          "output's end; None when every output has ended.")
      .def("cancel",
           [](PipelineHandle& h) {
             nb::gil_scoped_release nogil;
             h.pipeline->cancel();
           })
      .def(
          "cut",
          [](PipelineHandle& h, bool take) -> nb::object {
            std::optional<runtime::Cut> c = without_gil([&] { return h.pipeline->cut(take); });
            if (!c) return nb::none();
            return cut_to_python(*c);
          },
          "take"_a = false,
          "A consistent cut for a checkpoint (runtime/pipeline.h): a dict of the stages' names, states and "
          "finished flags, each source's rows per input, held batches and origin, and each output's queued "
          "batches (take=True: taken out of the queues); None when an operator cannot save its state.")
      .def(
          "help", [](PipelineHandle& h) { return without_gil([&] { return h.pipeline->help(); }); },
          "One step of operator work on the workers' behalf, from a thread waiting for room (runtime/pipeline.h).")
      .def("stats", [](PipelineHandle& h) {
        const runtime::PipelineStats s = h.pipeline->stats();
        nb::list ops;
        for (const auto& o : s.operators) {
          nb::dict d;
          d["name"] = o.name;
          d["kind"] = ops::kind_name(o.kind);
          d["tuples_in"] = o.tuples_in;
          d["tuples_out"] = o.tuples_out;
          d["busy_ns"] = o.busy_ns;
          d["cpu_ns"] = o.cpu_ns;
          d["morsels"] = o.morsels;
          d["queued"] = o.queued;
          d["cost_ns_per_tuple"] = o.tuples_in > 0 ? static_cast<double>(o.busy_ns) / static_cast<double>(o.tuples_in) : 0.0;
          d["selectivity"] = o.tuples_in > 0 ? static_cast<double>(o.tuples_out) / static_cast<double>(o.tuples_in) : 0.0;
          d["max_parallelism"] = o.max_parallelism;
          d["peak_workers"] = o.peak_workers;
          d["fused"] = o.fused;
          d["copies"] = o.copies;
          ops.append(d);
        }
        nb::dict d;
        d["operators"] = ops;
        d["tuples_in"] = s.tuples_in;
        d["tuples_out"] = s.tuples_out;
        d["threads"] = s.threads;
        d["partitions"] = s.partitions;
        d["morsel_rows"] = s.morsel_rows;
        d["peak_inflight"] = s.peak_inflight;
        d["ingress_steps"] = s.ingress_steps;
        d["helper_steps"] = s.helper_steps;
        d["latencies_ns"] = s.latencies_ns;
        nb::list levels;
        for (const auto& l : s.levels) {
          nb::dict e;
          e["at_ns"] = l.at_ns;
          e["threads"] = l.level;
          e["tuples_per_s"] = l.tuples_per_s;
          e["free_cores"] = std::isinf(l.free_cores) ? nb::none() : nb::cast(l.free_cores);
          levels.append(e);
        }
        d["thread_levels"] = levels;
        return d;
      });
}

}  // namespace pao::python
