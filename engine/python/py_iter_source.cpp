#include "python/py_iter_source.h"

#include <algorithm>

#include "arrow/import.h"
#include "core/builder.h"
#include "core/error.h"
#include "python/capsules.h"

namespace nb = nanobind;

namespace pao::python {
namespace {

class PyIterSource final : public BatchSource {
 public:
  PyIterSource(nb::handle schema, nb::handle iterator, std::string label, nb::handle ready)
      : iterator_(nb::borrow(iterator)), ready_(nb::borrow(ready)), label_(std::move(label)) {
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
      ready_.release();
      return;
    }
    nb::gil_scoped_acquire gil;
    iterator_.reset();
    ready_.reset();
  }

  const std::shared_ptr<const Schema>& schema() const noexcept override { return schema_; }
  int64_t bound() const noexcept override { return bound_; }
  // Asks the iterator's producer, when it can tell (LiveInput: whether anything is queued).
  bool ready() override {
    if (!ready_.is_valid() || ready_.is_none()) return true;
    nb::gil_scoped_acquire gil;
    return nb::cast<bool>(ready_());
  }

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
    if (PyLong_CheckExact(item)) {
      // A heartbeat (pyarrow_ops.LiveInput.heartbeat): the column's stored integer. Whoever reads
      // the promise checks it against the rows (gate::InputTimes::heartbeat).
      const long long time = PyLong_AsLongLong(item);
      if (time == -1 && PyErr_Occurred()) throw nb::python_error();
      bound_ = std::max<int64_t>(bound_, time);
      return empty_batch(schema_);
    }
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
  nb::object ready_;  // None, or a callable: whether a next item is at hand
  std::string label_;
  std::shared_ptr<const Schema> schema_;
  int64_t batches_ = 0;
  int64_t bound_ = INT64_MIN;
};

class GilReleasingSource final : public BatchSource {
 public:
  explicit GilReleasingSource(std::unique_ptr<BatchSource> inner) : inner_(std::move(inner)) {}
  const std::shared_ptr<const Schema>& schema() const noexcept override { return inner_->schema(); }
  int64_t bound() const noexcept override { return inner_->bound(); }
  bool ready() override { return inner_->ready(); }
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
                                                 std::string label, nb::handle ready) {
  return std::make_unique<PyIterSource>(schema, iterator, std::move(label), ready);
}

std::unique_ptr<BatchSource> release_gil_while_pulling(std::unique_ptr<BatchSource> source) {
  return std::make_unique<GilReleasingSource>(std::move(source));
}

}  // namespace pao::python
