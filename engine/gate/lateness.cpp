#include "gate/lateness.h"

#include <algorithm>
#include <deque>
#include <exception>
#include <iterator>
#include <numeric>
#include <span>
#include <optional>

#include "core/builder.h"
#include "core/error.h"
#include "core/gather.h"
#include "gate/times.h"

namespace pao::gate {

void LateRows::add(Chunk chunk) {
  std::lock_guard lock(mutex_);
  if (counts_.size() <= chunk.input) counts_.resize(chunk.input + 1, 0);
  counts_[chunk.input] += static_cast<int64_t>(chunk.rows.size());
  if (chunk.batch.num_rows() > 0) chunks_.push_back(std::move(chunk));
}

int64_t LateRows::count(int64_t input) const {
  std::lock_guard lock(mutex_);
  if (input < 0) return std::accumulate(counts_.begin(), counts_.end(), int64_t{0});
  return static_cast<size_t>(input) < counts_.size() ? counts_[static_cast<size_t>(input)] : 0;
}

std::vector<LateRows::Chunk> LateRows::peek(uint32_t input) const {
  std::lock_guard lock(mutex_);
  std::vector<Chunk> out;
  for (const Chunk& c : chunks_)
    if (c.input == input) out.push_back(c);
  return out;
}

std::vector<LateRows::Chunk> LateRows::take() {
  std::lock_guard lock(mutex_);
  std::vector<Chunk> out = std::move(chunks_);
  chunks_.clear();
  // One input's chunks are added in its arrival order; inputs interleave by timing, so order them.
  std::stable_sort(out.begin(), out.end(), [](const Chunk& a, const Chunk& b) { return a.input < b.input; });
  return out;
}

Lateness::Lateness(uint32_t input, std::string label, std::shared_ptr<const Schema> schema, const std::string& column,
                   LatenessOptions options, std::shared_ptr<LateRows> late)
    : input_(input), label_(std::move(label)), schema_(std::move(schema)), column_(column), options_(options),
      late_(std::move(late)) {
  const std::optional<size_t> index = schema_->find(column);
  if (!index) {
    throw Error(ErrorKind::kInvalidInput,
                "time column '" + column + "' not found in " + label_ + "; its columns are: " + schema_->to_string());
  }
  time_index_ = *index;
  type_ = schema_->fields[time_index_].type;
  if (!type_.is_temporal_key()) {
    throw Error(ErrorKind::kInvalidInput, "time column '" + column + "' of " + label_ + " has type " +
                                              type_.to_string() + "; expected a timestamp, date32, int32 or int64 column");
  }
  if (options_.bound < 0) {
    throw Error(ErrorKind::kUsage, "lateness must not be negative, got " + std::to_string(options_.bound));
  }
  if (!late_) late_ = std::make_shared<LateRows>();
}

void Lateness::resume_at(int64_t rows) {
  if (rows_ != 0 || !runs_.empty() || rows < 0) {
    throw Error(ErrorKind::kUsage, label_ + ": resume_at() takes a position >= 0 before the first push");
  }
  rows_ = rows;
}

void Lateness::push(const Batch& batch, std::vector<Batch>& out) {
  const int64_t n = batch.num_rows();
  if (n == 0) return;
  const int64_t* t = read_times(batch, time_index_, type_, widened_, label_, column_, rows_);
  // Judge each row against the watermark of the rows before it; nothing is kept until the whole
  // batch has passed (a late row under kError fails the input with none of the batch taken).
  int64_t latest = latest_;
  int64_t watermark = watermark_;
  Run run;
  run.times.reserve(static_cast<size_t>(n));
  run.rows.reserve(static_cast<size_t>(n));
  std::vector<int64_t> late;
  bool sorted = true;
  for (int64_t r = 0; r < n; ++r) {
    const int64_t time = t[r];
    if (time < watermark) {
      if (options_.policy == LatePolicy::kError) late_error(rows_ + r, time, latest);
      late.push_back(r);
      continue;
    }
    sorted &= run.times.empty() || time >= run.times.back();
    run.times.push_back(time);
    run.rows.push_back(r);
    if (time > latest) {
      latest = time;
      // Saturating: a time near INT64_MIN less the bound stays INT64_MIN.
      const int64_t bounded = latest < INT64_MIN + options_.bound ? INT64_MIN : latest - options_.bound;
      watermark = std::max(watermark, bounded);
    }
  }
  if (!sorted) {
    // Stable, so equal times keep their arrival order; (time, row) pairs side by side, so the
    // sort reads no other array.
    std::vector<std::pair<int64_t, int64_t>> pairs(run.rows.size());
    for (size_t i = 0; i < pairs.size(); ++i) pairs[i] = {run.times[i], run.rows[i]};
    std::stable_sort(pairs.begin(), pairs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < pairs.size(); ++i) {
      run.times[i] = pairs[i].first;
      run.rows[i] = pairs[i].second;
    }
  }
  if (!late.empty()) {
    LateRows::Chunk chunk{input_, {}, {}};
    chunk.rows.reserve(late.size());
    for (int64_t r : late) chunk.rows.push_back(rows_ + r);
    if (options_.policy == LatePolicy::kSide) {
      std::vector<Segment> segments;
      for (int64_t r : late) append_row(segments, 0, r);
      chunk.batch = gather(schema_, std::span<const Batch>(&batch, 1), segments);
    }
    late_->add(std::move(chunk));
    late_rows_ += static_cast<int64_t>(late.size());
  }
  rows_ += n;
  latest_ = latest;
  watermark_ = watermark;
  if (!run.rows.empty()) {
    held_ += static_cast<int64_t>(run.rows.size());
    run.batch = batch;
    runs_.push_back(std::move(run));
  }
  release(watermark_, out);
}

void Lateness::heartbeat(int64_t time, std::vector<Batch>& out) {
  if (time < heartbeat_) {
    throw Error(ErrorKind::kUnsorted, label_ + " sent a heartbeat at " + format_time_value(time, type_) +
                                          ", earlier than its previous heartbeat at " +
                                          format_time_value(heartbeat_, type_) + "; heartbeats must not go back");
  }
  heartbeat_ = time;
  watermark_ = std::max(watermark_, time);
  release(watermark_, out);
}

void Lateness::finish(std::vector<Batch>& out) { release(INT64_MAX, out); }

std::vector<Batch> Lateness::save() const {
  DataType i64;
  auto meta = std::make_shared<const Schema>(Schema{{{"rows", i64, false}, {"latest", i64, false},
                                                     {"heartbeat", i64, false}, {"watermark", i64, false},
                                                     {"late", i64, false}}});
  std::vector<ColumnBuilder> built = builders_of({i64, i64, i64, i64, i64});
  const int64_t values[5] = {rows_, latest_, heartbeat_, watermark_, late_rows_};
  for (size_t c = 0; c < 5; ++c) built[c].append_fixed(&values[c]);
  // Each run's rows not yet released, in arrival order (a run's are in (time, arrival) order).
  std::vector<Batch> sources;
  std::vector<Segment> segments;
  for (const Run& run : runs_) {
    if (run.next == run.rows.size()) continue;
    std::vector<int64_t> rows(run.rows.begin() + static_cast<std::ptrdiff_t>(run.next), run.rows.end());
    std::sort(rows.begin(), rows.end());
    for (int64_t r : rows) append_row(segments, static_cast<uint32_t>(sources.size()), r);
    sources.push_back(run.batch);
  }
  Batch held = sources.empty() ? empty_batch(schema_) : gather(schema_, sources, segments);
  std::vector<Batch> out{finish_batch(meta, built), std::move(held)};
  if (options_.policy == LatePolicy::kSide) {
    Schema with_row = *schema_;
    with_row.fields.push_back({"row", i64, false});
    std::vector<Batch> chunks;
    std::vector<Segment> all;
    std::vector<ColumnBuilder> rows = builders_of({i64});
    for (const LateRows::Chunk& c : late_->peek(input_)) {
      all.push_back({static_cast<uint32_t>(chunks.size()), 0, c.batch.num_rows()});
      chunks.push_back(c.batch);
      for (int64_t r : c.rows) rows[0].append_fixed(&r);
    }
    const Batch kept = chunks.empty() ? empty_batch(schema_) : gather(schema_, chunks, all);
    const Batch row = finish_batch(std::make_shared<const Schema>(Schema{{{"row", i64, false}}}), rows);
    out.push_back(side_by_side(std::make_shared<const Schema>(std::move(with_row)), kept, row));
  }
  return out;
}

void Lateness::restore(const std::vector<Batch>& state) {
  if (state.size() < 2 || state.size() > 3 || state[0].num_rows() != 1 || state[0].num_columns() != 5 || rows_ != 0 || !runs_.empty()) {
    throw Error(ErrorKind::kInvalidInput, label_ + ": a checkpoint's lateness buffer does not fit (or came after a push)");
  }
  const auto at = [&](size_t c) { return state[0].column(c).typed<int64_t>()[0]; };
  const Batch& held = state[1];
  latest_ = at(1);
  heartbeat_ = at(2);
  watermark_ = at(3);
  late_rows_ = at(4);
  rows_ = at(0) - held.num_rows();  // the held rows come back as the last ones taken
  std::vector<Batch> out;
  push(held.with_schema(schema_), out);
  if (!out.empty() || rows_ != at(0) || late_rows_ != at(4)) {
    throw Error(ErrorKind::kInvalidInput, label_ + ": a checkpoint's held rows are not above its watermark");
  }
}

void Lateness::release(int64_t upto, std::vector<Batch>& out) {
  // Each run's rows at or below `upto` (a prefix: the run is sorted).
  std::vector<Batch> sources;
  std::vector<std::pair<size_t, size_t>> spans;  // per contributing run: [next, end)
  std::vector<size_t> which;                     // its index in runs_
  int64_t last = INT64_MIN;
  bool concatenated = true;  // the runs' prefixes one after another are already in order
  for (size_t j = 0; j < runs_.size(); ++j) {
    Run& run = runs_[j];
    const auto end = static_cast<size_t>(
        std::upper_bound(run.times.begin() + static_cast<ptrdiff_t>(run.next), run.times.end(), upto) -
        run.times.begin());
    if (end == run.next) continue;
    // Runs are in arrival order, so a tie between runs already sorts the earlier first.
    concatenated &= run.times[run.next] >= last;
    last = run.times[end - 1];
    sources.push_back(run.batch);
    spans.emplace_back(run.next, end);
    which.push_back(j);
  }
  if (sources.empty()) return;

  std::vector<Segment> segments;
  int64_t released = 0;
  if (concatenated) {
    for (size_t s = 0; s < spans.size(); ++s) {
      const Run& run = runs_[which[s]];
      for (size_t i = spans[s].first; i < spans[s].second; ++i) append_row(segments, static_cast<uint32_t>(s), run.rows[i]);
      released += static_cast<int64_t>(spans[s].second - spans[s].first);
    }
  } else {
    // Interleaved runs: merge their sorted prefixes one run at a time, in arrival order.
    // std::merge is stable (of equal times, the first range's come first), and the first range
    // holds the earlier runs, so ties keep arrival order. Held runs are few (those within the
    // bound of the latest time), so the repeated merges cost O(rows x runs), not a sort.
    struct Entry {
      int64_t time;
      uint32_t source;
      int64_t row;
    };
    std::vector<Entry> merged;
    std::vector<Entry> next;
    std::vector<Entry> run_entries;
    for (size_t s = 0; s < spans.size(); ++s) {
      const Run& run = runs_[which[s]];
      run_entries.clear();
      for (size_t i = spans[s].first; i < spans[s].second; ++i)
        run_entries.push_back({run.times[i], static_cast<uint32_t>(s), run.rows[i]});
      next.clear();
      next.reserve(merged.size() + run_entries.size());
      std::merge(merged.begin(), merged.end(), run_entries.begin(), run_entries.end(), std::back_inserter(next),
                 [](const Entry& a, const Entry& b) { return a.time < b.time; });
      merged.swap(next);
    }
    for (const Entry& e : merged) append_row(segments, e.source, e.row);
    released = static_cast<int64_t>(merged.size());
  }
  for (size_t s = 0; s < spans.size(); ++s) runs_[which[s]].next = spans[s].second;
  std::erase_if(runs_, [](const Run& r) { return r.next == r.rows.size(); });
  held_ -= released;

  // Long segments leave as zero-copy slices of their batch; the short ones between them are
  // gathered together into one batch.
  constexpr int64_t kSliceRows = 256;
  std::vector<Segment> shorts;
  auto flush = [&] {
    if (shorts.empty()) return;
    out.push_back(gather(schema_, sources, shorts));
    shorts.clear();
  };
  for (const Segment& seg : segments) {
    if (seg.length >= kSliceRows) {
      flush();
      out.push_back(sources[seg.source].slice(seg.start, seg.length));
    } else {
      shorts.push_back(seg);
    }
  }
  flush();
}

void Lateness::late_error(int64_t row, int64_t time, int64_t latest) const {
  std::string why;
  const bool by_bound = latest != INT64_MIN &&
                        (latest < INT64_MIN + options_.bound ? INT64_MIN : latest - options_.bound) >= heartbeat_;
  if (by_bound) {
    why = "its latest time before it, " + format_time_value(latest, type_) + ", less the lateness of " +
          std::to_string(options_.bound);
  } else {
    why = "its heartbeat at " + format_time_value(heartbeat_, type_);
  }
  throw Error(ErrorKind::kUnsorted, label_ + " is not sorted by '" + column_ + "' within its lateness: row " +
                                        std::to_string(row) + " has " + format_time_value(time, type_) +
                                        ", earlier than " + why +
                                        " (raise lateness=, or pass late=\"drop\" or late=\"side\")");
}

namespace {

class LatenessSource final : public BatchSource {
 public:
  LatenessSource(std::unique_ptr<BatchSource> input, Lateness lateness, const InputState* resume)
      : input_(std::move(input)), lateness_(std::move(lateness)) {
    if (resume != nullptr) {
      lateness_.restore(resume->state);
      resumed_at_ = lateness_.rows();
      promised_ = lateness_.heartbeat_of();
      ready_.assign(resume->pending.begin(), resume->pending.end());
    }
  }

