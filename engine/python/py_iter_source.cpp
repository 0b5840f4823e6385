#include "python/py_iter_source.h"

#include "arrow/import.h"
#include "core/error.h"
#include "python/capsules.h"

namespace nb = nanobind;

namespace pao::python {
namespace {

class PyIterSource final : public BatchSource {
 public:
  PyIterSource(nb::handle schema, nb::handle iterator, std::string label)
      : iterator_(nb::borrow(iterator)), label_(std::move(label)) {
    nb::object capsule = schema.attr("__arrow_c_schema__")();
    try {
      schema_ = std::make_shared<const Schema>(
          arrow::import_schema(*from_capsule<ArrowSchema>(capsule, "arrow_schema")));
    } catch (const Error& e) {
      throw Error(e.kind(), label_ + ": " + e.what());
    }
  }

  ~PyIterSource() override {
    if (!Py_IsInitialized()) {
      iterator_.release();  // the interpreter is gone: nothing to give back to
      return;
    }
    nb::gil_scoped_acquire gil;
    iterator_.reset();
  }

  const std::shared_ptr<const Schema>& schema() const noexcept override { return schema_; }

  std::optional<Batch> next() override {
    nb::gil_scoped_acquire gil;
    if (!iterator_.is_valid()) return std::nullopt;
    PyObject* item = PyIter_Next(iterator_.ptr());
    if (item == nullptr) {
      if (PyErr_Occurred()) throw nb::python_error();
      iterator_.reset();  // the end: let the producer go now
      return std::nullopt;
    }
    nb::object batch = nb::steal(item);
    const int64_t index = batches_++;
    Batch imported = import_py_batch(batch, label_ + ", batch " + std::to_string(index));
    if (auto diff = schema_difference(*schema_, *imported.schema())) {
      throw Error(ErrorKind::kSchemaMismatch, label_ + ", batch " + std::to_string(index) +
                                                  " does not match the input's first batch: " + *diff);
    }
    return imported.with_schema(schema_);
  }

 private:
  nb::object iterator_;
  std::string label_;
  std::shared_ptr<const Schema> schema_;
  int64_t batches_ = 0;
};

class GilReleasingSource final : public BatchSource {
 public:
  explicit GilReleasingSource(std::unique_ptr<BatchSource> inner) : inner_(std::move(inner)) {}
  const std::shared_ptr<const Schema>& schema() const noexcept override { return inner_->schema(); }
  std::optional<Batch> next() override {
    if (Py_IsInitialized() && PyGILState_Check()) {
      nb::gil_scoped_release nogil;
      return inner_->next();
    }
    return inner_->next();
  }

 private:
  std::unique_ptr<BatchSource> inner_;
};

}  // namespace

std::unique_ptr<BatchSource> make_py_iter_source(nb::handle schema, nb::handle iterator,
                                                 std::string label) {
  return std::make_unique<PyIterSource>(schema, iterator, std::move(label));
}

std::unique_ptr<BatchSource> release_gil_while_pulling(std::unique_ptr<BatchSource> source) {
  return std::make_unique<GilReleasingSource>(std::move(source));
}

}  // namespace pao::python
