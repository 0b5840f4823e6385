#pragma once
// The typed vocabulary of the boundary, each defined once: enums for designs, aggregate functions,
// schedulers, reorder schemes and partitionings, and the option and spec structs the entry points
// take. They are the engine's own structs (ops::MultiwayOptions, runtime::PipelineOptions,
// window::AggSpec ...), bound field by field, so there is no second copy to keep in step.
#include <nanobind/nanobind.h>

namespace pao::python {

// Defines on `m`: Design, AggFunction, Scheduler, Reorder, Partitioning, WindowSpec, AggSpec,
// AggregateQuery, AggregateOptions and PipelineOptions.
void bind_options(nanobind::module_& m);

}  // namespace pao::python
