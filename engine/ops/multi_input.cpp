#include "ops/multi_input.h"

#include <algorithm>

#include "core/error.h"
#include "core/builder.h"
#include "core/gather.h"
#include "core/loser_tree.h"
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
    const Column& c = in.column(times_[port].column_index());
    if (t == static_cast<const int64_t*>(c.values) + c.offset) {
      q.times = t;  // no copy: a union's inputs are read once more, in drain()
    } else {
      q.widened.assign(t, t + n);  // read()'s buffer is reused at its next call
      q.times = q.widened.data();
    }
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
  const int64_t* t = q.times;
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

namespace {
// Rows a port takes one at a time in drain() before its run's end is found by galloping up to the
// runner-up: a row at a time costs no mispredicted branch where runs are a row or two long.
constexpr int64_t kRowsBeforeGalloping = 8;
// Rows that drain() merges in one lane rather than two.
constexpr int64_t kTwoLaneRows = 256;
// A stretch of a port's rows that one lane of drain() takes from one queued batch: [from, to) of
// `t`, the batch's times; the batch is sources[source].
struct Stretch {
  const int64_t* t;
  int64_t from;
  int64_t to;
  uint32_t source;
};

// One lane of drain(): the merge of each rank's stretches (stretches[r], in order) into
// out[0, ...). drain() runs two lanes over the two halves of the rows in one loop (step_together,
// core/loser_tree.h; step() inlined into it), as the merge runs its parts (gate/merge.cpp). The
// union of the stateless pipeline's 4 filtered inputs, 2 workers, alternating builds: 9.2-10.3 ns
// per row with one tournament, 6.5-6.6 with two lanes.
template <class Keys>
class DrainLane {
 public:
  using Key = typename Keys::Key;
  DrainLane(const Keys& keys, std::vector<std::vector<Stretch>> stretches, RowRef* out)
      : keys_(keys), stretches_(std::move(stretches)), cur_(stretches_.size()), out_(out),
        leaves_(leaves_for(stretches_.size())), tree_(keys, first_keys()) {}

  [[gnu::always_inline]] bool step() {
    const Key w = tree_.winner();
    if (!tree_.live(w)) [[unlikely]] return false;
    const uint32_t r = keys_.order(w);
    Cursor& c = cur_[r];
    wins_ = r == last_ ? wins_ + 1 : 1;
    last_ = r;
    int64_t take = 1;
    if (wins_ > kRowsBeforeGalloping) [[unlikely]] {
      // The rank won that often in a row: the rest of its run is the rows before the runner-up's
      // key (all of the stretch when every other rank is done).
      const Key runner = tree_.runner();
      if (!tree_.live(runner)) {
        take = c.to - c.pos;
      } else {
        const int64_t limit = keys_.time(runner);
        const int64_t* first_row = c.t + c.pos;
        const int64_t* stop = r < keys_.order(runner)
                                  ? gallop(first_row, c.t + c.to, [limit](int64_t x) { return x <= limit; })
                                  : gallop(first_row, c.t + c.to, [limit](int64_t x) { return x < limit; });
        take = std::max<int64_t>(1, stop - first_row);
      }
    }
    const RowRef ref{c.source, static_cast<uint32_t>(c.pos)};
    runs_ += ref.source != next_.source || ref.row != next_.row;
    for (int64_t i = 0; i < take; ++i) *out_++ = {c.source, static_cast<uint32_t>(c.pos + i)};
    c.pos += take;
    next_ = {c.source, static_cast<uint32_t>(c.pos)};
    tree_.replay(r, c.pos < c.to ? keys_.make(c.t[c.pos], r) : next_stretch(r));
    return true;
  }
  int64_t runs() const noexcept { return runs_; }

 private:
  struct Cursor {
    const int64_t* t = nullptr;
    int64_t pos = 0;
    int64_t to = 0;
    uint32_t source = 0;
    size_t stretch = 0;  // the next of stretches_[r]
  };
  // Rank r's cursor moved to its next stretch: that stretch's first key, or the key after every
  // row once its stretches are done.
  Key next_stretch(uint32_t r) {
    Cursor& c = cur_[r];
    const std::vector<Stretch>& mine = stretches_[r];
    while (c.stretch < mine.size()) {
      const Stretch& s = mine[c.stretch++];
      if (s.from == s.to) continue;
      c = {s.t, s.from, s.to, s.source, c.stretch};
      return keys_.make(c.t[c.pos], r);
    }
    return keys_.last(leaves_ + r);
  }
  std::vector<Key> first_keys() {
    std::vector<Key> first(stretches_.size());
    for (uint32_t r = 0; r < stretches_.size(); ++r) first[r] = next_stretch(r);
    return first;
  }

