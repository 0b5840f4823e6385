#pragma once
// A result or input stream held by Python (class _engine.Stream): a BatchSource until it is
// consumed or closed. Entry points that read streams take them with take().
#include <memory>

#include "core/batch.h"
#include "core/error.h"

namespace pao::python {

struct Stream {
  std::unique_ptr<BatchSource> source;
  // next_batch() pulls without the GIL. These two, read and written only with the GIL held, keep
  // another thread's close() from freeing the source under the pull (the pull drops it when it
  // returns and finds `closed`), and a second reader from pulling the same source at once.
  // `closed` also tells get()'s error a closed stream from a consumed one.
  bool pulling = false;
  bool closed = false;

  BatchSource& get() {
    if (!source) {
      throw Error(ErrorKind::kUsage, closed ? "this stream was closed"
                                            : "this stream was already consumed (passed to a run or exported)");
    }
    if (pulling) {
      throw Error(ErrorKind::kUsage, "this stream is being read by another thread; a result is read by one thread");
    }
    return *source;
  }
  std::unique_ptr<BatchSource> take() {
    get();
    return std::move(source);
  }
  void close() {
    closed = true;
    if (!pulling) source.reset();
  }
};

// A shared engine object (an aggregate, a pipeline) read as a BatchSource: the result's side of
// a run whose handle Python also keeps.
template <class T>
struct SharedSource final : BatchSource {
  explicit SharedSource(std::shared_ptr<T> object) : p(std::move(object)) {}
  const std::shared_ptr<const Schema>& schema() const noexcept override { return p->schema(); }
  std::optional<Batch> next() override { return p->next(); }
  std::shared_ptr<T> p;
};

}  // namespace pao::python
