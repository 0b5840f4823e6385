#include "ops/joins.h"

#include <algorithm>
#include <deque>
#include <limits>

#include "core/builder.h"
#include "core/error.h"
#include "core/gather.h"
#include "core/key_table.h"
#include "core/prefetch.h"
#include "ops/partitioned.h"

namespace pao::ops {
namespace {

// a + b, clamped to the int64 range (times near the range's ends plus a join's bounds).
int64_t add_clamped(int64_t a, int64_t b) {
  int64_t out;
  if (__builtin_add_overflow(a, b, &out)) return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  return out;
}

// The columns `columns` of `b` as a batch of `schema`: a view, no copy.
Batch project(const Batch& b, const std::vector<size_t>& columns, const std::shared_ptr<const Schema>& schema) {
  std::vector<Column> out;
  out.reserve(columns.size());
  for (size_t c : columns) out.push_back(b.column(c));
  return Batch(schema, b.num_rows(), std::move(out), b.owner());
}

// The keys of both sides in one id space: each side's key columns are viewed as a batch of one
// key schema (the left's key fields), read by one KeyTable.
class JoinKeys {
 public:
  JoinKeys(const Schema& left, const Schema& right, const std::vector<std::string>& names, const std::string& op) {
    // No key columns: every tuple has the one key (id 0).
    Schema keys;
    std::vector<size_t> all;
    for (const std::string& n : names) {
      const std::optional<size_t> l = left.find(n);
      const std::optional<size_t> r = right.find(n);
      if (!l || !r) {
        throw Error(ErrorKind::kInvalidInput, op + "'s key column '" + n + "' is not in its " + (l ? "right" : "left") +
                                                  " input; its columns are: " + (l ? right : left).to_string());
      }
      if (!(left.fields[*l].type == right.fields[*r].type)) {
        throw Error(ErrorKind::kSchemaMismatch, op + "'s key column '" + n + "' has type " +
                                                    left.fields[*l].type.to_string() + " on the left and " +
                                                    right.fields[*r].type.to_string() + " on the right");
      }
      columns_[0].push_back(*l);
      columns_[1].push_back(*r);
      Field f = left.fields[*l];
      f.nullable = true;
      keys.fields.push_back(f);
      all.push_back(all.size());
    }
    schema_ = std::make_shared<const Schema>(std::move(keys));
    table_ = std::make_unique<KeyTable>(*schema_, all);
  }

  // Side 0 (left) or 1 (right): `b`'s key columns as a batch of the key schema.
  Batch view(size_t side, const Batch& b) const { return project(b, columns_[side], schema_); }
  // The key id of `row` of a view, adding a new key; nullopt when a key column is null (a null
  // key matches nothing, as in SQL).
  std::optional<uint32_t> id(const Batch& keys, int64_t row) {
    if (has_null(keys, row)) return std::nullopt;
    return table_->id(keys, row);
  }
  // id() of rows [start, start + length) of a view into out (resized), kNoKey for a row with a
  // null key column: the bulk path (KeyTable::ids, its lookups overlapped).
  static constexpr uint32_t kNoKey = UINT32_MAX;
  void ids(const Batch& keys, int64_t start, int64_t length, std::vector<int64_t>& rows, std::vector<uint32_t>& out) {
    rows.resize(static_cast<size_t>(length));
    for (int64_t i = 0; i < length; ++i) rows[static_cast<size_t>(i)] = start + i;
    table_->ids(keys, rows, out);
    for (size_t c = 0; c < keys.num_columns(); ++c) {
      if (!keys.column(c).may_have_nulls()) continue;
      for (int64_t i = 0; i < length; ++i) {
        if (has_null(keys, start + i)) out[static_cast<size_t>(i)] = kNoKey;
      }
      break;
    }
  }
  // Without adding: const, for readers of a table built once.
  std::optional<uint32_t> find(const Batch& keys, int64_t row) const {
    if (has_null(keys, row)) return std::nullopt;
    return table_->find(keys, row);
  }
  const std::vector<size_t>& columns(size_t side) const { return columns_[side]; }
  // Checkpoints: the key schema, a key's values, and the id of a key batch's row (no nulls).
  const std::shared_ptr<const Schema>& schema() const { return schema_; }
  void append(uint32_t id, std::vector<ColumnBuilder>& builders) const { table_->append(id, builders, 0); }
  uint32_t saved_id(const Batch& keys, int64_t row) { return table_->id(keys, row); }