  // The rows of its input the buffer took (of the input as given: a restored one's input starts
  // where the cut left it, while the buffer counts from the original start, for late rows'
  // positions), what it released that next() has not returned, and the buffer itself.
  std::optional<Position> position() const override {
    if (failed_) return std::nullopt;
    Position p;
    p.rows = {lateness_.rows() - resumed_at_};
    p.held.assign(ready_.begin(), ready_.end());
    p.state = lateness_.save();
    return p;
  }

  const std::shared_ptr<const Schema>& schema() const noexcept override { return input_->schema(); }
  // Nothing earlier than the watermark leaves any more.
  int64_t bound() const noexcept override { return lateness_.watermark(); }
  // Takes in what the input has at hand until something can leave (rows, a pulse, the end): an
  // input row that releases nothing and moves no watermark is taken here, not in next(), so next()
  // never waits on the producer after ready() said true.
  bool ready() override {
    if (failed_) return true;
    try {
      while (ready_.empty() && !done_ && !pulse_) {
        if (!input_->ready()) return false;
        take_one();
      }
    } catch (...) {
      failed_ = std::current_exception();  // next() throws it
    }
    return true;
  }

  std::optional<Batch> next() override {
    if (failed_) std::rethrow_exception(failed_);
    try {
      while (ready_.empty() && !done_ && !pulse_) take_one();
    } catch (...) {
      failed_ = std::current_exception();
      throw;
    }
    if (ready_.empty() && pulse_) {
      pulse_ = false;
      return empty_batch(schema());
    }
    if (ready_.empty()) return std::nullopt;
    Batch b = std::move(ready_.front());
    ready_.pop_front();
    return b;
  }

