#include "ops/fused.h"

#include <algorithm>

#include "core/clock.h"
#include "core/error.h"

namespace pao::ops {

FusedChain::FusedChain(std::vector<OperatorPtr> ops) : ops_(std::move(ops)) {
  if (ops_.size() < 2) throw Error(ErrorKind::kUsage, "a fused chain needs two operators or more");
  for (size_t i = 0; i < ops_.size(); ++i) {
    if (ops_[i]->kind() != OpKind::kStateless) {
      throw Error(ErrorKind::kUsage, "only stateless operators fuse, not " + ops_[i]->name());
    }
    if (i > 0) {
      if (auto diff = schema_difference(*ops_[i]->input_schema(), *ops_[i - 1]->output_schema())) {
        throw Error(ErrorKind::kSchemaMismatch, ops_[i]->name() + " does not take its input's schema: " + *diff);
      }
    }
  }
  counters_ = std::make_unique<Counters[]>(ops_.size());
}

std::string FusedChain::name() const {
  std::string out;
  for (const OperatorPtr& op : ops_) {
    if (!out.empty()) out += '+';
    out += op->name();
  }
  return out;
}

std::string FusedChain::describe() const {
  std::string out;
  for (const OperatorPtr& op : ops_) {
    if (!out.empty()) out += "; then ";
    out += op->describe();
  }
  return out;
}

Selectivity FusedChain::selectivity() const {
  Selectivity s = Selectivity::kExactlyOne;
  for (const OperatorPtr& op : ops_) s = std::max(s, op->selectivity());  // the enum orders them
  return s;
}

size_t FusedChain::max_parallelism() const {
  size_t m = 0;
  for (const OperatorPtr& op : ops_) {
    if (op->max_parallelism() != 0) m = m == 0 ? op->max_parallelism() : std::min(m, op->max_parallelism());
  }
  return m;
}

bool FusedChain::preserves_time(const std::string& time) const {
  return std::all_of(ops_.begin(), ops_.end(), [&](const OperatorPtr& op) { return op->preserves_time(time); });
}

bool FusedChain::passes_through(const std::string& column) const {
  return std::all_of(ops_.begin(), ops_.end(), [&](const OperatorPtr& op) { return op->passes_through(column); });
}

bool FusedChain::may_fail() const {
  return std::any_of(ops_.begin(), ops_.end(), [](const OperatorPtr& op) { return op->may_fail(); });
}

Batch FusedChain::process(const Batch& in) {
  Batch cur = in;
  int64_t t0 = now_ns();
  for (size_t i = 0; i < ops_.size(); ++i) {
    Counters& c = counters_[i];
    c.tuples_in.fetch_add(cur.num_rows(), std::memory_order_relaxed);
    try {
      cur = ops_[i]->process(cur);
    } catch (const Error& e) {
      throw FusedError(e, i);
    }
    const int64_t t1 = now_ns();
    c.tuples_out.fetch_add(cur.num_rows(), std::memory_order_relaxed);
    c.busy_ns.fetch_add(t1 - t0, std::memory_order_relaxed);
    t0 = t1;
  }
  return cur;
}

FusedChain::Counts FusedChain::counts(size_t i) const {
  const Counters& c = counters_[i];
  return {c.tuples_in.load(std::memory_order_relaxed), c.tuples_out.load(std::memory_order_relaxed),
          c.busy_ns.load(std::memory_order_relaxed)};
}

}  // namespace pao::ops
