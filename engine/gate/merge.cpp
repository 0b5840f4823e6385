#include "gate/merge.h"

#include <algorithm>
#include <exception>
#include <limits>
#include <optional>

#include "core/error.h"
#include "core/gather.h"
#include "core/order_key.h"
#include "gate/times.h"

namespace pao::gate {
namespace {

// Where the merge stands in one input.
struct Cursor {
  std::unique_ptr<BatchSource> source;  // reset as soon as the input ends
  Batch batch;                          // the batch rows are taken from now
  const int64_t* times = nullptr;       // batch's time values (widened if 32-bit)
  std::optional<InputTimes> checked;    // validates each batch's times as it is pulled
  int64_t pos = 0;                      // next row of `batch` to emit
  int64_t end = 0;                      // batch.num_rows()
  int32_t slot = -1;                    // index of `batch` in the current output's sources
};

class Merge final : public BatchSource {
 public:
  Merge(std::vector<std::unique_ptr<BatchSource>> inputs, MergeOptions options)
      : options_(std::move(options)) {
    if (inputs.empty()) throw Error(ErrorKind::kInvalidInput, "merge needs at least one input");
    // The loser tree's keys name up to 2 * (inputs rounded up to a power of two) leaves.
    if (inputs.size() > (size_t{1} << (OrderKey::kInputBits - 1))) {
      throw Error(ErrorKind::kInvalidInput, "merge takes at most 2^23 inputs, got " + std::to_string(inputs.size()));
    }
    if (options_.batch_size < 1) {
      throw Error(ErrorKind::kInvalidInput,
                  "batch_size must be at least 1, got " + std::to_string(options_.batch_size));
    }
    std::vector<std::shared_ptr<const Schema>> schemas;
    for (const auto& in : inputs) schemas.push_back(in->schema());
    InputsSchema checked = check_input_schemas(schemas, options_.time_column);
    schema_ = std::move(checked.schema);
    time_index_ = checked.time_index;
    time_type_ = schema_->fields[time_index_].type;
    cursors_.resize(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      cursors_[i].source = std::move(inputs[i]);
      cursors_[i].checked.emplace(static_cast<uint32_t>(i) + options_.first_input, options_.time_column, time_index_,
                                  time_type_);
    }
    // One input: every run is the whole batch, so each batch passes through untouched. Several:
    // only long runs are worth a separate (zero-copy) batch; short ones are gathered together.
    slice_rows_ = cursors_.size() == 1 ? 1 : std::max<int64_t>(2, options_.batch_size / 16);
  }

  const std::shared_ptr<const Schema>& schema() const noexcept override { return schema_; }

  // unmerge(): the inputs, each as a merge of one, while nothing has been read (the schemas were
  // checked together at construction, so each part's checks pass again).
  std::vector<std::unique_ptr<BatchSource>> take_apart() {
    std::vector<std::unique_ptr<BatchSource>> parts;
    if (started_ || failure_ || cursors_.size() < 2) return parts;
    for (size_t i = 0; i < cursors_.size(); ++i) {
      std::vector<std::unique_ptr<BatchSource>> one;
      one.push_back(std::move(cursors_[i].source));
      MergeOptions o = options_;
      o.first_input = options_.first_input + static_cast<uint32_t>(i);
      parts.push_back(std::make_unique<Merge>(std::move(one), std::move(o)));
    }
    return parts;
  }

  std::optional<Batch> next() override {
    if (failure_) std::rethrow_exception(failure_);
    try {
      return produce();
    } catch (...) {
      failure_ = std::current_exception();
      cursors_.clear();  // release every input now: nothing more will be read from them
      sources_.clear();
      pending_.reset();
      deferred_.reset();
      throw;
    }
  }

 private:
  // An input's current row as a tournament key: the packed merged-order key (core/order_key.h),
  // so the merged order is plain integer order: one compare, and selects the compiler turns into
  // conditional moves. Its input part is the input index while the input is live (its position
  // part stays 0: the tree only ever compares rows of different inputs); an input that has ended
  // (and each padding leaf) gets time INT64_MAX and input part leaves_ + input, so it sorts after
  // every live input, even one whose time is INT64_MAX.
  using Key = OrderKey::Packed;
  static Key make_key(int64_t time, uint32_t order) noexcept { return OrderKey::of(time, order, 0).packed(); }
  static int64_t key_time(Key k) noexcept { return OrderKey::unpack(k).time; }
  static uint32_t key_order(Key k) noexcept { return OrderKey::unpack(k).input(); }
  Key ended_key(uint32_t input) const noexcept {
    return make_key(std::numeric_limits<int64_t>::max(), leaves_ + input);
  }
  bool live(Key k) const noexcept { return key_order(k) < leaves_; }

