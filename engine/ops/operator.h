#pragma once
// The operator model of the ordered pipeline runtime (ordered-processing paper, section 2.1;
// auto-parallelization paper, section 3.2). An operator is a unary function of its input stream
// that declares
//   - its kind: stateless (any worker, any order), partitioned stateful by key (tuples of one key
//     in arrival order, different keys concurrently) or stateful (one worker, arrival order);
//   - its selectivity class: exactly one output per input tuple, at most one, or any number.
// Operators never manage threads or order: the runtime (engine/runtime) decides who runs them
// and restores the arrival order of their outputs. An operator only promises the contract of
// its kind below.
//
// Work arrives in morsels, a row range of a batch, but the semantics are per tuple: the output
// of a morsel must equal the concatenation, in row order, of the outputs of its tuples processed
// one at a time. The runtime may use any morsel size, down to one row.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/batch.h"

namespace pao {
class KeyTable;
}

namespace pao::ops {

// Columns whose names start with this prefix are the engine's own bookkeeping (the row numbers
// pyarrow_ops.spark carries through a stage, see carry_column below), never user data: operators
// pass them through but never let them change a result (the parametric operator does not hash them).
inline constexpr std::string_view kReservedPrefix = "__pao_";
inline bool is_reserved(std::string_view name) noexcept { return name.starts_with(kReservedPrefix); }

enum class OpKind : uint8_t { kStateless, kPartitioned, kStateful };
enum class Selectivity : uint8_t { kExactlyOne, kAtMostOne, kAny };

const char* kind_name(OpKind k) noexcept;          // "stateless", "partitioned", "stateful"
const char* selectivity_name(Selectivity s) noexcept;  // "exactly one", "at most one", "any"

// What a partitioned operator returns for some rows of a morsel: output rows, and for each the
// row of the morsel (an index into the morsel batch) that produced it, nondecreasing. The
// runtime merges the pieces of one morsel by source row (stable), which gives the output of a
// one-tuple-at-a-time run.
struct Piece {
  Batch batch;
  std::vector<int64_t> source_rows;  // source_rows.size() == batch.num_rows()
};

class Operator {
 public:
  virtual ~Operator() = default;

  // A short name for explain() and stats(), e.g. "filter", "sessionize".
  virtual std::string name() const = 0;
  // One line on what it does with which columns, for explain().
  virtual std::string describe() const = 0;
  virtual OpKind kind() const = 0;
  virtual Selectivity selectivity() const = 0;
  // Partitioned operators: the indices (in the input schema) of the key columns. Tuples with
  // equal keys (equal as KeyTable defines it: -0.0 == 0.0, null a key of its own) are
  // routed to the same partition.
  virtual std::vector<size_t> key_columns() const { return {}; }
  // Stateless operators that must not run on two workers at once (a Python function under the
  // GIL gains nothing from two) say 1; 0 = no limit.
  virtual size_t max_parallelism() const { return 0; }
  // Whether every output row has, in the column `time`, the time of the input row it came from
  // (and finish() emits nothing): filters, projections that pass `time` on, the keyed operators.
  // Then the output promises what the input promises, no time below the input's bound, and a
  // union or join downstream can take its tuples without waiting for the end. False for operators
  // that emit later than their input's time (windows, top-k), compute the time column, drop it, or
  // run user code.
  virtual bool preserves_time(const std::string& time) const {
    (void)time;
    return false;
  }
  // Whether process() may throw an error about one row's values (pao::Error with a row): such an
  // operator starts a fused chain, where the row it names is the chain's own input row.
  virtual bool may_fail() const { return true; }
  // Whether the input column `column` reaches the output unchanged, under its name, in every
  // output row (the auto-parallelization paper's forwarding, section 3.1): a region routed by a
  // key needs every operator between its entry and a keyed operator to forward the key.
  virtual bool passes_through(const std::string& column) const {
    (void)column;
    return false;
  }

  // A column this operator adds that numbers each key's runs (key_columns()): along a key's
  // tuples its value never decreases, so a value once left never comes back (sessionize's
  // session); the operator checks that each key's times never go back. Lets the planner key an
  // operator after it by the key alone (keyed_by_epoch), which then need not check the order.
  virtual std::optional<std::string> epoch_column() const { return std::nullopt; }
  // An operator keyed by `keys` + `epoch` (names, any order) whose state for a key + epoch is
  // dead once the key's epoch moves on: the same operator keyed by `keys` alone, restarting its
  // state at each new epoch. The planner uses it where `epoch` is an epoch_column() of `keys`:
  // the output is the same, and the state stays one per key instead of one per key and epoch.
  // Null where the operator has no such form.
  virtual std::shared_ptr<Operator> keyed_by_epoch(const std::vector<std::string>& keys,
                                                   const std::string& epoch) const {
    (void)keys;
    (void)epoch;
    return nullptr;
  }

  virtual const std::shared_ptr<const Schema>& input_schema() const = 0;
  virtual const std::shared_ptr<const Schema>& output_schema() const = 0;

  // Partitioned operators: called once before the run with the number of partitions, so state
  // can be kept per partition without locks.
  virtual void set_partitions(size_t partitions) { (void)partitions; }

