#pragma once
// For benchmarks (built into test targets and pyarrow_ops._testing only, never the product).
// A T-Gate throughput measurement (the paper's Figure 7): producer threads insert pre-generated
// sorted inputs, one reader takes every tuple; the time from start to the last tuple read.
#include <cstdint>

#include "gate/tgate.h"

namespace pao::testing {

struct GateBenchResult {
  double seconds = 0;
  int64_t tuples = 0;
  size_t peak_live_arenas = 0;
};

// `tuples` in total over `inputs` inputs (time steps of 0-2 per tuple, so inputs interleave
// finely), inserted in batches of `batch_rows` by `producers` threads.
GateBenchResult benchmark_gate(size_t inputs, int64_t tuples, gate::Readiness readiness, size_t producers,
                               int64_t batch_rows);

}  // namespace pao::testing
