#pragma once
// What the partitioned operators (keyed.h, the keyed parametric operator) share: checking their
// arguments against the input schema, reading single values, state kept per partition, and
// building output rows as input rows plus new columns.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/batch.h"
#include "core/builder.h"
#include "core/error.h"
#include "core/key_table.h"
#include "core/values.h"
#include "ops/operator.h"

namespace pao::ops {

// --- Arguments ------------------------------------------------------------------------------

// The index of column `name` in `schema`. Throws kInvalidInput naming the operator `op`, the
// column's `role` ("key column", "time column", ...) and the columns the schema has.
size_t find_column(const Schema& schema, const std::string& name, const std::string& op, const std::string& role);
// The key columns' indices; at least one (kInvalidInput otherwise), since a partitioned operator
// without a key would have nothing to route by.
std::vector<size_t> find_keys(const Schema& schema, const std::vector<std::string>& keys, const std::string& op);
// A time column checked by find_time, and how to read it.
struct TimeColumn {
  size_t index = 0;
  DataType type;
  std::string name;

  // The time of `row` of `in`: the stored integer. A null throws kNullTime for `row`: after the
  // pipeline's input checks only an operator that rewrote the column can cause one. Inline: the
  // keyed operators read a time per row.
  int64_t at(const Batch& in, int64_t row) const {
    const Column& c = in.column(index);
    if (c.validity != nullptr && !c.is_valid(row)) null_at(row);
    return signed_at(c, type, row);
  }
  [[noreturn]] void null_at(int64_t row) const;
  // Throws kUnsorted for `row`, whose time `now` is earlier than `previous`, its key's previous
  // tuple's. The pipeline's input is checked sorted, so only an operator that rewrote the time
  // column can get here; an order-dependent operator refuses rather than give a result that
  // depends on the order (a sawtooth time once made dedupe drop rows silently).
  [[noreturn]] void went_back(int64_t row, int64_t now, int64_t previous) const;
};

// Each key's latest time, for the order-dependent operators that keep no time of their own (lag,
// delta, running, dedupe): check() refuses a key's tuple earlier than the key's previous one.
struct KeyTimes {
  std::vector<int64_t> last;  // by key id; INT64_MIN before the key's first tuple

  void check(uint32_t key, const TimeColumn& time, const Batch& in, int64_t row) {
    const int64_t t = time.at(in, row);
    if (key >= last.size()) last.resize(std::max<size_t>(16, std::max<size_t>(2 * last.size(), key + size_t{1})), INT64_MIN);
    if (t < last[key]) time.went_back(row, t, last[key]);
    last[key] = t;
  }
  // A checkpoint's: the key's latest time (INT64_MIN: none yet), and setting it.
  int64_t of(uint32_t key) const { return key < last.size() ? last[key] : INT64_MIN; }
  void set(uint32_t key, int64_t t) {
    if (key >= last.size()) last.resize(std::max<size_t>(16, std::max<size_t>(2 * last.size(), key + size_t{1})), INT64_MIN);
    last[key] = t;
  }
};
// The time column `time`; it must have a time type (timestamp, date32, int32, int64), else
// kUnsupportedType.
TimeColumn find_time(const Schema& schema, const std::string& time, const std::string& op);
// `input`'s fields followed by `added`. Throws kInvalidInput when two columns would share a name;
// `hint` says how to avoid it (e.g. "pass another suffix").
std::shared_ptr<const Schema> extend_schema(const Schema& input, const std::vector<Field>& added, const std::string& op,
                                            const std::string& hint);
// The names as "'a', 'b'" for describe().
std::string quoted_list(const std::vector<std::string>& names);

// --- Values ---------------------------------------------------------------------------------

// raw_bits, signed_at and string_at: core/values.h.

// --- Output ---------------------------------------------------------------------------------

// Rows `rows` of `in` (ascending; a row may repeat, one output row each) under `schema`, which
// must have `in`'s layout: a zero-copy slice when they are one consecutive run, else a gather of
// their runs.
Batch take_rows(const std::shared_ptr<const Schema>& schema, const Batch& in, std::span<const int64_t> rows);
// `base`'s columns followed by the builders' (all of base.num_rows() values), under `schema`. The
// result owns the builders' memory and shares base's; the builders are empty after.
Batch add_columns(std::shared_ptr<const Schema> schema, const Batch& base, std::vector<ColumnBuilder>& added);
// The builders' columns (`rows` values each) as a batch under `schema`, owning their memory; the
// builders are empty after.
Batch built_batch(std::shared_ptr<const Schema> schema, int64_t rows, std::vector<ColumnBuilder>& built);


// --- Checkpoint text --------------------------------------------------------------------------

// A key's state in a checkpoint (PartitionedOperator::save_state) is text: integers in decimal,
// separated by spaces, and strings as their length, a colon and their bytes, so any bytes fit.
// Text, as the aggregates' states are (window::AggStates::save), so one reader serves both.
struct StateWriter {
  std::string out;
  void put(int64_t v) { out += std::to_string(v) + ' '; }
  void put_u(uint64_t v) { out += std::to_string(v) + ' '; }
  void put_text(std::string_view v) {
    out += std::to_string(v.size()) + ':';
    out.append(v);
  }
};
// Reads what a StateWriter wrote, in the same order; throws kInvalidInput on anything else.
struct StateReader {
  std::string_view in;
  int64_t get();
  uint64_t get_u();
  std::string_view get_text();
  [[noreturn]] void bad() const;

