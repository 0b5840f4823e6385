// pyarrow_ops._engine: the nanobind bindings. Thin by design: convert, drop the GIL, forward.
// The typed, documented API lives in the pyarrow_ops Python package.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "arrow/counting_stream.h"
#include "arrow/export.h"
#include "arrow/import.h"
#include "core/error.h"
#include "gate/merge.h"
#include "gate/tgate_bench.h"
#include "gate/times.h"
#include "ops/multiway.h"
#include "python/capsules.h"
#include "python/expr_binding.h"
#include "python/pipeline_binding.h"
#include "python/py_iter_source.h"
#include "runtime/pipeline.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace pao::python {
namespace {

// A result or input stream held by Python: a BatchSource until it is consumed or closed.
struct Stream {
  std::unique_ptr<BatchSource> source;
  // next_batch() pulls without the GIL. These two, read and written only with the GIL held, keep
  // another thread's close() from freeing the source under the pull (close() is then carried out
  // when the pull returns), and a second reader from pulling the same source at once.
  bool pulling = false;
  bool close_requested = false;

  BatchSource& get() {
    if (!source) throw Error(ErrorKind::kUsage, "this stream was already consumed or closed");
    if (pulling) {
      throw Error(ErrorKind::kUsage, "this stream is being read by another thread; a result is read by one thread");
    }
    return *source;
  }
  std::unique_ptr<BatchSource> take() {
    get();
    return std::move(source);
  }
  void close() {
    if (pulling) {
      close_requested = true;
    } else {
      source.reset();
    }
  }
};

// Exception classes, created at import; their Python homes are in pyarrow_ops.errors.
constexpr int kErrorKinds = static_cast<int>(ErrorKind::kUsage) + 1;  // kUsage is the last kind
PyObject* g_error_classes[kErrorKinds] = {};

PyObject* new_error(nb::module_& m, const char* name, PyObject* bases, const char* doc) {
  std::string qualified = std::string("pyarrow_ops.errors.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (cls == nullptr) throw nb::python_error();
  m.attr(name) = nb::handle(cls);
  return cls;
}

void define_errors(nb::module_& m) {
  PyObject* base = new_error(m, "PyArrowOpsError", PyExc_Exception,
                             "Base class of every error pyarrow-ops raises.");
  auto bases = [&](PyObject* other) { return nb::make_tuple(nb::handle(base), nb::handle(other)); };
  nb::object invalid_bases = bases(PyExc_ValueError);
  PyObject* invalid = new_error(m, "InvalidInputError", invalid_bases.ptr(),
                                "An input or argument the engine cannot use as given.");
  g_error_classes[static_cast<int>(ErrorKind::kInvalidInput)] = invalid;
  nb::object type_bases = bases(PyExc_TypeError);
  g_error_classes[static_cast<int>(ErrorKind::kUnsupportedType)] =
      new_error(m, "UnsupportedTypeError", type_bases.ptr(),
                "A column whose Arrow type pyarrow-ops does not support.");
  g_error_classes[static_cast<int>(ErrorKind::kSchemaMismatch)] =
      new_error(m, "SchemaMismatchError", type_bases.ptr(),
                "Inputs, or batches of one input, whose schemas differ.");
  g_error_classes[static_cast<int>(ErrorKind::kUnsorted)] =
      new_error(m, "UnsortedInputError", invalid,
                "An input not sorted by its time column; names input, row and values.");
  g_error_classes[static_cast<int>(ErrorKind::kNullTime)] =
      new_error(m, "NullTimeError", invalid, "A null in the time column; names input and row.");
  nb::object runtime_bases = bases(PyExc_RuntimeError);
  g_error_classes[static_cast<int>(ErrorKind::kInputFailed)] =
      new_error(m, "InputFailedError", runtime_bases.ptr(),
                "A producer reported an error while the engine read from it.");
  g_error_classes[static_cast<int>(ErrorKind::kUsage)] =
      new_error(m, "UsageError", runtime_bases.ptr(),
                "The API used out of order, e.g. a result read twice.");
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      PyErr_SetString(g_error_classes[static_cast<int>(e.kind())], e.what());
    }
  });
}

// Runs `f` without the GIL. A Python error stored by a failed run (a KeyboardInterrupt, a
// failing Python input) is re-raised as a copy: raising moves the error out of the object, and
// the run raises the same stored object again on every later call.
template <class F>
auto without_gil(F&& f) {
  try {
    nb::gil_scoped_release nogil;
    return f();
  } catch (const nb::python_error& e) {
    throw nb::python_error(e);
  }
}

