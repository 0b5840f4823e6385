#pragma once
// The partitioned stateful operators of docs/pipeline.md. Each keeps its state per key, a key
// being one or more columns compared as KeyTable does (null is a key of its own, -0.0
// equals 0.0, NaN equals NaN); the runtime routes a key's tuples to one partition, in arrival
// order, and each partition has its own key table and state, so no call takes a lock. Per key the
// state, hence the output, is exactly that of a sequential run over the key's tuples, whatever
// the number of partitions or the morsels. All of them emit online (finish() is empty).
//
// "input" below means every input column, unchanged, at the emitted rows. The factories check
// their arguments against the input schema and throw pao::Error: kInvalidInput for an unknown
// column (naming the columns there are), a missing key, a bad gap or `within`, or a result with
// two columns of one name; kUnsupportedType for a column of the wrong type.
//
// sessionize(keys, time, gap, name = "session")                               exactly one per tuple
//   Output: input + `name`: int64, not null: the tuple's session number within its key, 0, 1, ...
//   A key's first tuple opens session 0; a later tuple opens the next session when its time is
//   more than `gap` after the key's previous tuple (gap >= 0, in the time column's unit).
//
// lag(keys, columns, suffix = "_prev")                                          exactly one per tuple
//   Output: input + `c + suffix` per column c, of c's type, nullable: c in the key's previous
//   tuple (null for the key's first tuple, or where that value was null). Any column type.
//
// delta(keys, time, columns, suffix = "_delta")                                 exactly one per tuple
//   Output: input + `c + suffix` per column c: c minus c in the key's previous tuple; null for
//   the key's first tuple or when either value is null. Integer and time columns (int*, uint*,
//   date32, timestamp; the time column included) give int64 in the column's own unit: the
//   difference modulo 2^64, so it is exact whenever it fits in int64 and wraps like numpy's int64
//   subtraction otherwise (only possible for 64-bit columns). Float columns give float64 (float32
//   values are widened first). An empty `columns` means the time column alone.
//
// running(keys, aggs)                                                           exactly one per tuple
//   Output: input + one column per aggregate (window::AggSpec: output name, function, column)
//   over the key's tuples so far, this one included. Functions, result types and null rules are
//   aggregate()'s (docs/semantics.md): count() int64 of tuples, count(c) of non-null values;
//   sum int64 / uint64 (wrapping) / float64; mean float64; min, max in c's type with floats in the
//   total order (-0.0 < 0.0, NaN above every number); first, last c's value (null included).
//   Float sums are exact, rounded once (docs/semantics.md); a mean divides the sum by the count.
//
// dedupe(keys, time, within = nullopt)                                          at most one per tuple
//   Output: input, at the tuples that pass. A tuple passes if it is its key's first or, with
//   `within` (>= 0, the time column's unit), if its time is more than `within` after the key's
//   last passed tuple.
//
// pairs(keys, time, item, gap)                                                  any number per tuple
//   Sessions as sessionize(keys, time, gap). When a tuple brings an item new to its key's
//   session, one row per earlier distinct item of the session, in the order those items first
//   appeared. Output: the key columns and the time column (the tuple's values, their types),
//   then `item_a` = the lesser, `item_b` = the greater of the two items (the item's type, not
//   null). Items are integer (int*, uint*) or string (utf8, large_utf8) values; integers compare
//   as numbers, strings by their UTF-8 bytes. A null item is no item: it adds nothing, though
//   its tuple still counts for the session's gap. Memory: each partition remembers every
//   distinct item it has seen, plus each key's current session.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/types.h"
#include "ops/operator.h"
#include "window/aggregates.h"

namespace pao::ops {

// sessionize: int64 column `name`, the session number of each tuple within its key.
OperatorPtr make_sessionize(std::shared_ptr<const Schema> input_schema, std::vector<std::string> keys,
                            std::string time, int64_t gap, std::string name = "session");

// Every operator here follows each key's tuples in order, so each checks that a key's times do not
// go back (kUnsorted for the row, see TimeColumn::went_back); lag and running take the time
// column for that check alone, and skip it when `time` is empty or not in the schema (an
// operator before them dropped it).

// lag: per column c, `c + suffix`, the value of c in the key's previous tuple.
OperatorPtr make_lag(std::shared_ptr<const Schema> input_schema, std::vector<std::string> keys,
                     std::vector<std::string> columns, std::string suffix = "_prev", std::string time = "");

// delta: per column c (the time column when `columns` is empty), `c + suffix` = c - previous c.
OperatorPtr make_delta(std::shared_ptr<const Schema> input_schema, std::vector<std::string> keys, std::string time,
                       std::vector<std::string> columns, std::string suffix = "_delta");

// running: one column per aggregate over the key's tuples so far.
OperatorPtr make_running(std::shared_ptr<const Schema> input_schema, std::vector<std::string> keys,
                         std::vector<window::AggSpec> aggs, std::string time = "");

// dedupe: a key's first tuple, and with `within` every tuple more than `within` after the key's
// last passed one.
OperatorPtr make_dedupe(std::shared_ptr<const Schema> input_schema, std::vector<std::string> keys, std::string time,
                        std::optional<int64_t> within);

// pairs: (keys, time, item_a, item_b) for every new distinct item of a key's session against
// each earlier one.
OperatorPtr make_pairs(std::shared_ptr<const Schema> input_schema, std::vector<std::string> keys, std::string time,
                       std::string item, int64_t gap);

}  // namespace pao::ops
