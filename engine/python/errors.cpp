#include "python/errors.h"

#include <string>

namespace nb = nanobind;

namespace pao::python {
namespace {

constexpr int kErrorKinds = static_cast<int>(ErrorKind::kUsage) + 1;  // kUsage is the last kind
// Filled at import, under the GIL, and read only under it.
PyObject* g_error_classes[kErrorKinds] = {};

PyObject* new_error(nb::module_& m, ErrorKind kind, PyObject* bases, const char* doc) {
  const char* name = error_class_name(kind);
  std::string qualified = std::string("pyarrow_ops.errors.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (cls == nullptr) throw nb::python_error();
  m.attr(name) = nb::handle(cls);
  g_error_classes[static_cast<int>(kind)] = cls;
  return cls;
}

}  // namespace

const char* error_class_name(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::kInvalidInput: return "InvalidInputError";
    case ErrorKind::kUnsupportedType: return "UnsupportedTypeError";
    case ErrorKind::kSchemaMismatch: return "SchemaMismatchError";
    case ErrorKind::kUnsorted: return "UnsortedInputError";
    case ErrorKind::kNullTime: return "NullTimeError";
    case ErrorKind::kInputFailed: return "InputFailedError";
    case ErrorKind::kUsage: return "UsageError";
  }
  return "PyArrowOpsError";
}

void define_errors(nb::module_& m) {
  PyObject* base = PyErr_NewExceptionWithDoc("pyarrow_ops.errors.PyArrowOpsError",
                                             "Base class of every error pyarrow-ops raises.", PyExc_Exception, nullptr);
  if (base == nullptr) throw nb::python_error();
  m.attr("PyArrowOpsError") = nb::handle(base);
  auto bases = [&](PyObject* other) { return nb::make_tuple(nb::handle(base), nb::handle(other)); };
  nb::object value_bases = bases(PyExc_ValueError);
  nb::object type_bases = bases(PyExc_TypeError);
  nb::object runtime_bases = bases(PyExc_RuntimeError);
  PyObject* invalid = new_error(m, ErrorKind::kInvalidInput, value_bases.ptr(),
                                "An input or argument the engine cannot use as given.");
  new_error(m, ErrorKind::kUnsupportedType, type_bases.ptr(), "A column whose Arrow type pyarrow-ops does not support.");
  new_error(m, ErrorKind::kSchemaMismatch, type_bases.ptr(), "Inputs, or batches of one input, whose schemas differ.");
  new_error(m, ErrorKind::kUnsorted, invalid, "An input not sorted by its time column; names input, row and values.");
  new_error(m, ErrorKind::kNullTime, invalid, "A null in the time column; names input and row.");
  new_error(m, ErrorKind::kInputFailed, runtime_bases.ptr(), "A producer reported an error while the engine read from it.");
  new_error(m, ErrorKind::kUsage, runtime_bases.ptr(), "The API used out of order, e.g. a result read twice.");
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      PyErr_SetString(g_error_classes[static_cast<int>(e.kind())], e.what());
    }
  });
}

void translate_errors_into_engine_classes() {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      nb::object cls = nb::module_::import_("pyarrow_ops._engine").attr(error_class_name(e.kind()));
      PyErr_SetString(cls.ptr(), e.what());
    }
  });
}

}  // namespace pao::python
