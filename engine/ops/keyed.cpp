#include "ops/keyed.h"

#include <algorithm>
#include <bit>
#include <unordered_set>

#include "ops/partitioned.h"
#include "core/key_table.h"
#include "core/prefetch.h"
#include "core/values.h"

namespace pao::ops {
namespace {

DataType of(TypeId id) {
  DataType t;
  t.id = id;
  return t;
}

// The key ids of rows `rows` into `ids`: looked up in `keys`, or in a keyed fused chain
// (ops/fused.h) the ids the operator before gave the same rows (`given`, whose ids are this
// table's too: `keys` borrows the new keys from the table that gave them, KeyTable::lend).
void key_ids(KeyTable& keys, const Batch& in, std::span<const int64_t> rows, const Operator::KeyedRows* given,
             std::vector<uint32_t>& ids) {
  if (given != nullptr && given->keys != nullptr && given->ids.size() == rows.size()) {
    keys.lend(*given->keys);
    ids.assign(given->ids.begin(), given->ids.end());
    return;
  }
  keys.ids(in, rows, ids);
}

// A partition's key table and one `State` per key id.
template <class State>
struct KeyedPart {
  KeyTable keys;
  std::vector<State> states;

  std::vector<uint32_t> ids;  // lookup()'s result

  KeyedPart(const Schema& schema, const std::vector<size_t>& key_columns) : keys(schema, key_columns) {}
  // The state of row `row`'s key, a fresh one for a new key.
  State& of(const Batch& in, int64_t row) {
    const uint32_t id = keys.id(in, row);
    if (id >= states.size()) states.resize(static_cast<size_t>(id) + 1);  // amortized: resize grows geometrically
    return states[id];
  }
  // The key ids of rows `rows` into `ids` (key_ids), each with a state (fresh for a new key).
  void lookup(const Batch& in, std::span<const int64_t> rows, const Operator::KeyedRows* given = nullptr) {
    key_ids(keys, in, rows, given, ids);
    if (keys.size() > states.size()) states.resize(keys.size());
  }
  // The state of key `id`, which the key table gave just now (a checkpoint's load).
  State& loaded(uint32_t id) {
    if (id >= states.size()) states.resize(static_cast<size_t>(id) + 1);
    return states[id];
  }
  // Requests the state of the row KeyTable::kPrefetchAhead places after row i from memory.
  void prefetch(size_t i) const {
    if (i + KeyTable::kPrefetchAhead < ids.size()) pao::prefetch(&states[ids[i + KeyTable::kPrefetchAhead]]);
  }
};

// Where a key stands in its run of sessions (sessionize, pairs): a new session starts when a
// tuple comes more than `gap` after the key's previous one.
struct Session {
  int64_t last = 0;
  int64_t number = -1;  // -1 before the key's first tuple

  // Moves to a tuple at time t; true when it opens a session. The difference is taken in 128
  // bits so that times far apart (or out of order) cannot overflow.
  bool advance(int64_t t, int64_t gap) {
    const bool opens = number < 0 || __int128{t} - last > gap;
    number += opens;
    last = t;
    return opens;
  }
};

// The time column of an operator that reads it only to check the order: none when `time` is
// empty or not in the schema.
std::optional<TimeColumn> order_time(const Schema& schema, const std::string& time, const std::string& op) {
  if (time.empty() || !schema.find(time)) return std::nullopt;
  return find_time(schema, time, op);
}

void check_gap(int64_t gap, const std::string& op) {
  if (gap < 0) {
    throw Error(ErrorKind::kInvalidInput, op + ": gap must be at least 0 (in the time column's unit), got " +
                                              std::to_string(gap));
  }
}

// --- sessionize -------------------------------------------------------------------------------

// Sessionize's part: per key its Session, and per row of the last call whether it opened one
// (keyed_rows(): the epoch of a running fused after it).
struct SessionPart : KeyedPart<Session> {
  std::vector<uint8_t> opens;
  using KeyedPart<Session>::KeyedPart;
};

class Sessionize final : public AppendingOperator<SessionPart> {
 public:
  Sessionize(std::shared_ptr<const Schema> input, std::vector<std::string> keys, std::string time, int64_t gap,
             std::string name)
      : AppendingOperator(input, find_keys(*input, keys, "sessionize")),
        key_names_(std::move(keys)),
        time_(find_time(*input_, time, "sessionize")),
        gap_(gap),
        column_(std::move(name)) {
    check_gap(gap_, "sessionize");
    append_fields({{column_, of(TypeId::kInt64), false}}, "sessionize", "pass another name");
    set_partitions(1);
  }

