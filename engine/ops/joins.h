#pragma once
// Joins of two streams (docs/graphs.md states their semantics for users):
//
// interval join  pairs (l, r) of the left and right streams with equal, non-null keys and
//                lo <= r.time - l.time <= hi. A pair leaves at the later of its two tuples in the
//                merged order (time, side: left before right, position), pairs leaving at one
//                tuple ordered by the other's merged position. Its time is the later tuple's. With
//                how = left, a left tuple that matched nothing leaves once no match can come: right
//                after itself when hi < 0, else just before the first tuple of either stream whose
//                time passes l.time + hi (or at the end), with time max(l.time, l.time + hi) and
//                null right columns.
//                Columns: the left's (its time column holding the output time), the right's but
//                the keys (a name already taken gets "_right": the right's time is time_right),
//                then time_left, the left tuple's own time.
// as-of join     each left tuple with the latest right tuple of equal, non-null keys at or before
//                its time (equal times count; of right tuples with one time, the last), no older
//                than `tolerance` if given; null right columns when there is none. One row per
//                left tuple, in left order, with the left's time. Columns: the left's, then the
//                right's but the keys ("_right" for a name taken).
// lookup join    the as-of join with a static right table: for each key its last row is in
//                force from the start. Stateless (any worker): the table is read only.
//
// Both streams must have the time column, sorted, and the key columns with equal types.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/batch.h"
#include "ops/multi_input.h"

namespace pao::ops {

enum class JoinHow : uint8_t { kInner, kLeft };

std::shared_ptr<MultiInputOperator> make_interval_join(std::shared_ptr<const Schema> left,
                                                       std::shared_ptr<const Schema> right, const std::string& time,
                                                       std::vector<std::string> on, int64_t lo, int64_t hi,
                                                       JoinHow how);

std::shared_ptr<MultiInputOperator> make_asof_join(std::shared_ptr<const Schema> left,
                                                   std::shared_ptr<const Schema> right, const std::string& time,
                                                   std::vector<std::string> by, std::optional<int64_t> tolerance);

// `table`: the right side's batches, all of `right`'s schema.
OperatorPtr make_lookup_join(std::shared_ptr<const Schema> left, std::shared_ptr<const Schema> right,
                             std::vector<Batch> table, const std::string& time, std::vector<std::string> by);

}  // namespace pao::ops
