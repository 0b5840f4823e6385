#pragma once
// The parametric operator of docs/pipeline.md ("The parametric operator"; the auto-
// parallelization paper's section 7): a synthetic operator whose cost, selectivity, state size
// and kind are parameters, for experiments on the runtime. Per input tuple it
//   - busy-waits `cost_us` microseconds on the steady clock (a spin, not a sleep: it occupies its
//     core the way real work would);
//   - folds the tuple into its state and touches `state_bytes` bytes of state (every 8-byte word
//     read and written): per key for the partitioned kind, one region for the stateful kind, none
//     for the stateless kind;
//   - emits parametric_copies(h, selectivity) copies of the tuple, h = parametric_tuple_hash of
//     its values, so which tuples pass depends only on the tuple, never on timing or partitions.
// Output: the input columns, then `p_state`: uint64, not null. For the partitioned kind the
// running hash of the key's tuples in arrival order, for the stateful kind of all tuples, for the
// stateless kind the tuple's own hash (see the functions below); every tuple, dropped or not,
// enters the running hash, and all copies of a tuple carry the state after it. Any reordering of
// a key's tuples therefore shows in the output. An input column already named `p_state` (an
// earlier parametric operator's) is replaced: the new one is always the last column.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/batch.h"
#include "ops/operator.h"

namespace pao::ops {

struct ParametricOptions {
  double cost_us = 10.0;    // spin per input tuple, microseconds; >= 0
  double selectivity = 1.0;  // below 1: the share of tuples kept; 1 or more: mean copies per tuple; 0..1e6
  int64_t state_bytes = 0;   // state touched per tuple (rounded up to 8-byte words); >= 0, 0 for stateless
};

// The stateless kind: process() is thread-safe; p_state is the tuple's hash.
OperatorPtr make_stateless_parametric(std::shared_ptr<const Schema> input_schema, ParametricOptions options);
// The stateful kind: process() one morsel at a time in arrival order; p_state hashes every tuple so far.
OperatorPtr make_stateful_parametric(std::shared_ptr<const Schema> input_schema, ParametricOptions options);
// The partitioned kind: state per key (`keys`, compared as KeyTable does); p_state hashes
// the key's tuples so far.
OperatorPtr make_keyed_parametric(std::shared_ptr<const Schema> input_schema, std::vector<std::string> keys,
                                  ParametricOptions options);

// The running hash before the first tuple.
inline constexpr uint64_t kParametricSeed = 0;
// A hash of row `row`'s values in every column of `batch` but the reserved ones (operator.h)
// (nulls, raw fixed-width bits, string bytes), in column order: equal tuples hash equal, whatever
// batch or offset they sit in.
uint64_t parametric_tuple_hash(const Batch& batch, int64_t row);
// The running hash after one more tuple; order-sensitive (folding a then b differs from b then a).
uint64_t parametric_fold(uint64_t state, uint64_t tuple_hash);
// How many copies of a tuple to emit: floor(selectivity), plus one when a uniform number in
// [0, 1) drawn from the tuple's hash falls below selectivity's fractional part.
int64_t parametric_copies(uint64_t tuple_hash, double selectivity);

}  // namespace pao::ops
