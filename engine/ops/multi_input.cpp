#include "ops/multi_input.h"

#include <algorithm>

#include "core/error.h"
#include "core/builder.h"
#include "core/gather.h"
#include "gate/times.h"
#include "ops/partitioned.h"

namespace pao::ops {

MergedPorts::MergedPorts(const std::vector<std::string>& labels, const std::string& time,
                         const std::vector<std::shared_ptr<const Schema>>& schemas, std::vector<uint32_t> order)
    : rank_(std::move(order)), ports_(schemas.size()) {
  if (rank_.empty()) {
    for (size_t p = 0; p < schemas.size(); ++p) rank_.push_back(static_cast<uint32_t>(p));
  }
  for (size_t p = 0; p < schemas.size(); ++p) {
    const std::optional<size_t> t = schemas[p]->find(time);
    if (!t) {
      throw Error(ErrorKind::kInvalidInput, labels[p] + " has no time column '" + time + "'; its columns are: " +
                                                schemas[p]->to_string());
    }
    const DataType& type = schemas[p]->fields[*t].type;
    if (!type.is_temporal_key()) {
      throw Error(ErrorKind::kInvalidInput, "the time column '" + time + "' of " + labels[p] + " has type " +
                                                type.to_string() + "; expected a timestamp, date32, int32 or int64 column");
    }
    times_.emplace_back(static_cast<uint32_t>(p), labels[p], time, *t, type);
  }
  head_.assign(ports_.size(), kNone);
  for (size_t p = 0; p < ports_.size(); ++p) refresh(p);
}

void MergedPorts::refresh(size_t p) {
  const Port& port = ports_[p];
  if (!port.queue.empty()) {
    const Queued& q = port.queue.front();
    head_[p] = OrderKey::of(q.times[static_cast<size_t>(q.next)], rank_[p], 0).packed();
  } else {
    head_[p] = port.ended ? kNone : OrderKey::of(port.bound, rank_[p], 0).packed();
  }
}

void MergedPorts::push(size_t port, const Batch& in, int64_t bound, uint64_t tag) {
  Port& p = ports_[port];
  if (p.ended) {
    // The end may be told twice (a producer's last pulse says INT64_MAX, then its close); rows may not.
    if (in.num_rows() == 0) return;
    throw Error(ErrorKind::kUsage, "rows after the end of a stream (a bug in the runtime)");
  }
  const int64_t n = in.num_rows();
  if (n > 0) {
    const int64_t* t = times_[port].read(in);  // validates: no nulls, sorted, not below the bound
    Queued q;
    q.batch = in;
    q.times.assign(t, t + n);
    q.position = p.rows;
    q.tag = tag;
    p.last = t[n - 1];
    p.rows += n;
    p.bound = std::max(p.bound, p.last);
    p.queue.push_back(std::move(q));
  }
  if (bound == INT64_MAX) {
    p.ended = true;
  } else if (bound > p.bound) {
    times_[port].heartbeat(bound);  // later rows below it are refused, as for a heartbeat
    p.bound = bound;
  }
  refresh(port);
}

namespace {
// The first element of [first, last) for which `before` fails, `before` holding on a prefix (the
// times sorting before another port's head), found by galloping from `first`: O(log k) for an
// answer k places in. Inputs that interleave finely make runs of a row or two, where a binary
// search over the rest of the batch cost a dozen probes per run.
template <class Before>
const int64_t* gallop(const int64_t* first, const int64_t* last, Before before) {
  std::ptrdiff_t step = 1;
  while (first < last && before(*first)) {
    const std::ptrdiff_t jump = std::min(step, last - first);
    // [first, first + jump) all before: skip them; else the answer is in (first, first + jump).
    if (jump < step || !before(first[jump - 1])) return std::partition_point(first + 1, first + jump, before);
    first += jump;
    step *= 2;
  }
  return first;
}
}  // namespace

std::optional<MergedPorts::Run> MergedPorts::next(int64_t max_rows) {
  // The candidate: the least head among ports that have queued rows; `other`: the least key any
  // other port may still deliver (its head, or what its bound allows). One pass.
  size_t best = ports_.size();
  Key best_key = kNone;
  Key other = kNone;
  for (size_t p = 0; p < ports_.size(); ++p) {
    const Key k = head_[p];
    if (k < best_key && !ports_[p].queue.empty()) {
      other = std::min(other, best_key);
      best = p;
      best_key = k;
    } else {
      other = std::min(other, k);
    }
  }
  if (best == ports_.size()) return std::nullopt;
  const Queued& q = ports_[best].queue.front();
  const uint32_t rank = rank_[best];
  const int64_t* t = q.times.data();
  const int64_t begin = q.next;
  const int64_t end = q.batch.num_rows();
  int64_t stop = end;
  if (other != kNone) {
    // Rows sorting before `other`: time below it, or equal time and a lower rank. Times are sorted.
    const OrderKey o = OrderKey::unpack(other);
    const int64_t* first = t + begin;
    const int64_t* last = t + end;
    const int64_t limit = o.time;
    stop = (rank < o.input() ? gallop(first, last, [limit](int64_t x) { return x <= limit; })
                             : gallop(first, last, [limit](int64_t x) { return x < limit; })) -
           t;
  }
  const int64_t length = std::min(stop - begin, max_rows);
  if (length <= 0) return std::nullopt;
  return Run{best, &q.batch, begin, length, t + begin, q.position + begin, q.tag, begin + length == end};
}

void MergedPorts::consume(const Run& run, int64_t rows) {
  Port& p = ports_[run.port];
  Queued& q = p.queue.front();
  q.next += rows;
  if (q.next == q.batch.num_rows()) p.queue.pop_front();
  refresh(run.port);
}

int64_t MergedPorts::frontier() const {
  const Key least = *std::min_element(head_.begin(), head_.end());
  return least == kNone ? INT64_MAX : OrderKey::unpack(least).time;
}

std::vector<Batch> MergedPorts::save(const std::vector<std::shared_ptr<const Schema>>& schemas) const {
  DataType i64;
  i64.id = TypeId::kInt64;
  auto meta = std::make_shared<const Schema>(
      Schema{{{"rows", i64, false}, {"last", i64, false}, {"bound", i64, false}, {"ended", i64, false}}});
  std::vector<ColumnBuilder> built = builders_of({i64, i64, i64, i64});
  std::vector<Batch> out(1);
  for (size_t p = 0; p < ports_.size(); ++p) {
    const Port& port = ports_[p];
    const int64_t values[4] = {port.rows, port.last, port.bound, port.ended ? 1 : 0};
    for (size_t c = 0; c < 4; ++c) built[c].append_fixed(&values[c]);
    std::vector<Batch> sources;
    std::vector<Segment> segments;
    for (const Queued& q : port.queue) {
      segments.push_back({static_cast<uint32_t>(sources.size()), q.next, q.batch.num_rows() - q.next});
      sources.push_back(q.batch);
    }
    out.push_back(sources.empty() ? empty_batch(schemas[p]) : gather(schemas[p], sources, segments));
  }
  out[0] = built_batch(meta, static_cast<int64_t>(ports_.size()), built);
  return out;
}

void MergedPorts::load(const std::vector<Batch>& state, const std::function<uint64_t(size_t, const Batch&)>& tag) {
  if (state.size() != ports_.size() + 1 || state[0].num_rows() != static_cast<int64_t>(ports_.size()) ||
      state[0].num_columns() != 4) {
    throw Error(ErrorKind::kInvalidInput, "a checkpoint's state of a merge of " + std::to_string(ports_.size()) +
                                              " streams is a batch of their promises and one of each stream's rows");
  }
  const auto value = [&](size_t column, size_t p) {
    return state[0].column(column).typed<int64_t>()[p];
  };
  for (size_t p = 0; p < ports_.size(); ++p) {
    const Batch& rows = state[1 + p];
    ports_[p].rows = value(0, p) - rows.num_rows();  // the queued rows' positions come out as they were
    push(p, rows, value(3, p) != 0 ? INT64_MAX : value(2, p), tag && rows.num_rows() > 0 ? tag(p, rows) : 0);
    ports_[p].last = value(1, p);
  }
}

bool MergedPorts::done() const {
  for (const Port& p : ports_) {
    if (!p.ended || !p.queue.empty()) return false;
  }
  return true;
}

GatherPlan MultiInputOperator::push_plan(size_t, const Batch&, int64_t) {
  throw Error(ErrorKind::kUsage, name() + " makes its output itself: push_plan() is not for it");
}

namespace {

class Union final : public MultiInputOperator {
 public:
  Union(const std::vector<std::shared_ptr<const Schema>>& schemas, const std::string& time)
      : schemas_(schemas), merged_(labels(schemas.size()), time, schemas) {
    output_ = gate::check_input_schemas(schemas_, time).schema;
  }