 private:
  static bool has_null(const Batch& keys, int64_t row) {
    for (size_t c = 0; c < keys.num_columns(); ++c) {
      if (!keys.column(c).is_valid(row)) return true;
    }
    return false;
  }
  std::vector<size_t> columns_[2];
  std::shared_ptr<const Schema> schema_;
  std::unique_ptr<KeyTable> table_;
};

// What a join outputs of the right side: its columns but the keys, named as the output names them.
struct RightColumns {
  std::vector<size_t> columns;            // indices in the right schema
  std::shared_ptr<const Schema> payload;  // those fields under their own names (gather's layout)
};

// The output schema: `left`'s fields, then the right's but `keys` (a name already taken gets
// "_right"), then `extra`. `right_nullable`: the right columns may be null (left join, as-of).
std::shared_ptr<const Schema> join_schema(const Schema& left, const Schema& right, const std::vector<size_t>& keys,
                                          bool right_nullable, const std::vector<Field>& extra, const std::string& op,
                                          RightColumns& right_columns) {
  Schema out = left;
  Schema payload;
  auto taken = [&](const std::string& name) { return out.find(name).has_value(); };
  for (size_t c = 0; c < right.fields.size(); ++c) {
    if (std::find(keys.begin(), keys.end(), c) != keys.end()) continue;
    Field f = right.fields[c];
    payload.fields.push_back(f);
    right_columns.columns.push_back(c);
    if (taken(f.name)) f.name += "_right";
    if (taken(f.name)) {
      throw Error(ErrorKind::kInvalidInput, op + "'s output would have two columns named '" + f.name +
                                                "'; rename one of them first (with_columns or select)");
    }
    f.nullable = f.nullable || right_nullable;
    out.fields.push_back(f);
  }
  for (const Field& f : extra) {
    if (taken(f.name)) {
      throw Error(ErrorKind::kInvalidInput, op + "'s output would have two columns named '" + f.name +
                                                "'; rename the input's column '" + f.name + "' first");
    }
    out.fields.push_back(f);
  }
  right_columns.payload = std::make_shared<const Schema>(std::move(payload));
  return std::make_shared<const Schema>(std::move(out));
}

// A row of a batch a join keeps: the batch's id in a BatchStore and the row.
struct Ref {
  uint64_t batch = 0;
  int64_t row = 0;
};

// The batches a join keeps rows of. Each has a count of holds (rows kept in state, and the batch's
// own hold while its rows are still queued to be taken); trim() drops batches from the oldest
// while they have none, so memory follows what state still needs.
class BatchStore {
 public:
  uint64_t add(Batch b) {
    batches_.push_back({std::move(b), 1});
    return base_ + batches_.size() - 1;
  }
  const Batch& at(uint64_t id) const { return batches_[static_cast<size_t>(id - base_)].batch; }
  void hold(uint64_t id) { ++batches_[static_cast<size_t>(id - base_)].holds; }
  void release(uint64_t id) { --batches_[static_cast<size_t>(id - base_)].holds; }
  void trim() {
    while (!batches_.empty() && batches_.front().holds == 0) {
      batches_.pop_front();
      ++base_;
    }
  }

 private:
  struct Kept {
    Batch batch;
    int64_t holds;
  };
  std::deque<Kept> batches_;
  uint64_t base_ = 0;
};

// The batches of a store that one output takes rows from, and the segments of those rows in
// output order: a join's right (or left) columns, built row by row, then gathered once.
struct RowSources {
  static constexpr uint64_t kNullRow = UINT64_MAX;  // the id of the null row's source
  std::vector<Batch> batches;
  std::vector<uint64_t> ids;  // batches[i] is store batch ids[i], or the null row
  std::vector<Segment> segments;

