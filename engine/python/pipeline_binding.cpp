#include "python/pipeline_binding.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "core/builder.h"
#include "core/error.h"
#include "ops/keyed.h"
#include "ops/parametric.h"
#include "ops/stateless.h"
#include "ops/windowed.h"
#include "python/capsules.h"
#include "python/expr_binding.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace pao::python {
namespace {

window::AggKind agg_kind(const std::string& name) {
  static const std::pair<const char*, window::AggKind> kinds[] = {
      {"count", window::AggKind::kCount}, {"sum", window::AggKind::kSum},     {"mean", window::AggKind::kMean},
      {"min", window::AggKind::kMin},     {"max", window::AggKind::kMax},     {"first", window::AggKind::kFirst},
      {"last", window::AggKind::kLast}};
  for (const auto& [n, k] : kinds)
    if (name == n) return k;
  throw Error(ErrorKind::kInvalidInput, "unknown aggregate function '" + name + "'");
}

std::vector<window::AggSpec> agg_specs(nb::handle aggs) {
  std::vector<window::AggSpec> out;
  for (nb::handle a : aggs) {
    auto t = nb::cast<nb::tuple>(a);
    out.push_back({nb::cast<std::string>(t[0]), agg_kind(nb::cast<std::string>(t[1])), nb::cast<std::string>(t[2])});
  }
  return out;
}

std::vector<std::pair<std::string, ExprPtr>> named_exprs(nb::handle list) {
  std::vector<std::pair<std::string, ExprPtr>> out;
  for (nb::handle item : list) {
    auto t = nb::cast<nb::tuple>(item);
    out.emplace_back(nb::cast<std::string>(t[0]), expr_from_python(t[1]));
  }
  return out;
}

// map_batches: a Python function from pa.RecordBatch to pa.RecordBatch. Stateless, but it runs
// under the GIL, so two workers would only take turns: max_parallelism() is 1. The workers drop
// the GIL everywhere else, so the rest of the pipeline runs in parallel with it.
class PyMapBatches final : public ops::Operator {
 public:
  PyMapBatches(std::shared_ptr<const Schema> input, nb::handle fn, nb::handle schema, size_t index)
      : input_(std::move(input)), fn_(nb::borrow(fn)), index_(index) {
    if (!PyCallable_Check(fn.ptr())) throw Error(ErrorKind::kInvalidInput, where() + ": fn must be callable");
    if (!schema.is_none()) {
      output_ = std::make_shared<const Schema>(
          arrow::import_schema(*from_capsule<ArrowSchema>(schema.attr("__arrow_c_schema__")(), "arrow_schema")));
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

std::optional<int64_t> optional_int(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  return nb::cast<int64_t>(h);
}

ops::OperatorPtr build_one(const std::shared_ptr<const Schema>& in, const std::string& time, nb::tuple spec,
                           size_t index) {
  const auto op = nb::cast<std::string>(spec[0]);
  auto strings = [&](size_t i) { return nb::cast<std::vector<std::string>>(spec[i]); };
  if (op == "filter") return ops::make_filter(in, expr_from_python(spec[1]));
  if (op == "select") return ops::make_select(in, named_exprs(spec[1]));
  if (op == "with_columns") return ops::make_with_columns(in, named_exprs(spec[1]));
  if (op == "map_batches") return std::make_shared<PyMapBatches>(in, spec[1], spec[2], index);
  if (op == "sessionize")
    return ops::make_sessionize(in, strings(1), time, nb::cast<int64_t>(spec[2]), nb::cast<std::string>(spec[3]));
  if (op == "lag") return ops::make_lag(in, strings(1), strings(2), nb::cast<std::string>(spec[3]), time);
  if (op == "delta") return ops::make_delta(in, strings(1), time, strings(2), nb::cast<std::string>(spec[3]));
  if (op == "running") return ops::make_running(in, strings(1), agg_specs(spec[2]), time);
  if (op == "dedupe") return ops::make_dedupe(in, strings(1), time, optional_int(spec[2]));
  if (op == "pairs")
    return ops::make_pairs(in, strings(1), time, nb::cast<std::string>(spec[2]), nb::cast<int64_t>(spec[3]));
  if (op == "window_aggregate") {
    window::WindowSpec w{nb::cast<int64_t>(spec[2]), nb::cast<int64_t>(spec[3]), nb::cast<int64_t>(spec[4])};
    return ops::make_window_aggregate(in, time, w, agg_specs(spec[5]), strings(1));
  }
  if (op == "top_k") {
    std::optional<std::string> per;
    if (!spec[3].is_none()) per = nb::cast<std::string>(spec[3]);
    return ops::make_top_k(in, nb::cast<int64_t>(spec[1]), nb::cast<std::string>(spec[2]), per,
                           nb::cast<bool>(spec[4]));
  }
  if (op == "parametric") {
    const auto kind = nb::cast<std::string>(spec[1]);
    ops::ParametricOptions o;
    o.cost_us = nb::cast<double>(spec[3]);
    o.selectivity = nb::cast<double>(spec[4]);
    o.state_bytes = nb::cast<int64_t>(spec[5]);
    if (kind == "stateless") return ops::make_stateless_parametric(in, o);
    if (kind == "stateful") return ops::make_stateful_parametric(in, o);
    if (kind == "partitioned") return ops::make_keyed_parametric(in, strings(2), o);
    throw Error(ErrorKind::kInvalidInput, "parametric kind must be 'stateless', 'partitioned' or 'stateful', got '" +
                                              kind + "'");
  }
  throw Error(ErrorKind::kInvalidInput, "unknown pipeline operator '" + op + "'");
}

}  // namespace

std::vector<ops::OperatorPtr> build_operators(std::shared_ptr<const Schema> input, const std::string& time,
                                              nb::handle specs, const std::string& carry) {
  std::vector<ops::OperatorPtr> out;
  std::shared_ptr<const Schema> schema = std::move(input);
  size_t index = 0;
  for (nb::handle s : specs) {
    auto spec = nb::cast<nb::tuple>(s);
    try {
      out.push_back(build_one(schema, time, spec, index));
      if (!carry.empty() && !out.back()->output_schema()->find(carry)) {
        out.back() = ops::carry_column(out.back(), carry);
      }
    } catch (const Error& e) {
      // Name the operator: "operator 2 (sessionize): time column 'ts' not found ..."
      throw Error(e.kind(), "operator " + std::to_string(index) + " (" + nb::cast<std::string>(spec[0]) +
                                "): " + e.what());
    }
    schema = out.back()->output_schema();
    ++index;
  }
  if (out.empty()) throw Error(ErrorKind::kInvalidInput, "the pipeline has no operators; add one, e.g. .filter(...)");
  return out;
}

std::shared_ptr<runtime::Pipeline> make_pipeline(std::unique_ptr<BatchSource> source, std::vector<ops::OperatorPtr> ops,
                                                 runtime::PipelineOptions options) {
  return std::shared_ptr<runtime::Pipeline>(
      new runtime::Pipeline(std::move(source), std::move(ops), std::move(options)), [](runtime::Pipeline* p) {
        if (Py_IsInitialized() && PyGILState_Check()) {
          nb::gil_scoped_release nogil;
          delete p;
        } else {
          delete p;
        }
      });
}

void bind_pipeline(nb::module_& m) {
  m.def(
      "plan",
      [](nb::handle schema, std::string time, nb::handle specs, std::string carry) {
        auto sch = std::make_shared<const Schema>(
            arrow::import_schema(*from_capsule<ArrowSchema>(schema.attr("__arrow_c_schema__")(), "arrow_schema")));
        std::vector<ops::OperatorPtr> ops = build_operators(sch, time, specs, carry);
        nb::list out;
        for (const auto& op : ops) {
          nb::dict d;
          d["name"] = op->name();
          d["description"] = op->describe();
          d["kind"] = ops::kind_name(op->kind());
          d["selectivity"] = ops::selectivity_name(op->selectivity());
          std::vector<std::string> keys;
          for (size_t c : op->key_columns()) keys.push_back(op->input_schema()->fields[c].name);
          d["keys"] = keys;
          d["max_parallelism"] = op->kind() == ops::OpKind::kStateful ? size_t{1} : op->max_parallelism();
          d["output_schema"] =
              nb::module_::import_("pyarrow").attr("Schema").attr("_import_from_c_capsule")(schema_capsule(*op->output_schema()));
          out.append(d);
        }
        return out;
      },
      "schema"_a, "time"_a, "specs"_a, "carry"_a = "", "The operators a pipeline would run, for explain().");

  nb::class_<PipelineHandle>(m, "PipelineHandle")
      .def("cancel",
           [](PipelineHandle& h) {
             nb::gil_scoped_release nogil;
             h.pipeline->cancel();
           })
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
          d["morsels"] = o.morsels;
          d["queued"] = o.queued;
          d["cost_ns_per_tuple"] = o.tuples_in > 0 ? static_cast<double>(o.busy_ns) / static_cast<double>(o.tuples_in) : 0.0;
          d["selectivity"] = o.tuples_in > 0 ? static_cast<double>(o.tuples_out) / static_cast<double>(o.tuples_in) : 0.0;
          d["max_parallelism"] = o.max_parallelism;
          d["peak_workers"] = o.peak_workers;
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
        d["latencies_ns"] = s.latencies_ns;
        return d;
      });
}

}  // namespace pao::python
