#pragma once
// pyarrow-ops' exception classes as Python sees them (homes: pyarrow_ops.errors), one per
// pao::ErrorKind, and the translation of pao::Error into them.
#include <nanobind/nanobind.h>

#include "core/error.h"

namespace pao::python {

// The Python class name of each kind ("UnsortedInputError", ...).
const char* error_class_name(ErrorKind kind) noexcept;

// Creates the classes on `m` (pyarrow_ops._engine) and registers the translator.
void define_errors(nanobind::module_& m);

// For another extension module (pyarrow_ops._testing): translates the pao::Error its own code
// throws into pyarrow_ops._engine's classes, looked up by name.
void translate_errors_into_engine_classes();

}  // namespace pao::python
