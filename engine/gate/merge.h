#pragma once
// Merging N time-sorted inputs into one stream in the merged order.
#include <memory>
#include <string>
#include <vector>

#include "core/batch.h"

namespace pao::gate {

struct MergeOptions {
  std::string time_column;
  // Rows per output batch the merge copies. Runs it emits as zero-copy slices may be longer.
  int64_t batch_size = 65536;
  // The index errors give the first input (the rest follow): a merge of one input of a larger
  // set (unmerge) names it as the whole set's merge would.
  uint32_t first_input = 0;
  // Threads that merge (the caller's and threads - 1 of the merge's own): each region of ready
  // rows is cut into parts that merge independently. The rows and their order never depend on it;
  // the cut into batches does.
  unsigned threads = 1;
  // With threads > 1, about how many rows make a part: large enough that handing a part to a
  // thread is noise next to merging it, small enough that a region (about one input batch) makes
  // several parts per thread. Tests set it small to cut tiny regions into parts.
  int64_t part_rows = 8192;
  // The output goes to a caller that collects it (merge()'s result), not to an operator that reads
  // each batch at once: gathered batches are written around the cache (gather's Stores::kStreamed).
  bool streamed = false;
};

// The merged order (docs/semantics.md): tuples by (time, input index, position in the input).
// The returned source pulls its inputs lazily, one batch of one input at a time, and emits:
//  - a zero-copy slice of an input batch for every run of rows that come consecutively from one
//    input and are long enough (every run, with one input: a single input passes through);
//  - otherwise new batches of up to batch_size rows gathered from the inputs;
// and a batch leaves as soon as going on would pull an input (a live one may wait): results are
// never held back for batch_size rows to gather. An input's heartbeat (a batch of 0 rows and its
// BatchSource::bound()) lets the others' rows before it leave without pulling that input again;
// when nothing can leave until a heartbeated input sends more, the merge returns a batch of 0 rows
// itself, its bound() the least time still to come (once per rise), then waits on that input.
// ready() is false while an input it would have to pull has nothing at hand.
// It validates as it pulls, before any row of a batch is emitted: time never null, each input
// sorted by time; it throws pao::Error naming input, row (0-based, counted across the input's
// batches) and values. Construction checks that the time column exists, is temporal, and that
// every input's schema equals input 0's. Sequential: the concurrent T-Gate must match it exactly.
std::unique_ptr<BatchSource> make_merge(std::vector<std::unique_ptr<BatchSource>> inputs,
                                        MergeOptions options);

// If `merged` is a merge (make_merge) of two or more inputs that has not been read yet: takes it
// apart and returns its inputs in order, each as a merge of one input that validates as the whole
// merge did and names its input by its index there (the union of their streams in the merged
// order is the merge's output). Otherwise returns nothing and leaves `merged` as it is. The
// planner uses it to run operators on each input before the merge (runtime/planner.h).
std::vector<std::unique_ptr<BatchSource>> unmerge(std::unique_ptr<BatchSource>& merged);

}  // namespace pao::gate
