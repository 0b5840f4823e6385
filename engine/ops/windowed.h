#pragma once
// The pipeline's operators that hold tuples or aggregates across morsels (docs/pipeline.md):
// top_k, and window_aggregate with or without a key. Both keep their state in the window layer's
// structures (key order, aggregate states, window assignment), so a pipeline's windows compute
// exactly what aggregate() computes.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ops/operator.h"
#include "window/aggregates.h"
#include "window/window_aggregate.h"

namespace pao::ops {

// top_k(k, by, per, descending): a stateful operator (one worker, arrival order, morsels of any
// size) whose output is the input's columns plus a non-null int64 column `rank` (1-based).
//
// Groups are the runs of consecutive equal `per` values (equal as keys are: null equals null,
// -0.0 equals 0.0, NaN equals NaN); without `per` the whole input is one group. A group's best
// `k` rows by `by`, best first, are emitted when a row with another `per` value arrives (as the
// output of that row's morsel, before anything else of it) or at finish(). "Best" is the largest
// with `descending`, the smallest otherwise, in the total order of docs/semantics.md (floats:
// -0.0 below 0.0, NaN above every number; strings by their UTF-8 bytes); null `by` values rank
// after every value either way; ties keep arrival order.
//
// Retained rows stay in their input batches (the batch's owner is kept alive, not the values
// copied) until their group is emitted, so at most `k` rows' batches are held at a time.
//
// Throws pao::Error kInvalidInput when k < 1, `by` or `per` is not an input column, or the input
// already has a column named "rank".
OperatorPtr make_top_k(std::shared_ptr<const Schema> input, int64_t k, std::string by,
                       std::optional<std::string> per, bool descending);

// window_aggregate(window, aggs, keys) over the pipeline's time column `time` (timestamp, date32,
// int32 or int64). Output schema as aggregate(): window_start, window_end (the time column's type,
// non-null), the key columns, then one column per aggregate in `aggs` order (types as in
// docs/semantics.md, nullable). Aggregates compute exactly as aggregate()'s (float sums included).
//
// Without keys, or with keys and `by_window`: a stateful operator that closes windows on the
// pipeline's time, like aggregate() with a single input. A tuple's output is the window sets that
// end at or before its time (window start order, keys ascending); finish() returns the rest.
//
// With keys: a partitioned operator (key_columns() = the key columns). A key's open windows are
// those containing its latest tuple; they close when the key's next tuple has a time at or past
// their end, and that tuple's output rows are exactly the closed windows of its key, in window
// start order (the tuple itself is then added to its windows). finish() returns every still-open
// window of every key, by window_start and then key ascending (KeyTable order, across all
// partitions). The rows of a key do not depend on the number of partitions.
//
// Time must not decrease (per key with keys): a decrease, or a null time, throws pao::Error
// (kUnsorted, kNullTime) from process()/process_rows(). Invalid arguments (unknown columns, a
// non-temporal time column, size or advance below 1, an aggregate that does not apply to its
// column's type, duplicate output names) throw pao::Error from the factory.
//
// With `session_gap`: session windows (window/sessions.h) instead of `window`, with or without
// keys: a stateful operator that closes sessions on the pipeline's time (a tuple's output is the
// sessions ending below its time, by end and then key; finish() returns the rest), exactly as
// aggregate() with window=po.session(gap).
OperatorPtr make_window_aggregate(std::shared_ptr<const Schema> input, std::string time,
                                  window::WindowSpec window, std::vector<window::AggSpec> aggs,
                                  std::vector<std::string> keys, bool by_window = false,
                                  std::optional<int64_t> session_gap = std::nullopt);

}  // namespace pao::ops