  std::string name() const override { return "sessionize"; }
  // A key's session numbers count up from 0: one left never comes back.
  std::optional<std::string> epoch_column() const override { return column_; }
  std::string describe() const override {
    return "'" + column_ + "' = session number per key " + quoted_list(key_names_) + ", a new session after a gap > " +
           std::to_string(gap_) + " in '" + time_.name + "'";
  }

  Batch process_appended(const Batch& in, std::span<const int64_t> rows, size_t partition) override {
    return sessions(in, rows, partition, nullptr);
  }
  Batch process_appended_given(const Batch& in, std::span<const int64_t> rows, size_t partition,
                               const KeyedRows& given) override {
    return sessions(in, rows, partition, &given);
  }
  Batch sessions(const Batch& in, std::span<const int64_t> rows, size_t partition, const KeyedRows* given) {
    auto& part = this->part(partition, in);
    std::vector<ColumnBuilder> added = builders_of({of(TypeId::kInt64)});
    auto* out = reinterpret_cast<int64_t*>(added[0].append_fixed_n(static_cast<int64_t>(rows.size())));
    part.lookup(in, rows, given);
    part.opens.resize(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      const int64_t r = rows[i];
      part.prefetch(i);
      Session& s = part.states[part.ids[i]];
      const int64_t t = time_.at(in, r);
      if (s.number >= 0 && t < s.last) time_.went_back(r, t, s.last);
      part.opens[i] = s.advance(t, gap_);
      out[i] = s.number;
    }
    return appended(rows, added);
  }
  // The key ids, and the rows that opened a session: the session number changed there, or the
  // key starts.
  KeyedRows keyed_rows(size_t partition) const override {
    const SessionPart& part = *this->parts()[partition];
    return {part.ids, part.opens, &part.keys};
  }

 private:
  std::unique_ptr<SessionPart> new_part() const override { return std::make_unique<SessionPart>(*input_, keys_); }
  bool saves_key_state() const override { return true; }
  std::string save_key(const SessionPart& part, uint32_t id) const override {
    StateWriter w;
    w.put(part.states[id].last);
    w.put(part.states[id].number);
    return std::move(w.out);
  }
  void load_key(SessionPart& part, uint32_t id, StateReader& in) const override {
    Session& s = part.loaded(id);
    s.last = in.get();
    s.number = in.get();
  }

  std::vector<std::string> key_names_;
  TimeColumn time_;
  int64_t gap_;
  std::string column_;
};

// --- lag and delta ----------------------------------------------------------------------------

// One column's value in a key's previous tuple; not valid before the key's first tuple.
struct Previous {
  bool valid = false;
  uint64_t bits = 0;  // lag: the raw value (raw_bits); delta: int64 or uint64 as two's complement, or double bits
  std::string text;   // lag of a string column
};

// A partition's key table and each key's previous values (flat: key id * columns + column).
struct PreviousPart {
  KeyTable keys;
  std::vector<Previous> previous;
  KeyTimes times;
  std::vector<uint32_t> ids;  // KeyTable::ids of the rows at hand

  PreviousPart(const Schema& schema, const std::vector<size_t>& key_columns) : keys(schema, key_columns) {}
};

// lag and delta: both remember each column's value in the key's previous tuple and differ only in
// what they make of it.
class LagDelta final : public AppendingOperator<PreviousPart> {
 public:
  enum class Mode : uint8_t { kLag, kDelta };

  LagDelta(Mode mode, std::shared_ptr<const Schema> input, std::vector<std::string> keys,
           std::optional<std::string> time, std::vector<std::string> columns, const std::string& suffix)
      : AppendingOperator(input, find_keys(*input, keys, mode == Mode::kLag ? "lag" : "delta")),
        mode_(mode),
        key_names_(std::move(keys)),
        names_(std::move(columns)) {
    const std::string op = name();
    if (time) time_ = order_time(*input_, *time, op);
    if (mode_ == Mode::kDelta && time && !time_) find_time(*input_, *time, op);  // delta needs it: name it missing
    if (time_ && mode_ == Mode::kDelta && names_.empty()) names_.push_back(time_->name);
    if (names_.empty()) throw Error(ErrorKind::kInvalidInput, op + ": needs at least one column");
    std::vector<Field> added;
    for (const std::string& n : names_) {
      const size_t c = find_column(*input_, n, op, "column");
      const DataType& type = input_->fields[c].type;
      columns_.push_back(c);
      if (mode_ == Mode::kLag) {
        added.push_back({n + suffix, type, true});
        continue;
      }
      if (type.id == TypeId::kFloat32 || type.id == TypeId::kFloat64) {
        added.push_back({n + suffix, of(TypeId::kFloat64), true});
      } else if (is_signed_storage(type.id) || is_unsigned_integer(type.id)) {
        added.push_back({n + suffix, of(TypeId::kInt64), true});
      } else {
        throw Error(ErrorKind::kUnsupportedType, "delta: column '" + n + "' has type " + type.to_string() +
                                                     "; delta needs a numeric, date or timestamp column");
      }
    }
    append_fields(added, op, "pass another suffix");
    set_partitions(1);
  }

