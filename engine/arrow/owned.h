#pragma once
// RAII owners for the C structs: whoever holds one releases it exactly once, on destruction.
// Nobody in the engine calls a release callback by hand except through these.
#include <utility>

#include "arrow/c_abi.h"

namespace pao::arrow {

template <class T>
class Owned {
 public:
  Owned() noexcept { raw_.release = nullptr; }
  // Takes ownership of *src: moves the struct and marks src released (src->release = nullptr).
  explicit Owned(T* src) noexcept : raw_(*src) { src->release = nullptr; }
  Owned(Owned&& other) noexcept : raw_(other.raw_) { other.raw_.release = nullptr; }
  Owned& operator=(Owned&& other) noexcept {
    if (this != &other) {
      reset();
      raw_ = other.raw_;
      other.raw_.release = nullptr;
    }
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() { reset(); }

  void reset() noexcept {
    if (raw_.release != nullptr) raw_.release(&raw_);
    raw_.release = nullptr;  // the callback must do this too; we do not rely on it
  }
  bool is_released() const noexcept { return raw_.release == nullptr; }
  T* get() noexcept { return &raw_; }
  const T* get() const noexcept { return &raw_; }
  T* operator->() noexcept { return &raw_; }
  const T* operator->() const noexcept { return &raw_; }

 private:
  T raw_;
};

using OwnedSchema = Owned<ArrowSchema>;
using OwnedArray = Owned<ArrowArray>;
using OwnedStream = Owned<ArrowArrayStream>;

}  // namespace pao::arrow
