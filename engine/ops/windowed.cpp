#include "ops/windowed.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <type_traits>

#include "core/builder.h"
#include "core/error.h"
#include "core/prefetch.h"
#include "core/values.h"
#include "core/gather.h"
#include "core/key_table.h"
#include "ops/partitioned.h"
#include "window/sessions.h"

namespace pao::ops {
namespace {

size_t column_index(const Schema& input, const std::string& name, const char* role) {
  auto i = input.find(name);
  if (!i) {
    throw Error(ErrorKind::kInvalidInput, std::string(role) + " column '" + name +
                                              "' not found; the columns are: " + input.to_string());
  }
  return *i;
}

// `b` with one more column built by `extra`, under `schema` (b's fields plus that column). The
// new batch owns `b`'s memory (shared) and the column's.
Batch with_extra_column(const Batch& b, std::shared_ptr<const Schema> schema, ColumnBuilder& extra) {
  auto owner = std::make_shared<BatchMemory>();
  owner->share(b.owner());
  std::vector<Column> columns;
  columns.reserve(b.num_columns() + 1);
  for (size_t c = 0; c < b.num_columns(); ++c) columns.push_back(b.column(c));
  columns.push_back(extra.finish(*owner));
  return Batch(std::move(schema), b.num_rows(), std::move(columns), std::move(owner));
}

// ---- top_k -------------------------------------------------------------------------------------

class TopK final : public Operator {
 public:
  TopK(std::shared_ptr<const Schema> input, int64_t k, std::string by, std::optional<std::string> per,
       bool descending)
      : input_(std::move(input)), k_(k), by_name_(std::move(by)), per_name_(std::move(per)),
        descending_(descending), rank_(DataType{}) {
    if (k_ < 1) throw Error(ErrorKind::kInvalidInput, "top_k needs k >= 1, got " + std::to_string(k_));
    by_ = column_index(*input_, by_name_, "top_k's 'by'");
    by_type_ = input_->fields[by_].type;
    if (per_name_) {
      per_ = column_index(*input_, *per_name_, "top_k's 'per'");
      per_type_ = input_->fields[per_].type;
    }
    if (input_->find("rank")) {
      throw Error(ErrorKind::kInvalidInput,
                  "top_k adds a column 'rank', but the input already has one; rename or drop it first");
    }
    Schema out = *input_;
    out.fields.push_back({"rank", DataType{}, false});  // DataType{} is int64
    output_ = std::make_shared<const Schema>(std::move(out));
  }

  std::string name() const override { return "top_k"; }
  std::string describe() const override {
    return "top " + std::to_string(k_) + " rows by " + by_name_ + (descending_ ? " descending" : " ascending") +
           (per_name_ ? " per run of equal " + *per_name_ : " of the whole input") + ", adds rank";
  }
  OpKind kind() const override { return OpKind::kStateful; }
  Selectivity selectivity() const override { return Selectivity::kAny; }
  const std::shared_ptr<const Schema>& input_schema() const override { return input_; }
  const std::shared_ptr<const Schema>& output_schema() const override { return output_; }

  Batch process(const Batch& in) override {
    morsel_source_ = kNone;
    for (int64_t row = 0; row < in.num_rows(); ++row) {
      if (per_name_ && !same_group(in, row)) {
        if (!heap_.empty()) close_group();
        start_group(in, row);
      }
      admit(in, row);
    }
    morsel_source_ = kNone;  // the next morsel is another batch
    return take_output();
  }

  Batch finish() override {
    if (!heap_.empty()) close_group();
    return take_output();
  }