  std::string name() const override { return mode_ == Mode::kLag ? "lag" : "delta"; }
  std::string describe() const override {
    return std::string(mode_ == Mode::kLag ? "previous value" : "difference from the previous value") + " of " +
           quoted_list(names_) + " per key " + quoted_list(key_names_);
  }

  Batch process_appended(const Batch& in, std::span<const int64_t> rows, size_t partition) override {
    return previous(in, rows, partition, nullptr);
  }
  Batch process_appended_given(const Batch& in, std::span<const int64_t> rows, size_t partition,
                               const KeyedRows& given) override {
    return previous(in, rows, partition, &given);
  }
  KeyedRows keyed_rows(size_t partition) const override {
    return {this->parts()[partition]->ids, {}, &this->parts()[partition]->keys};
  }

  Batch previous(const Batch& in, std::span<const int64_t> rows, size_t partition, const KeyedRows* given) {
    PreviousPart& part = this->part(partition, in);
    const size_t n = columns_.size();
    std::vector<ColumnBuilder> added;
    for (size_t j = 0; j < n; ++j) added.emplace_back(output_->fields[input_->fields.size() + j].type);
    key_ids(part.keys, in, rows, given, part.ids);
    if (part.keys.size() * n > part.previous.size()) part.previous.resize(part.keys.size() * n);  // new keys: none valid
    for (size_t i = 0; i < rows.size(); ++i) {
      const int64_t r = rows[i];
      const uint32_t key = part.ids[i];
      if (const size_t ahead = i + KeyTable::kPrefetchAhead; ahead < rows.size())
        pao::prefetch(&part.previous[static_cast<size_t>(part.ids[ahead]) * n]);
      if (time_) part.times.check(key, *time_, in, r);
      Previous* previous = &part.previous[static_cast<size_t>(key) * n];
      for (size_t j = 0; j < n; ++j) {
        const Column& c = in.column(columns_[j]);
        const DataType& type = input_->fields[columns_[j]].type;
        Previous& p = previous[j];
        const bool valid = c.is_valid(r);
        if (mode_ == Mode::kLag) {
          emit_lag(p, type, added[j]);
          p.valid = valid;
          if (!valid) continue;
          if (is_string(type.id)) {
            p.text.assign(string_at(c, type, r));
          } else {
            p.bits = raw_bits(c, type, r);
          }
        } else {
          const uint64_t now = valid ? delta_value(c, type, r) : 0;
          emit_delta(!p.valid || !valid, now, p.bits, type, added[j]);
          p.valid = valid;
          p.bits = now;
        }
      }
    }
    return appended(rows, added);
  }

 private:
  std::unique_ptr<PreviousPart> new_part() const override { return std::make_unique<PreviousPart>(*input_, keys_); }
  bool saves_key_state() const override { return true; }
  // The key's latest time, then per column: valid, and the value's bits or text.
  std::string save_key(const PreviousPart& part, uint32_t id) const override {
    StateWriter w;
    w.put(part.times.of(id));
    const size_t n = columns_.size();
    for (size_t j = 0; j < n; ++j) {
      const size_t at = static_cast<size_t>(id) * n + j;
      const Previous p = at < part.previous.size() ? part.previous[at] : Previous{};
      w.put(p.valid);
      w.put_u(p.bits);
      w.put_text(p.text);
    }
    return std::move(w.out);
  }
  void load_key(PreviousPart& part, uint32_t id, StateReader& in) const override {
    const int64_t t = in.get();
    if (t != INT64_MIN) part.times.set(id, t);
    const size_t n = columns_.size();
    if ((static_cast<size_t>(id) + 1) * n > part.previous.size()) part.previous.resize((static_cast<size_t>(id) + 1) * n);
    for (size_t j = 0; j < n; ++j) {
      Previous& p = part.previous[static_cast<size_t>(id) * n + j];
      p.valid = in.get() != 0;
      p.bits = in.get_u();
      p.text.assign(in.get_text());
    }
  }