std::optional<Batch> pull(BatchSource& source) {
  return without_gil([&] { return source.next(); });
}

// The result side of an aggregate as a BatchSource; the Aggregation handle shares the operator.
struct AggregateSource final : BatchSource {
  std::shared_ptr<ops::MultiwayAggregate> op;
  const std::shared_ptr<const Schema>& schema() const noexcept override { return op->schema(); }
  std::optional<Batch> next() override { return op->next(); }
};

// The operator, shared by the result and the handle, is destroyed without the GIL: its
// destructor cancels and joins the producer threads, and a producer may be waiting for the GIL
// to pull a Python input (py_iter_source.h); joining it while holding the GIL would deadlock.
std::shared_ptr<ops::MultiwayAggregate> make_aggregate(std::shared_ptr<const Schema> schema, size_t inputs,
                                                       ops::MultiwayOptions options) {
  return std::shared_ptr<ops::MultiwayAggregate>(
      new ops::MultiwayAggregate(std::move(schema), inputs, std::move(options)), [](ops::MultiwayAggregate* p) {
        if (Py_IsInitialized() && PyGILState_Check()) {
          nb::gil_scoped_release nogil;
          delete p;
        } else {
          delete p;
        }
      });
}

// The handle Python keeps for pushing and for statistics.
struct Aggregation {
  std::shared_ptr<ops::MultiwayAggregate> op;
};

ops::MultiwayOptions aggregate_options(std::string time, std::vector<std::string> keys, int64_t size,
                                       int64_t advance, int64_t offset,
                                       const std::vector<std::tuple<std::string, std::string, std::string>>& aggs,
                                       size_t threads, size_t update_threads, int64_t batch_size,
                                       bool flush, double rate) {
  ops::MultiwayOptions o;
  o.query.time_column = std::move(time);
  o.query.keys = std::move(keys);
  o.query.window = {size, advance, offset};
  for (const auto& [name, kind, column] : aggs) {
    window::AggSpec spec{name, window::AggKind::kCount, column};
    static const std::pair<const char*, window::AggKind> kinds[] = {
        {"count", window::AggKind::kCount}, {"sum", window::AggKind::kSum},   {"mean", window::AggKind::kMean},
        {"min", window::AggKind::kMin},     {"max", window::AggKind::kMax},   {"first", window::AggKind::kFirst},
        {"last", window::AggKind::kLast}};
    bool found = false;
    for (const auto& [n, k] : kinds) {
      if (kind == n) {
        spec.kind = k;
        found = true;
      }
    }
    if (!found) throw Error(ErrorKind::kInvalidInput, "unknown aggregate function '" + kind + "'");
    o.query.aggs.push_back(std::move(spec));
  }
  o.threads = threads;
  o.update_threads = update_threads;
  o.batch_size = batch_size;
  o.flush_each_window = flush;
  o.rate = rate;
  // Ctrl-C: the output thread works and waits without the GIL; every 50 ms it takes the GIL to
  // let Python run signal handlers, and a KeyboardInterrupt ends the run: the producer threads
  // stop at once and the operator's destructor joins them (make_aggregate).
  o.check_interrupt = [] {
    nb::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw nb::python_error();
  };
  return o;
}

// The test producer as Python sees it: the counts, and the stream until it is exported.
struct CountingStream {
  std::shared_ptr<arrow::ReleaseCounts> counts = std::make_shared<arrow::ReleaseCounts>();
  std::unique_ptr<ArrowArrayStream> stream;
  ~CountingStream() {
    if (stream && stream->release != nullptr) stream->release(stream.get());
  }
};

}  // namespace
}  // namespace pao::python

using namespace pao;
using namespace pao::python;

