#pragma once
// Operators over several streams: union, the interval join and the as-of join. Their result is a
// function of the streams' merged order, (time, port, position in the port's stream), where a
// port is one input stream. The runtime feeds each port in its stream's order, morsel by morsel,
// and with each morsel the stream's bound: the least time its future tuples may have (INT64_MAX
// once it has ended). A morsel may be empty: then it is only the bound, the "pulse" of the
// auto-parallelization paper (section 4.3.3), which tells a merger that a stream whose operators
// dropped everything has moved on, so nothing waits for tuples that will never come.
//
// A tuple is taken in the merged order only once it is ready: every other port has a tuple that
// sorts after it, or promises by its bound that nothing sorting before it can come. Which tuples
// are ready, and so the output, does not depend on the order in which the runtime feeds the ports,
// so these operators are stateful (one worker at a time) but need no order across ports.
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/batch.h"
#include "core/gather.h"
#include "core/order_key.h"
#include "gate/times.h"
#include "ops/operator.h"

namespace pao::ops {

class MultiInputOperator : public Operator {
 public:
  OpKind kind() const override { return OpKind::kStateful; }
  // input_schema() is port 0's.
  const std::shared_ptr<const Schema>& input_schema() const override { return port_schema(0); }

  virtual size_t ports() const = 0;
  virtual const std::shared_ptr<const Schema>& port_schema(size_t port) const = 0;
  // `in` (possibly empty) from `port`'s stream, after which that stream sends no time below
  // `bound` (INT64_MAX: it has ended). Returns the rows now ready, in output order.
  virtual Batch push(size_t port, const Batch& in, int64_t bound) = 0;
  // push(), with the ready rows left uncopied: an operator whose output is rows of its inputs as
  // they came (union) may hand the runtime a plan of them, which the runtime gathers in ranges on
  // the workers of the consumers (the merge's order decided once, its copying in parallel).
  // plans_output() says whether push_plan() may be called.
  virtual bool plans_output() const { return false; }
  virtual GatherPlan push_plan(size_t port, const Batch& in, int64_t bound);
  // Every row this operator may still output has time >= output_bound(): what its consumers may
  // be promised after the last push (INT64_MAX once everything has left).
  virtual int64_t output_bound() const = 0;
  bool preserves_time(const std::string&) const override { return true; }
  // Single-port use (process() of the one-input form) is not how these run.
  Batch process(const Batch& in) override { return push(0, in, INT64_MIN); }
};

// The ports' queued tuples and promises, and the merged order over them: what union and the joins
// share. Validates each port's times as they arrive (non-null, non-decreasing, not below the
// port's earlier bound), naming the operator, the port's role and the row.
class MergedPorts {
 public:
  // `labels` name the ports in errors ("union's input 1", "the join's left input"); each port's
  // schema has the time column `time` (of a time type: kInvalidInput otherwise). `order` gives
  // each port's rank in the merged order's ties (port i ranks order[i]); empty: the port index.
  MergedPorts(const std::vector<std::string>& labels, const std::string& time,
              const std::vector<std::shared_ptr<const Schema>>& schemas, std::vector<uint32_t> order = {});

  // `tag` comes back with every run of `in`'s rows (a join's id for the batch).
  void push(size_t port, const Batch& in, int64_t bound, uint64_t tag = 0);