  // The loser tree: leaves_ (a power of two) leaves, one per input; tree_[n] for 1 <= n < leaves_
  // holds the loser of the match at node n, winner_ the overall winner. After the winner's key
  // changes, replay() plays its leaf-to-root path again: one comparison per level, written as
  // selects so the unpredictable outcome costs no branch misprediction.
  //
  // The runner-up (the best key but the winner's) lost a match on the winner's path. When the
  // replayed input wins again, the losers it leaves on its path are exactly that path's, so their
  // minimum, taken on the way up, is the runner-up: runner_ is valid iff runner_valid_.
  void replay(uint32_t input, Key key) noexcept {
    Key runner = ~Key{0};
    for (uint32_t node = (leaves_ + input) >> 1; node >= 1; node >>= 1) {
      const Key other = tree_[node];
      const Key loser = other < key ? key : other;
      key = other < key ? other : key;
      tree_[node] = loser;
      runner = loser < runner ? loser : runner;
    }
    winner_ = key;
    runner_ = runner;
    runner_valid_ = key_order(key) == input;
  }

  Key key_of(uint32_t input) const noexcept {
    const Cursor& c = cursors_[input];
    if (!c.source && c.pos == c.end) return ended_key(input);
    return make_key(c.times[c.pos], input);
  }

  void start() {
    const auto k = static_cast<uint32_t>(cursors_.size());
    leaves_ = 1;
    while (leaves_ < k) leaves_ <<= 1;
    // Play the whole tournament once, bottom up: winners[n] is the winner below node n.
    std::vector<Key> winners(2 * leaves_);
    for (uint32_t i = 0; i < leaves_; ++i) {
      winners[leaves_ + i] = (i < k && pull(i)) ? make_key(cursors_[i].times[0], i) : ended_key(i);
    }
    tree_.assign(leaves_, Key{0});
    for (uint32_t n = leaves_ - 1; n >= 1; --n) {
      const Key a = winners[2 * n];
      const Key b = winners[2 * n + 1];
      winners[n] = a < b ? a : b;
      tree_[n] = a < b ? b : a;
    }
    winner_ = winners[1];
    // One leaf: there is no runner-up (~0 is not live), so its whole batch is one run. Several:
    // the loop takes one row of the first winner, then replay() tells its runner-up.
    runner_ = ~Key{0};
    runner_valid_ = leaves_ == 1;
    started_ = true;
  }

  // Loads input i's next non-empty batch and validates its time column. False at the input's end.
  bool pull(uint32_t i) {
    Cursor& c = cursors_[i];
    c.batch = Batch();
    c.pos = c.end = 0;
    c.slot = -1;
    for (;;) {
      std::optional<Batch> b = c.source->next();
      if (!b) {
        c.source.reset();
        return false;
      }
      if (b->num_rows() == 0) continue;
      c.batch = std::move(*b);
      break;
    }
    c.times = c.checked->read(c.batch);
    c.end = c.batch.num_rows();
    return true;
  }

