#include "python/options_binding.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "ops/multiway.h"
#include "runtime/pipeline.h"
#include "window/aggregates.h"
#include "window/window_aggregate.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace pao::python {

void bind_options(nb::module_& m) {
  // Value names are the strings of the Python API (design="tumlsc", po.sum(...) -> "sum"), so
  // pyarrow_ops converts with Enum[name] and the engine's own *_name functions print the same.
  auto design = nb::enum_<ops::Design>(m, "Design", "The multiway aggregate's designs (docs/aggregate.md).");
  for (ops::Design d : {ops::Design::kMQ, ops::Design::kMQLF, ops::Design::kTuMLSC, ops::Design::kSliced,
                        ops::Design::kTuMLMC, ops::Design::kWiML}) {
    design.value(ops::design_name(d), d);
  }
  auto function = nb::enum_<window::AggKind>(m, "AggFunction", "Aggregate functions (docs/semantics.md).");
  for (window::AggKind k : {window::AggKind::kCount, window::AggKind::kSum, window::AggKind::kMean,
                            window::AggKind::kMin, window::AggKind::kMax, window::AggKind::kFirst,
                            window::AggKind::kLast}) {
    function.value(window::agg_name(k), k);
  }
  nb::enum_<runtime::Threading>(m, "Threading", "How a run uses threads (runtime/pipeline.h).")
      .value("ordered", runtime::Threading::kOrdered)
      .value("manual", runtime::Threading::kManual)
      .value("dedicated", runtime::Threading::kDedicated)
      .value("dynamic", runtime::Threading::kDynamic);
  nb::enum_<runtime::Heuristic>(m, "Scheduler", "The ordered runtime's scheduling heuristics (docs/pipeline.md).")
      .value("ct", runtime::Heuristic::kCT)
      .value("lp", runtime::Heuristic::kLP)
      .value("et", runtime::Heuristic::kET)
      .value("qst", runtime::Heuristic::kQST);
  nb::enum_<sync::ReorderScheme>(m, "Reorder", "How workers' outputs are put back in order.")
      .value("nonblocking", sync::ReorderScheme::kNonBlocking)
      .value("locked", sync::ReorderScheme::kLocked);
  nb::enum_<sync::Partitioning>(m, "Partitioning", "How partitioned operators share work among workers.")
      .value("hybrid", sync::Partitioning::kHybrid)
      .value("partitioned", sync::Partitioning::kPartitioned)
      .value("shared", sync::Partitioning::kShared);

  nb::class_<window::WindowSpec>(m, "WindowSpec", "Windows [offset + k * advance, + size), in the time column's unit.")
      .def(
          "__init__",
          [](window::WindowSpec* self, int64_t size, int64_t advance, int64_t offset) {
            new (self) window::WindowSpec{size, advance, offset};
          },
          "size"_a, "advance"_a, "offset"_a = 0)
      .def_rw("size", &window::WindowSpec::size)
      .def_rw("advance", &window::WindowSpec::advance)
      .def_rw("offset", &window::WindowSpec::offset);
  nb::class_<window::AggSpec>(m, "AggSpec", "One output column: `function` of `column` (empty: count of tuples).")
      .def(
          "__init__",
          [](window::AggSpec* self, std::string name, window::AggKind function, std::string column) {
            new (self) window::AggSpec{std::move(name), function, std::move(column)};
          },
          "name"_a, "function"_a, "column"_a = "")
      .def_rw("name", &window::AggSpec::name)
      .def_rw("function", &window::AggSpec::kind)
      .def_rw("column", &window::AggSpec::column);
  nb::class_<window::AggregateQuery>(m, "AggregateQuery", "What a windowed aggregate computes.")
      .def(
          "__init__",
          [](window::AggregateQuery* self, std::string time, std::vector<std::string> keys, window::WindowSpec window,
             std::vector<window::AggSpec> aggs, std::optional<int64_t> session_gap) {
            new (self) window::AggregateQuery{std::move(time), std::move(keys), window, std::move(aggs), session_gap};
          },
          "time"_a, "keys"_a, "window"_a, "aggs"_a, "session_gap"_a = nb::none())
      .def_rw("time", &window::AggregateQuery::time_column)
      .def_rw("keys", &window::AggregateQuery::keys)
      .def_rw("window", &window::AggregateQuery::window)
      .def_rw("aggs", &window::AggregateQuery::aggs)
      .def_rw("session_gap", &window::AggregateQuery::session_gap);
  // The design is not a field here: aggregate() takes it separately, None meaning "auto".
  nb::class_<ops::MultiwayOptions>(m, "AggregateOptions", "How a windowed aggregate runs (ops/multiway.h).")
      .def(
          "__init__",
          [](ops::MultiwayOptions* self, window::AggregateQuery query, size_t threads, size_t update_threads,
             int64_t batch_size, bool flush_each_window, double rate) {
            new (self) ops::MultiwayOptions();
            self->query = std::move(query);
            self->threads = threads;
            self->update_threads = update_threads;
            self->batch_size = batch_size;
            self->flush_each_window = flush_each_window;
            self->rate = rate;
          },
          "query"_a, "threads"_a = 0, "update_threads"_a = 0, "batch_size"_a = 65536, "flush_each_window"_a = false,
          "rate"_a = 0.0)
      .def_rw("query", &ops::MultiwayOptions::query)
      .def_rw("threads", &ops::MultiwayOptions::threads)
      .def_rw("update_threads", &ops::MultiwayOptions::update_threads)
      .def_rw("batch_size", &ops::MultiwayOptions::batch_size)
      .def_rw("flush_each_window", &ops::MultiwayOptions::flush_each_window)
      .def_rw("rate", &ops::MultiwayOptions::rate);
  // 0 for a count means the engine's default (runtime/pipeline.h says which).
  nb::class_<runtime::PipelineOptions>(m, "PipelineOptions", "How a pipeline runs (runtime/pipeline.h).")
      .def(
          "__init__",
          [](runtime::PipelineOptions* self, size_t threads, runtime::Heuristic scheduler, sync::ReorderScheme reorder,
             sync::Partitioning partitioning, size_t partitions, int64_t morsel_rows, size_t reorder_capacity,
             size_t max_inflight, int64_t slice_us, double rate, bool fuse, bool push_down, bool elastic,
             int64_t elastic_period_ms, runtime::Threading threading) {
            new (self) runtime::PipelineOptions();
            self->threading = threading;
            self->threads = threads;
            self->scheduler = scheduler;
            self->reorder = reorder;
            self->partitioning = partitioning;
            self->partitions = partitions;
            self->morsel_rows = morsel_rows;
            if (reorder_capacity != 0) self->reorder_capacity = reorder_capacity;
            self->max_inflight = max_inflight;
            if (slice_us > 0) self->slice = std::chrono::microseconds(slice_us);
            self->rate = rate;
            self->fuse = fuse;
            self->push_down = push_down;
            self->elastic = elastic;
            if (elastic_period_ms > 0) self->elastic_period = std::chrono::milliseconds(elastic_period_ms);
          },
          "threads"_a = 0, "scheduler"_a = runtime::Heuristic::kCT, "reorder"_a = sync::ReorderScheme::kNonBlocking,
          "partitioning"_a = sync::Partitioning::kHybrid, "partitions"_a = 0, "morsel_rows"_a = 0,
          "reorder_capacity"_a = 0, "max_inflight"_a = 0, "slice_us"_a = 0, "rate"_a = 0.0, "fuse"_a = true,
          "push_down"_a = true, "elastic"_a = false, "elastic_period_ms"_a = 0,
          "threading"_a = runtime::Threading::kOrdered)
      .def_rw("threads", &runtime::PipelineOptions::threads)
      .def_rw("scheduler", &runtime::PipelineOptions::scheduler)
      .def_rw("reorder", &runtime::PipelineOptions::reorder)
      .def_rw("partitioning", &runtime::PipelineOptions::partitioning)
      .def_rw("partitions", &runtime::PipelineOptions::partitions)
      .def_rw("morsel_rows", &runtime::PipelineOptions::morsel_rows)
      .def_rw("reorder_capacity", &runtime::PipelineOptions::reorder_capacity)
      .def_rw("max_inflight", &runtime::PipelineOptions::max_inflight)
      .def_rw("rate", &runtime::PipelineOptions::rate)
      .def_rw("fuse", &runtime::PipelineOptions::fuse)
      .def_rw("push_down", &runtime::PipelineOptions::push_down)
      .def_rw("elastic", &runtime::PipelineOptions::elastic)
      .def_rw("threading", &runtime::PipelineOptions::threading);
}

}  // namespace pao::python