  // Checkpoints: the current group's retained rows (under the input schema), each one's arrival
  // number, and the arrival counter. Between calls nothing else is held: each call hands out its
  // output, and the group's `per` value is that of its rows.
  bool saves_state() const override { return true; }
  std::vector<Batch> save_state() override {
    // Only the slots the heap uses (a freed slot holds no batch to gather from).
    std::vector<Batch> used;
    std::vector<uint32_t> index(sources_.size(), kNone);
    std::vector<Segment> rows;
    std::vector<ColumnBuilder> arrivals = builders_of({DataType{}});
    for (const Candidate& c : heap_) {
      if (index[c.source] == kNone) {
        index[c.source] = static_cast<uint32_t>(used.size());
        used.push_back(sources_[c.source]);
      }
      rows.push_back({index[c.source], c.row, 1});
      arrivals[0].append_fixed(&c.arrival);
    }
    std::vector<ColumnBuilder> counter = builders_of({DataType{}});
    const auto next = static_cast<int64_t>(arrival_);
    counter[0].append_fixed(&next);
    auto one = std::make_shared<const Schema>(Schema{{{"arrival", DataType{}, false}}});
    return {heap_.empty() ? empty_batch(input_) : gather(input_, used, rows),
            built_batch(one, static_cast<int64_t>(heap_.size()), arrivals), built_batch(one, 1, counter)};
  }
  void load_state(const std::vector<Batch>& state) override {
    if (state.size() != 3 || state[1].num_rows() != state[0].num_rows() || state[2].num_rows() != 1 ||
        state[0].num_columns() != input_->fields.size() || state[0].num_rows() > k_) {
      throw Error(ErrorKind::kInvalidInput, "top_k: a checkpoint's state is its retained rows, their arrivals and a counter");
    }
    const Batch& rows = state[0];
    arrival_ = static_cast<uint64_t>(state[2].column(0).typed<int64_t>()[0]);
    if (rows.num_rows() == 0) return;
    morsel_source_ = kNone;
    for (int64_t r = 0; r < rows.num_rows(); ++r) {
      Candidate c = read(rows, r);
      c.arrival = static_cast<uint64_t>(state[1].column(0).typed<int64_t>()[r]);
      c.row = r;
      c.source = retain(rows);
      heap_.push_back(c);
    }
    morsel_source_ = kNone;
    std::make_heap(heap_.begin(), heap_.end(), [this](const Candidate& a, const Candidate& b) { return better(a, b); });
    if (per_name_) start_group(rows, 0);
  }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;

  // One retained row: its `by` value in a form that compares cheaply, its arrival number (ties keep
  // arrival order) and where it lives.
  struct Candidate {
    bool null;
    uint64_t order;         // fixed-width `by`: the key order value
    uint8_t zero_sign;      // floats: 0 for -0.0, 1 otherwise (the key order folds -0.0 into 0.0)
    std::string_view text;  // string `by`: the bytes, inside the retained batch
    uint64_t arrival;
    uint32_t source;        // index into sources_
    int64_t row;
  };

  Candidate read(const Batch& in, int64_t row) const {
    Candidate c{};
    const Column& col = in.column(by_);
    c.null = col.validity != nullptr && !col.is_valid(row);
    if (c.null) return c;
    if (is_string(by_type_.id)) {
      c.text = string_at(col, by_type_, row);
      return c;
    }
    c.order = key_order_value(by_type_, col, row);
    c.zero_sign = 1;
    if (by_type_.id == TypeId::kFloat64 || by_type_.id == TypeId::kFloat32) {
      const double f = by_type_.id == TypeId::kFloat64 ? col.typed<double>()[row] : col.typed<float>()[row];
      if (f == 0.0 && std::signbit(f)) c.zero_sign = 0;
    }
    return c;
  }

  // True when `a` ranks before `b`: any value before null, then by value in the chosen direction,
  // then the earlier arrival.
  bool better(const Candidate& a, const Candidate& b) const noexcept {
    if (a.null != b.null) return b.null;
    if (!a.null) {
      int cmp;
      if (is_string(by_type_.id)) {
        const int c = a.text.compare(b.text);
        cmp = (c > 0) - (c < 0);
      } else if (a.order != b.order) {
        cmp = a.order < b.order ? -1 : 1;
      } else {
        cmp = int{a.zero_sign} - int{b.zero_sign};
      }
      if (cmp != 0) return descending_ ? cmp > 0 : cmp < 0;
    }
    return a.arrival < b.arrival;
  }

  // Whether `row`'s per value equals the current group's (false before the first row).
  bool same_group(const Batch& in, int64_t row) const {
    if (!in_group_) return false;
    const Column& col = in.column(per_);
    const bool null = col.validity != nullptr && !col.is_valid(row);
    if (null || per_null_) return null == per_null_;
    if (is_string(per_type_.id)) return string_at(col, per_type_, row) == per_text_;
    return key_order_value(per_type_, col, row) == per_order_;
  }