  static void emit_lag(const Previous& p, const DataType& type, ColumnBuilder& out) {
    if (!p.valid) {
      out.append_null();
    } else if (is_string(type.id)) {
      out.append_string(p.text);
    } else if (type.layout() == Layout::kBits) {
      out.append_bool(p.bits != 0);
    } else {
      out.append_fixed(&p.bits);  // the low byte_width() bytes: the value itself
    }
  }

  // The value delta subtracts: integers as int64 (sign-extended) or uint64, both kept as uint64 so
  // one wrapping subtraction serves both; floats as the bits of a double.
  static uint64_t delta_value(const Column& c, const DataType& type, int64_t row) {
    switch (type.id) {
      case TypeId::kFloat32: return std::bit_cast<uint64_t>(static_cast<double>(std::bit_cast<float>(
          static_cast<uint32_t>(raw_bits(c, type, row)))));
      case TypeId::kFloat64: return raw_bits(c, type, row);
      default: return is_signed_storage(type.id) ? static_cast<uint64_t>(signed_at(c, type, row)) : raw_bits(c, type, row);
    }
  }

  static void emit_delta(bool null, uint64_t now, uint64_t before, const DataType& type, ColumnBuilder& out) {
    if (null) {
      out.append_null();
    } else if (type.id == TypeId::kFloat32 || type.id == TypeId::kFloat64) {
      const double d = std::bit_cast<double>(now) - std::bit_cast<double>(before);
      out.append_fixed(&d);
    } else {
      const uint64_t d = now - before;  // modulo 2^64: read as int64, exact when the difference fits
      out.append_fixed(&d);
    }
  }

  Mode mode_;
  std::vector<std::string> key_names_;
  std::optional<TimeColumn> time_;
  std::vector<std::string> names_;
  std::vector<size_t> columns_;
};

// --- running ----------------------------------------------------------------------------------

// A key's current epoch (running keyed by epoch): `seen` false before its first tuple.
struct KeyEpoch {
  int64_t value = 0;
  bool seen = false;
};

// A partition's key table and one window::AggStates per aggregate, with one slot per key id.
struct RunningPart {
  KeyTable keys;
  std::vector<window::AggStates> aggs;
  KeyTimes times;
  std::vector<uint32_t> ids;  // KeyTable::ids of the rows at hand
  std::vector<KeyEpoch> epochs;     // by key id, when keyed by epoch
  std::vector<uint8_t> restarts;    // per row at hand: its key's state restarts there

  RunningPart(const Schema& schema, const std::vector<size_t>& key_columns, const std::vector<window::AggStates>& prototypes)
      : keys(schema, key_columns), aggs(prototypes) {}
};

// Running aggregates reuse aggregate()'s states: a key's slot is the state of one window that
// never closes, all of its tuples in one slice, emitted after every tuple.
//
// Keyed by epoch (keyed_by_epoch: running over keys + [epoch] where epoch numbers each key's
// runs, as sessionize's session does): the table holds the keys alone, and a key's slot restarts
// when its epoch changes, since the state of a (key, epoch) it left is never updated again. The
// output is that of running over keys + [epoch]; the state is one slot per key, not one per key
// and session (sessions never end otherwise: a run of days would keep every session it saw).
class Running final : public AppendingOperator<RunningPart> {
 public:
  Running(std::shared_ptr<const Schema> input, std::vector<std::string> keys, std::vector<window::AggSpec> aggs,
          const std::string& time, std::string epoch = "")
      : AppendingOperator(input, find_keys(*input, keys, "running")),
        key_names_(std::move(keys)),
        specs_(std::move(aggs)),
        time_(order_time(*input_, time, "running")),
        epoch_name_(std::move(epoch)) {
    if (specs_.empty()) throw Error(ErrorKind::kInvalidInput, "running: needs at least one aggregate");
    if (!epoch_name_.empty()) {
      const std::optional<size_t> e = input_->find(epoch_name_);
      if (!e || input_->fields[*e].type.id != TypeId::kInt64) {
        throw Error(ErrorKind::kUsage, "running: the epoch '" + epoch_name_ + "' is no int64 column");
      }
      epoch_ = *e;
    }
    std::vector<Field> added;
    for (const window::AggSpec& spec : specs_) {
      prototypes_.emplace_back(spec, *input_);
      added.push_back({spec.name, prototypes_.back().output_type(), true});
    }
    append_fields(added, "running", "rename the aggregate");
    set_partitions(1);
  }

  std::string name() const override { return "running"; }
  std::string describe() const override {
    std::string aggs;
    for (const window::AggSpec& s : specs_) {
      aggs += (aggs.empty() ? "" : ", ") + s.name + " = " + window::agg_name(s.kind) + "(" + s.column + ")";
    }
    if (epoch_) return aggs + " per key " + quoted_list(key_names_) + " since its '" + epoch_name_ + "' last changed";
    return aggs + " per key " + quoted_list(key_names_) + " so far";
  }