  // kStateless: the output of all rows of `in`. Called concurrently by any number of workers
  //   (up to max_parallelism()); must be thread-safe.
  // kStateful: the output of all rows of `in`. Called by one worker at a time, morsels in
  //   arrival order (the runtime's synchronisation makes each call see the previous one's
  //   writes).
  virtual Batch process(const Batch& in) {
    (void)in;
    return {};
  }
  // kPartitioned: the output of rows `rows` (ascending) of `in`, all of partition `partition`.
  //   Calls for one partition come one at a time, in arrival order; calls for different
  //   partitions run concurrently, so state must be kept per partition.
  virtual Piece process_rows(const Batch& in, std::span<const int64_t> rows, size_t partition) {
    (void)in;
    (void)rows;
    (void)partition;
    return {};
  }
  // Partitioned operators of selectivity exactly one whose output row is their input row followed
  // by columns of their own (sessionize, lag, delta, running) return those columns' schema here
  // (the output schema is the input's fields, then these) and compute them alone in
  // process_appended(). The runtime then never copies the input columns: it merges the pieces'
  // new columns by row and sets them beside the morsel's own, where process_rows() copies every
  // input column into each piece and the merge copies every column again. Null: not such an
  // operator.
  virtual const std::shared_ptr<const Schema>* appended_schema() const { return nullptr; }
  // The appended columns of rows `rows` (ascending) of `in`, one row each, in `rows`' order, under
  // *appended_schema(). The contract of process_rows() otherwise: the same calls, the same state.
  virtual Batch process_appended(const Batch& in, std::span<const int64_t> rows, size_t partition) {
    (void)in;
    (void)rows;
    (void)partition;
    return {};
  }
  // Keyed fusion (ops/fused.h): partitioned appending operators over the same key, fused into
  // one task, hand each other what they learnt of a piece's rows instead of learning it again.
  // The key ids are those of the operator's key table for the partition; a table numbers keys in
  // order of first appearance, so every member's table, fed the same rows of the same partition
  // in the same order, gives every key the same id. `new_epoch` (an operator with
  // an epoch_column(), else empty): per row, its epoch differs from its key's previous row's, or
  // the row is its key's first.
  struct KeyedRows {
    std::span<const uint32_t> ids;
    std::span<const uint8_t> new_epoch;
    const KeyTable* keys = nullptr;  // the table that gave `ids` (KeyTable::lend)
  };
  // What the last process_appended() call on `partition` learnt of its rows (valid until the
  // next call on that partition; called by the worker that made it). Empty: nothing to hand on.
  virtual KeyedRows keyed_rows(size_t partition) const {
    (void)partition;
    return {};
  }
  // process_appended() for an operator that follows another of the same key in a fused chain,
  // given that one's keyed_rows() for the same rows: the same result and state, found with fewer
  // lookups where the operator knows how to use them.
  virtual Batch process_appended_given(const Batch& in, std::span<const int64_t> rows, size_t partition,
                                       const KeyedRows& given) {
    (void)given;
    return process_appended(in, rows, partition);
  }
  // Stateful operators whose output waits on the stream's time (windows, sessions) say true, and
  // advance(bound) returns what is due once no tuple earlier than `bound` will come (a heartbeat,
  // reaching them as a pulse: runtime/pipeline.h): exactly what a tuple at `bound` would release
  // before its own effect, so the output as a whole never changes, only when it leaves. Called in
  // arrival order among process() calls, by one worker at a time.
  virtual bool advances() const { return false; }
  virtual Batch advance(int64_t bound) {
    (void)bound;
    return {};
  }
  // After the last input: what the operator still holds (open sessions, windows, top-k), in the
  // order a sequential run would emit it. Called once, by one worker, after every process call
  // has returned. An empty batch (or one of 0 rows) when there is nothing.
  virtual Batch finish() { return {}; }

  // --- Checkpoints (docs/checkpoints.md) ---
  // A run's snapshot holds its operators' state only when every operator can save it; otherwise
  // the restore replays the input from its start. Stateless operators hold nothing.
  virtual bool saves_state() const { return kind() == OpKind::kStateless; }
  // The state, as batches of the operator's own making. Called by one thread while no other call
  // runs (the runtime's cut: runtime/pipeline.h), between process calls, before finish().
  virtual std::vector<Batch> save_state() { return {}; }
  // What save_state() gave, into an operator fresh from its factory whose set_partitions() was
  // called (perhaps with another number of partitions than the saving run's), before any process
  // call. Throws kInvalidInput for batches it cannot read.
  virtual void load_state(const std::vector<Batch>& state) { (void)state; }
};

using OperatorPtr = std::shared_ptr<Operator>;

// The names of `op`'s key columns (key_columns() in its input schema), in key order: what the
// planner compares to form keyed regions and keyed fused chains.
std::vector<std::string> key_names(const Operator& op);

// Lineage for running a pipeline in pieces (pyarrow_ops.spark.run): `inner`, a partitioned
// operator whose output lacks the int64 input column `column`, with that column appended: for each
// output row the value of the input row that produced it (Piece::source_rows), null for rows that
// finish() emits. Operators that pass their input columns through carry it without help.
OperatorPtr carry_column(OperatorPtr inner, const std::string& column);

}  // namespace pao::ops
