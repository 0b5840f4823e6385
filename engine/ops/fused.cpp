#include "ops/fused.h"

#include <algorithm>
#include <cstring>

#include "core/clock.h"
#include "core/error.h"
#include "core/gather.h"
#include "ops/partitioned.h"

namespace pao::ops {

namespace {

// `in` with `added` (one row per row of `rows`) after its columns, laid out at those rows of
// columns as long as `in`: the next operator of a keyed chain reads them as input columns at
// the same rows. Rows of `in` outside `rows` hold no value there (other partitions' rows, which
// this piece's operators never read); the validity bits are zero there.
Batch widened(std::shared_ptr<const Schema> schema, const Batch& in, const Batch& added,
              std::span<const int64_t> rows) {
  auto owner = std::make_shared<BatchMemory>();
  owner->share(in.owner());
  std::vector<Column> columns;
  columns.reserve(in.num_columns() + added.num_columns());
  for (size_t c = 0; c < in.num_columns(); ++c) columns.push_back(in.column(c));
  const size_t length = static_cast<size_t>(in.num_rows());
  for (size_t c = 0; c < added.num_columns(); ++c) {
    const Column& from = added.column(c);
    const size_t w = static_cast<size_t>(added.schema()->fields[c].type.byte_width());
    Column to;
    uint8_t* values = owner->allocate(length * w);
    const uint8_t* src = static_cast<const uint8_t*>(from.values) + static_cast<size_t>(from.offset) * w;
    for (size_t j = 0; j < rows.size(); ++j) std::memcpy(values + static_cast<size_t>(rows[j]) * w, src + j * w, w);
    to.values = values;
    if (from.may_have_nulls()) {
      uint8_t* bits = owner->allocate_zeroed(static_cast<size_t>(bitmap_bytes(in.num_rows())));
      for (size_t j = 0; j < rows.size(); ++j) or_bit(bits, rows[j], from.is_valid(static_cast<int64_t>(j)));
      to.validity = bits;
    } else {
      to.null_count = 0;
    }
    columns.push_back(to);
  }
  return Batch(std::move(schema), in.num_rows(), std::move(columns), std::move(owner));
}

}  // namespace

bool FusedChain::keyed_fusible(const std::vector<OperatorPtr>& ops) {
  if (ops.size() < 2) return false;
  const std::vector<std::string> key = key_names(*ops.front());
  for (size_t i = 0; i < ops.size(); ++i) {
    const Operator& op = *ops[i];
    const std::shared_ptr<const Schema>* appended = op.appended_schema();
    if (op.kind() != OpKind::kPartitioned || appended == nullptr || key.empty() || key_names(op) != key) return false;
    if (i + 1 < ops.size() && !can_scatter(**appended)) return false;
  }
  return true;
}

FusedChain::FusedChain(std::vector<OperatorPtr> ops) : ops_(std::move(ops)) {
  if (ops_.size() < 2) throw Error(ErrorKind::kUsage, "a fused chain needs two operators or more");
  keyed_ = ops_.front()->kind() == OpKind::kPartitioned;
  if (keyed_ && !keyed_fusible(ops_)) {
    throw Error(ErrorKind::kUsage, "partitioned operators fuse only when they append columns over the same key: " + name());
  }
  std::vector<Field> appended;
  for (size_t i = 0; i < ops_.size(); ++i) {
    if (!keyed_ && ops_[i]->kind() != OpKind::kStateless) {
      throw Error(ErrorKind::kUsage, "only stateless operators fuse, not " + ops_[i]->name());
    }
    if (keyed_) {
      for (const Field& f : (*ops_[i]->appended_schema())->fields) appended.push_back(f);
    }
    if (i > 0) {
      if (auto diff = schema_difference(*ops_[i]->input_schema(), *ops_[i - 1]->output_schema())) {
        throw Error(ErrorKind::kSchemaMismatch, ops_[i]->name() + " does not take its input's schema: " + *diff);
      }
    }
  }
  if (keyed_) appended_ = std::make_shared<const Schema>(Schema{appended});
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

Batch FusedChain::process_appended(const Batch& in, std::span<const int64_t> rows, size_t partition) {
  if (!keyed_) throw Error(ErrorKind::kUsage, name() + ": process_appended on a stateless chain");
  const int64_t n = static_cast<int64_t>(rows.size());
  std::vector<Batch> added(ops_.size());
  Batch cur = in;
  KeyedRows given;
  int64_t t0 = now_ns();
  for (size_t i = 0; i < ops_.size(); ++i) {
    Counters& c = counters_[i];
    c.tuples_in.fetch_add(n, std::memory_order_relaxed);
    try {
      added[i] = i == 0 ? ops_[i]->process_appended(cur, rows, partition)
                        : ops_[i]->process_appended_given(cur, rows, partition, given);
      if (i + 1 < ops_.size()) {
        given = ops_[i]->keyed_rows(partition);
        cur = widened(ops_[i]->output_schema(), cur, added[i], rows);
      }
    } catch (const Error& e) {
      throw FusedError(e, i, /*rows_are_input=*/true);
    }
    const int64_t t1 = now_ns();
    c.tuples_out.fetch_add(n, std::memory_order_relaxed);
    c.busy_ns.fetch_add(t1 - t0, std::memory_order_relaxed);
    t0 = t1;
  }
  auto owner = std::make_shared<BatchMemory>();
  std::vector<Column> columns;
  for (const Batch& b : added) {
    owner->share(b.owner());
    for (size_t c = 0; c < b.num_columns(); ++c) columns.push_back(b.column(c));
  }
  return Batch(appended_, n, std::move(columns), std::move(owner));
}

Piece FusedChain::process_rows(const Batch& in, std::span<const int64_t> rows, size_t partition) {
  const Batch added = process_appended(in, rows, partition);
  return {side_by_side(output_schema(), take_rows(input_schema(), in, rows), added),
          std::vector<int64_t>(rows.begin(), rows.end())};
}

void FusedChain::set_partitions(size_t partitions) {
  for (const OperatorPtr& op : ops_) op->set_partitions(partitions);
}

Batch FusedChain::finish() {
  // Stateless operators hold nothing; appending partitioned ones emit online (ops/partitioned.h).
  for (const OperatorPtr& op : ops_) {
    const Batch rest = op->finish();
    if (rest.num_rows() > 0) throw Error(ErrorKind::kUsage, op->name() + " emits at the end: it cannot be fused");
  }
  return {};
}

bool FusedChain::saves_state() const {
  return std::all_of(ops_.begin(), ops_.end(), [](const OperatorPtr& op) { return op->saves_state(); });
}

std::vector<Batch> FusedChain::save_state() {
  if (!keyed_) return {};
  std::vector<Batch> out;
  for (const OperatorPtr& op : ops_) {
    std::vector<Batch> one = op->save_state();
    if (one.size() != 1) throw Error(ErrorKind::kUsage, op->name() + ": a fused operator's state is one batch");
    out.push_back(std::move(one[0]));
  }
  return out;
}

void FusedChain::load_state(const std::vector<Batch>& state) {
  if (!keyed_) return;
  if (state.size() != ops_.size()) {
    throw Error(ErrorKind::kInvalidInput, name() + ": a checkpoint's state of " + std::to_string(state.size()) +
                                              " batches for " + std::to_string(ops_.size()) + " operators");
  }
  for (size_t i = 0; i < ops_.size(); ++i) ops_[i]->load_state({state[i]});
}

FusedChain::Counts FusedChain::counts(size_t i) const {
  const Counters& c = counters_[i];
  return {c.tuples_in.load(std::memory_order_relaxed), c.tuples_out.load(std::memory_order_relaxed),
          c.busy_ns.load(std::memory_order_relaxed)};
}

}  // namespace pao::ops
