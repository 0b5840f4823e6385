#include "ops/operator.h"

namespace pao::ops {

const char* kind_name(OpKind k) noexcept {
  switch (k) {
    case OpKind::kStateless: return "stateless";
    case OpKind::kPartitioned: return "partitioned";
    case OpKind::kStateful: return "stateful";
  }
  return "?";
}

const char* selectivity_name(Selectivity s) noexcept {
  switch (s) {
    case Selectivity::kExactlyOne: return "exactly one";
    case Selectivity::kAtMostOne: return "at most one";
    case Selectivity::kAny: return "any";
  }
  return "?";
}

}  // namespace pao::ops