  // The source index of store batch `id`, added on first use.
  uint32_t of(uint64_t id, const BatchStore& store) {
    for (size_t i = ids.size(); i-- > 0;) {  // recent first: rows cluster
      if (ids[i] == id) return static_cast<uint32_t>(i);
    }
    ids.push_back(id);
    batches.push_back(store.at(id));
    return static_cast<uint32_t>(ids.size() - 1);
  }
  void row(uint64_t id, int64_t row, const BatchStore& store) { append_row(segments, of(id, store), row); }
  void rows(uint64_t id, int64_t start, int64_t length, const BatchStore& store) {
    append_rows(segments, of(id, store), start, length);
  }
  // A row of nulls (from `null_row`, a one-row batch of nulls).
  void null(const Batch& null_row) {
    if (null_source < 0) {
      null_source = static_cast<int32_t>(ids.size());
      ids.push_back(kNullRow);
      batches.push_back(null_row);
    }
    segments.push_back({static_cast<uint32_t>(null_source), 0, 1});
  }
  int32_t null_source = -1;
  // The rows as one batch of `schema` (the sources' layout): a slice, without a copy, when they
  // are one range of one batch.
  Batch batch(const std::shared_ptr<const Schema>& schema) const {
    if (segments.empty()) return empty_batch(schema);
    if (segments.size() == 1 && ids[segments[0].source] != kNullRow) {
      return batches[segments[0].source].slice(segments[0].start, segments[0].length).with_schema(schema);
    }
    return gather(schema, batches, segments);
  }
};

// Rows `refs` of `store`'s batches as one batch of `schema` (their layout); a missing ref gives
// a null row (from `null_row`, a one-row batch of nulls).
Batch gather_refs(const std::shared_ptr<const Schema>& schema, const BatchStore& store,
                  const std::vector<std::optional<Ref>>& refs, const Batch& null_row) {
  RowSources out;
  for (const std::optional<Ref>& r : refs) {
    if (r) {
      out.row(r->batch, r->row, store);
    } else {
      out.null(null_row);
    }
  }
  return out.batch(schema);
}

// A one-row batch of nulls of `schema`.
Batch null_row(const std::shared_ptr<const Schema>& schema) {
  std::vector<ColumnBuilder> builders;
  for (const Field& f : schema->fields) {
    builders.emplace_back(f.type);
    builders.back().append_null();
  }
  return finish_batch(schema, builders);
}

// `left`'s columns, with column `replace` (if any) swapped for `replacement`, then `right`'s,
// then `extra`, as one batch of `schema` owning all of their memory.
Batch combine(const std::shared_ptr<const Schema>& schema, const Batch& left, std::optional<size_t> replace,
              const Batch& right, std::vector<ColumnBuilder>& built) {
  auto memory = std::make_shared<BatchMemory>();
  memory->share(left.owner());
  memory->share(right.owner());
  std::vector<Column> columns;
  columns.reserve(schema->fields.size());
  std::vector<Column> made;
  for (ColumnBuilder& b : built) made.push_back(b.finish(*memory));
  size_t next_made = 0;
  for (size_t c = 0; c < left.num_columns(); ++c) {
    columns.push_back(replace && c == *replace ? made[next_made++] : left.column(c));
  }
  for (size_t c = 0; c < right.num_columns(); ++c) columns.push_back(right.column(c));
  while (next_made < made.size()) columns.push_back(made[next_made++]);
  return Batch(schema, left.num_rows(), std::move(columns), std::move(memory));
}

// Both inputs' time columns have one type, so their times compare as stored integers.
void check_time_types(const Schema& left, const Schema& right, const std::string& time, const std::string& op) {
  const std::optional<size_t> l = left.find(time), r = right.find(time);
  if (l && r && !(left.fields[*l].type == right.fields[*r].type)) {
    throw Error(ErrorKind::kSchemaMismatch, op + "'s inputs have time columns of different types: " +
                                                left.fields[*l].type.to_string() + " on the left, " +
                                                right.fields[*r].type.to_string() + " on the right");
  }
}

// ---- joins of two streams ----------------------------------------------------------------------

// What the interval and as-of joins share: the two ports merged (MergedPorts), the keys of both
// sides in one id space, the right columns the output takes, and the batches state keeps rows of.
// A derived class sets output_ (join_schema) and then calls set_null_right().
class StreamJoin : public MultiInputOperator {
 public:
  const std::shared_ptr<const Schema>& output_schema() const override { return output_; }
  size_t ports() const override { return 2; }
  const std::shared_ptr<const Schema>& port_schema(size_t port) const override { return port == 0 ? left_ : right_; }
  int64_t output_bound() const override { return merged_.frontier(); }

 protected:
  // `order`: the ports' ranks on ties (MergedPorts).
  StreamJoin(std::shared_ptr<const Schema> left, std::shared_ptr<const Schema> right, const std::string& time,
             const std::vector<std::string>& keys, const std::string& op, std::vector<uint32_t> order)
      : left_(std::move(left)),
        right_(std::move(right)),
        merged_({"the " + op + "'s left input", "the " + op + "'s right input"}, time, {left_, right_},
                std::move(order)),
        keys_(*left_, *right_, keys, op) {
    check_time_types(*left_, *right_, time, op);
  }

  // Takes `in` into its port (kept in the port's store, the right side as its output columns).
  void accept(size_t port, const Batch& in, int64_t bound) {
    uint64_t tag = 0;
    if (in.num_rows() > 0) {
      tag = port == 0 ? left_store_.add(in) : right_store_.add(project(in, right_columns_.columns, right_columns_.payload));
    }
    merged_.push(port, in, bound, tag);
  }
  // The run's rows were taken: a batch whose rows are all taken keeps only its state's holds.
  void taken(const MergedPorts::Run& run) {
    merged_.consume(run, run.length);
    if (run.last) (run.port == 0 ? left_store_ : right_store_).release(run.tag);
  }
  // After a push: batches nobody holds any more go.
  Batch trimmed(Batch out) {
    left_store_.trim();
    right_store_.trim();
    return out;
  }
  void set_null_right() { null_right_ = null_row(right_columns_.payload); }

