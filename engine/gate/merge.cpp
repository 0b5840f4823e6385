#include "gate/merge.h"

#include <algorithm>
#include <deque>
#include <exception>
#include <limits>
#include <optional>
#include <span>

#include "core/builder.h"
#include "core/error.h"
#include "core/gather.h"
#include "core/loser_tree.h"
#include "core/order_key.h"
#include "gate/times.h"
#include "sync/fork_join.h"

namespace pao::gate {
namespace {

// Where the merge stands in one input.
struct Cursor {
  std::unique_ptr<BatchSource> source;  // reset as soon as the input ends
  Batch batch;                          // the batch rows are taken from now
  const int64_t* times = nullptr;       // batch's time values (widened if 32-bit)
  std::optional<InputTimes> checked;    // validates each batch's times as it is pulled
  int64_t pos = 0;                      // next row of `batch` to emit
  int64_t before = 0;                   // rows of the input in batches before `batch` (position())
  std::optional<BatchSource::Position> last;  // the input's position() at its end (it is released then)
  int64_t end = 0;                      // batch.num_rows()
  // Open, without rows, and heartbeated (BatchSource::bound): its next row is at or after
  // (promise, this input) in the merged order, so the others' rows before that need not wait for
  // it. Pulled again only when no row can leave without it.
  bool waiting = false;
  int64_t promise = INT64_MIN;
  // The times of `batch` are not read (validated) yet: a large batch is read with the others
  // pulled for the same region, on the merge's threads (check_pulled), before any row is used.
  bool unchecked = false;
};

// Rows [lo, hi) of one input's current batch.
struct Span {
  int64_t lo;
  int64_t hi;
};

// A batch a part made: gathered rows (input < 0), or rows [start, start + length) of an input's
// batch, as a zero-copy slice.
struct Made {
  Batch batch;
  int64_t input = -1;
  int64_t start = 0;
  int64_t length = 0;
};

// A part of a region: a span of every input, merged on its own into `out`.
struct Part {
  std::vector<Span> spans;
  std::vector<Made> out;
  // The rows of the batch being built, one by one (inputs that interleave finely make runs of a
  // row or two, which gather copies row by row anyway): kept from region to region, so its memory
  // is not touched for the first time (page faults) at every region.
  std::vector<RowRef> rows;
  // Per input, the bits of `rows` that are its (SourceMasks: the gather's plan of them), kept so.
  std::vector<uint64_t> masks;
};

// The merge works region by region. A region is every row that is ready without pulling an input:
// the input whose current batch ends with the least key gives its whole batch, every other input
// its rows before that key (a row after it could be preceded by that input's next batch). A
// region is cut into parts at pivot keys (every input's rows before a pivot go to earlier parts),
// so the parts merge independently, on as many threads as the merge has, and their outputs in
// part order are the region's merged order. Only after the region's last batch has been taken are
// the inputs whose batches it used up pulled: nothing is read ahead of the consumer.
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
    if (options_.threads < 1 || options_.part_rows < 1) {
      throw Error(ErrorKind::kInvalidInput, "threads and part_rows must be at least 1");
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
    gallop_after_ = std::min(kRowsBeforeGalloping, slice_rows_ - 1);
  }