 private:
  uint64_t number(char delimiter);
};

// A checkpoint's keyed state (PartitionedOperator::save_state, keyed windows): one row per key,
// the key columns (the input's, by their names) then `state`, the key's state as text. Not a
// partition's image: a restore may run another number of partitions, so each row goes back to the
// partition the runtime routes its key's tuples to (partition_of).
std::shared_ptr<const Schema> key_state_schema(const Schema& input, const std::vector<size_t>& keys);
// Per row of `state` (checked to be `keys` key columns and `state`), its partition of `partitions`;
// `op` names the operator in errors.
std::vector<uint32_t> key_state_partitions(const Batch& state, size_t keys, size_t partitions, const std::string& op);
// The state text of `row`.
std::string_view key_state_text(const Batch& state, int64_t row);
// The key columns' indices in a state batch: 0, 1, ... (KeyTable::set_columns).
std::vector<size_t> key_state_columns(size_t keys);
// A state batch, row by row: a key (by its id in a key table over the input's key columns) and
// its state's text.
class KeyStateBuilder {
 public:
  KeyStateBuilder(const Schema& input, const std::vector<size_t>& keys) : schema_(key_state_schema(input, keys)) {
    for (const Field& f : schema_->fields) built_.emplace_back(f.type);
  }
  void add(const KeyTable& table, uint32_t id, std::string_view state) {
    table.append(id, built_, 0);
    built_.back().append_string(state);
    ++rows_;
  }
  Batch finish() { return built_batch(schema_, rows_, built_); }

 private:
  std::shared_ptr<const Schema> schema_;
  std::vector<ColumnBuilder> built_;
  int64_t rows_ = 0;
};

// --- State per partition --------------------------------------------------------------------

// A partitioned operator whose state is a `Part` per partition (typically a KeyTable and
// per-key state indexed by its dense ids). The runtime calls one partition at a time, in arrival
// order, so a Part needs no lock. Parts live in their own allocations: their hot data (key
// tables, state vectors) is in separate heap blocks per partition, never interleaved in one array.
//
// Derived classes implement new_part() and end their constructor with set_partitions(1), so an
// operator is usable (one partition) before the runtime says how many there are.
template <class Part>
class PartitionedOperator : public Operator {
 public:
  OpKind kind() const override { return OpKind::kPartitioned; }
  std::vector<size_t> key_columns() const override { return keys_; }
  const std::shared_ptr<const Schema>& input_schema() const override { return input_; }
  const std::shared_ptr<const Schema>& output_schema() const override { return output_; }
  // Starts afresh with `partitions` empty parts (at least one).
  void set_partitions(size_t partitions) override {
    parts_.clear();
    for (size_t p = 0; p < std::max<size_t>(partitions, 1); ++p) parts_.push_back(new_part());
  }
  // Every operator built on this emits online: nothing is held back for the end.
  Batch finish() override { return {}; }

