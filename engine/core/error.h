#pragma once
// Errors the engine raises. One exception type with a kind, so every layer throws the same thing
// and the Python bindings map each kind to one Python exception class (pyarrow_ops.errors).
#include <cstdint>
#include <stdexcept>
#include <string>

namespace pao {

enum class ErrorKind {
  kInvalidInput,     // a bad argument or input shape: missing time column, non-temporal time column
  kUnsupportedType,  // a column whose Arrow type the engine does not handle
  kSchemaMismatch,   // inputs (or batches of one input) whose schemas differ
  kUnsorted,         // an input not sorted by its time column
  kNullTime,         // a null in the time column
  kInputFailed,      // a producer reported an error while we pulled from it
  kUsage,            // the API used out of order: a result consumed twice, a closed result read
};

class Error : public std::runtime_error {
 public:
  // `row`: for a fault in one row of the batch an operator was handed, that row's index in the
  // batch (-1: not about one row). Only the caller knows where the batch starts in the operator's
  // input, so the message leaves the row out, and the pipeline runtime rethrows it naming the
  // operator and the row within its input (runtime/pipeline.cpp, `in_operator`).
  Error(ErrorKind kind, const std::string& message, int64_t row = -1)
      : std::runtime_error(message), kind_(kind), row_(row) {}
  ErrorKind kind() const noexcept { return kind_; }
  int64_t row() const noexcept { return row_; }

 private:
  ErrorKind kind_;
  int64_t row_;
};

}  // namespace pao