  // Checkpoints, what both joins save first: the two streams' queued rows and promises
  // (MergedPorts::save), which a load pushes again, each batch entering its store as accept() does.
  static constexpr size_t kMergedBatches = 3;
  std::vector<Batch> save_merged() const { return merged_.save({left_, right_}); }
  void load_merged(const std::vector<Batch>& state) {
    merged_.load({state.begin(), state.begin() + kMergedBatches}, [this](size_t port, const Batch& b) {
      return port == 0 ? left_store_.add(b) : right_store_.add(project(b, right_columns_.columns, right_columns_.payload));
    });
  }
  // Rows kept in state as (key, time, right payload row) triples (the as-of join's latest right
  // rows, the interval join's right rows): a batch of the key columns then `time`, and a batch of
  // the payload rows. `keys` and `refs` are parallel.
  std::vector<Batch> save_keyed_rights(const std::vector<uint32_t>& keys, const std::vector<int64_t>& times,
                                       const std::vector<Ref>& refs) const {
    Schema with_time = *keys_.schema();
    with_time.fields.push_back({"time", DataType{}, false});
    std::vector<ColumnBuilder> built;
    for (const Field& f : with_time.fields) built.emplace_back(f.type);
    RowSources rows;
    for (size_t i = 0; i < keys.size(); ++i) {
      keys_.append(keys[i], built);
      built.back().append_fixed(&times[i]);
      rows.row(refs[i].batch, refs[i].row, right_store_);
    }
    return {built_batch(std::make_shared<const Schema>(std::move(with_time)), static_cast<int64_t>(keys.size()), built),
            rows.batch(right_columns_.payload)};
  }
  // Back: calls add(key id, time, ref) per row, the payload rows entered into right_store_ (each
  // row holds its batch; the batch's own hold is let go).
  template <class Add>
  void load_keyed_rights(const Batch& keyed, const Batch& payload, Add add) {
    if (keyed.num_rows() != payload.num_rows() || keyed.num_columns() != keys_.schema()->fields.size() + 1) {
      throw Error(ErrorKind::kInvalidInput, name() + ": a checkpoint's rows of state do not fit this join");
    }
    const uint64_t tag = right_store_.add(payload);
    const int64_t* times = keyed.column(keyed.num_columns() - 1).typed<int64_t>();
    std::vector<Column> key_columns;
    for (size_t c = 0; c + 1 < keyed.num_columns(); ++c) key_columns.push_back(keyed.column(c));
    const Batch keys(keys_.schema(), keyed.num_rows(), std::move(key_columns), keyed.owner());
    for (int64_t r = 0; r < keyed.num_rows(); ++r) {
      right_store_.hold(tag);
      add(keys_.saved_id(keys, r), times[r], Ref{tag, r});
    }
    right_store_.release(tag);
  }

  std::shared_ptr<const Schema> left_, right_, output_;
  MergedPorts merged_;
  JoinKeys keys_;
  RightColumns right_columns_;
  Batch null_right_;
  BatchStore left_store_, right_store_;
};

// ---- interval join -----------------------------------------------------------------------------

class IntervalJoin final : public StreamJoin {
 public:
  IntervalJoin(std::shared_ptr<const Schema> left, std::shared_ptr<const Schema> right, const std::string& time,
               std::vector<std::string> on, int64_t lo, int64_t hi, JoinHow how)
      : StreamJoin(std::move(left), std::move(right), time, on, "join", {}),
        on_(std::move(on)),
        lo_(lo),
        hi_(hi),
        how_(how) {
    if (lo_ > hi_) {
      throw Error(ErrorKind::kInvalidInput, "join's within=(lo, hi) needs lo <= hi, got (" + std::to_string(lo_) +
                                                ", " + std::to_string(hi_) + ")");
    }
    time_ = *left_->find(time);
    const DataType time_type = left_->fields[time_].type;
    output_ = join_schema(*left_, *right_, keys_.columns(1), how_ == JoinHow::kLeft,
                          {{time + "_left", time_type, false}}, "join", right_columns_);
    set_null_right();
  }

  std::string name() const override { return "join"; }
  std::string describe() const override {
    return std::string(how_ == JoinHow::kLeft ? "left" : "inner") + " interval join on " + quoted(on_) +
           " where " + std::to_string(lo_) + " <= right time - left time <= " + std::to_string(hi_);
  }
  Selectivity selectivity() const override { return Selectivity::kAny; }