  std::shared_ptr<Operator> keyed_by_epoch(const std::vector<std::string>& keys,
                                           const std::string& epoch) const override {
    if (epoch_ || std::find(keys.begin(), keys.end(), epoch) != keys.end()) return nullptr;
    std::vector<std::string> want = keys;
    want.push_back(epoch);
    std::vector<std::string> have = key_names_;
    std::sort(want.begin(), want.end());
    std::sort(have.begin(), have.end());
    if (want != have) return nullptr;
    const std::optional<size_t> e = input_->find(epoch);
    if (!e || input_->fields[*e].type.id != TypeId::kInt64 || input_->fields[*e].nullable) return nullptr;
    // No order check of its own: the epoch's operator checks each key's times already
    // (Operator::epoch_column), and would have named the row first.
    return std::make_shared<Running>(input_, keys, specs_, "", epoch);
  }

  Batch process_appended(const Batch& in, std::span<const int64_t> rows, size_t partition) override {
    return totals(in, rows, partition, nullptr);
  }
  // In a keyed fused chain (ops/fused.h) the operator before's key ids stand for this one's
  // lookups, and when it is the operator whose epoch keys this one (sessionize), its new-epoch
  // rows stand for the epoch comparisons: they are the rows whose epoch differs from the key's
  // previous row's, where mark_restarts() would restart, and each key's first, where restarting
  // the fresh slot changes nothing. The keys' epochs (`epochs`) are then not kept, since every
  // restart comes from the operator before (a store per row, a cache line of its own: running
  // took 51.8-54.5 ns per tuple with it, 46.4-48.3 without, on the sessions pipeline at 2
  // workers). A checkpoint of the chain restores into the same chain (the runtime checks the
  // stages' names), where they stay unread.
  Batch process_appended_given(const Batch& in, std::span<const int64_t> rows, size_t partition,
                               const KeyedRows& given) override {
    return totals(in, rows, partition, &given);
  }
  Batch totals(const Batch& in, std::span<const int64_t> rows, size_t partition, const KeyedRows* given) {
    RunningPart& part = this->part(partition, in);
    key_ids(part.keys, in, rows, given, part.ids);
    if (time_) {
      for (size_t i = 0; i < rows.size(); ++i) part.times.check(part.ids[i], *time_, in, rows[i]);
    }
    if (!epoch_) return aggregate(part, in, rows, nullptr);
    if (given != nullptr && given->ids.size() == rows.size() && given->new_epoch.size() == rows.size()) {
      return aggregate(part, in, rows, given->new_epoch.data());
    }
    mark_restarts(part, in, rows);
    return aggregate(part, in, rows, part.restarts.data());
  }
  KeyedRows keyed_rows(size_t partition) const override {
    return {this->parts()[partition]->ids, {}, &this->parts()[partition]->keys};
  }

 private:
  // The aggregates' columns for the rows whose key ids are in part.ids, restarting each key's
  // slots where `restarts` (per row; null: nowhere) says.
  Batch aggregate(RunningPart& part, const Batch& in, std::span<const int64_t> rows, const uint8_t* restarts) {
    std::vector<ColumnBuilder> added;
    for (const window::AggStates& a : prototypes_) added.emplace_back(a.output_type());
    const size_t keys = part.keys.size();
    // Aggregate by aggregate over the rows (the rows of one key stay in order, which is all a
    // running state needs): one column read and one state vector at a time.
    for (size_t j = 0; j < part.aggs.size(); ++j) {
      window::AggStates& a = part.aggs[j];
      if (keys > a.size()) a.resize(keys);  // amortized: resize grows the capacity geometrically
      a.run_indexed(part.ids.data(), in, rows.data(), restarts, rows.size(), added[j]);
    }
    return appended(rows, added);
  }

  std::unique_ptr<RunningPart> new_part() const override {
    return std::make_unique<RunningPart>(*input_, keys_, prototypes_);
  }
  bool saves_key_state() const override { return true; }
  // The key's latest time, its epoch (seen, value), then each aggregate's state (AggStates::save).
  std::string save_key(const RunningPart& part, uint32_t id) const override {
    StateWriter w;
    w.put(part.times.of(id));
    const KeyEpoch e = id < part.epochs.size() ? part.epochs[id] : KeyEpoch{};
    w.put(e.seen);
    w.put(e.value);
    for (const window::AggStates& a : part.aggs) w.put_text(a.save(id));
    return std::move(w.out);
  }
  void load_key(RunningPart& part, uint32_t id, StateReader& in) const override {
    const int64_t t = in.get();
    if (t != INT64_MIN) part.times.set(id, t);
    if (id >= part.epochs.size()) part.epochs.resize(static_cast<size_t>(id) + 1);
    part.epochs[id].seen = in.get() != 0;
    part.epochs[id].value = in.get();
    for (window::AggStates& a : part.aggs) {
      if (id >= a.size()) a.resize(static_cast<size_t>(id) + 1);
      if (!a.load(id, in.get_text())) in.bad();
    }
  }