  // One past the last row of the winner i's current batch that precedes the runner-up in the
  // merged order. Gallops, so a run of length L costs O(log L) comparisons.
  int64_t run_end(uint32_t i, const Key& next) const noexcept {
    const Cursor& c = cursors_[i];
    if (!live(next)) return c.end;  // every other input has ended
    const int64_t tj = key_time(next);
    const bool i_first_on_ties = i < key_order(next);
    auto in_run = [&](int64_t t) { return i_first_on_ties ? t <= tj : t < tj; };
    const int64_t* t = c.times;
    int64_t last_in = c.pos;  // c.pos is in the run: i is the winner
    int64_t step = 1;
    int64_t probe = c.pos + 1;
    while (probe < c.end && in_run(t[probe])) {
      last_in = probe;
      step *= 2;
      probe = c.pos + step;
    }
    int64_t lo = last_in + 1;
    int64_t hi = std::min(probe, c.end);
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (in_run(t[mid])) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  // Moves the winner's cursor on by n rows and replays its path.
  void advance(uint32_t i, int64_t n) {
    Cursor& c = cursors_[i];
    c.pos += n;
    if (c.pos == c.end) pull(i);
    replay(i, key_of(i));
  }

  std::optional<Batch> produce() {
    if (pending_) {
      Batch b = std::move(*pending_);
      pending_.reset();
      return b;
    }
    if (deferred_) {
      const auto [input, rows] = *deferred_;
      deferred_.reset();
      advance(input, rows);
    }
    if (!started_) start();
    sources_.clear();
    segments_.clear();
    for (Cursor& c : cursors_) c.slot = -1;
    int64_t rows = 0;
    while (live(winner_) && rows < options_.batch_size) {
      const uint32_t i = key_order(winner_);
      Cursor& c = cursors_[i];
      // A new winner takes one row; if it wins again, the tree tells its runner-up and the rest of
      // its run is found by galloping. Inputs that interleave finely never pay for galloping.
      const int64_t end = runner_valid_ ? run_end(i, runner_) : c.pos + 1;
      // Rows of this run already gathered just before (its first row) join a slice.
      Segment* prev = segments_.empty() ? nullptr : &segments_.back();
      const bool continues = prev != nullptr && c.slot >= 0 &&
                             prev->source == static_cast<uint32_t>(c.slot) &&
                             prev->start + prev->length == c.pos;
      const int64_t start = continues ? prev->start : c.pos;
      if (end - start >= slice_rows_) {
        if (continues) {
          rows -= prev->length;
          segments_.pop_back();
        }
        Batch slice = c.batch.slice(start, end - start).with_schema(schema_);
        if (rows == 0) {
          // Move on at the next call, not now: reading the input's next batch now would run a
          // batch ahead of the consumer (and raise its errors before this batch is delivered).
          deferred_ = {i, end - c.pos};
          return slice;
        }
        // Emit what was gathered first, to keep the order, and move on only after both have left
        // (the move may pull the input's next batch, and a live input's pull may wait).
        deferred_ = {i, end - c.pos};
        pending_ = std::move(slice);
        break;
      }
      const int64_t take = std::min(end - c.pos, options_.batch_size - rows);
      if (continues) {
        prev->length += take;
      } else {
        if (c.slot < 0) {
          c.slot = static_cast<int32_t>(sources_.size());
          sources_.push_back(c.batch);
        }
        segments_.push_back(Segment{static_cast<uint32_t>(c.slot), c.pos, take});
      }
      rows += take;
      if (c.pos + take == c.end) {
        // The input's batch is used up, and pulling its next one may wait for a live producer.
        // Every row gathered precedes every other input's current row, and this input's next
        // rows come after them, so they are ready: they leave now, and the pull waits for the
        // next call. batch_size bounds a batch; it is never a reason to hold ready rows back.
        deferred_ = {i, take};
        break;
      }
      advance(i, take);
    }
    if (rows == 0) return std::nullopt;
    return gather(schema_, sources_, segments_);
  }

  MergeOptions options_;
  std::shared_ptr<const Schema> schema_;
  size_t time_index_ = 0;
  DataType time_type_;
  int64_t slice_rows_ = 1;
  std::vector<Cursor> cursors_;
  uint32_t leaves_ = 1;            // the loser tree's leaves: inputs rounded up to a power of two
  std::vector<Key> tree_;          // the loser of the match at each internal node (1-based)
  Key winner_ = 1;                 // the overall winner; not live() before start() or at the end
  Key runner_ = 1;                 // the runner-up, when runner_valid_ (see replay())
  bool runner_valid_ = false;
  std::vector<Batch> sources_;     // batches the output being built takes rows from
  std::vector<Segment> segments_;  // the output being built, as runs of those batches
  std::optional<Batch> pending_;   // a slice to emit after the gathered output before it
  std::optional<std::pair<uint32_t, int64_t>> deferred_;  // (input, rows) emitted, not yet advanced
  bool started_ = false;
  std::exception_ptr failure_;
};

}  // namespace

std::unique_ptr<BatchSource> make_merge(std::vector<std::unique_ptr<BatchSource>> inputs,
                                        MergeOptions options) {
  return std::make_unique<Merge>(std::move(inputs), std::move(options));
}

std::vector<std::unique_ptr<BatchSource>> unmerge(std::unique_ptr<BatchSource>& merged) {
  auto* m = dynamic_cast<Merge*>(merged.get());
  if (m == nullptr) return {};
  std::vector<std::unique_ptr<BatchSource>> parts = m->take_apart();
  if (!parts.empty()) merged.reset();
  return parts;
}

}  // namespace pao::gate