  Batch push(size_t port, const Batch& in, int64_t bound) override {
    accept(port, in, bound);
    while (std::optional<MergedPorts::Run> run = merged_.next()) {
      const Batch keys = keys_.view(run->port, *run->batch);
      for (int64_t i = 0; i < run->length; ++i) {
        const int64_t t = run->times[i];
        expire(t);
        const Ref ref{run->tag, run->start + i};
        const std::optional<uint32_t> key = keys_.id(keys, run->start + i);
        if (run->port == 0) {
          take_left(t, key, ref);
        } else {
          take_right(t, key, ref);
        }
      }
      taken(*run);
    }
    expire(merged_.frontier());
    return trimmed(emit());
  }

 private:
  struct Left {
    int64_t time;
    Ref ref;
    bool matched;
  };
  struct Right {
    int64_t time;
    Ref ref;
  };
  struct Out {
    Ref left;
    std::optional<Ref> right;
    int64_t time;
    int64_t left_time;
  };

  static std::string quoted(const std::vector<std::string>& names) {
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
    return out;
  }

  // A left tuple: pairs with the earlier right tuples of its key (right time in [t + lo, t + hi],
  // all before t: a right tuple of time t sorts after it), in right order; kept while later right
  // tuples may match (hi >= 0), or, unmatched with how = left, emitted now (hi < 0).
  void take_left(int64_t t, std::optional<uint32_t> key, Ref ref) {
    bool matched = false;
    if (key) {
      std::deque<uint64_t>& mine = by_key(right_by_key_, *key);
      const int64_t from = add_clamped(t, lo_), to = add_clamped(t, hi_);
      // Right tuples before t + lo match neither this left tuple nor any later one.
      while (!mine.empty() && (mine.front() < right_base_ || rights_[mine.front() - right_base_].time < from)) {
        mine.pop_front();
      }
      for (uint64_t seq : mine) {
        const Right& r = rights_[seq - right_base_];
        if (r.time > to) break;
        out_.push_back({ref, r.ref, t, t});
        matched = true;
      }
    }
    if (hi_ >= 0) {
      if (key) by_key(left_by_key_, *key).push_back(left_base_ + lefts_.size());
      if (key || how_ == JoinHow::kLeft) {
        lefts_.push_back({t, ref, matched});
        left_store_.hold(ref.batch);
      }
    } else if (how_ == JoinHow::kLeft && !matched) {
      out_.push_back({ref, std::nullopt, t, t});
    }
  }

  // A right tuple: pairs with the earlier left tuples of its key (left time in [t - hi, t - lo],
  // at most t), in left order; kept while later left tuples may match (lo < 0).
  void take_right(int64_t t, std::optional<uint32_t> key, Ref ref) {
    if (!key) return;
    std::deque<uint64_t>& mine = by_key(left_by_key_, *key);
    const int64_t from = add_clamped(t, -hi_), to = add_clamped(t, -lo_);
    while (!mine.empty() && (mine.front() < left_base_ || lefts_[mine.front() - left_base_].time < from)) {
      mine.pop_front();
    }
    for (uint64_t seq : mine) {
      Left& l = lefts_[seq - left_base_];
      if (l.time > to) break;
      out_.push_back({l.ref, ref, t, l.time});
      l.matched = true;
    }
    if (lo_ < 0) {
      by_key(right_by_key_, *key).push_back(right_base_ + rights_.size());
      rights_.push_back({t, ref});
      right_store_.hold(ref.batch);
    }
  }

  // Everything still to come has time >= `now`: left tuples whose last chance (time + hi) is
  // before it leave the state (unmatched ones are emitted with how = left, in left order), and
  // right tuples whose last chance (time - lo) is before it.
  void expire(int64_t now) {
    while (!lefts_.empty() && add_clamped(lefts_.front().time, hi_) < now) {
      const Left& l = lefts_.front();
      if (!l.matched && how_ == JoinHow::kLeft) out_.push_back({l.ref, std::nullopt, add_clamped(l.time, std::max<int64_t>(hi_, 0)), l.time});
      left_store_.release(l.ref.batch);
      lefts_.pop_front();
      ++left_base_;
    }
    while (!rights_.empty() && add_clamped(rights_.front().time, -lo_) < now) {
      right_store_.release(rights_.front().ref.batch);
      rights_.pop_front();
      ++right_base_;
    }
  }