  // Which rows restart their key's state (keyed by epoch): those whose epoch differs from the
  // key's previous tuple's. In row order, before the aggregates' passes, which then only read it.
  void mark_restarts(RunningPart& part, const Batch& in, std::span<const int64_t> rows) const {
    const Column& c = in.column(*epoch_);
    const DataType& type = input_->fields[*epoch_].type;
    if (part.epochs.size() < part.keys.size()) part.epochs.resize(part.keys.size());
    part.restarts.resize(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      if (i + KeyTable::kPrefetchAhead < rows.size()) pao::prefetch(&part.epochs[part.ids[i + KeyTable::kPrefetchAhead]]);
      KeyEpoch& k = part.epochs[part.ids[i]];
      const int64_t e = signed_at(c, type, rows[i]);
      part.restarts[i] = k.seen && k.value != e;
      k.value = e;
      k.seen = true;
    }
  }

  std::vector<std::string> key_names_;
  std::vector<window::AggSpec> specs_;
  std::optional<TimeColumn> time_;
  std::string epoch_name_;           // empty unless keyed by epoch
  std::optional<size_t> epoch_;      // its column
  std::vector<window::AggStates> prototypes_;
};

// --- dedupe -----------------------------------------------------------------------------------

struct Passed {
  bool any = false;
  int64_t last = 0;          // the time of the key's last passed tuple
  int64_t seen = INT64_MIN;  // the time of the key's previous tuple, for the order check
};

class Dedupe final : public PartitionedOperator<KeyedPart<Passed>> {
 public:
  Dedupe(std::shared_ptr<const Schema> input, std::vector<std::string> keys, std::string time,
         std::optional<int64_t> within)
      : PartitionedOperator(input, find_keys(*input, keys, "dedupe")),
        key_names_(std::move(keys)),
        time_(find_time(*input_, time, "dedupe")),
        within_(within) {
    if (within_ && *within_ < 0) {
      throw Error(ErrorKind::kInvalidInput, "dedupe: within must be at least 0 (in the time column's unit), got " +
                                                std::to_string(*within_));
    }
    output_ = input_;
    set_partitions(1);
  }

  std::string name() const override { return "dedupe"; }
  std::string describe() const override {
    return "first tuple per key " + quoted_list(key_names_) +
           (within_ ? ", again once more than " + std::to_string(*within_) + " after the last passed in '" +
                          time_.name + "'"
                    : std::string());
  }
  Selectivity selectivity() const override { return Selectivity::kAtMostOne; }

  Piece process_rows(const Batch& in, std::span<const int64_t> rows, size_t partition) override {
    auto& part = this->part(partition, in);
    std::vector<int64_t> kept;
    part.lookup(in, rows);
    for (size_t i = 0; i < rows.size(); ++i) {
      const int64_t r = rows[i];
      part.prefetch(i);
      Passed& p = part.states[part.ids[i]];
      const int64_t t = time_.at(in, r);
      if (t < p.seen) time_.went_back(r, t, p.seen);
      p.seen = t;
      if (!within_) {
        if (!p.any) kept.push_back(r);
        p.any = true;
        continue;
      }
      if (!p.any || __int128{t} - p.last > *within_) {
        kept.push_back(r);
        p.any = true;
        p.last = t;
      }
    }
    Batch out = take_rows(output_, in, kept);
    return {std::move(out), std::move(kept)};
  }

 private:
  std::unique_ptr<KeyedPart<Passed>> new_part() const override {
    return std::make_unique<KeyedPart<Passed>>(*input_, keys_);
  }
  bool saves_key_state() const override { return true; }
  std::string save_key(const KeyedPart<Passed>& part, uint32_t id) const override {
    StateWriter w;
    w.put(part.states[id].any);
    w.put(part.states[id].last);
    w.put(part.states[id].seen);
    return std::move(w.out);
  }
  void load_key(KeyedPart<Passed>& part, uint32_t id, StateReader& in) const override {
    Passed& p = part.loaded(id);
    p.any = in.get() != 0;
    p.last = in.get();
    p.seen = in.get();
  }