  void start_group(const Batch& in, int64_t row) {
    in_group_ = true;
    const Column& col = in.column(per_);
    per_null_ = col.validity != nullptr && !col.is_valid(row);
    if (per_null_) return;
    if (is_string(per_type_.id)) {
      per_text_.assign(string_at(col, per_type_, row));
    } else {
      per_order_ = key_order_value(per_type_, col, row);
    }
  }

  // Offers `row` to the current group's heap, whose front is its worst row once it holds k.
  void admit(const Batch& in, int64_t row) {
    Candidate c = read(in, row);
    c.arrival = arrival_++;
    c.row = row;
    const auto cmp = [this](const Candidate& a, const Candidate& b) { return better(a, b); };
    if (heap_.size() < static_cast<uint64_t>(k_)) {
      c.source = retain(in);
      heap_.push_back(c);
      std::push_heap(heap_.begin(), heap_.end(), cmp);
      return;
    }
    if (!better(c, heap_.front())) return;  // an equal value arrived later: it ranks after
    std::pop_heap(heap_.begin(), heap_.end(), cmp);
    release(heap_.back().source);
    c.source = retain(in);
    heap_.back() = c;
    std::push_heap(heap_.begin(), heap_.end(), cmp);
  }

  // The source slot holding the current morsel, taking one for it on first use.
  uint32_t retain(const Batch& in) {
    if (morsel_source_ == kNone) {
      if (free_.empty()) {
        morsel_source_ = static_cast<uint32_t>(sources_.size());
        sources_.push_back(in);
        refs_.push_back(0);
        stamp_.push_back(0);
        out_index_.push_back(0);
      } else {
        morsel_source_ = free_.back();
        free_.pop_back();
        sources_[morsel_source_] = in;
      }
    }
    ++refs_[morsel_source_];
    return morsel_source_;
  }

  // Drops one row's hold on its batch; the batch is let go with its last retained row.
  void release(uint32_t source) {
    if (--refs_[source] != 0) return;
    sources_[source] = Batch();
    free_.push_back(source);
    if (source == morsel_source_) morsel_source_ = kNone;
  }

  // Appends the group's rows, best first, to the pending output and lets their batches go.
  void close_group() {
    const auto cmp = [this](const Candidate& a, const Candidate& b) { return better(a, b); };
    std::sort_heap(heap_.begin(), heap_.end(), cmp);  // ascending in `better`: best first
    ++flush_;
    int64_t rank = 0;
    for (const Candidate& c : heap_) {
      if (stamp_[c.source] != flush_) {  // first row of this batch in this group
        stamp_[c.source] = flush_;
        out_index_[c.source] = static_cast<uint32_t>(out_sources_.size());
        out_sources_.push_back(sources_[c.source]);
      }
      const uint32_t s = out_index_[c.source];
      if (!out_segments_.empty() && out_segments_.back().source == s &&
          out_segments_.back().start + out_segments_.back().length == c.row) {
        ++out_segments_.back().length;
      } else {
        out_segments_.push_back({s, c.row, 1});
      }
      ++rank;
      rank_.append_fixed(&rank);
    }
    for (const Candidate& c : heap_) release(c.source);
    heap_.clear();
  }

  // The pending output rows as one batch (an empty Batch when there are none).
  Batch take_output() {
    if (out_segments_.empty()) return Batch();
    Batch rows = gather(input_, out_sources_, out_segments_);
    out_sources_.clear();
    out_segments_.clear();
    return with_extra_column(rows, output_, rank_);
  }

  std::shared_ptr<const Schema> input_;
  std::shared_ptr<const Schema> output_;
  int64_t k_;
  std::string by_name_;
  std::optional<std::string> per_name_;
  bool descending_;
  size_t by_ = 0;
  DataType by_type_;
  size_t per_ = 0;
  DataType per_type_;

  // The current group's per value.
  bool in_group_ = false;
  bool per_null_ = false;
  uint64_t per_order_ = 0;
  std::string per_text_;

  std::vector<Candidate> heap_;  // the group's best rows so far, worst at the front
  uint64_t arrival_ = 0;

  // Batches holding retained rows: slot -> batch and how many retained rows are in it.
  std::vector<Batch> sources_;
  std::vector<int64_t> refs_;
  std::vector<uint32_t> free_;
  uint32_t morsel_source_ = kNone;