  // Checkpoints: the merged streams; the left rows kept (their rows, then time and matched); the
  // right rows kept (key, time, payload). Each side's keys come from its by-key lists (a left
  // row without a key, kept for a left join, is in none). out_ is empty between calls.
 public:
  bool saves_state() const override { return true; }
  std::vector<Batch> save_state() override {
    std::vector<Batch> out = save_merged();
    RowSources left_rows;
    std::vector<ColumnBuilder> info = builders_of({DataType{}, DataType{}});
    for (const Left& l : lefts_) {
      left_rows.row(l.ref.batch, l.ref.row, left_store_);
      info[0].append_fixed(&l.time);
      const int64_t matched = l.matched ? 1 : 0;
      info[1].append_fixed(&matched);
    }
    out.push_back(left_rows.batch(left_));
    auto info_schema = std::make_shared<const Schema>(Schema{{{"time", DataType{}, false}, {"matched", DataType{}, false}}});
    out.push_back(built_batch(info_schema, static_cast<int64_t>(lefts_.size()), info));
    std::vector<uint32_t> key_of(rights_.size(), JoinKeys::kNoKey);
    for (uint32_t key = 0; key < right_by_key_.size(); ++key) {
      for (uint64_t seq : right_by_key_[key]) {
        if (seq >= right_base_ && seq - right_base_ < rights_.size()) key_of[seq - right_base_] = key;
      }
    }
    std::vector<uint32_t> keys;
    std::vector<int64_t> times;
    std::vector<Ref> refs;
    for (size_t i = 0; i < rights_.size(); ++i) {
      keys.push_back(key_of[i]);  // every kept right row has a key (take_right)
      times.push_back(rights_[i].time);
      refs.push_back(rights_[i].ref);
    }
    for (Batch& b : save_keyed_rights(keys, times, refs)) out.push_back(std::move(b));
    return out;
  }
  void load_state(const std::vector<Batch>& state) override {
    if (state.size() != kMergedBatches + 4 || state[kMergedBatches].num_rows() != state[kMergedBatches + 1].num_rows()) {
      throw Error(ErrorKind::kInvalidInput, "join: a checkpoint's state does not fit");
    }
    // Kept rows first (the store lets go of its oldest batches first), in their order.
    const Batch& kept = state[kMergedBatches];
    const uint64_t tag = left_store_.add(kept);
    const Batch keys = keys_.view(0, kept);
    const int64_t* times = state[kMergedBatches + 1].column(0).typed<int64_t>();
    const int64_t* matched = state[kMergedBatches + 1].column(1).typed<int64_t>();
    for (int64_t r = 0; r < kept.num_rows(); ++r) {
      if (const std::optional<uint32_t> key = keys_.id(keys, r)) {
        by_key(left_by_key_, *key).push_back(left_base_ + lefts_.size());
      }
      lefts_.push_back({times[r], Ref{tag, r}, matched[r] != 0});
      left_store_.hold(tag);
    }
    left_store_.release(tag);
    load_keyed_rights(state[kMergedBatches + 2], state[kMergedBatches + 3], [this](uint32_t key, int64_t time, Ref ref) {
      by_key(right_by_key_, key).push_back(right_base_ + rights_.size());
      rights_.push_back({time, ref});
    });
    load_merged(state);
  }

 private:
  static std::deque<uint64_t>& by_key(std::vector<std::deque<uint64_t>>& table, uint32_t key) {
    if (key >= table.size()) table.resize(static_cast<size_t>(key) + 1);
    return table[key];
  }

  Batch emit() {
    if (out_.empty()) return empty_batch(output_);
    std::vector<std::optional<Ref>> lefts, rights;
    lefts.reserve(out_.size());
    rights.reserve(out_.size());
    std::vector<ColumnBuilder> built = builders_of({left_->fields[time_].type, left_->fields[time_].type});
    built[0].reserve(static_cast<int64_t>(out_.size()));
    built[1].reserve(static_cast<int64_t>(out_.size()));
    for (const Out& o : out_) {
      lefts.push_back(o.left);
      rights.push_back(o.right);
      built[0].append_fixed(&o.time);  // little-endian: an int32 column takes the low bytes
      built[1].append_fixed(&o.left_time);
    }
    out_.clear();
    const Batch l = gather_refs(left_, left_store_, lefts, Batch());
    const Batch r = gather_refs(right_columns_.payload, right_store_, rights, null_right_);
    return combine(output_, l, time_, r, built);
  }