  Keys keys_;
  std::vector<std::vector<Stretch>> stretches_;
  std::vector<Cursor> cur_;
  RowRef* out_;
  uint32_t leaves_;
  LoserTree<Keys> tree_;
  uint32_t last_ = UINT32_MAX;  // the rank that won the last match, and how often in a row
  int64_t wins_ = 0;
  int64_t runs_ = 0;             // runs of consecutive rows of one source written
  RowRef next_{UINT32_MAX, 0};   // the ref that would continue the last run
};
}  // namespace

template <class Keys>
int64_t MergedPorts::drain_with(const Keys& keys, int64_t lo, int64_t hi, std::vector<Batch>& sources,
                                std::vector<RowRef>& rows) {
  using Key = typename Keys::Key;
  const size_t k = ports_.size();
  const uint32_t leaves = leaves_for(k);
  // The rows that leave are exactly those before the least promise of another port that has not
  // ended (its bound, clamped into [lo - 1, hi + 1], which orders it the same against every
  // queued row): a row after it could be preceded by what that port sends next. A port's own
  // rows are all at or before its own promise (its bound is at least its last time) and do not
  // wait for it. A tournament of the ports that stops at the first promise it meets takes the
  // same rows; they are found first here, so that they can be cut in two and merged by two lanes.
  const Key none = keys.last(2 * leaves - 1);  // after every row
  Key least = none, next_least = none;  // the two least promises, and the port of the least
  size_t least_port = k;
  for (size_t p = 0; p < k; ++p) {
    if (ports_[p].ended) continue;
    const Key promise = keys.make(std::clamp(ports_[p].bound, lo - 1, hi + 1), rank_[p]);
    if (promise < least) {
      next_least = least;
      least = promise;
      least_port = p;
    } else if (promise < next_least) {
      next_least = promise;
    }
  }
  // The first of rows [from, to) of times `t` (rank r's) whose key is `key` or after: the times
  // are sorted, so the keys are.
  const auto first_from = [&](const int64_t* t, int64_t from, int64_t to, uint32_t r, Key key) {
    return std::partition_point(t + from, t + to, [&](int64_t x) { return keys.make(x, r) < key; }) - t;
  };
  // Port p's queued rows before `end_key`, a stretch for each of its front batches.
  const auto rows_before = [&](size_t p, Key end_key, std::vector<Stretch>& out) {
    for (const Queued& q : ports_[p].queue) {
      const int64_t n = q.batch.num_rows();
      const int64_t end = first_from(q.times, q.next, n, rank_[p], end_key);
      out.push_back({q.times, q.next, end, 0});
      if (end < n) break;
    }
  };
  std::vector<std::vector<Stretch>> taken(k);  // by port
  int64_t total = 0;
  size_t widest = 0;
  int64_t widest_rows = 0;
  for (size_t p = 0; p < k; ++p) {
    rows_before(p, p == least_port ? next_least : least, taken[p]);
    int64_t n = 0;
    for (const Stretch& stretch : taken[p]) n += stretch.to - stretch.from;
    total += n;
    if (n > widest_rows) {
      widest = p;
      widest_rows = n;
    }
  }
  if (total == 0) return 0;
  // Every batch with a row to take is a source, once.
  for (size_t p = 0; p < k; ++p) {
    for (size_t i = 0; i < taken[p].size(); ++i) {
      if (taken[p][i].from == taken[p][i].to) continue;
      taken[p][i].source = static_cast<uint32_t>(sources.size());
      sources.push_back(ports_[p].queue[i].batch);
    }
  }
  // Two lanes: the rows before the widest port's middle row, and the rest (a pivot key; each
  // port's rows split at it by a binary search). Few rows: one lane.
  Key pivot = none;
  if (total >= kTwoLaneRows) {
    int64_t half = widest_rows / 2;
    for (const Stretch& stretch : taken[widest]) {
      if (half < stretch.to - stretch.from) {
        pivot = keys.make(stretch.t[stretch.from + half], rank_[widest]);
        break;
      }
      half -= stretch.to - stretch.from;
    }
  }
  std::vector<std::vector<Stretch>> before(k), after(k);  // by rank: the rows before the pivot; the rest
  int64_t first_rows = 0;
  for (size_t p = 0; p < k; ++p) {
    const uint32_t r = rank_[p];
    for (const Stretch& stretch : taken[p]) {
      const int64_t cut = first_from(stretch.t, stretch.from, stretch.to, r, pivot);
      before[r].push_back({stretch.t, stretch.from, cut, stretch.source});
      after[r].push_back({stretch.t, cut, stretch.to, stretch.source});
      first_rows += cut - stretch.from;
    }
  }
  const size_t at = rows.size();
  rows.resize(at + static_cast<size_t>(total));
  DrainLane<Keys> x(keys, std::move(before), rows.data() + at);
  DrainLane<Keys> y(keys, std::move(after), rows.data() + at + first_rows);
  step_together(x, y);
  // What was taken leaves the queues.
  for (size_t p = 0; p < k; ++p) {
    Port& port = ports_[p];
    for (const Stretch& stretch : taken[p]) {
      if (stretch.to == port.queue.front().batch.num_rows()) {
        port.queue.pop_front();
      } else {
        port.queue.front().next = stretch.to;
      }
    }
    refresh(p);
  }
  // A run the two lanes' cut splits counts twice: the count only chooses how to gather.
  return x.runs() + y.runs();
}

