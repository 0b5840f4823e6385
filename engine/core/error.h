#pragma once
// Errors the engine raises. One exception type with a kind, so every layer throws the same thing
// and the Python bindings map each kind to one Python exception class (pyarrow_ops.errors).
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
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace pao