  // A checkpoint's state (key_state_schema): every key of every partition. Operators that
  // implement save_key() say saves_key_state().
  bool saves_state() const override { return saves_key_state(); }
  std::vector<Batch> save_state() override {
    KeyStateBuilder out(*input_, keys_);
    for (const auto& part : parts_) {
      part->keys.settle();  // a fused chain's later member holds its keys lent (KeyTable::lend)
      const size_t n = part->keys.size();
      for (uint32_t id = 0; id < n; ++id) out.add(part->keys, id, save_key(*part, id));
    }
    return {out.finish()};
  }
  void load_state(const std::vector<Batch>& state) override {
    if (state.size() != 1) throw Error(ErrorKind::kInvalidInput, name() + ": a checkpoint's state is one batch");
    const Batch& b = state[0];
    const std::vector<uint32_t> to = key_state_partitions(b, keys_.size(), parts_.size(), name());
    for (auto& part : parts_) part->keys.set_columns(key_state_columns(keys_.size()));
    for (int64_t r = 0; r < b.num_rows(); ++r) {
      Part& part = *parts_[to[static_cast<size_t>(r)]];
      StateReader reader{key_state_text(b, r)};
      load_key(part, part.keys.id(b, r), reader);
    }
    for (auto& part : parts_) part->keys.set_columns(keys_);
  }
  // Their output rows are input rows (plus columns), or for pairs carry the triggering row's time.
  bool preserves_time(const std::string& time) const override { return passes_through(time); }
  bool passes_through(const std::string& column) const override {
    return input_->find(column).has_value() && output_->find(column).has_value();
  }

 protected:
  PartitionedOperator(std::shared_ptr<const Schema> input, std::vector<size_t> keys)
      : input_(std::move(input)), keys_(std::move(keys)) {}

  virtual std::unique_ptr<Part> new_part() const = 0;
  // Checkpoints: key `id`'s state in `part` as text, and back into a fresh `part` (whose key table
  // gave `id` to the key just now). Operators that implement both say so in saves_key_state().
  virtual bool saves_key_state() const { return false; }
  virtual std::string save_key(const Part& part, uint32_t id) const {
    (void)part;
    (void)id;
    return {};
  }
  virtual void load_key(Part& part, uint32_t id, StateReader& in) const {
    (void)part;
    (void)id;
    (void)in;
  }

  // Partition `p`'s state after checking the call: a partition the runtime did not announce, or
  // a batch of another shape, is a bug in the caller, reported rather than undefined behaviour.
  Part& part(size_t p, const Batch& in) {
    if (p >= parts_.size()) {
      throw Error(ErrorKind::kUsage, name() + ": partition " + std::to_string(p) + " of " +
                                         std::to_string(parts_.size()) + " (set_partitions)");
    }
    if (in.num_columns() != input_->fields.size()) {
      throw Error(ErrorKind::kSchemaMismatch, name() + ": a batch of " + std::to_string(in.num_columns()) +
                                                  " columns; the operator was built for " + input_->to_string());
    }
    return *parts_[p];
  }

  // Every partition's state: for an operator that saves its state in its own form (pairs).
  std::vector<std::unique_ptr<Part>>& parts() noexcept { return parts_; }
  const std::vector<std::unique_ptr<Part>>& parts() const noexcept { return parts_; }

  std::shared_ptr<const Schema> input_;
  std::shared_ptr<const Schema> output_;
  std::vector<size_t> keys_;

 private:
  std::vector<std::unique_ptr<Part>> parts_;
};

// A partitioned operator that appends columns (Operator::appended_schema): derived classes
// implement process_appended() and set appended_ and output_ with append_fields(); process_rows()
// follows from them, for callers that want whole rows (a wrapper, a test).
template <class Part>
class AppendingOperator : public PartitionedOperator<Part> {
 public:
  Selectivity selectivity() const override { return Selectivity::kExactlyOne; }
  const std::shared_ptr<const Schema>* appended_schema() const override { return &appended_; }
  Piece process_rows(const Batch& in, std::span<const int64_t> rows, size_t partition) override {
    const Batch added = this->process_appended(in, rows, partition);
    return {side_by_side(this->output_, take_rows(this->input_, in, rows), added),
            std::vector<int64_t>(rows.begin(), rows.end())};
  }

 protected:
  using PartitionedOperator<Part>::PartitionedOperator;

  // The output schema, the input's fields then `added`, checked by extend_schema (op, hint).
  void append_fields(const std::vector<Field>& added, const std::string& op, const std::string& hint) {
    this->output_ = extend_schema(*this->input_, added, op, hint);
    appended_ = std::make_shared<const Schema>(Schema{added});
  }
  // The appended columns from their builders (rows.size() values each).
  Batch appended(std::span<const int64_t> rows, std::vector<ColumnBuilder>& built) const {
    return built_batch(appended_, static_cast<int64_t>(rows.size()), built);
  }

  std::shared_ptr<const Schema> appended_;
};

}  // namespace pao::ops
