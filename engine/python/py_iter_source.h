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
// next() throws Error(kSchemaMismatch) naming the input (`label`) and the batch. An item that is
// an int is a heartbeat (pyarrow_ops.LiveInput.heartbeat): next() returns a batch of 0 rows and
// bound() the promise. `ready`: None, or a callable telling whether the next item is at hand
// (BatchSource::ready; for a LiveInput, whether its queue holds anything). Takes the GIL itself in
// next(), ready() and on destruction, so it may be called and destroyed without holding it.
std::unique_ptr<BatchSource> make_py_iter_source(nanobind::handle schema, nanobind::handle iterator,
                                                 std::string label, nanobind::handle ready);

// Wraps a source so that next() drops the GIL while it works, if the calling thread holds it:
// exported streams are pulled both from Python (GIL held) and from other libraries' threads.
std::unique_ptr<BatchSource> release_gil_while_pulling(std::unique_ptr<BatchSource> source);

}  // namespace pao::python