  std::vector<std::string> key_names_;
  TimeColumn time_;
  std::optional<int64_t> within_;
};

// --- pairs ------------------------------------------------------------------------------------

// A key's current session and its distinct items, as ids of the partition's item table, in the
// order they first appeared.
struct PairSession {
  Session session;
  std::vector<uint32_t> items;
  std::unordered_set<uint32_t> seen;
};

// The item table gives every distinct item of the partition a dense id, its comparison (the key
// order of KeyTable: numbers as numbers, strings bytewise) and its value for the output.
struct PairsPart : KeyedPart<PairSession> {
  KeyTable items;

  PairsPart(const Schema& schema, const std::vector<size_t>& key_columns, size_t item)
      : KeyedPart(schema, key_columns), items(schema, {item}) {}
};

class Pairs final : public PartitionedOperator<PairsPart> {
 public:
  Pairs(std::shared_ptr<const Schema> input, std::vector<std::string> keys, std::string time, std::string item,
        int64_t gap)
      : PartitionedOperator(input, find_keys(*input, keys, "pairs")),
        key_names_(std::move(keys)),
        item_name_(std::move(item)),
        time_(find_time(*input_, time, "pairs")),
        item_(find_column(*input_, item_name_, "pairs", "item column")),
        gap_(gap) {
    check_gap(gap_, "pairs");
    const DataType& item_type = input_->fields[item_].type;
    const bool integer = (is_signed_storage(item_type.id) || is_unsigned_integer(item_type.id)) &&
                         item_type.id != TypeId::kDate32 && item_type.id != TypeId::kTimestamp;
    if (!integer && !is_string(item_type.id)) {
      throw Error(ErrorKind::kUnsupportedType, "pairs: item column '" + item_name_ + "' has type " +
                                                   item_type.to_string() + "; expected an integer or string type");
    }
    // The key and time columns, projected from the input without copying, are what output rows
    // repeat from their source tuple.
    Schema projected;
    for (size_t k : keys_) {
      projected.fields.push_back(input_->fields[k]);
      projected_.push_back(k);
    }
    projected.fields.push_back(input_->fields[time_.index]);
    projected_.push_back(time_.index);
    projected_schema_ = std::make_shared<const Schema>(projected);
    output_ = extend_schema(projected, {{"item_a", item_type, false}, {"item_b", item_type, false}}, "pairs",
                            "rename the column");
    set_partitions(1);
  }

  std::string name() const override { return "pairs"; }
  std::string describe() const override {
    return "pairs of distinct '" + item_name_ + "' per session of key " + quoted_list(key_names_) + " (gap " +
           std::to_string(gap_) + " in '" + time_.name + "')";
  }
  Selectivity selectivity() const override { return Selectivity::kAny; }

  Piece process_rows(const Batch& in, std::span<const int64_t> rows, size_t partition) override {
    PairsPart& part = this->part(partition, in);
    const Column& item = in.column(item_);
    const DataType& item_type = input_->fields[item_].type;
    std::vector<ColumnBuilder> added = builders_of({item_type, item_type});
    std::vector<int64_t> sources;
    for (int64_t r : rows) {
      PairSession& s = part.of(in, r);
      const int64_t t = time_.at(in, r);
      if (s.session.number >= 0 && t < s.session.last) time_.went_back(r, t, s.session.last);
      if (s.session.advance(t, gap_)) {
        s.items.clear();
        s.seen.clear();
      }
      if (!item.is_valid(r)) continue;
      const uint32_t x = part.items.id(in, r);
      if (!s.seen.insert(x).second) continue;
      for (uint32_t earlier : s.items) {
        const bool x_first = part.items.less(x, earlier);
        part.items.append(x_first ? x : earlier, added, 0);
        part.items.append(x_first ? earlier : x, added, 1);
        sources.push_back(r);
      }
      s.items.push_back(x);
    }
    std::vector<Column> columns;
    for (size_t c : projected_) columns.push_back(in.column(c));
    const Batch projected(projected_schema_, in.num_rows(), std::move(columns), in.owner());
    Batch out = add_columns(output_, take_rows(projected_schema_, projected, sources), added);
    return {std::move(out), std::move(sources)};
  }

 private:
  std::unique_ptr<PairsPart> new_part() const override { return std::make_unique<PairsPart>(*input_, keys_, item_); }

