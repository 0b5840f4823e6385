// pyarrow_ops._engine: the nanobind bindings. Thin by design: convert, drop the GIL, forward.
// The typed, documented API lives in the pyarrow_ops Python package.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>
#include <algorithm>
#include <thread>

#include "arrow/export.h"
#include "arrow/import.h"
#include "core/buffer_pool.h"
#include "core/error.h"
#include "gate/lateness.h"
#include "gate/merge.h"
#include "gate/times.h"
#include "ops/multiway.h"
#include "window/window_states.h"
#include "python/capsules.h"
#include "python/errors.h"
#include "python/expr_binding.h"
#include "python/gil.h"
#include "python/options_binding.h"
#include "python/pipeline_binding.h"
#include "python/py_iter_source.h"
#include "python/stream.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace pao::python {
namespace {

// The next batch with rows, or the end: a batch of 0 rows that only carries a heartbeat
// (BatchSource::bound) means nothing to a Python reader.
std::optional<Batch> pull(BatchSource& source) {
  return without_gil([&] {
    std::optional<Batch> b = source.next();
    while (b && b->num_rows() == 0 && source.bound() != INT64_MIN) b = source.next();
    return b;
  });
}

gate::LatePolicy late_policy(const std::string& name) {
  if (name == "error") return gate::LatePolicy::kError;
  if (name == "drop") return gate::LatePolicy::kDrop;
  if (name == "side") return gate::LatePolicy::kSide;
  throw Error(ErrorKind::kUsage, "late must be 'error', 'drop' or 'side', got '" + name + "'");
}

nb::list handles(std::vector<Batch>& batches) {
  nb::list out;
  for (Batch& b : batches) out.append(BatchHandle{std::move(b)});
  return out;
}

// A batch handed over as a pair of Arrow C capsules; `what` names it in errors.
Batch import_capsules(nb::capsule schema, nb::capsule array, const std::string& what) {
  auto sch = std::make_shared<const Schema>(arrow::import_schema(*from_capsule<ArrowSchema>(schema, "arrow_schema")));
  return arrow::import_batch(from_capsule<ArrowArray>(array, "arrow_array"), sch, what);
}

// The handle Python keeps for pushing and for statistics; the result stream shares the operator.
struct Aggregation {
  std::shared_ptr<ops::MultiwayAggregate> op;
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
  main_thread_ident() = nb::cast<unsigned long>(nb::module_::import_("threading").attr("main_thread")().attr("ident"));
  define_errors(m);
  bind_options(m);

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
               if (s.closed) s.source.reset();
               throw;
             }
             s.pulling = false;
             if (s.closed) {  // closed by another thread meanwhile: the stream ends here
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
      .def_prop_ro("closed", [](const Stream& s) { return s.source == nullptr || s.closed; });

  m.def(
      "stream_from_capsule",
      [](nb::capsule capsule, std::string label) {
        auto* raw = from_capsule<ArrowArrayStream>(capsule, "arrow_array_stream");
        return Stream{arrow::import_stream(raw, std::move(label))};
      },
      "capsule"_a, "label"_a, "Takes ownership of an 'arrow_array_stream' capsule's stream.");
  m.def(
      "stream_from_batches",
      [](nb::handle schema, nb::handle iterator, std::string label, nb::handle ready) {
        return Stream{make_py_iter_source(schema, iterator, std::move(label), ready)};
      },
      "schema"_a, "iterator"_a, "label"_a, "ready"_a = nb::none(),
      "A stream over an iterator of objects with __arrow_c_array__, all with `schema` (an int item is a "
      "heartbeat); `ready`, if given, tells whether the next item is at hand.");
  m.def(
      "merge",
      [](std::vector<Stream*> inputs, std::string time, int64_t batch_size, unsigned threads) {
        std::vector<std::unique_ptr<BatchSource>> sources;
        sources.reserve(inputs.size());
        for (Stream* s : inputs) sources.push_back(s->take());
        gate::MergeOptions options{std::move(time), batch_size};
        options.threads = threads != 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
        options.streamed = true;  // the caller reads the result (merge()), no operator downstream
        return Stream{gate::make_merge(std::move(sources), std::move(options))};
      },
      "inputs"_a, "time"_a, "batch_size"_a, "threads"_a = 1,
      "Merges time-sorted streams by (time, input index, position) on `threads` threads (0: one per core); "
      "consumes the inputs.");
  nb::class_<gate::LateRows>(m, "LateRows")
      .def(nb::init<>())
      .def("count", &gate::LateRows::count, "input"_a = -1, "Late rows of an input (all inputs: -1).")
      .def("take",
           [](gate::LateRows& late) {
             nb::list out;
             for (auto& chunk : late.take()) out.append(nb::make_tuple(chunk.input, chunk.rows, BatchHandle{chunk.batch}));
             return out;
           },
           "The kept late rows as (input, arrival rows, batch) by input and arrival; taken once.");
  m.def(
      "within_lateness",
      [](Stream& input, uint32_t index, std::string label, const std::string& time, int64_t bound, const std::string& late,
         std::shared_ptr<gate::LateRows> rows, nb::object resume) {
        std::optional<BatchSource::InputState> from;
        if (!resume.is_none()) {
          from.emplace();
          for (nb::handle b : resume[0]) from->state.push_back(import_py_batch(b, "a checkpoint's lateness buffer"));
          for (nb::handle b : resume[1]) from->pending.push_back(import_py_batch(b, "a checkpoint's released rows"));
        }
        return Stream{gate::within_lateness(input.take(), index, std::move(label), time, {bound, late_policy(late)},
                                            std::move(rows), from ? &*from : nullptr)};
      },
      "input"_a, "index"_a, "label"_a, "time"_a, "bound"_a, "late"_a, "rows"_a, "resume"_a = nb::none(),
      "The input put in time order within `bound` (gate/lateness.h); consumes it. `resume`: a cut's (state, "
      "pending) for this input (PipelineHandle.cut()'s inputs).");
  nb::class_<gate::Lateness>(m, "Lateness")
      .def("__init__",
           [](gate::Lateness* self, nb::capsule schema, uint32_t index, std::string label, const std::string& time,
              int64_t bound, const std::string& late, std::shared_ptr<gate::LateRows> rows) {
             auto sch = std::make_shared<const Schema>(arrow::import_schema(*from_capsule<ArrowSchema>(schema, "arrow_schema")));
             new (self) gate::Lateness(index, std::move(label), std::move(sch), time, {bound, late_policy(late)}, std::move(rows));
           },
           "schema"_a, "index"_a, "label"_a, "time"_a, "bound"_a, "late"_a, "rows"_a)
      .def("push",
           [](gate::Lateness& l, nb::capsule schema, nb::capsule array) {
             auto sch = std::make_shared<const Schema>(arrow::import_schema(*from_capsule<ArrowSchema>(schema, "arrow_schema")));
             Batch b = arrow::import_batch(from_capsule<ArrowArray>(array, "arrow_array"), sch,
                                           "a batch pushed to " + l.label());
             if (auto diff = schema_difference(*l.schema(), *sch)) {
               throw Error(ErrorKind::kSchemaMismatch, "a batch pushed to " + l.label() + " does not match its schema: " + *diff);
             }
             std::vector<Batch> out;
             l.push(b.with_schema(l.schema()), out);
             return handles(out);
           },
           "schema"_a, "array"_a, "Takes a batch; returns the batches it releases, in order.")
      .def("heartbeat",
           [](gate::Lateness& l, int64_t time) {
             std::vector<Batch> out;
             l.heartbeat(time, out);
             return handles(out);
           },
           "time"_a)
      .def("finish",
           [](gate::Lateness& l) {
             std::vector<Batch> out;
             l.finish(out);
             return handles(out);
           })
      .def("resume_at", &gate::Lateness::resume_at, "rows"_a,
           "A restore: the next row is at position `rows` of the input (before any push).")
      .def_prop_ro("watermark", &gate::Lateness::watermark)
      .def_prop_ro("held", &gate::Lateness::held);
  nb::class_<Aggregation>(m, "Aggregation")
      .def("push",
           [](Aggregation& a, uint32_t input, nb::capsule schema, nb::capsule array) {
             Batch b = import_capsules(schema, array, "a batch pushed to input " + std::to_string(input));
             without_gil([&] { a.op->push(input, b); });
           },
           "input"_a, "schema"_a, "array"_a)
      .def("load_states",
           [](Aggregation& a, nb::capsule schema, nb::capsule array) {
             a.op->load_states(import_capsules(schema, array, "the saved window states"));
           },
           "schema"_a, "array"_a, "A restore, before any push: the window states the run starts from.")
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

  nb::class_<window::WindowStates>(m, "WindowStates")
      .def("__init__",
           [](window::WindowStates* self, nb::capsule schema, const ops::MultiwayOptions& options) {
             new (self) window::WindowStates(arrow::import_schema(*from_capsule<ArrowSchema>(schema, "arrow_schema")),
                                             options.query);
           },
           "schema"_a, "options"_a)
      .def("add",
           [](window::WindowStates& w, uint32_t input, uint64_t first_position, nb::capsule schema, nb::capsule array) {
             Batch b = import_capsules(schema, array, "rows of input " + std::to_string(input));
             without_gil([&] { w.add(b, input, first_position); });
           },
           "input"_a, "first_position"_a, "schema"_a, "array"_a,
           "Folds rows of `input` (the first at `first_position`) into their windows' states.")
      .def("forget_before", &window::WindowStates::forget_before, "end"_a)
      .def("save", [](window::WindowStates& w, int64_t from_end) { return BatchHandle{w.save_states(from_end)}; },
           "from_end"_a, "The states of the windows ending at or after `from_end`.")
      .def("load",
           [](window::WindowStates& w, nb::capsule schema, nb::capsule array) {
             w.load_states(import_capsules(schema, array, "the saved window states"));
           },
           "schema"_a, "array"_a);

  nb::class_<window::SessionStates>(m, "SessionStates")
      .def("__init__",
           [](window::SessionStates* self, nb::capsule schema, const ops::MultiwayOptions& options) {
             new (self) window::SessionStates(arrow::import_schema(*from_capsule<ArrowSchema>(schema, "arrow_schema")),
                                              options.query);
           },
           "schema"_a, "options"_a)
      .def("add",
           [](window::SessionStates& w, nb::capsule schema, nb::capsule array) {
             Batch b = import_capsules(schema, array, "rows in the merged order");
             without_gil([&] { w.add_all(b); });
           },
           "schema"_a, "array"_a, "Folds rows, in the merged order after those before.")
      .def("advance", &window::SessionStates::advance, "watermark"_a,
           "No row earlier than `watermark` will come: closes the sessions it proves final.")
      .def("take",
           [](window::SessionStates& w) -> std::optional<BatchHandle> {
             std::optional<Batch> b = w.take(true);
             if (!b) return std::nullopt;
             return BatchHandle{std::move(*b)};
           },
           "The closed sessions' rows (None when there are none).")
      .def("save", [](window::SessionStates& w) { return BatchHandle{w.save_sessions()}; }, "The open sessions.")
      .def("load",
           [](window::SessionStates& w, nb::capsule schema, nb::capsule array) {
             w.load_sessions(import_capsules(schema, array, "the saved sessions"));
           },
           "schema"_a, "array"_a);

  m.def(
      "aggregate",
      [](std::vector<Stream*> inputs, ops::MultiwayOptions options, std::optional<ops::Design> design,
         std::optional<nb::capsule> schema, size_t push_inputs) {
        options.check_interrupt = interrupt_check();
        std::shared_ptr<const Schema> sch;
        if (inputs.empty()) {
          if (!schema) throw Error(ErrorKind::kUsage, "aggregate() without input streams needs the pushed inputs' schema");
          sch = std::make_shared<const Schema>(
              arrow::import_schema(*from_capsule<ArrowSchema>(*schema, "arrow_schema")));
          gate::check_input_schemas({sch}, options.query.time_column);
        } else {
          std::vector<std::shared_ptr<const Schema>> schemas;
          for (Stream* s : inputs) schemas.push_back(s->get().schema());
          sch = gate::check_input_schemas(schemas, options.query.time_column).schema;
          push_inputs = inputs.size();
        }
        options.design = design ? *design : ops::choose_design(*sch, options.query);
        auto op = shared_without_gil(new ops::MultiwayAggregate(sch, push_inputs, std::move(options)));
        if (!inputs.empty()) {
          std::vector<std::unique_ptr<BatchSource>> sources;
          for (Stream* s : inputs) sources.push_back(s->take());
          op->start(std::move(sources));
        }
        return std::make_pair(Stream{std::make_unique<SharedSource<ops::MultiwayAggregate>>(op)}, Aggregation{op});
      },
      "inputs"_a, "options"_a, "design"_a.none(), "schema"_a.none() = nb::none(), "push_inputs"_a = 0,
      "A windowed aggregate; design None chooses one (ops::choose_design). With input streams, engine threads "
      "read them; with none, the Aggregation handle takes pushes for `push_inputs` inputs of `schema` (an "
      "arrow_schema capsule). Returns (result, handle).");
  bind_pipeline(m);
  m.def("live_exports", &arrow::live_exports,
        "Exported Arrow structs whose release callback has not run yet.");
  m.def("memory_pool",
        [] {
          const PoolStats s = pool_stats();
          return nb::make_tuple(s.idle_bytes, s.reused, s.fresh, s.idle_limit);
        },
        "The buffer pool (core/buffer_pool.h): (idle bytes, allocations reused, allocations fresh, idle limit).");
  m.def("release_memory", &pool_release, "Frees the buffer pool's idle buffers; returns their bytes.");

}