  // Output pending for the current call: rows to gather, their ranks.
  std::vector<Batch> out_sources_;
  std::vector<Segment> out_segments_;
  std::vector<uint64_t> stamp_;        // slot -> the close_group() that last listed it in out_sources_
  std::vector<uint32_t> out_index_;    // slot -> its index in out_sources_ for that close_group()
  uint64_t flush_ = 0;
  ColumnBuilder rank_;
};

// ---- window_aggregate --------------------------------------------------------------------------

// The time column read as int64, whatever its width, with the checks the operator relies on.
class TimeReader {
 public:
  TimeReader(const Schema& input, const window::AggregateQuery& query) : name_(query.time_column) {
    const std::string& column = query.time_column;
    index_ = column_index(input, column, "time");
    type_ = input.fields[index_].type;
    if (!type_.is_temporal_key()) {
      throw Error(ErrorKind::kInvalidInput, "time column '" + column + "' has type " + type_.to_string() +
                                                "; window_aggregate needs timestamp, date32, int32 or int64");
    }
    bounds_ = query.session_gap ? window::session_time_bounds(*query.session_gap, type_)
                                : window::time_bounds_for(query.window, type_);
  }

  int64_t at(const Batch& in, int64_t row) const {
    const Column& c = in.column(index_);
    if (c.validity != nullptr && !c.is_valid(row)) {
      throw Error(ErrorKind::kNullTime, "a null in time column '" + name_ + "'", row);
    }
    const int64_t t = type_.byte_width() == 4 ? int64_t{c.typed<int32_t>()[row]} : c.typed<int64_t>()[row];
    if (t < bounds_.lo || t > bounds_.hi) out_of_range(t, row);
    return t;
  }

  // As MultiwayAggregate's inputs (gate::InputTimes::limit): every window of a time must fit the
  // column's range.
  [[noreturn]] void out_of_range(int64_t t, int64_t row) const {
    throw Error(ErrorKind::kInvalidInput,
                "time column '" + name_ + "' has " + format_time_value(t, type_) + ", outside the times " + bounds_.why,
                row);
  }

  // As TimeColumn::went_back (ops/partitioned.h), for `row` of the batch the operator was handed.
  [[noreturn]] void went_back(int64_t previous, int64_t now, const char* whose, int64_t row) const {
    throw Error(ErrorKind::kUnsorted,
                "time column '" + name_ + "' went back from " + format_time_value(previous, type_) + " to " +
                    format_time_value(now, type_) + " (" + whose +
                    "); an operator before this one rewrote the time column, and window_aggregate needs it in "
                    "time order",
                row);
  }

 private:
  std::string name_;
  size_t index_ = 0;
  DataType type_;
  window::TimeBounds bounds_;
};

std::string describe_query(const window::AggregateQuery& q) {
  std::string s = q.session_gap ? "sessions with gap " + std::to_string(*q.session_gap) + " over " + q.time_column + ":"
                                : "windows [s, s + " + std::to_string(q.window.size) + ") every " +
                                      std::to_string(q.window.advance) + " from " + std::to_string(q.window.offset) +
                                      " over " + q.time_column + ":";
  for (const window::AggSpec& a : q.aggs) {
    s += " " + a.name + "=" + window::agg_name(a.kind) + "(" + a.column + ")";
  }
  if (q.keys.empty()) return s + ", closing on the pipeline's time";
  s += " by";
  for (const std::string& k : q.keys) s += " " + k;
  return s + (q.session_gap ? ", closing on the pipeline's time" : ", closing per key");
}

// Without keys (or by_window, or sessions): a window store fed tuple by tuple, as aggregate() with
// one input: window::WindowAggregate, or window::SessionAggregate for session windows.
template <class Store>
class GlobalWindows final : public Operator {
 public:
  GlobalWindows(std::shared_ptr<const Schema> input, const window::AggregateQuery& query)
      : input_(std::move(input)), time_(*input_, query), description_(describe_query(query)),
        windows_(*input_, query, INT64_MAX) {}  // one batch per call: take(true) cuts it

  std::string name() const override { return "window_aggregate"; }
  std::string describe() const override { return description_; }
  OpKind kind() const override { return OpKind::kStateful; }
  Selectivity selectivity() const override { return Selectivity::kAny; }
  const std::shared_ptr<const Schema>& input_schema() const override { return input_; }
  const std::shared_ptr<const Schema>& output_schema() const override { return windows_.output_schema(); }

