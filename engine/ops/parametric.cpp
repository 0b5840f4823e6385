#include "ops/parametric.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "ops/partitioned.h"
#include "core/key_table.h"

namespace pao::ops {
namespace {

// splitmix64's finalizer: every input bit affects every output bit.
uint64_t mix(uint64_t x) noexcept {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Adds one word to a hash; position matters, so (a, b) and (b, a) hash differently.
uint64_t absorb(uint64_t h, uint64_t word) noexcept { return mix(h ^ word) + 0x9E3779B97F4A7C15ULL; }

constexpr uint64_t kNullMark = 0x6E756C6C6E756C6CULL;  // "nullnull"
constexpr double kMaxSelectivity = 1e6;

// Busy-waits `cost` on the steady clock, which never jumps, so every tuple costs at least `cost`.
void spin(std::chrono::nanoseconds cost) {
  if (cost.count() <= 0) return;
  const auto until = std::chrono::steady_clock::now() + cost;
  while (std::chrono::steady_clock::now() < until) {
  }
}

// Reads and writes every word of a tuple's state region, so state_bytes costs what that much
// real state would (cache misses once it outgrows the caches).
void touch(uint64_t* words, size_t n, uint64_t h) noexcept {
  for (size_t i = 0; i < n; ++i) words[i] += h;
}

// The columns of `schema` a tuple's hash covers: all but the reserved ones (operator.h).
std::vector<size_t> hashed_columns(const Schema& schema) {
  std::vector<size_t> out;
  for (size_t c = 0; c < schema.fields.size(); ++c)
    if (!is_reserved(schema.fields[c].name)) out.push_back(c);
  return out;
}

// parametric_tuple_hash over columns `columns`, with the types from `schema`.
uint64_t tuple_hash(const Schema& schema, std::span<const size_t> columns, const Batch& batch, int64_t row) {
  uint64_t h = 0x243F6A8885A308D3ULL;  // pi's first digits: any fixed start will do
  for (size_t c : columns) {
    const Column& col = batch.column(c);
    const DataType& type = schema.fields[c].type;
    if (!col.is_valid(row)) {
      h = absorb(h, kNullMark);
    } else if (is_string(type.id)) {
      const std::string_view s = string_at(col, type, row);
      h = absorb(h, s.size());
      for (size_t at = 0; at < s.size(); at += 8) {
        uint64_t word = 0;
        std::memcpy(&word, s.data() + at, std::min<size_t>(8, s.size() - at));
        h = absorb(h, word);
      }
    } else {
      h = absorb(h, raw_bits(col, type, row));
    }
  }
  return mix(h);
}

// What the three kinds share: the checked options, the output schema and the per-tuple work.
class ParametricBody {
 public:
  ParametricBody(std::shared_ptr<const Schema> input, const ParametricOptions& options, OpKind kind)
      : options_(options), input_(std::move(input)) {
    const auto bad = [](const std::string& what) { throw Error(ErrorKind::kInvalidInput, "parametric: " + what); };
    if (!std::isfinite(options_.cost_us) || options_.cost_us < 0) {
      bad("cost_us must be a number at least 0, got " + std::to_string(options_.cost_us));
    }
    if (!std::isfinite(options_.selectivity) || options_.selectivity < 0 || options_.selectivity > kMaxSelectivity) {
      bad("selectivity must be between 0 and 1e6, got " + std::to_string(options_.selectivity));
    }
    if (options_.state_bytes < 0) bad("state_bytes must be at least 0, got " + std::to_string(options_.state_bytes));
    if (kind == OpKind::kStateless && options_.state_bytes > 0) {
      bad("state_bytes needs state: use the stateful or the partitioned kind");
    }
    cost_ = std::chrono::nanoseconds(std::llround(options_.cost_us * 1000.0));
    words_ = static_cast<size_t>((options_.state_bytes + 7) / 8);
    // The input columns an output row repeats: all but an earlier p_state, which the new one replaces.
    Schema kept;
    for (size_t c = 0; c < input_->fields.size(); ++c) {
      if (input_->fields[c].name == "p_state") continue;
      kept.fields.push_back(input_->fields[c]);
      kept_.push_back(c);
    }
    kept_schema_ = std::make_shared<const Schema>(kept);
    hashed_ = hashed_columns(*input_);
    DataType u64;
    u64.id = TypeId::kUInt64;
    output_ = extend_schema(kept, {{"p_state", u64, false}}, "parametric", "");
  }

  const std::shared_ptr<const Schema>& input() const noexcept { return input_; }
  const std::shared_ptr<const Schema>& output() const noexcept { return output_; }
  uint64_t hash(const Batch& in, int64_t row) const { return tuple_hash(*input_, hashed_, in, row); }
  size_t words() const noexcept { return words_; }

  Selectivity selectivity() const noexcept {
    return options_.selectivity == 1.0  ? Selectivity::kExactlyOne
           : options_.selectivity < 1.0 ? Selectivity::kAtMostOne
                                        : Selectivity::kAny;
  }
  std::string describe(const std::string& state) const {
    const auto number = [](double v) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", v);
      return std::string(buf);
    };
    return "spin " + number(options_.cost_us) + " us per tuple, selectivity " + number(options_.selectivity) + ", " +
           std::to_string(options_.state_bytes) + " bytes of state " + state;
  }

  // Spins for the tuple with hash `h`, then appends its copies: `row` to `rows` and `p_state` to
  // `out`, once per copy.
  void emit(uint64_t h, int64_t row, uint64_t p_state, std::vector<int64_t>& rows, ColumnBuilder& out) const {
    spin(cost_);
    for (int64_t k = parametric_copies(h, options_.selectivity); k > 0; --k) {
      rows.push_back(row);
      out.append_fixed(&p_state);
    }
  }

  // The output rows: the input's rows `rows`, then p_state.
  Batch assemble(const Batch& in, std::span<const int64_t> rows, ColumnBuilder& p_state) const {
    std::vector<Column> columns;
    for (size_t c : kept_) columns.push_back(in.column(c));
    const Batch kept(kept_schema_, in.num_rows(), std::move(columns), in.owner());
    std::vector<ColumnBuilder> added;
    added.push_back(std::move(p_state));
    return add_columns(output_, take_rows(kept_schema_, kept, rows), added);
  }

  static ColumnBuilder p_state_builder() {
    DataType u64;
    u64.id = TypeId::kUInt64;
    return ColumnBuilder(u64);
  }

 private:
  ParametricOptions options_;
  std::chrono::nanoseconds cost_{0};
  size_t words_ = 0;
  std::shared_ptr<const Schema> input_;
  std::vector<size_t> kept_;
  std::vector<size_t> hashed_;
  std::shared_ptr<const Schema> kept_schema_;
  std::shared_ptr<const Schema> output_;
};

// The stateless and the stateful kind: one class, as they differ only in the state the stateful
// kind carries from tuple to tuple (one running hash and one state region for the whole stream).
class UnkeyedParametric final : public Operator {
 public:
  UnkeyedParametric(std::shared_ptr<const Schema> input, const ParametricOptions& options, OpKind kind)
      : body_(std::move(input), options, kind),
        kind_(kind),
        words_(kind == OpKind::kStateful ? body_.words() : 0, 0) {}

