#pragma once
// Fusion (auto-parallelization paper, section 3: operators fused into one processing element):
// adjacent stateless operators of a parallel region run as one operator, a morsel passing through
// all of them in one task, with no worklist, reorder buffer or scheduling decision between them.
// The chain keeps each operator's own counters, so statistics still report every operator.
//
// Keyed fusion goes further than the paper's PEs: adjacent partitioned operators that append
// columns (Operator::appended_schema) and have the same key columns run as one partitioned
// operator. The runtime routes each row to the partition of its key once, and the operators run
// one after the other on the same piece: the second sees the rows the first saw, in the same
// order, under the same partition, which is what it would see unfused (its rows would be routed
// by the same key to the same partition, in arrival order), so its state and output are the
// same. In between the first one's appended columns are laid out at the piece's rows of a
// morsel-long column, so the second reads them as input columns; and each hands the next what it
// learnt of the rows (Operator::keyed_rows: key ids, new epochs), so the next need not look its
// keys up again. The piece merge and the routing between them are gone.
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "ops/operator.h"

namespace pao::ops {

// What a fused chain throws for an error of one of its operators: the operator's index in the
// chain, which the runtime names. The row is kept only for the first operator, whose input is the
// chain's (the planner lets only the first operator of a chain be one that may_fail()).
class FusedError : public Error {
 public:
  // A keyed chain's operators all take the chain's input rows: each keeps its row (`rows_are_input`).
  FusedError(const Error& e, size_t index, bool rows_are_input = false)
      : Error(e.kind(), e.what(), index == 0 || rows_are_input ? e.row() : -1), index_(index) {}
  size_t index() const noexcept { return index_; }

 private:
  size_t index_;
};

class FusedChain final : public Operator {
 public:
  // `ops`: at least two operators, each taking the previous one's output schema; either all
  // stateless, or all partitioned and appending with the same key columns (by name), the
  // appended columns of all but the last of fixed width (can_scatter). kUsage otherwise.
  explicit FusedChain(std::vector<OperatorPtr> ops);
  // Whether `ops` may fuse as a keyed chain (the conditions above).
  static bool keyed_fusible(const std::vector<OperatorPtr>& ops);

  std::string name() const override;  // "filter+with_columns"
  std::string describe() const override;
  OpKind kind() const override { return keyed_ ? OpKind::kPartitioned : OpKind::kStateless; }
  std::vector<size_t> key_columns() const override { return ops_.front()->key_columns(); }
  Selectivity selectivity() const override;
  size_t max_parallelism() const override;
  bool preserves_time(const std::string& time) const override;
  bool passes_through(const std::string& column) const override;
  bool may_fail() const override;
  const std::shared_ptr<const Schema>& input_schema() const override { return ops_.front()->input_schema(); }
  const std::shared_ptr<const Schema>& output_schema() const override { return ops_.back()->output_schema(); }
  // Thread-safe, as each operator's process() is (they are stateless); the counters are relaxed
  // atomics, tallies that order nothing.
  Batch process(const Batch& in) override;

  // A keyed chain: the operators' appended columns side by side. The runtime calls it as any
  // partitioned operator: one call at a time per partition, in arrival order, different
  // partitions concurrently; the members keep their state per partition, so the chain needs no
  // lock, and what a member hands the next (keyed_rows) is its partition's, read within the same
  // call.
  const std::shared_ptr<const Schema>* appended_schema() const override { return keyed_ ? &appended_ : nullptr; }
  Batch process_appended(const Batch& in, std::span<const int64_t> rows, size_t partition) override;
  Piece process_rows(const Batch& in, std::span<const int64_t> rows, size_t partition) override;
  void set_partitions(size_t partitions) override;
  Batch finish() override;
  // Every operator's state, one batch each in chain order (a keyed chain's operators each save
  // one), so a checkpoint of the chain restores into the same chain.
  bool saves_state() const override;
  std::vector<Batch> save_state() override;
  void load_state(const std::vector<Batch>& state) override;

  const std::vector<OperatorPtr>& ops() const noexcept { return ops_; }
  struct Counts {
    int64_t tuples_in, tuples_out, busy_ns;
  };
  Counts counts(size_t i) const;

 private:
  struct Counters {
    std::atomic<int64_t> tuples_in{0}, tuples_out{0}, busy_ns{0};
  };
  std::vector<OperatorPtr> ops_;
  bool keyed_ = false;
  std::shared_ptr<const Schema> appended_;  // a keyed chain's: every operator's appended fields
  std::unique_ptr<Counters[]> counters_;
};

}  // namespace pao::ops
