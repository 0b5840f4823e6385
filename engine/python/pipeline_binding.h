#pragma once
// Pipelines from Python: operator specs (tuples built by pyarrow_ops.pipeline) to engine
// operators, and the handle Python keeps on a running pipeline.
#include <nanobind/nanobind.h>

#include <memory>
#include <string>
#include <vector>

#include "ops/operator.h"
#include "runtime/pipeline.h"

namespace pao::python {

// The operators `specs` describe, chained from `input`: each spec is a tuple (name, args...) as
// pyarrow_ops.pipeline writes them. `time` is the pipeline's time column. With `carry` (an int64
// input column; pyarrow_ops.spark's row numbers) every operator must keep that column: partitioned
// operators that would drop it get ops::carry_column, any other that drops it is an error.
// Needs the GIL.
std::vector<ops::OperatorPtr> build_operators(std::shared_ptr<const Schema> input, const std::string& time,
                                              nanobind::handle specs, const std::string& carry = "");

// A running pipeline, shared by its result stream and the handle Python keeps for stats().
// Destroyed without the GIL: the destructor joins workers, and a map_batches worker may be
// waiting for the GIL.
std::shared_ptr<runtime::Pipeline> make_pipeline(std::unique_ptr<BatchSource> source,
                                                 std::vector<ops::OperatorPtr> ops,
                                                 runtime::PipelineOptions options);

struct PipelineHandle {
  std::shared_ptr<runtime::Pipeline> pipeline;
};

// Defines on `m`: plan(schema, time, specs) -> list of dicts (explain) and the PipelineHandle
// class (stats, cancel).
void bind_pipeline(nanobind::module_& m);

}  // namespace pao::python
