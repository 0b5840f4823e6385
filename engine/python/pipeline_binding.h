#pragma once
// Pipelines from Python: the operator spec classes (ops/specs.h, plus map_batches), plan() for
// explain(), run_pipeline() and the handle Python keeps on a running pipeline.
#include <nanobind/nanobind.h>

namespace pao::python {

// Defines on `m`: OperatorKind, the *Spec classes, plan(), run_pipeline() and PipelineHandle
// (stats, cancel). Needs bind_options (the option classes) and the Stream class first.
void bind_pipeline(nanobind::module_& m);

}  // namespace pao::python