 private:
  // The input's next item, through the buffer: released rows into ready_, a pulse, or the end.
  void take_one() {
    std::vector<Batch> out;
    if (std::optional<Batch> b = input_->next()) {
      if (b->num_rows() == 0 && input_->bound() > promised_) {
        // The input's heartbeat: rows up to it are released, and what is still held (or comes
        // later and is not late) is at or after the watermark, which the consumer hears (an
        // empty batch) as soon as the released rows are out.
        promised_ = input_->bound();
        lateness_.heartbeat(promised_, out);
        pulse_ = true;
      } else {
        const int64_t before = lateness_.watermark();
        lateness_.push(*b, out);
        // Rows held, none released, and the input has nothing more at hand: the consumer hears
        // the risen watermark now instead of waiting here for the input's producer.
        if (out.empty() && lateness_.watermark() > before && !input_->ready()) pulse_ = true;
      }
    } else {
      lateness_.finish(out);
      done_ = true;
    }
    for (Batch& b : out) ready_.push_back(std::move(b));
  }

  std::unique_ptr<BatchSource> input_;
  Lateness lateness_;
  std::deque<Batch> ready_;
  int64_t promised_ = INT64_MIN;  // the input's latest heartbeat
  int64_t resumed_at_ = 0;        // a restored buffer's rows taken before the cut
  bool pulse_ = false;  // the watermark rose (a heartbeat): an empty batch follows the rows released
  bool done_ = false;
  std::exception_ptr failed_;
};

}  // namespace

std::unique_ptr<BatchSource> within_lateness(std::unique_ptr<BatchSource> input, uint32_t index, std::string label,
                                             const std::string& column, LatenessOptions options,
                                             std::shared_ptr<LateRows> late, const BatchSource::InputState* resume) {
  Lateness lateness(index, std::move(label), input->schema(), column, options, std::move(late));
  return std::make_unique<LatenessSource>(std::move(input), std::move(lateness), resume);
}

}  // namespace pao::gate