NB_MODULE(_engine, m) {
  m.doc() = "pyarrow-ops C++ engine (private; use the pyarrow_ops package).";
  // A Result a user script still holds at interpreter exit is not a bug worth a warning; our
  // tests check ownership with explicit counters (live_exports, CountingStream) instead.
  nb::set_leak_warnings(false);
  define_errors(m);

  nb::class_<BatchHandle>(m, "Batch")
      .def("__arrow_c_array__",
           [](const BatchHandle& b, nb::handle /*requested_schema*/) {
             auto array = std::make_unique<ArrowArray>();
             arrow::export_batch(b.batch, array.get());
             return nb::make_tuple(schema_capsule(*b.batch.schema()),
                                   to_capsule(std::move(array), "arrow_array"));
           },
           "requested_schema"_a = nb::none())
      .def_prop_ro("num_rows", [](const BatchHandle& b) { return b.batch.num_rows(); });
  bind_expr(m);

  nb::class_<Stream>(m, "Stream")
      .def("__arrow_c_schema__", [](Stream& s) { return schema_capsule(*s.get().schema()); })
      .def("next_batch",
           [](Stream& s) -> std::optional<BatchHandle> {
             BatchSource& source = s.get();
             s.pulling = true;
             std::optional<Batch> b;
             try {
               b = pull(source);
             } catch (...) {
               s.pulling = false;
               if (s.close_requested) s.source.reset();
               throw;
             }
             s.pulling = false;
             if (s.close_requested) {  // closed by another thread meanwhile: the stream ends here
               s.source.reset();
               return std::nullopt;
             }
             if (!b) return std::nullopt;
             return BatchHandle{std::move(*b)};
           })
      .def("export_stream",
           [](Stream& s) {
             auto raw = std::make_unique<ArrowArrayStream>();
             arrow::export_stream(release_gil_while_pulling(s.take()), raw.get());
             return to_capsule(std::move(raw), "arrow_array_stream");
           })
      .def("close", [](Stream& s) { s.close(); })
      .def_prop_ro("closed", [](const Stream& s) { return s.source == nullptr || s.close_requested; });

  m.def(
      "stream_from_capsule",
      [](nb::handle capsule, std::string label) {
        auto* raw = from_capsule<ArrowArrayStream>(capsule, "arrow_array_stream");
        return Stream{arrow::import_stream(raw, std::move(label))};
      },
      "capsule"_a, "label"_a, "Takes ownership of an 'arrow_array_stream' capsule's stream.");
  m.def(
      "stream_from_batches",
      [](nb::handle schema, nb::handle iterator, std::string label) {
        return Stream{make_py_iter_source(schema, iterator, std::move(label))};
      },
      "schema"_a, "iterator"_a, "label"_a,
      "A stream over an iterator of objects with __arrow_c_array__, all with `schema`.");
  m.def(
      "merge",
      [](std::vector<Stream*> inputs, std::string time, int64_t batch_size) {
        std::vector<std::unique_ptr<BatchSource>> sources;
        sources.reserve(inputs.size());
        for (Stream* s : inputs) sources.push_back(s->take());
        return Stream{gate::make_merge(std::move(sources), {std::move(time), batch_size})};
      },
      "inputs"_a, "time"_a, "batch_size"_a,
      "Merges time-sorted streams by (time, input index, position); consumes the inputs.");
  nb::class_<Aggregation>(m, "Aggregation")
      .def("push",
           [](Aggregation& a, uint32_t input, nb::handle schema, nb::handle array) {
             auto sch = std::make_shared<const Schema>(
                 arrow::import_schema(*from_capsule<ArrowSchema>(schema, "arrow_schema")));
             Batch b = arrow::import_batch(from_capsule<ArrowArray>(array, "arrow_array"), sch,
                                           "a batch pushed to input " + std::to_string(input));
             without_gil([&] { a.op->push(input, b); });
           },
           "input"_a, "schema"_a, "array"_a)
      .def("heartbeat",
           [](Aggregation& a, uint32_t input, int64_t time) {
             without_gil([&] { a.op->heartbeat(input, time); });
           },
           "input"_a, "time"_a)
      .def("close",
           [](Aggregation& a, uint32_t input) {
             without_gil([&] { a.op->close(input); });
           },
           "input"_a)
      .def("cancel", [](Aggregation& a) { a.op->cancel(); })
      .def(
          "stop",
          [](Aggregation& a, double timeout_s) {
            nb::gil_scoped_release nogil;  // the producers may need the GIL to finish
            return a.op->stop(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
          },
          "timeout_s"_a,
          "Cancels the run and joins its threads; False if some were still busy after timeout_s.")
      .def("stats", [](Aggregation& a) {
        const ops::MultiwayStats s = a.op->stats();
        nb::dict d;
        d["tuples"] = s.tuples;
        d["window_sets"] = s.window_sets;
        d["latencies_ns"] = s.latencies_ns;
        d["design"] = ops::design_name(a.op->design());
        d["peak_live_arenas"] = a.op->peak_live_arenas();  // None for designs without a T-Gate
        return d;
      });

  m.def(
      "aggregate",
      [](std::vector<Stream*> inputs, nb::handle schema, size_t n_inputs, std::string time,
         std::vector<std::string> keys, int64_t size, int64_t advance, int64_t offset,
         std::vector<std::tuple<std::string, std::string, std::string>> aggs, std::string design,
         size_t threads, size_t update_threads, int64_t batch_size, bool flush, double rate) {
        ops::MultiwayOptions o = aggregate_options(std::move(time), std::move(keys), size, advance, offset, aggs,
                                                   threads, update_threads, batch_size, flush, rate);
        std::shared_ptr<const Schema> sch;
        if (inputs.empty()) {
          sch = std::make_shared<const Schema>(
              arrow::import_schema(*from_capsule<ArrowSchema>(schema, "arrow_schema")));
          gate::check_input_schemas({sch}, o.query.time_column);
        } else {
          std::vector<std::shared_ptr<const Schema>> schemas;
          for (Stream* s : inputs) schemas.push_back(s->get().schema());
          sch = gate::check_input_schemas(schemas, o.query.time_column).schema;
          n_inputs = inputs.size();
        }
        static constexpr ops::Design kDesigns[] = {ops::Design::kMQ,     ops::Design::kMQLF,
                                                   ops::Design::kTuMLSC, ops::Design::kSliced,
                                                   ops::Design::kTuMLMC, ops::Design::kWiML};
        if (design == "auto") {
          o.design = ops::choose_design(*sch, o.query);
        } else {
          bool found = false;
          for (ops::Design d : kDesigns) {
            if (design == ops::design_name(d)) {
              o.design = d;
              found = true;
            }
          }
          if (!found) {
            throw Error(ErrorKind::kInvalidInput, "unknown design '" + design +
                                                      "'; expected 'auto', 'mq', 'mqlf', 'tumlsc', 'sliced', "
                                                      "'tumlmc' or 'wiml'");
          }
        }
        auto op = make_aggregate(sch, n_inputs, std::move(o));
        if (!inputs.empty()) {
          std::vector<std::unique_ptr<BatchSource>> sources;
          for (Stream* s : inputs) sources.push_back(s->take());
          op->start(std::move(sources));
        }
        auto source = std::make_unique<AggregateSource>();
        source->op = op;
        return nb::make_tuple(Stream{std::move(source)}, Aggregation{op});
      },
      "inputs"_a, "schema"_a.none(), "n_inputs"_a, "time"_a, "keys"_a, "size"_a, "advance"_a, "offset"_a, "aggs"_a,
      "design"_a, "threads"_a, "update_threads"_a, "batch_size"_a, "flush"_a, "rate"_a,
      "A windowed aggregate. With input streams, engine threads read them; with none, the "
      "Aggregation handle takes pushes for n_inputs inputs of `schema`. Returns (result, handle).");
  m.def(
      "benchmark_gate",
      [](size_t inputs, int64_t tuples, bool scan_all, size_t producers, int64_t batch_rows) {
        gate::GateBenchResult r;
        {
          nb::gil_scoped_release nogil;
          r = gate::benchmark_gate(inputs, tuples, scan_all ? gate::Readiness::kScanAll : gate::Readiness::kExact,
                                   producers, batch_rows);
        }
        return nb::make_tuple(r.seconds, r.tuples, r.peak_live_arenas);
      },
      "inputs"_a, "tuples"_a, "scan_all"_a, "producers"_a, "batch_rows"_a,
      "T-Gate throughput (Figure 7): (seconds, tuples read, peak live arenas).");
  bind_pipeline(m);
  m.def(
      "run_pipeline",
      [](std::vector<Stream*> inputs, std::string time, nb::handle specs, size_t threads, std::string scheduler,
         std::string reorder, std::string partitioning, size_t partitions, int64_t morsel, size_t reorder_capacity,
         size_t max_inflight, int64_t slice_us, int64_t batch_size, double rate, bool merge, std::string carry) {
        runtime::PipelineOptions o;
        o.threads = threads;
        static const std::pair<const char*, runtime::Heuristic> hs[] = {
            {"qst", runtime::Heuristic::kQST}, {"lp", runtime::Heuristic::kLP},
            {"et", runtime::Heuristic::kET},   {"ct", runtime::Heuristic::kCT}};
        bool found = false;
        for (const auto& [n, h] : hs)
          if (scheduler == n) o.scheduler = h, found = true;
        if (!found) throw Error(ErrorKind::kInvalidInput, "scheduler must be 'ct', 'lp', 'et' or 'qst', got '" + scheduler + "'");
        if (reorder == "nonblocking") o.reorder = sync::ReorderScheme::kNonBlocking;
        else if (reorder == "locked") o.reorder = sync::ReorderScheme::kLocked;
        else throw Error(ErrorKind::kInvalidInput, "reorder must be 'nonblocking' or 'locked', got '" + reorder + "'");
        if (partitioning == "hybrid") o.partitioning = sync::Partitioning::kHybrid;
        else if (partitioning == "partitioned") o.partitioning = sync::Partitioning::kPartitioned;
        else if (partitioning == "shared") o.partitioning = sync::Partitioning::kShared;
        else throw Error(ErrorKind::kInvalidInput, "partitioning must be 'hybrid', 'partitioned' or 'shared', got '" + partitioning + "'");
        o.partitions = partitions;
        o.morsel_rows = morsel;
        if (reorder_capacity != 0) o.reorder_capacity = reorder_capacity;
        o.max_inflight = max_inflight;
        o.rate = rate;
        if (slice_us > 0) o.slice = std::chrono::microseconds(slice_us);
        // Ctrl-C, as for aggregate(): next() polls while it waits.
        o.check_interrupt = [] {
          nb::gil_scoped_acquire gil;
          if (PyErr_CheckSignals() != 0) throw nb::python_error();
        };
        std::vector<std::unique_ptr<BatchSource>> sources;
        for (Stream* s : inputs) sources.push_back(s->take());
        // merge=false: one input already in the order to process (a later stage of
        // pyarrow_ops.spark.run, sorted by sequence numbers), read as it comes.
        if (!merge && sources.size() != 1) throw Error(ErrorKind::kUsage, "merge=False takes exactly one input");
        std::unique_ptr<BatchSource> merged =
            merge ? gate::make_merge(std::move(sources), {time, batch_size}) : std::move(sources[0]);
        std::vector<ops::OperatorPtr> ops = build_operators(merged->schema(), time, specs, carry);
        auto p = make_pipeline(std::move(merged), std::move(ops), std::move(o));
        struct Source final : BatchSource {
          std::shared_ptr<runtime::Pipeline> p;
          const std::shared_ptr<const Schema>& schema() const noexcept override { return p->schema(); }
          std::optional<Batch> next() override { return p->next(); }
        };
        auto src = std::make_unique<Source>();
        src->p = p;
        return std::make_pair(Stream{std::move(src)}, PipelineHandle{p});
      },
      "inputs"_a, "time"_a, "specs"_a, "threads"_a, "scheduler"_a, "reorder"_a, "partitioning"_a, "partitions"_a,
      "morsel"_a, "reorder_capacity"_a, "max_inflight"_a, "slice_us"_a, "batch_size"_a, "rate"_a,
      "merge"_a = true, "carry"_a = "",
      "Runs a pipeline over time-sorted streams merged by (time, input, position); consumes the inputs.");
  m.def("live_exports", &arrow::live_exports,
        "Exported Arrow structs whose release callback has not run yet.");

  nb::module_ testing = m.def_submodule("testing", "Tools for the test suite.");
  nb::class_<CountingStream>(testing, "CountingStream")
      .def(
          "__init__",
          [](CountingStream* self, nb::handle capsule, int64_t fail_after) {
            new (self) CountingStream();
            self->stream = std::make_unique<ArrowArrayStream>();
            arrow::make_counting_stream(from_capsule<ArrowArrayStream>(capsule, "arrow_array_stream"),
                                        self->counts, fail_after, self->stream.get());
          },
          "capsule"_a, "fail_after"_a = -1)
      .def("__arrow_c_schema__",
           [](CountingStream& self) {
             if (!self.stream) throw Error(ErrorKind::kUsage, "CountingStream already exported");
             auto raw = std::make_unique<ArrowSchema>();
             if (self.stream->get_schema(self.stream.get(), raw.get()) != 0) {
               throw Error(ErrorKind::kInputFailed, "CountingStream: get_schema failed");
             }
             return to_capsule(std::move(raw), "arrow_schema");
           })
      .def(
          "__arrow_c_stream__",
          [](CountingStream& self, nb::handle /*requested_schema*/) {
            if (!self.stream) throw Error(ErrorKind::kUsage, "CountingStream already exported");
            return to_capsule(std::move(self.stream), "arrow_array_stream");
          },
          "requested_schema"_a = nb::none())
      .def_prop_ro("arrays_made", [](const CountingStream& s) { return s.counts->arrays_made.load(std::memory_order_relaxed); })
      .def_prop_ro("arrays_released",
                   [](const CountingStream& s) { return s.counts->arrays_released.load(std::memory_order_relaxed); })
      .def_prop_ro("repeated_releases",
                   [](const CountingStream& s) { return s.counts->repeated_releases.load(std::memory_order_relaxed); })
      .def_prop_ro("stream_releases",
                   [](const CountingStream& s) { return s.counts->stream_releases.load(std::memory_order_relaxed); });
}