  std::vector<std::string> on_;
  int64_t lo_, hi_;
  JoinHow how_;
  size_t time_ = 0;
  std::deque<Left> lefts_;
  uint64_t left_base_ = 0;  // sequence number of lefts_[0]
  std::deque<Right> rights_;
  uint64_t right_base_ = 0;
  // Per key id, the sequence numbers of its kept tuples, in order (entries below the base are gone).
  std::vector<std::deque<uint64_t>> left_by_key_, right_by_key_;
  std::vector<Out> out_;
};

// ---- as-of join --------------------------------------------------------------------------------

class AsofJoin final : public StreamJoin {
 public:
  // Ties: a right tuple of the left tuple's time is taken first (equal times count), so the right
  // port ranks first.
  AsofJoin(std::shared_ptr<const Schema> left, std::shared_ptr<const Schema> right, const std::string& time,
           std::vector<std::string> by, std::optional<int64_t> tolerance)
      : StreamJoin(std::move(left), std::move(right), time, by, "join_asof", {1, 0}), tolerance_(tolerance) {
    if (tolerance_ && *tolerance_ < 0) {
      throw Error(ErrorKind::kInvalidInput, "join_asof's tolerance must be >= 0, got " + std::to_string(*tolerance_));
    }
    output_ = join_schema(*left_, *right_, keys_.columns(1), true, {}, "join_asof", right_columns_);
    set_null_right();
  }

  std::string name() const override { return "join_asof"; }
  std::string describe() const override {
    std::string d = "each row with the latest right row of its key at or before its time";
    if (tolerance_) d += ", at most " + std::to_string(*tolerance_) + " earlier";
    return d;
  }
  Selectivity selectivity() const override { return Selectivity::kExactlyOne; }

  // Column-wise: each run's keys are looked up at once, and a left row's latest right tuple is
  // requested from memory a few rows ahead (100,000 keys' entries are megabytes: a miss per row
  // otherwise, most of the join's time). The left rows leave as slices of their batches (a run
  // is consecutive rows of one batch); only the right columns are gathered.
  Batch push(size_t port, const Batch& in, int64_t bound) override {
    accept(port, in, bound);
    RowSources lefts, rights;
    while (std::optional<MergedPorts::Run> run = merged_.next()) {
      const Batch keys = keys_.view(run->port, *run->batch);
      keys_.ids(keys, run->start, run->length, rows_, ids_);
      if (run->port == 1) {
        for (int64_t i = 0; i < run->length; ++i) {
          const uint32_t key = ids_[static_cast<size_t>(i)];
          if (key == JoinKeys::kNoKey) continue;
          if (key >= latest_.size()) latest_.resize(static_cast<size_t>(key) + 1);
          Latest& slot = latest_[key];
          if (slot.batch != kNone) right_store_.release(slot.batch);
          slot = Latest{run->times[i], run->tag, run->start + i};
          right_store_.hold(run->tag);
        }
        taken(*run);
        continue;
      }
      lefts.rows(run->tag, run->start, run->length, left_store_);
      const size_t n = static_cast<size_t>(run->length);
      for (size_t i = 0; i < n; ++i) {
        if (i + KeyTable::kPrefetchAhead < n) {
          const uint32_t ahead = ids_[i + KeyTable::kPrefetchAhead];
          if (ahead < latest_.size()) pao::prefetch(&latest_[ahead]);
        }
        const uint32_t key = ids_[i];
        const Latest* r = key < latest_.size() && latest_[key].batch != kNone ? &latest_[key] : nullptr;
        if (r && tolerance_ && run->times[i] - r->time > *tolerance_) r = nullptr;
        if (r) {
          rights.row(r->batch, r->row, right_store_);
        } else {
          rights.null(null_right_);
        }
      }
      taken(*run);
    }
    Batch out = empty_batch(output_);
    if (!lefts.segments.empty()) {
      std::vector<ColumnBuilder> none;
      out = combine(output_, lefts.batch(left_), std::nullopt, rights.batch(right_columns_.payload), none);
    }
    return trimmed(std::move(out));
  }

  // Checkpoints: the merged streams, then each key's latest right row (key, time, payload).
  bool saves_state() const override { return true; }
  std::vector<Batch> save_state() override {
    std::vector<uint32_t> keys;
    std::vector<int64_t> times;
    std::vector<Ref> refs;
    for (uint32_t key = 0; key < latest_.size(); ++key) {
      if (latest_[key].batch == kNone) continue;
      keys.push_back(key);
      times.push_back(latest_[key].time);
      refs.push_back({latest_[key].batch, latest_[key].row});
    }
    std::vector<Batch> out = save_merged();
    for (Batch& b : save_keyed_rights(keys, times, refs)) out.push_back(std::move(b));
    return out;
  }
  void load_state(const std::vector<Batch>& state) override {
    if (state.size() != kMergedBatches + 2) throw Error(ErrorKind::kInvalidInput, "join_asof: a checkpoint's state does not fit");
    // The latest rows first: the store lets go of its oldest batches first, and these stay longest.
    load_keyed_rights(state[kMergedBatches], state[kMergedBatches + 1], [this](uint32_t key, int64_t time, Ref ref) {
      if (key >= latest_.size()) latest_.resize(static_cast<size_t>(key) + 1);
      latest_[key] = Latest{time, ref.batch, ref.row};
    });
    load_merged(state);
  }