  Batch process(const Batch& in) override {
    for (int64_t row = 0; row < in.num_rows(); ++row) {
      const int64_t t = time_.at(in, row);
      if (t < last_) time_.went_back(last_, t, "the previous tuple", row);
      last_ = t;
      windows_.add(in, row, t);
    }
    return take();
  }

  // A window set (a session) closes at a heartbeat exactly as at a tuple of that time: the same
  // rows, in the same order, only sooner.
  bool advances() const override { return true; }
  Batch advance(int64_t bound) override {
    if (bound <= last_) return {};
    last_ = bound;  // a tuple below it now went back
    windows_.advance(bound);
    return take();
  }

  Batch finish() override {
    windows_.finish();
    return take();
  }

  // Checkpoints: the open windows' states (WindowAggregate::save_open) or open sessions
  // (SessionAggregate::save_sessions), as states_schema() rows, and the latest time.
  bool saves_state() const override { return true; }
  std::vector<Batch> save_state() override {
    std::vector<ColumnBuilder> built = builders_of({DataType{}});
    built[0].append_fixed(&last_);
    auto schema = std::make_shared<const Schema>(Schema{{{"last", DataType{}, false}}});
    if constexpr (std::is_same_v<Store, window::SessionAggregate>) {
      return {windows_.save_sessions(), built_batch(schema, 1, built)};
    } else {
      return {windows_.save_open(), built_batch(schema, 1, built)};
    }
  }
  void load_state(const std::vector<Batch>& state) override {
    if (state.size() != 2 || state[1].num_rows() != 1 || state[1].num_columns() != 1) {
      throw Error(ErrorKind::kInvalidInput, "window_aggregate: a checkpoint's state is its windows and a time");
    }
    if constexpr (std::is_same_v<Store, window::SessionAggregate>) {
      windows_.load_sessions(state[0]);
    } else {
      windows_.load_states(state[0]);
    }
    last_ = state[1].column(0).typed<int64_t>()[0];
  }

 private:
  Batch take() {
    std::optional<Batch> b = windows_.take(true);
    return b ? std::move(*b) : Batch();
  }

  std::shared_ptr<const Schema> input_;
  TimeReader time_;
  std::string description_;
  Store windows_;
  int64_t last_ = INT64_MIN;
};

// With keys: per partition a key table and, per key, a ring of the windows containing its latest
// tuple. Those are exactly its open windows: a new tuple at t closes the ones ending at or before
// t, and every one left contains t as well, so at most ceil(size / advance) are open at a time
// and window k of key id lives in slot id * ring + (k mod ring) of each aggregate's states.
class KeyedWindows final : public Operator {
 public:
  KeyedWindows(std::shared_ptr<const Schema> input, const window::AggregateQuery& query)
      : input_(std::move(input)), time_(*input_, query), description_(describe_query(query)),
        window_(query.window) {
    // WindowOutput validates the query exactly as aggregate() does and gives its output schema.
    output_ = window::WindowOutput(*input_, query, 1).output_schema();
    Schema keys;
    for (const std::string& k : query.keys) {
      key_columns_.push_back(column_index(*input_, k, "key"));
      keys.fields.push_back(input_->fields[key_columns_.back()]);
    }
    key_schema_ = std::make_shared<const Schema>(std::move(keys));
    for (const window::AggSpec& spec : query.aggs) prototypes_.emplace_back(spec, *input_);
    ring_ = (window_.size - 1) / window_.advance + 1;
    whole_ring_ = window_.size % window_.advance == 0;
    set_partitions(1);
  }

  std::string name() const override { return "window_aggregate"; }
  std::string describe() const override { return description_; }
  OpKind kind() const override { return OpKind::kPartitioned; }
  Selectivity selectivity() const override { return Selectivity::kAny; }
  std::vector<size_t> key_columns() const override { return key_columns_; }
  const std::shared_ptr<const Schema>& input_schema() const override { return input_; }
  const std::shared_ptr<const Schema>& output_schema() const override { return output_; }