int64_t MergedPorts::drain(std::vector<Batch>& sources, std::vector<RowRef>& rows) {
  // The queued rows' times, [lo, hi]. Promises outside them are moved to lo - 1 or hi + 1, which
  // orders them the same against every queued row, so the tournament's keys need only span
  // [lo - 1, hi + 1]: narrow keys (one 64-bit compare a match) whenever that span fits.
  int64_t lo = INT64_MAX;
  int64_t hi = INT64_MIN;
  for (const Port& port : ports_) {
    if (port.queue.empty()) continue;
    const Queued& q = port.queue.front();
    lo = std::min(lo, q.times[static_cast<size_t>(q.next)]);
    hi = std::max(hi, port.last);
  }
  if (lo > hi) return 0;  // nothing queued
  if (lo > INT64_MIN && hi < INT64_MAX) {
    if (const std::optional<NarrowKeys> narrow = NarrowKeys::fit(lo - 1, hi + 1, leaves_for(ports_.size()))) {
      return drain_with(*narrow, lo, hi, sources, rows);
    }
  }
  return drain_with(WideKeys{}, lo, hi, sources, rows);
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
    const GatherPlan ready = push_plan(port, in, bound);
    return gather_range(ready, 0, ready.rows());  // consecutive rows of one batch: a zero-copy slice
  }

  bool saves_state() const override { return true; }
  std::vector<Batch> save_state() override { return merged_.save(schemas_); }
  void load_state(const std::vector<Batch>& state) override { merged_.load(state); }

  bool plans_output() const override { return true; }
  GatherPlan push_plan(size_t port, const Batch& in, int64_t bound) override {
    if (static_cast<uint64_t>(in.num_rows()) > UINT32_MAX) {
      throw Error(ErrorKind::kInvalidInput, "union's input " + std::to_string(port) + " sent a batch of " +
                                                std::to_string(in.num_rows()) + " rows; at most 4,294,967,295 rows a batch");
    }
    merged_.push(port, in, bound);
    std::vector<Batch> sources;
    std::vector<RowRef> rows;
    const int64_t runs = merged_.drain(sources, rows);
    // Rows that interleave finely stay RowRefs; runs of two rows or more on average become
    // segments, which gather a run at a time (and leave as slices where a range is one run).
    if (runs * 2 > static_cast<int64_t>(rows.size())) return GatherPlan(output_, std::move(sources), std::move(rows));
    std::vector<Segment> segments;
    segments.reserve(static_cast<size_t>(runs));
    for (const RowRef& r : rows) append_row(segments, r.source, r.row);
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