 private:
  static constexpr uint64_t kNone = UINT64_MAX;
  // A key's latest right tuple: its time and row of right_store_ batch `batch` (kNone: none yet).
  struct Latest {
    int64_t time = 0;
    uint64_t batch = kNone;
    int64_t row = 0;
  };
  std::optional<int64_t> tolerance_;
  std::vector<Latest> latest_;  // by key id: the latest right tuple
  std::vector<int64_t> rows_;   // scratch of push()
  std::vector<uint32_t> ids_;
};

// ---- lookup join -------------------------------------------------------------------------------

class LookupJoin final : public Operator {
 public:
  LookupJoin(std::shared_ptr<const Schema> left, std::shared_ptr<const Schema> right, std::vector<Batch> table,
             std::vector<std::string> by)
      : left_(std::move(left)), right_(std::move(right)), by_(std::move(by)), keys_(*left_, *right_, by_, "join_asof") {
    output_ = join_schema(*left_, *right_, keys_.columns(1), true, {}, "join_asof", right_columns_);
    null_right_ = null_row(right_columns_.payload);
    for (const Batch& b : table) {
      if (auto diff = schema_difference(*right_, *b.schema())) {
        throw Error(ErrorKind::kSchemaMismatch, "join_asof's right table changes schema: " + *diff);
      }
      const uint64_t id = store_.add(project(b, right_columns_.columns, right_columns_.payload));
      const Batch keys = keys_.view(1, b);
      for (int64_t r = 0; r < b.num_rows(); ++r) {
        const std::optional<uint32_t> key = keys_.id(keys, r);
        if (!key) continue;
        if (*key >= row_of_.size()) row_of_.resize(static_cast<size_t>(*key) + 1);
        row_of_[*key] = Ref{id, r};  // the last row of a key wins
      }
    }
  }

  std::string name() const override { return "join_asof"; }
  std::string describe() const override { return "each row with the right table's last row of its key"; }
  OpKind kind() const override { return OpKind::kStateless; }
  Selectivity selectivity() const override { return Selectivity::kExactlyOne; }
  bool preserves_time(const std::string&) const override { return true; }
  bool passes_through(const std::string& column) const override { return left_->find(column).has_value(); }
  bool may_fail() const override { return false; }
  const std::shared_ptr<const Schema>& input_schema() const override { return left_; }
  const std::shared_ptr<const Schema>& output_schema() const override { return output_; }

  // Thread-safe: reads only the table and the key ids built with it (KeyTable::find).
  Batch process(const Batch& in) override {
    const Batch keys = keys_.view(0, in);
    std::vector<std::optional<Ref>> rights;
    rights.reserve(static_cast<size_t>(in.num_rows()));
    for (int64_t r = 0; r < in.num_rows(); ++r) {
      const std::optional<uint32_t> key = keys_.find(keys, r);
      rights.push_back(key && *key < row_of_.size() ? row_of_[*key] : std::nullopt);
    }
    std::vector<ColumnBuilder> none;
    return combine(output_, in, std::nullopt, gather_refs(right_columns_.payload, store_, rights, null_right_), none);
  }

 private:
  std::shared_ptr<const Schema> left_, right_, output_;
  std::vector<std::string> by_;
  JoinKeys keys_;
  RightColumns right_columns_;
  Batch null_right_;
  BatchStore store_;
  std::vector<std::optional<Ref>> row_of_;
};

}  // namespace

std::shared_ptr<MultiInputOperator> make_interval_join(std::shared_ptr<const Schema> left,
                                                       std::shared_ptr<const Schema> right, const std::string& time,
                                                       std::vector<std::string> on, int64_t lo, int64_t hi,
                                                       JoinHow how) {
  return std::make_shared<IntervalJoin>(std::move(left), std::move(right), time, std::move(on), lo, hi, how);
}

std::shared_ptr<MultiInputOperator> make_asof_join(std::shared_ptr<const Schema> left,
                                                   std::shared_ptr<const Schema> right, const std::string& time,
                                                   std::vector<std::string> by, std::optional<int64_t> tolerance) {
  return std::make_shared<AsofJoin>(std::move(left), std::move(right), time, std::move(by), tolerance);
}

OperatorPtr make_lookup_join(std::shared_ptr<const Schema> left, std::shared_ptr<const Schema> right,
                             std::vector<Batch> table, const std::string& time, std::vector<std::string> by) {
  (void)time;  // a static table has no order to merge with; its time column, if any, is a column
  return std::make_shared<LookupJoin>(std::move(left), std::move(right), std::move(table), std::move(by));
}

}  // namespace pao::ops