  void set_partitions(size_t partitions) override {
    if (partitions == 0) throw Error(ErrorKind::kUsage, "window_aggregate needs at least one partition");
    parts_.clear();
    for (size_t i = 0; i < partitions; ++i) parts_.push_back(std::make_unique<Partition>(*this));
  }

  // In two passes, so that the aggregates run column by column. The first walks the rows: keys,
  // times, the windows each row updates (as (row, slot) pairs) and the windows it closes (events,
  // each placed before its row's pairs), writing the closed windows' start, end and key columns.
  // The second runs each aggregate over the pairs in runs between events, one dispatch per run,
  // emitting and resetting each event's slot where it falls: a closed window's state then holds
  // exactly the key's rows before the closing row, as when every row did everything in turn.
  Piece process_rows(const Batch& in, std::span<const int64_t> rows, size_t partition) override {
    Partition& p = *parts_.at(partition);
    // Keys in bulk (KeyTable::ids): new keys are numbered in row order, so a key's first row
    // still finds it equal to the number of keys seen before.
    p.keys.ids(in, rows, p.ids);
    p.pair_rows.clear();
    p.pair_slots.clear();
    p.events.clear();
    for (size_t i = 0; i < rows.size(); ++i) {
      // A key's state is data-dependent: requested a few rows ahead, as the key table's entries.
      if (i + KeyTable::kPrefetchAhead < rows.size()) {
        const uint32_t ahead = p.ids[i + KeyTable::kPrefetchAhead];
        if (ahead < p.state.size()) pao::prefetch(&p.state[ahead]);
      }
      const int64_t row = rows[i];
      const int64_t t = time_.at(in, row);
      const uint32_t key = p.ids[i];
      // The windows containing t: one division when the size is a multiple of the advance.
      const int64_t kl = window_.last_k(t);
      const int64_t kf = whole_ring_ ? kl - ring_ + 1 : window_.first_k(t);
      if (key == p.state.size()) {
        add_key(p, key);
      } else {
        const int64_t previous = p.state[key].last;
        if (t < previous) time_.went_back(previous, t, "the key's previous tuple", row);
        // Close the key's windows ending at or before t: its open ones (its previous tuple's)
        // before the first window containing t.
        const OpenWindows open = p.state[key].open;
        const int64_t close_to = std::min(open.last, kf - 1);
        for (int64_t k = open.first; k <= close_to; ++k) {
          write_window(p, key, k, p.out);
          p.events.push_back({p.pair_rows.size(), slot_of(key, k)});
          p.source_rows.push_back(row);
        }
      }
      p.state[key] = {t, {kf, kl}};
      for (int64_t k = kf; k <= kl; ++k) {  // none in a gap between windows (kf > kl)
        p.pair_rows.push_back(row);
        p.pair_slots.push_back(slot_of(key, k));
      }
    }
    const size_t first_agg = 2 + key_columns_.size();
    for (size_t a = 0; a < p.aggs.size(); ++a) {
      window::AggStates& agg = p.aggs[a];
      ColumnBuilder& column = p.out[first_agg + a];
      size_t done = 0;
      for (const Event& e : p.events) {
        agg.update_indexed(p.pair_slots.data() + done, in, p.pair_rows.data() + done, e.pair - done);
        done = e.pair;
        agg.emit(e.slot, column);
        agg.reset(e.slot);
      }
      agg.update_indexed(p.pair_slots.data() + done, in, p.pair_rows.data() + done, p.pair_rows.size() - done);
    }
    if (p.source_rows.empty()) return {};
    Piece piece{finish_batch(output_, p.out), std::move(p.source_rows)};
    p.source_rows.clear();
    return piece;
  }

