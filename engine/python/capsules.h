#pragma once
// The Arrow PyCapsule interface on the engine's side: C structs in and out of PyCapsules, and
// record batches imported from Python objects. Shared by every binding file so each conversion
// is written once.
#include <nanobind/nanobind.h>

#include <memory>
#include <string>
#include <string_view>

#include "arrow/c_abi.h"
#include "arrow/export.h"
#include "arrow/import.h"
#include "arrow/owned.h"
#include "core/batch.h"
#include "core/error.h"

namespace pao::python {

// Wraps a C struct we filled in a PyCapsule that releases it (unless a consumer took ownership,
// which sets release to nullptr) and frees it when Python drops the capsule.
template <class T>
nanobind::capsule to_capsule(std::unique_ptr<T> raw, const char* name) {
  return nanobind::capsule(raw.release(), name, [](void* p) noexcept {
    std::unique_ptr<T> s(static_cast<T*>(p));
    arrow::Owned<T> owned(s.get());  // released here, through the one owner, if still unreleased
  });
}

// The struct inside a capsule of the given name; raises the Python error for any other object.
template <class T>
T* from_capsule(nanobind::handle capsule, const char* name) {
  void* p = PyCapsule_GetPointer(capsule.ptr(), name);
  if (p == nullptr) throw nanobind::python_error();
  return static_cast<T*>(p);
}

inline nanobind::capsule schema_capsule(const Schema& schema) {
  auto raw = std::make_unique<ArrowSchema>();
  arrow::export_schema(schema, raw.get());
  return to_capsule(std::move(raw), "arrow_schema");
}

// One batch handed to Python (class _engine.Batch); exports through __arrow_c_array__ without
// copying.
struct BatchHandle {
  Batch batch;
};

// The record batch of an object with __arrow_c_array__, without copying. `where` prefixes errors
// about its schema or array (e.g. "input 2, batch 5"). Needs the GIL.
inline Batch import_py_batch(nanobind::handle obj, const std::string& where) {
  nanobind::object pair = obj.attr("__arrow_c_array__")();
  nanobind::handle schema_capsule = pair[0];
  nanobind::handle array_capsule = pair[1];
  // Own the array before anything can throw, so it is released exactly once on every path.
  arrow::OwnedArray array(from_capsule<ArrowArray>(array_capsule, "arrow_array"));
  std::shared_ptr<const Schema> schema;
  try {
    schema = std::make_shared<const Schema>(
        arrow::import_schema(*from_capsule<ArrowSchema>(schema_capsule, "arrow_schema")));
  } catch (const Error& e) {
    throw Error(e.kind(), where + ": " + e.what());
  }
  return arrow::import_batch(array.get(), std::move(schema), where);
}

}  // namespace pao::python