  const std::shared_ptr<const Schema>& schema() const noexcept override { return schema_; }
  // The least time the merge may still emit, as last reported with an empty batch: when no row
  // can leave until a heartbeated input sends more, the consumer hears how far the merge got.
  int64_t bound() const noexcept override { return announced_; }
  // Takes in what the inputs have at hand (find_region without waiting): true once next() can return a
  // region, an announcement or the end without waiting for an input's producer.
  bool ready() override {
    if (failure_ || !ready_.empty()) return true;
    started_ = true;  // inputs are read from now on: no unmerge()
    try {
      return find_region(false) != Found::kBlocked;
    } catch (...) {
      failure_ = std::current_exception();  // next() throws it
      cursors_.clear();
      ready_.clear();
      return true;
    }
  }

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
      o.threads = 1;
      parts.push_back(std::make_unique<Merge>(std::move(one), std::move(o)));
    }
    return parts;
  }

  // The rows of each input up to its cursor (a region's rows are all taken when it is cut into
  // ready_), and the batches of ready_ not returned yet.
  // An input that keeps state (a lateness buffer) counts its own input's rows, and what it
  // handed out that the merge has not merged goes back to it as pending: the rest of the cursor's
  // batch, then its own held batches.
  std::optional<Position> position() const override {
    if (failure_) return std::nullopt;
    Position p;
    bool stateful = false;
    for (const Cursor& c : cursors_) {
      std::optional<Position> inner = c.source ? c.source->position() : c.last;
      if (inner && !inner->state.empty()) {
        stateful = true;
        p.rows.push_back(inner->rows.at(0));
        InputState in{std::move(inner->state), {}};
        if (c.pos < c.end) in.pending.push_back(c.batch.slice(c.pos, c.end - c.pos));
        for (Batch& b : inner->held) in.pending.push_back(std::move(b));
        p.inputs.push_back(std::move(in));
      } else {
        p.rows.push_back(c.before + c.pos);
        p.inputs.emplace_back();
      }
    }
    if (!stateful) p.inputs.clear();
    p.held.assign(ready_.begin(), ready_.end());
    return p;
  }

  std::optional<Batch> next() override {
    if (failure_) std::rethrow_exception(failure_);
    try {
      return produce();
    } catch (...) {
      failure_ = std::current_exception();
      cursors_.clear();  // release every input now: nothing more will be read from them
      ready_.clear();
      throw;
    }
  }

 private:
  // Loads input i's next non-empty batch and validates its time column; at the input's end,
  // releases it and leaves it without rows; at a heartbeat that raises its floor, leaves it
  // waiting, with the floor as its promise.
  // With `wait` false it pulls only while the input has something at hand, and may stop with no
  // rows and no new promise (waiting on its old one, if it ever heartbeated).
  void pull(uint32_t i, bool wait = true) {
    Cursor& c = cursors_[i];
    c.before += c.end;
    c.batch = Batch();
    c.pos = c.end = 0;
    c.waiting = false;
    for (;;) {
      if (!wait && !c.source->ready()) break;
      std::optional<Batch> b = c.source->next();
      if (!b) {
        c.last = c.source->position();
        c.source.reset();
        return;
      }
      if (b->num_rows() > int64_t{std::numeric_limits<uint32_t>::max()}) {
        // A merged row is named by a 32-bit row of its batch (RowRef).
        throw Error(ErrorKind::kInvalidInput, "input " + std::to_string(options_.first_input + i) + " sent a batch of " +
                                                  std::to_string(b->num_rows()) + " rows; the merge takes batches of at most " +
                                                  "4,294,967,295 rows (split it)");
      }
      if (b->num_rows() > 0) {
        c.batch = std::move(*b);
        c.end = c.batch.num_rows();
        c.unchecked = options_.threads > 1 && c.end >= kCheckedTogether;
        if (!c.unchecked) c.times = c.checked->read(c.batch);
        return;
      }
      if (const int64_t h = c.source->bound(); h != INT64_MIN) {
        c.checked->heartbeat(h);  // throws if it goes back
        if (c.checked->floor() > c.promise) {
          c.promise = c.checked->floor();
          break;
        }
      }
    }
    // No rows: an input that ever heartbeated waits on its promise (it holds for every row to come).
    c.waiting = c.promise != INT64_MIN;
  }

  // The first row of input j in [c.pos, c.end) at or after key (time, input) in the merged order:
  // j's rows with a time below `time` come first, and those equal to it too when j < input.
  int64_t bound(uint32_t j, int64_t time, uint32_t input) const noexcept {
    const Cursor& c = cursors_[j];
    const int64_t* t = c.times;
    const int64_t* at = j < input ? std::upper_bound(t + c.pos, t + c.end, time) : std::lower_bound(t + c.pos, t + c.end, time);
    return at - t;
  }

  // Batches of this many rows or more are read (validated) together (check_pulled): reading an
  // input's times is a pass over memory not in cache, a twentieth of the merge of 4 inputs
  // (benchmarks/merge.py), and on one thread it is all before any merging starts.
  static constexpr int64_t kCheckedTogether = 65536;

  // Reads the times of every batch pull() left unchecked, several inputs' at once on the merge's
  // threads; then throws the error of the first input whose batch has one, as reading each at its
  // pull would have.
  void check_pulled() {
    std::vector<uint32_t> todo;
    for (uint32_t i = 0; i < cursors_.size(); ++i) {
      if (cursors_[i].unchecked) todo.push_back(i);
    }
    if (todo.empty()) return;
    std::vector<std::exception_ptr> errors(todo.size());
    auto check = [&](size_t t) {
      Cursor& c = cursors_[todo[t]];
      try {
        c.times = c.checked->read(c.batch);  // each input's own InputTimes: no state shared
      } catch (...) {
        errors[t] = std::current_exception();
      }
      c.unchecked = false;
    };
    if (todo.size() == 1) {
      check(0);
    } else {
      pool().run(todo.size(), check);
    }
    for (const std::exception_ptr& e : errors) {
      if (e) std::rethrow_exception(e);
    }
  }

  sync::ForkJoin& pool() {
    if (!pool_) pool_ = std::make_unique<sync::ForkJoin>(options_.threads - 1);
    return *pool_;
  }

  enum class Found { kRegion, kAnnounce, kEnd, kBlocked };

  // Pulls what the next region needs until it has rows (region_, rows_, widest_), the merge has a
  // promise to announce (the least input's, least_: no row can leave before that input, waiting
  // on its promise, sends more; an input with rows that is least gives its whole batch), or every
  // input has ended. The region: each input's rows before the least of the keys that bound what
  // the inputs hold, the last key of each current batch and each waiting input's promise. With
  // `wait` false it pulls only inputs that have something at hand, and says kBlocked where it
  // would wait.
  Found find_region(bool wait) {
    const auto k = static_cast<uint32_t>(cursors_.size());
    const WideKeys wide;
    for (;;) {
      try {
        for (uint32_t i = 0; i < k; ++i) {
          const Cursor& c = cursors_[i];
          if (!c.source || c.pos < c.end || c.waiting) continue;
          pull(i, wait);
          if (c.source && c.pos == c.end && !c.waiting) return Found::kBlocked;  // only without waiting
        }
      } catch (...) {
        check_pulled();  // an earlier input's bad batch comes first: reading it at its pull would have thrown
        throw;
      }
      check_pulled();
      least_ = k;
      WideKeys::Key least_key = 0;
      for (uint32_t i = 0; i < k; ++i) {
        const Cursor& c = cursors_[i];
        if (c.pos == c.end && !c.waiting) continue;
        const WideKeys::Key last = c.waiting ? wide.make(c.promise, i) : wide.make(c.times[c.end - 1], i);
        if (least_ == k || last < least_key) {
          least_ = i;
          least_key = last;
        }
      }
      if (least_ == k) return Found::kEnd;
      rows_ = 0;
      widest_ = least_;
      region_.assign(k, Span{0, 0});  // none of the last region's spans: widest_ compares with them
      for (uint32_t i = 0; i < k; ++i) {
        const Cursor& c = cursors_[i];
        region_[i] = {c.pos, c.pos == c.end ? c.pos : i == least_ ? c.end : bound(i, wide.time(least_key), least_)};
        rows_ += region_[i].hi - region_[i].lo;
        if (region_[i].hi - region_[i].lo > region_[widest_].hi - region_[widest_].lo) widest_ = i;
      }
      if (rows_ > 0) return Found::kRegion;
      if (cursors_[least_].promise > announced_) return Found::kAnnounce;
      if (!wait && !cursors_[least_].source->ready()) return Found::kBlocked;
      pull(least_, wait);
    }
  }

  std::optional<Batch> produce() {
    if (!ready_.empty()) {
      Batch b = std::move(ready_.front());
      ready_.pop_front();
      return b;
    }
    // Every input whose batch is used up (all of them, at the start) moves on now, not when the
    // region used it up: reading its next batch then would run ahead of the consumer (and raise
    // its errors before the rows before them were delivered).
    started_ = true;
    switch (find_region(true)) {
      case Found::kEnd:
        return std::nullopt;
      case Found::kAnnounce:
        // Every row still to come is at or after the least input's promise: tell the consumer
        // once, then (next call) wait for that input.
        announced_ = cursors_[least_].promise;
        return empty_batch(schema_);
      case Found::kRegion:
      case Found::kBlocked:  // only without waiting
        break;
    }
    const auto k = static_cast<uint32_t>(cursors_.size());
    std::vector<Span>& region = region_;
    const int64_t rows = rows_;
    const uint32_t widest = widest_;

    // Parts: one with one thread (batches of batch_size rows, as without parts); with more, enough
    // for every thread to take several, cut at rows of the widest input spread evenly over it.
    // Parts merge in pairs (merge_pair), so a region of two parts' rows or more makes an even
    // number of them, one thread too.
    size_t parts = 1;
    const auto live = std::count_if(region.begin(), region.end(), [](const Span& sp) { return sp.hi > sp.lo; });
    if (live > 1 && rows >= 2 * options_.part_rows) {
      parts = options_.threads == 1 ? 2
              : static_cast<size_t>(std::clamp<int64_t>(rows / options_.part_rows, 2, 4 * int64_t{options_.threads})) & ~size_t{1};
    }
    std::vector<Part>& cut = parts_;
    cut.resize(std::max(cut.size(), parts));
    for (Part& p : cut) p.out.clear();
    std::vector<int64_t> at(k);
    for (uint32_t i = 0; i < k; ++i) at[i] = region[i].lo;
    for (size_t p = 0; p < parts; ++p) {
      cut[p].spans.resize(k);
      const Span& w = region[widest];
      const int64_t pivot = p + 1 == parts ? w.hi : w.lo + (w.hi - w.lo) * static_cast<int64_t>(p + 1) / static_cast<int64_t>(parts);
      for (uint32_t i = 0; i < k; ++i) {
        int64_t hi = region[i].hi;
        if (p + 1 < parts) {
          hi = i == widest ? pivot : std::min(region[i].hi, bound(i, cursors_[widest].times[pivot], widest));
        }
        cut[p].spans[i] = {at[i], std::max(at[i], hi)};
        at[i] = cut[p].spans[i].hi;
      }
    }
    std::vector<Batch> sources(k);
    // An input without rows stands in with a batch of the region's (no segment reads it).
    for (uint32_t i = 0; i < k; ++i) sources[i] = cursors_[i].pos == cursors_[i].end ? cursors_[widest].batch : cursors_[i].batch;
    if (parts == 1) {
      merge_part(cut[0], sources);
    } else if (options_.threads == 1) {
      merge_pair(cut[0], cut[1], sources);
    } else {
      pool().run(parts / 2, [&](size_t q) { merge_pair(cut[2 * q], cut[2 * q + 1], sources); });
    }
    // Slices of one input batch that parts cut apart leave whole again (disjoint inputs pass
    // through as they would with one thread).
    Made last;
    for (size_t p = 0; p < parts; ++p) {
      for (Made& m : cut[p].out) {
        if (m.input >= 0 && m.input == last.input && last.start + last.length == m.start) {
          last.length += m.length;
          last.batch = sources[static_cast<size_t>(m.input)].slice(last.start, last.length).with_schema(schema_);
          continue;
        }
        if (last.batch.schema() != nullptr) ready_.push_back(std::move(last.batch));
        last = std::move(m);
      }
    }
    if (last.batch.schema() != nullptr) ready_.push_back(std::move(last.batch));
    for (uint32_t i = 0; i < k; ++i) cursors_[i].pos = region[i].hi;
    Batch b = std::move(ready_.front());
    ready_.pop_front();
    return b;
  }

  // One past the last row of input i in [pos, hi) that precedes `next` (the runner-up) in the
  // merged order. Gallops, so a run of length L costs O(log L) comparisons.
  template <class Keys>
  static int64_t run_end(const Keys& keys, const int64_t* t, uint32_t i, int64_t pos, int64_t hi,
                         typename Keys::Key next) noexcept {
    const int64_t tj = keys.time(next);
    const bool i_first_on_ties = i < keys.order(next);
    auto in_run = [&](int64_t v) { return i_first_on_ties ? v <= tj : v < tj; };
    int64_t last_in = pos;  // pos is in the run: i is the winner
    int64_t step = 1;
    int64_t probe = pos + 1;
    while (probe < hi && in_run(t[probe])) {
      last_in = probe;
      step *= 2;
      probe = pos + step;
    }
    int64_t lo = last_in + 1;
    int64_t end = std::min(probe, hi);
    while (lo < end) {
      const int64_t mid = lo + (end - lo) / 2;
      if (in_run(t[mid])) lo = mid + 1; else end = mid;
    }
    return lo;
  }

  // The keys a part's rows play their tournament with: narrow when its times allow.
  std::optional<NarrowKeys> narrow_keys(const Part& part) const {
    int64_t lo = std::numeric_limits<int64_t>::max();
    int64_t hi = std::numeric_limits<int64_t>::min();
    for (uint32_t i = 0; i < part.spans.size(); ++i) {
      const Span& sp = part.spans[i];
      if (sp.lo == sp.hi) continue;
      lo = std::min(lo, cursors_[i].times[sp.lo]);
      hi = std::max(hi, cursors_[i].times[sp.hi - 1]);
    }
    return NarrowKeys::fit(lo, hi, leaves_for(part.spans.size()));
  }

  // Merges one part into part.out (Lane). Reads the cursors and `sources` only (they stay as they
  // are while a region's parts run), so parts run concurrently.
  void merge_part(Part& part, const std::vector<Batch>& sources) const {
    with_keys(part, part, [&](const auto& keys, const auto&, auto masks) {
      Lane<std::decay_t<decltype(keys)>, decltype(masks)::value> lane(*this, keys, part, sources);
      while (lane.step()) {}
    });
  }

  // Merges two parts at once, a row of each in turn (step_together, core/loser_tree.h).
  void merge_pair(Part& a, Part& b, const std::vector<Batch>& sources) const {
    with_keys(a, b, [&](const auto& ka, const auto& kb, auto masks) {
      using L = Lane<std::decay_t<decltype(ka)>, decltype(masks)::value>;
      L x(*this, ka, a, sources);
      L y(*this, kb, b, sources);
      step_together(x, y);
    });
  }

  // Calls f(keys of a, keys of b, masks): keys of one type for both parts, narrow when both parts'
  // times allow; masks a std::bool_constant, whether the lanes mark each input's rows for the
  // gather (SourceMasks), which it takes from inputs few enough.
  template <class F>
  void with_keys(const Part& a, const Part& b, F&& f) const {
    const auto na = narrow_keys(a);
    const auto nb = &a == &b ? na : narrow_keys(b);  // merge_part: one part
    auto go = [&](auto masks) {
      if (na && nb) {
        f(*na, *nb, masks);
      } else {
        f(WideKeys{}, WideKeys{}, masks);
      }
    };
    if (cursors_.size() <= SourceMasks::kMaxSources) {
      go(std::true_type{});
    } else {
      go(std::false_type{});
    }
  }

  // Rows an input takes one at a time before the merge looks for the end of its run at once
  // (gallop_after_: fewer when a run of that many rows leaves as a slice; none with one input).
  static constexpr int64_t kRowsBeforeGalloping = 8;

  // The merge of one part, a winner's rows per step: runs of at least slice_rows_ rows as
  // zero-copy slices of their input's batch, the rest gathered into batches of up to batch_size
  // rows, appended to part.out. With kMasks it marks each input's rows of the batch as it writes
  // them (SourceMasks), so the gather need not find them in a pass of its own over the rows.
  template <class Keys, bool kMasks>
  class Lane {
   public:
    using Key = typename Keys::Key;
    Lane(const Merge& merge, const Keys& keys, Part& part, const std::vector<Batch>& sources)
        : m_(merge), keys_(keys), part_(part), sources_(sources), k_(static_cast<uint32_t>(part.spans.size())),
          heads_(k_), tree_(keys, first_keys(merge, keys, part)), rows_(part.rows),
          batch_size_(merge.options_.batch_size), gallop_after_(merge.gallop_after_) {
      for (uint32_t i = 0; i < k_; ++i) heads_[i] = {m_.cursors_[i].times, part.spans[i].lo, part.spans[i].hi};
      last_ = k_;
      int64_t part_rows = 0;
      for (const Span& sp : part.spans) part_rows += sp.hi - sp.lo;
      const int64_t most = std::min(part_rows, batch_size_);
      if (static_cast<int64_t>(rows_.size()) < most) rows_.resize(static_cast<size_t>(most));
      refs_ = rows_.data();
      if constexpr (kMasks) {
        words_ = static_cast<size_t>((most + 63) / 64);
        part.masks.assign(k_ * words_, 0);
        for (uint32_t i = 0; i < k_; ++i) heads_[i].mask = part.masks.data() + i * words_;
      }
    }

    // Takes the next winner's rows; false once the part is merged (its last batch made). Inlined
    // into merge_pair's loop, so the two lanes' steps are one stretch of code to schedule.
    [[gnu::always_inline]] bool step() {
      const Key winner = tree_.winner();
      if (!tree_.live(winner)) [[unlikely]] {
        flush();
        return false;
      }
      const uint32_t i = keys_.order(winner);
      Head& h = heads_[i];
      // Rows of this run already in the batch. A mask, not a select: GCC made the select a branch,
      // which inputs that interleave finely mispredict at every other row.
      const int64_t before = trail_ & -static_cast<int64_t>(last_ == i);
      if (before < gallop_after_) [[likely]] {
        // A row at a time: inputs that interleave finely (runs of a row or two) take this path
        // at every row, where asking the tree for the runner-up and galloping would cost a
        // mispredicted branch at nearly every row.
        if constexpr (kMasks) h.mask[n_ >> 6] |= uint64_t{1} << (n_ & 63);
        refs_[n_++] = {i, static_cast<uint32_t>(h.pos)};
        trail_ = before + 1;
        last_ = i;
        ++h.pos;
        if (n_ == batch_size_) [[unlikely]] flush();
      } else {
        take_run(i, h, before);
      }
      // Each input's times are a stream of their own, and two lanes of 20 inputs are more streams
      // than the hardware prefetcher follows: the load of the next time missed the cache. Asking
      // for the line 32 rows ahead made the merge of 20 inputs 4-5% faster (one thread and two),
      // and cost nothing measurable at 4.
      // (The address by integer arithmetic: past the batch's end it is only a hint, never a pointer.)
      __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(h.times + h.pos) + 32 * sizeof(int64_t)));
      tree_.replay(i, h.pos < h.hi ? keys_.make(h.times[h.pos], i) : tree_.ended(i));
      return true;
    }

   private:
    // What the lane needs of input i at every row, together (one index, one line).
    struct Head {
      const int64_t* times;     // the input's batch's times
      int64_t pos;              // the next row of its span
      int64_t hi;               // its span's end
      uint64_t* mask = nullptr;  // kMasks: its rows among rows_[0, n_), as bits (words_ words)
    };

    // Sets (or clears) bits [from, from + count) of an input's mask.
    static void mark(uint64_t* mask, int64_t from, int64_t count, bool on) noexcept {
      for (int64_t r = from; r < from + count; ++r) {
        const uint64_t bit = uint64_t{1} << (r & 63);
        mask[r >> 6] = on ? mask[r >> 6] | bit : mask[r >> 6] & ~bit;
      }
    }

    static std::vector<Key> first_keys(const Merge& m, const Keys& keys, const Part& part) {
      const auto k = static_cast<uint32_t>(part.spans.size());
      const uint32_t leaves = leaves_for(k);
      std::vector<Key> first(k);
      for (uint32_t i = 0; i < k; ++i) {
        const Span& sp = part.spans[i];
        first[i] = sp.lo < sp.hi ? keys.make(m.cursors_[i].times[sp.lo], i) : keys.last(leaves + i);
      }
      return first;
    }

    // Input i won gallop_after_ times in a row: the rest of its run is found by galloping up to
    // the runner-up's key (one input: no runner-up, and its rows are one run), and leaves as a
    // slice when long enough, else as rows. Advances h.pos past it.
    [[gnu::noinline]] void take_run(uint32_t i, Head& h, int64_t before) {
      const Key runner = tree_.runner();
      const int64_t end = tree_.live(runner) ? run_end(keys_, h.times, i, h.pos, h.hi, runner) : h.hi;
      if (end - (h.pos - before) >= m_.slice_rows_) {
        if constexpr (kMasks) mark(h.mask, n_ - before, before, false);
        n_ -= before;
        flush();
        const int64_t start = h.pos - before;
        part_.out.push_back({sources_[i].slice(start, end - start).with_schema(m_.schema_), i, start, end - start});
        h.pos = end;
        return;
      }
      const int64_t take = std::min(end - h.pos, batch_size_ - n_);
      RowRef* out = refs_ + n_;
      for (int64_t r = h.pos; r < h.pos + take; ++r) *out++ = {i, static_cast<uint32_t>(r)};
      if constexpr (kMasks) mark(h.mask, n_, take, true);
      n_ += take;
      trail_ = before + take;
      h.pos += take;
      if (n_ == batch_size_) flush();
    }

    [[gnu::noinline]] void flush() {
      if (n_ > 0) {
        const SourceMasks masks{part_.masks.data(), words_};
        part_.out.push_back({gather(m_.schema_, sources_, std::span<const RowRef>(refs_, static_cast<size_t>(n_)),
                                    m_.options_.streamed ? Stores::kStreamed : Stores::kCached,
                                    kMasks ? &masks : nullptr)});
        if constexpr (kMasks) {
          // The next batch starts with no marks: every input's words this one used back to 0.
          const size_t used = static_cast<size_t>((n_ + 63) / 64);
          for (uint32_t i = 0; i < k_; ++i) std::fill_n(heads_[i].mask, used, uint64_t{0});
        }
      }
      n_ = 0;
      last_ = k_;
      trail_ = 0;
    }

    const Merge& m_;
    Keys keys_;
    Part& part_;
    const std::vector<Batch>& sources_;
    uint32_t k_;
    std::vector<Head> heads_;
    LoserTree<Keys> tree_;
    // rows_[0, n_): the batch being built. Its last trail_ rows are input last_'s rows just
    // before heads_[last_].pos (a run that a slice may take over whole).
    std::vector<RowRef>& rows_;
    RowRef* refs_;  // rows_.data(), sized once (a row's store needs no load of the vector's pointer)
    size_t words_ = 0;  // kMasks: words of each input's mask (part_.masks)
    int64_t batch_size_;
    int64_t gallop_after_;
    int64_t n_ = 0;
    uint32_t last_;
    int64_t trail_ = 0;
  };

  MergeOptions options_;
  std::shared_ptr<const Schema> schema_;
  size_t time_index_ = 0;
  DataType time_type_;
  int64_t slice_rows_ = 1;
  int64_t gallop_after_ = 0;
  std::vector<Cursor> cursors_;
  std::deque<Batch> ready_;  // the current region's batches not yet taken
  std::vector<Part> parts_;  // the current region's parts (the first `parts` of them)
  std::unique_ptr<sync::ForkJoin> pool_;  // threads - 1 helpers, made at first use (pool())
  bool started_ = false;
  int64_t announced_ = INT64_MIN;  // bound() (see there)
  // What find_region() found: the region, its rows, its widest input, the input bounding it.
  std::vector<Span> region_;
  int64_t rows_ = 0;
  uint32_t widest_ = 0;
  uint32_t least_ = 0;
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