  Batch finish() override {
    // Every key with open windows, from every partition, decoded into one batch and entered into
    // one key table: keys of different partitions then compare in KeyTable order.
    struct Owner {
      uint32_t part;
      uint32_t key;
    };
    std::vector<Owner> owners;
    std::vector<ColumnBuilder> key_builders;
    for (const Field& f : key_schema_->fields) key_builders.emplace_back(f.type);
    for (uint32_t part = 0; part < parts_.size(); ++part) {
      const Partition& p = *parts_[part];
      for (uint32_t key = 0; key < p.state.size(); ++key) {
        if (p.state[key].open.first > p.state[key].open.last) continue;  // nothing open
        p.keys.append(key, key_builders, 0);
        owners.push_back({part, key});
      }
    }
    const Batch key_batch = finish_batch(key_schema_, key_builders);
    std::vector<size_t> all(key_columns_.size());
    for (size_t c = 0; c < all.size(); ++c) all[c] = c;
    KeyTable order(*key_schema_, all);

    struct Open {
      int64_t k;
      uint32_t global;  // id in `order`
      uint32_t owner;   // index into owners
    };
    std::vector<Open> open;
    for (uint32_t i = 0; i < owners.size(); ++i) {
      const uint32_t global = order.id(key_batch, i);
      const OpenWindows windows = parts_[owners[i].part]->state[owners[i].key].open;
      for (int64_t k = windows.first; k <= windows.last; ++k) open.push_back({k, global, i});
    }
    std::sort(open.begin(), open.end(), [&](const Open& a, const Open& b) {
      if (a.k != b.k) return a.k < b.k;
      return order.less(a.global, b.global);
    });

    std::vector<ColumnBuilder> out;
    for (const Field& f : output_->fields) out.emplace_back(f.type);
    for (const Open& o : open) close_window(*parts_[owners[o.owner].part], owners[o.owner].key, o.k, out);
    set_partitions(parts_.size());  // everything was emitted: start empty
    if (open.empty()) return Batch();
    return finish_batch(output_, out);
  }

  // A checkpoint's state (ops/partitioned.h, key_state_schema): per key its latest time, its open
  // windows [first, last] by k, and each open window's state per aggregate (AggStates::save).
  bool saves_state() const override { return true; }
  std::vector<Batch> save_state() override {
    KeyStateBuilder out(*input_, key_columns_);
    for (const auto& part : parts_) {
      const Partition& p = *part;
      for (uint32_t key = 0; key < p.state.size(); ++key) {
        const KeyState& st = p.state[key];
        StateWriter w;
        w.put(st.last);
        w.put(st.open.first);
        w.put(st.open.last);
        for (int64_t k = st.open.first; k <= st.open.last; ++k)
          for (const window::AggStates& a : p.aggs) w.put_text(a.save(slot_of(key, k)));
        out.add(p.keys, key, w.out);
      }
    }
    return {out.finish()};
  }
  void load_state(const std::vector<Batch>& state) override {
    if (state.size() != 1) throw Error(ErrorKind::kInvalidInput, "window_aggregate: a checkpoint's state is one batch");
    const Batch& b = state[0];
    const std::vector<uint32_t> to = key_state_partitions(b, key_columns_.size(), parts_.size(), name());
    for (auto& part : parts_) part->keys.set_columns(key_state_columns(key_columns_.size()));
    for (int64_t r = 0; r < b.num_rows(); ++r) {
      Partition& p = *parts_[to[static_cast<size_t>(r)]];
      const uint32_t key = p.keys.id(b, r);
      StateReader in{key_state_text(b, r)};
      if (key != p.state.size()) in.bad();  // a key twice
      add_key(p, key);
      KeyState& st = p.state[key];
      st.last = in.get();
      st.open.first = in.get();
      st.open.last = in.get();
      if (st.open.last - st.open.first >= ring_) in.bad();
      for (int64_t k = st.open.first; k <= st.open.last; ++k)
        for (window::AggStates& a : p.aggs)
          if (!a.load(slot_of(key, k), in.get_text())) in.bad();
    }
    for (auto& part : parts_) part->keys.set_columns(key_columns_);
  }

 private:
  // A window closed in process_rows: emitted from `slot` before the pairs from `pair` on.
  struct Event {
    size_t pair;
    uint32_t slot;
  };

  // The windows [first, last] (by k) of a key's latest tuple: its open windows.
  struct OpenWindows {
    int64_t first = 0;
    int64_t last = -1;
  };

  // A key's latest tuple's time and the windows containing it (its open windows), side by side:
  // one cache line per row, where two arrays were two misses (100,000 meters' keys).
  struct KeyState {
    int64_t last = INT64_MIN;
    OpenWindows open;
  };

