#pragma once
// Fusion (auto-parallelization paper, section 3: operators fused into one processing element):
// adjacent stateless operators of a parallel region run as one operator, a morsel passing through
// all of them in one task, with no worklist, reorder buffer or scheduling decision between them.
// The chain keeps each operator's own counters, so statistics still report every operator.
#include <atomic>
#include <cstdint>
#include <memory>
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
  FusedError(const Error& e, size_t index) : Error(e.kind(), e.what(), index == 0 ? e.row() : -1), index_(index) {}
  size_t index() const noexcept { return index_; }

 private:
  size_t index_;
};

class FusedChain final : public Operator {
 public:
  // `ops`: at least two stateless operators, each taking the previous one's output schema.
  explicit FusedChain(std::vector<OperatorPtr> ops);

  std::string name() const override;  // "filter+with_columns"
  std::string describe() const override;
  OpKind kind() const override { return OpKind::kStateless; }
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
  std::unique_ptr<Counters[]> counters_;
};

}  // namespace pao::ops
