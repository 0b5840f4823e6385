#pragma once
// A BatchSource over a Python iterator of objects with __arrow_c_array__ (record batches). Lets
// Python generators feed the engine while their exceptions, KeyboardInterrupt included, reach
// the caller unchanged (as nanobind::python_error), not flattened into a C stream error string.
#include <nanobind/nanobind.h>

#include <memory>
#include <string>

#include "core/batch.h"

namespace pao::python {

// `schema` has __arrow_c_schema__; every item must have __arrow_c_array__ and that schema, or
// next() throws Error(kSchemaMismatch) naming the input (`label`) and the batch. Takes the GIL
// itself in next() and on destruction, so it may be called and destroyed without holding it.
std::unique_ptr<BatchSource> make_py_iter_source(nanobind::handle schema, nanobind::handle iterator,
                                                 std::string label);

// Wraps a source so that next() drops the GIL while it works, if the calling thread holds it:
// exported streams are pulled both from Python (GIL held) and from other libraries' threads.
std::unique_ptr<BatchSource> release_gil_while_pulling(std::unique_ptr<BatchSource> source);

}  // namespace pao::python