  // One partition's state; only the worker running that partition touches it.
  struct Partition {
    explicit Partition(const KeyedWindows& op)
        : keys(*op.input_, op.key_columns_), aggs(op.prototypes_) {
      for (const Field& f : op.output_->fields) out.emplace_back(f.type);
    }
    KeyTable keys;
    std::vector<window::AggStates> aggs;  // per aggregate: slot id * ring + (k mod ring)
    std::vector<KeyState> state;          // per key id
    std::vector<ColumnBuilder> out;       // the current call's output rows
    std::vector<int64_t> source_rows;
    std::vector<uint32_t> ids;            // the key ids of the rows at hand (KeyTable::ids)
    // process_rows' passes: the (row, slot) pairs the rows update, in row order, and the windows
    // they close, each before the pairs from `pair` on.
    std::vector<int64_t> pair_rows;
    std::vector<uint32_t> pair_slots;
    std::vector<Event> events;
  };

  uint32_t slot_of(uint32_t key, int64_t k) const noexcept {
    if (ring_ == 1) return key;  // tumbling: one open window per key
    const int64_t m = ((k % ring_) + ring_) % ring_;
    return static_cast<uint32_t>(static_cast<int64_t>(key) * ring_ + m);
  }

  // Makes room for a new key's ring in every aggregate's states.
  void add_key(Partition& p, uint32_t key) {
    const auto needed = (static_cast<uint64_t>(key) + 1) * static_cast<uint64_t>(ring_);
    if (needed > uint64_t{UINT32_MAX}) {
      throw Error(ErrorKind::kInvalidInput,
                  "window_aggregate: too many open windows in one partition (" + std::to_string(key + 1) +
                      " keys times " + std::to_string(ring_) + " windows per tuple)");
    }
    p.state.emplace_back();
    for (window::AggStates& a : p.aggs) {
      if (a.size() < needed) a.resize(std::max<size_t>(needed, 2 * a.size()));  // new cells are fresh
    }
  }

  // Appends key `key`'s window k's start, end and key to an output row (its aggregates follow).
  void write_window(Partition& p, uint32_t key, int64_t k, std::vector<ColumnBuilder>& out) {
    const int64_t start = window_.start(k);
    const int64_t end = window_.end(k);
    out[0].append_fixed(&start);
    out[1].append_fixed(&end);
    p.keys.append(key, out, 2);
  }

  // Appends key `key`'s window k as one output row and frees its slot for a later window.
  void close_window(Partition& p, uint32_t key, int64_t k, std::vector<ColumnBuilder>& out) {
    write_window(p, key, k, out);
    const size_t first_agg = 2 + key_columns_.size();
    const uint32_t slot = slot_of(key, k);
    for (size_t a = 0; a < p.aggs.size(); ++a) {
      p.aggs[a].emit(slot, out[first_agg + a]);
      p.aggs[a].reset(slot);
    }
  }

  std::shared_ptr<const Schema> input_;
  TimeReader time_;
  std::string description_;
  window::WindowSpec window_;
  std::shared_ptr<const Schema> output_;
  std::vector<size_t> key_columns_;
  std::shared_ptr<const Schema> key_schema_;
  std::vector<window::AggStates> prototypes_;
  int64_t ring_ = 1;
  bool whole_ring_ = false;  // size is a multiple of advance: first_k(t) = last_k(t) - ring_ + 1
  std::vector<std::unique_ptr<Partition>> parts_;
};

}  // namespace

OperatorPtr make_top_k(std::shared_ptr<const Schema> input, int64_t k, std::string by,
                       std::optional<std::string> per, bool descending) {
  return std::make_shared<TopK>(std::move(input), k, std::move(by), std::move(per), descending);
}

OperatorPtr make_window_aggregate(std::shared_ptr<const Schema> input, std::string time,
                                  window::WindowSpec window, std::vector<window::AggSpec> aggs,
                                  std::vector<std::string> keys, bool by_window, std::optional<int64_t> session_gap) {
  window::AggregateQuery query;
  query.time_column = std::move(time);
  query.keys = std::move(keys);
  query.window = window.normalized();
  query.aggs = std::move(aggs);
  query.session_gap = session_gap;
  if (session_gap) return std::make_shared<GlobalWindows<window::SessionAggregate>>(std::move(input), query);
  if (query.keys.empty() || by_window) return std::make_shared<GlobalWindows<window::WindowAggregate>>(std::move(input), query);
  return std::make_shared<KeyedWindows>(std::move(input), query);
}

}  // namespace pao::ops