  std::string name() const override { return "parametric"; }
  std::string describe() const override {
    return body_.describe(kind_ == OpKind::kStateful ? "in total (stateful)" : "(stateless)");
  }
  OpKind kind() const override { return kind_; }
  Selectivity selectivity() const override { return body_.selectivity(); }
  // Its output rows are copies of input rows (plus p_state).
  bool preserves_time(const std::string& time) const override { return passes_through(time); }
  bool passes_through(const std::string& column) const override { return body_.input()->find(column).has_value(); }
  bool may_fail() const override { return false; }
  const std::shared_ptr<const Schema>& input_schema() const override { return body_.input(); }
  const std::shared_ptr<const Schema>& output_schema() const override { return body_.output(); }

  // Stateless: thread-safe, reading only the body, which is immutable after construction.
  // Stateful: the runtime runs one process() at a time, in input order.
  Batch process(const Batch& in) override {
    const bool stateful = kind_ == OpKind::kStateful;
    std::vector<int64_t> rows;
    ColumnBuilder p_state = ParametricBody::p_state_builder();
    for (int64_t r = 0; r < in.num_rows(); ++r) {
      const uint64_t h = body_.hash(in, r);
      if (stateful) {
        state_ = parametric_fold(state_, h);
        touch(words_.data(), words_.size(), h);
      }
      body_.emit(h, r, stateful ? state_ : h, rows, p_state);
    }
    return body_.assemble(in, rows, p_state);
  }

  // Checkpoints: the stateful kind's running hash and state region, as one text row.
  bool saves_state() const override { return true; }
  std::vector<Batch> save_state() override {
    if (kind_ != OpKind::kStateful) return {};
    StateWriter w;
    w.put_u(state_);
    for (uint64_t word : words_) w.put_u(word);
    DataType text;
    text.id = TypeId::kLargeUtf8;
    std::vector<ColumnBuilder> built = builders_of({text});
    built[0].append_string(w.out);
    return {built_batch(std::make_shared<const Schema>(Schema{{{"state", text, false}}}), 1, built)};
  }
  void load_state(const std::vector<Batch>& state) override {
    if (kind_ != OpKind::kStateful) return;
    if (state.size() != 1 || state[0].num_rows() != 1) {
      throw Error(ErrorKind::kInvalidInput, "parametric: a checkpoint's state is one row");
    }
    StateReader in{key_state_text(state[0], 0)};
    state_ = in.get_u();
    for (uint64_t& word : words_) word = in.get_u();
  }