  std::string name() const override { return "union"; }
  std::string describe() const override {
    return "the rows of " + std::to_string(schemas_.size()) + " streams in the merged order (time, input, position)";
  }
  Selectivity selectivity() const override { return Selectivity::kExactlyOne; }
  const std::shared_ptr<const Schema>& output_schema() const override { return output_; }
  size_t ports() const override { return schemas_.size(); }
  const std::shared_ptr<const Schema>& port_schema(size_t port) const override { return schemas_[port]; }
  int64_t output_bound() const override { return merged_.frontier(); }

  Batch push(size_t port, const Batch& in, int64_t bound) override {
    GatherPlan ready = push_plan(port, in, bound);
    if (ready.segments.empty()) return empty_batch(output_);
    if (ready.segments.size() == 1) return gather_range(ready, 0, ready.rows());  // one run: a zero-copy slice
    return gather(output_, ready.sources, ready.segments);
  }

  bool saves_state() const override { return true; }
  std::vector<Batch> save_state() override { return merged_.save(schemas_); }
  void load_state(const std::vector<Batch>& state) override { merged_.load(state); }

  bool plans_output() const override { return true; }
  GatherPlan push_plan(size_t port, const Batch& in, int64_t bound) override {
    merged_.push(port, in, bound);
    std::vector<Batch> sources;
    std::vector<const Batch*> source_of;  // sources[i] is a copy of the queued batch *source_of[i]
    std::vector<Segment> segments;
    while (std::optional<MergedPorts::Run> run = merged_.next()) {
      // Every run of one queued batch shares one source, also when runs of the ports alternate
      // (no push happens while draining, so a queued batch's address names it; a batch taken to
      // its end is copied into `sources` first). A handful of batches are queued at a time: a
      // linear search, where copying the batch per run cost an allocation per run.
      const auto found = std::find(source_of.begin(), source_of.end(), run->batch);
      const auto source = static_cast<uint32_t>(found - source_of.begin());
      if (found == source_of.end()) {
        sources.push_back(*run->batch);
        source_of.push_back(run->batch);
      }
      segments.push_back({source, run->start, run->length});
      merged_.consume(*run, run->length);
    }
    return GatherPlan(output_, std::move(sources), std::move(segments));
  }

 private:
  static std::vector<std::string> labels(size_t n) {
    std::vector<std::string> out;
    for (size_t i = 0; i < n; ++i) out.push_back("union's input " + std::to_string(i));
    return out;
  }
  std::vector<std::shared_ptr<const Schema>> schemas_;
  std::shared_ptr<const Schema> output_;
  MergedPorts merged_;
};

}  // namespace

std::shared_ptr<MultiInputOperator> make_union(const std::vector<std::shared_ptr<const Schema>>& schemas,
                                               const std::string& time) {
  if (schemas.empty()) throw Error(ErrorKind::kInvalidInput, "union needs at least one input");
  return std::make_shared<Union>(schemas, time);
}

}  // namespace pao::ops