  // The next run of ready rows: rows [start, start + length) of `batch`, all of port `port`,
  // consecutive in the merged order. `times` points at their times.
  struct Run {
    size_t port = 0;
    const Batch* batch = nullptr;
    int64_t start = 0;
    int64_t length = 0;
    const int64_t* times = nullptr;
    int64_t position = 0;  // the first row's position in its port's stream
    uint64_t tag = 0;      // push()'s tag for the batch
    bool last = false;     // the run ends the batch: after consume(run, length) it is gone
  };
  // The next ready run, at most `max_rows` long, or nullopt when nothing is ready. The run stays
  // valid until the next call of next() or consume().
  std::optional<Run> next(int64_t max_rows = INT64_MAX);
  // Takes the first `rows` rows of the run next() returned.
  void consume(const Run& run, int64_t rows);
  // Takes every ready row, in the merged order, as rows of `sources` appended to `rows`; each
  // queued batch with a row taken joins `sources`. Returns about how many runs of consecutive rows
  // of one batch the rows make (a run cut in two by the lanes counts twice). What next() and
  // consume() do run by run, as tournaments of the ports (core/loser_tree.h) that play a row at a
  // time: inputs that interleave finely make runs of a row or two, where finding, describing and
  // consuming each run cost several times the row's place in a loser tree. The ready rows are
  // found first and cut in two at a pivot key, and two tournaments merge the halves in one loop.
  // Every queued batch must have fewer than 2^32 rows.
  int64_t drain(std::vector<Batch>& sources, std::vector<RowRef>& rows);

  // Every tuple still to be taken (queued or to come) has time >= frontier(); INT64_MAX once
  // every port has ended and every tuple was taken.
  int64_t frontier() const;
  bool done() const;

  // Checkpoints: batch 0 has a row per port (rows received, the last row's time, the bound, ended:
  // int64 columns), batch 1 + p port p's rows not yet taken, under schemas[p]. load() takes that
  // into fresh ports, as if their streams had been pushed again.
  // `tag` gives each port's queued rows their push() tag (a join's store id); null: 0.
  std::vector<Batch> save(const std::vector<std::shared_ptr<const Schema>>& schemas) const;
  void load(const std::vector<Batch>& state, const std::function<uint64_t(size_t, const Batch&)>& tag = nullptr);

 private:
  struct Queued {
    Batch batch;
    // The rows' times: the batch's own time column where it is 64-bit (`batch` keeps it), else
    // `widened`, a wide copy (moving a Queued keeps its heap buffer, so `times` stays valid).
    const int64_t* times = nullptr;
    std::vector<int64_t> widened;
    int64_t next = 0;      // first row not yet taken
    int64_t position = 0;  // the stream position of row 0
    uint64_t tag = 0;
    Queued() = default;
    Queued(Queued&&) = default;
    Queued& operator=(Queued&&) = default;
    Queued(const Queued&) = delete;  // `times` may point into `widened`
  };
  struct Port {
    std::deque<Queued> queue;
    int64_t bound = INT64_MIN;  // no time below this may still come
    int64_t rows = 0;           // rows received (positions)
    int64_t last = INT64_MIN;   // time of the last row received
    bool ended = false;
  };
  // The smallest merged-order key a tuple of port p may have next, its head's or what its bound
  // allows, as OrderKey::of(time, rank, 0).packed() (one compare orders two); kNone when the port
  // has ended and is empty. Kept in head_ and refreshed by push() and consume(), so next() reads
  // one array instead of every port's queue twice per run (runs of a row or two when the inputs
  // interleave: that lookup was most of a union's time).
  using Key = OrderKey::Packed;
  static constexpr Key kNone = ~Key{0};
  void refresh(size_t p);
  // drain() with the queued rows' times in [lo, hi].
  template <class Keys>
  int64_t drain_with(const Keys& keys, int64_t lo, int64_t hi, std::vector<Batch>& sources, std::vector<RowRef>& rows);

  std::vector<uint32_t> rank_;
  std::vector<Port> ports_;
  std::vector<gate::InputTimes> times_;
  std::vector<Key> head_;
};

// union(inputs): every row of every input, in the merged order (time, input index, position).
// The inputs must have `schemas[0]`'s names and types (nullability aside; the output is nullable
// wherever any input is) and each the time column `time`, sorted by time. Runs of rows from one
// input leave as zero-copy slices when they fill a whole output batch; interleaved rows are
// gathered, at most `batch_rows` per batch.
std::shared_ptr<MultiInputOperator> make_union(const std::vector<std::shared_ptr<const Schema>>& schemas,
                                               const std::string& time);

}  // namespace pao::ops