 private:
  const ParametricBody body_;
  const OpKind kind_;
  uint64_t state_ = kParametricSeed;  // stateful only
  std::vector<uint64_t> words_;       // stateful only
};

// A partition's key table, each key's running hash, and each key's state region (flat: key id *
// words + word).
struct ParametricPart {
  KeyTable keys;
  std::vector<uint64_t> hashes;
  std::vector<uint64_t> words;

  ParametricPart(const Schema& schema, const std::vector<size_t>& key_columns) : keys(schema, key_columns) {}
};

class KeyedParametric final : public PartitionedOperator<ParametricPart> {
 public:
  KeyedParametric(std::shared_ptr<const Schema> input, std::vector<std::string> keys, const ParametricOptions& options)
      : PartitionedOperator(input, find_keys(*input, keys, "parametric")),
        body_(input, options, OpKind::kPartitioned),
        key_names_(std::move(keys)) {
    output_ = body_.output();
    set_partitions(1);
  }

  std::string name() const override { return "parametric"; }
  std::string describe() const override { return body_.describe("per key " + quoted_list(key_names_)); }
  Selectivity selectivity() const override { return body_.selectivity(); }

  Piece process_rows(const Batch& in, std::span<const int64_t> rows, size_t partition) override {
    ParametricPart& part = this->part(partition, in);
    const size_t words = body_.words();
    std::vector<int64_t> sources;
    ColumnBuilder p_state = ParametricBody::p_state_builder();
    for (int64_t r : rows) {
      const uint32_t id = part.keys.id(in, r);
      if (id >= part.hashes.size()) {
        part.hashes.resize(static_cast<size_t>(id) + 1, kParametricSeed);
        part.words.resize(part.hashes.size() * words, 0);
      }
      const uint64_t h = body_.hash(in, r);
      part.hashes[id] = parametric_fold(part.hashes[id], h);
      touch(part.words.data() + static_cast<size_t>(id) * words, words, h);
      body_.emit(h, r, part.hashes[id], sources, p_state);
    }
    Batch out = body_.assemble(in, sources, p_state);
    return {std::move(out), std::move(sources)};
  }

 private:
  std::unique_ptr<ParametricPart> new_part() const override {
    return std::make_unique<ParametricPart>(*input_, keys_);
  }
  // Checkpoints: a key's running hash, then its state region's words.
  bool saves_key_state() const override { return true; }
  std::string save_key(const ParametricPart& part, uint32_t id) const override {
    StateWriter w;
    const size_t words = body_.words();
    w.put_u(id < part.hashes.size() ? part.hashes[id] : kParametricSeed);
    for (size_t j = 0; j < words; ++j) {
      const size_t at = static_cast<size_t>(id) * words + j;
      w.put_u(at < part.words.size() ? part.words[at] : 0);
    }
    return std::move(w.out);
  }
  void load_key(ParametricPart& part, uint32_t id, StateReader& in) const override {
    const size_t words = body_.words();
    if (id >= part.hashes.size()) {
      part.hashes.resize(static_cast<size_t>(id) + 1, kParametricSeed);
      part.words.resize(part.hashes.size() * words, 0);
    }
    part.hashes[id] = in.get_u();
    for (size_t j = 0; j < words; ++j) part.words[static_cast<size_t>(id) * words + j] = in.get_u();
  }

  const ParametricBody body_;
  std::vector<std::string> key_names_;
};

}  // namespace

uint64_t parametric_tuple_hash(const Batch& batch, int64_t row) {
  return tuple_hash(*batch.schema(), hashed_columns(*batch.schema()), batch, row);
}

uint64_t parametric_fold(uint64_t state, uint64_t tuple_hash) {
  return mix((state * 0x9E3779B97F4A7C15ULL) ^ tuple_hash);
}

int64_t parametric_copies(uint64_t tuple_hash, double selectivity) {
  const double whole = std::floor(selectivity);
  // A second mix decorrelates the draw from p_state, which for the stateless kind is the hash itself.
  const double u = static_cast<double>(mix(tuple_hash ^ 0xA0761D6478BD642FULL) >> 11) * 0x1.0p-53;
  return static_cast<int64_t>(whole) + (u < selectivity - whole ? 1 : 0);
}

OperatorPtr make_stateless_parametric(std::shared_ptr<const Schema> input_schema, ParametricOptions options) {
  return std::make_shared<UnkeyedParametric>(std::move(input_schema), options, OpKind::kStateless);
}

OperatorPtr make_stateful_parametric(std::shared_ptr<const Schema> input_schema, ParametricOptions options) {
  return std::make_shared<UnkeyedParametric>(std::move(input_schema), options, OpKind::kStateful);
}

OperatorPtr make_keyed_parametric(std::shared_ptr<const Schema> input_schema, std::vector<std::string> keys,
                                  ParametricOptions options) {
  return std::make_shared<KeyedParametric>(std::move(input_schema), std::move(keys), options);
}

}  // namespace pao::ops