 public:
  // Checkpoints: the keyed state (key_state_schema) with, per key, its session (last time, number)
  // and its session's items as indices into a second batch, every partition's item table (one
  // column of the item's type). Item ids are a partition's own: a restore, perhaps with other
  // partitions, enters the values into the new partitions' tables.
  bool saves_state() const override { return true; }
  std::vector<Batch> save_state() override {
    KeyStateBuilder out(*input_, keys_);
    const DataType& item_type = input_->fields[item_].type;
    std::vector<ColumnBuilder> items = builders_of({item_type});
    int64_t base = 0;
    for (const auto& part : parts()) {
      for (uint32_t id = 0; id < part->keys.size(); ++id) {
        const PairSession& s = part->states[id];
        StateWriter w;
        w.put(s.session.last);
        w.put(s.session.number);
        w.put(static_cast<int64_t>(s.items.size()));
        for (uint32_t x : s.items) w.put(base + x);
        out.add(part->keys, id, w.out);
      }
      for (uint32_t x = 0; x < part->items.size(); ++x) part->items.append(x, items, 0);
      base += static_cast<int64_t>(part->items.size());
    }
    auto item_schema = std::make_shared<const Schema>(Schema{{{"item", item_type, false}}});
    return {out.finish(), built_batch(item_schema, base, items)};
  }
  void load_state(const std::vector<Batch>& state) override {
    if (state.size() != 2 || state[1].num_columns() != 1) {
      throw Error(ErrorKind::kInvalidInput, "pairs: a checkpoint's state is its keys' sessions and their items");
    }
    const Batch& b = state[0];
    const Batch& items = state[1];
    const std::vector<uint32_t> to = key_state_partitions(b, keys_.size(), parts().size(), name());
    for (auto& part : parts()) {
      part->keys.set_columns(key_state_columns(keys_.size()));
      part->items.set_columns({0});
    }
    for (int64_t r = 0; r < b.num_rows(); ++r) {
      PairsPart& part = *parts()[to[static_cast<size_t>(r)]];
      PairSession& s = part.loaded(part.keys.id(b, r));
      StateReader in{key_state_text(b, r)};
      s.session.last = in.get();
      s.session.number = in.get();
      const int64_t n = in.get();
      for (int64_t j = 0; j < n; ++j) {
        const int64_t g = in.get();
        if (g < 0 || g >= items.num_rows()) in.bad();
        const uint32_t x = part.items.id(items, g);
        s.items.push_back(x);
        s.seen.insert(x);
      }
    }
    for (auto& part : parts()) {
      part->keys.set_columns(keys_);
      part->items.set_columns({item_});
    }
  }

 private:

  std::vector<std::string> key_names_;
  std::string item_name_;
  TimeColumn time_;
  size_t item_;
  int64_t gap_;
  std::vector<size_t> projected_;  // input columns: the keys, then the time
  std::shared_ptr<const Schema> projected_schema_;
};

}  // namespace

OperatorPtr make_sessionize(std::shared_ptr<const Schema> input_schema, std::vector<std::string> keys,
                            std::string time, int64_t gap, std::string name) {
  return std::make_shared<Sessionize>(std::move(input_schema), std::move(keys), std::move(time), gap, std::move(name));
}

OperatorPtr make_lag(std::shared_ptr<const Schema> input_schema, std::vector<std::string> keys,
                     std::vector<std::string> columns, std::string suffix, std::string time) {
  return std::make_shared<LagDelta>(LagDelta::Mode::kLag, std::move(input_schema), std::move(keys),
                                    std::optional<std::string>(std::move(time)), std::move(columns), suffix);
}

OperatorPtr make_delta(std::shared_ptr<const Schema> input_schema, std::vector<std::string> keys, std::string time,
                       std::vector<std::string> columns, std::string suffix) {
  return std::make_shared<LagDelta>(LagDelta::Mode::kDelta, std::move(input_schema), std::move(keys), std::move(time),
                                    std::move(columns), suffix);
}

OperatorPtr make_running(std::shared_ptr<const Schema> input_schema, std::vector<std::string> keys,
                         std::vector<window::AggSpec> aggs, std::string time) {
  return std::make_shared<Running>(std::move(input_schema), std::move(keys), std::move(aggs), time);
}

OperatorPtr make_dedupe(std::shared_ptr<const Schema> input_schema, std::vector<std::string> keys, std::string time,
                        std::optional<int64_t> within) {
  return std::make_shared<Dedupe>(std::move(input_schema), std::move(keys), std::move(time), within);
}

OperatorPtr make_pairs(std::shared_ptr<const Schema> input_schema, std::vector<std::string> keys, std::string time,
                       std::string item, int64_t gap) {
  return std::make_shared<Pairs>(std::move(input_schema), std::move(keys), std::move(time), std::move(item), gap);
}

}  // namespace pao::ops
