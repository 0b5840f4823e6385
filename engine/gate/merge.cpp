#include "gate/merge.h"

#include <algorithm>
#include <exception>
#include <optional>

#include "core/error.h"
#include "core/gather.h"

namespace pao::gate {
namespace {

// Where the merge stands in one input.
struct Cursor {
  std::unique_ptr<BatchSource> source;  // reset as soon as the input ends
  Batch batch;                          // the batch rows are taken from now
  const int64_t* times = nullptr;       // batch's time values (widened if 32-bit)
  std::vector<int64_t> widened;
  int64_t pos = 0;                      // next row of `batch` to emit
  int64_t end = 0;                      // batch.num_rows()
  int64_t rows_before = 0;              // rows of this input in earlier batches
  int64_t last_time = 0;                // time of the input's previous row, once there is one
  bool has_last = false;
  int32_t slot = -1;                    // index of `batch` in the current output's sources
};

class Merge final : public BatchSource {
 public:
  Merge(std::vector<std::unique_ptr<BatchSource>> inputs, MergeOptions options)
      : options_(std::move(options)) {
    if (inputs.empty()) throw Error(ErrorKind::kInvalidInput, "merge needs at least one input");
    if (options_.batch_size < 1) {
      throw Error(ErrorKind::kInvalidInput,
                  "batch_size must be at least 1, got " + std::to_string(options_.batch_size));
    }
    const Schema& first = *inputs[0]->schema();
    std::optional<size_t> time = first.find(options_.time_column);
    if (!time) {
      throw Error(ErrorKind::kInvalidInput, "time column '" + options_.time_column +
                                                "' not found in input 0; its columns are: " +
                                                first.to_string());
    }
    time_index_ = *time;
    time_type_ = first.fields[time_index_].type;
    if (!time_type_.is_temporal_key()) {
      throw Error(ErrorKind::kInvalidInput,
                  "time column '" + options_.time_column + "' of input 0 has type " +
                      time_type_.to_string() +
                      "; expected a timestamp, date32, int32 or int64 column");
    }
    Schema merged = first;
    for (size_t i = 1; i < inputs.size(); ++i) {
      const Schema& other = *inputs[i]->schema();
      if (auto diff = schema_difference(first, other)) {
        throw Error(ErrorKind::kSchemaMismatch,
                    "input " + std::to_string(i) + " does not match input 0: " + *diff);
      }
      for (size_t f = 0; f < merged.fields.size(); ++f) {
        merged.fields[f].nullable = merged.fields[f].nullable || other.fields[f].nullable;
      }
    }
    schema_ = std::make_shared<const Schema>(std::move(merged));
    cursors_.resize(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) cursors_[i].source = std::move(inputs[i]);
    // One input: every run is the whole batch, so each batch passes through untouched. Several:
    // only long runs are worth a separate (zero-copy) batch; short ones are gathered together.
    slice_rows_ = cursors_.size() == 1 ? 1 : std::max<int64_t>(2, options_.batch_size / 16);
  }

  const std::shared_ptr<const Schema>& schema() const noexcept override { return schema_; }

  std::optional<Batch> next() override {
    if (failure_) std::rethrow_exception(failure_);
    try {
      return produce();
    } catch (...) {
      failure_ = std::current_exception();
      cursors_.clear();  // release every input now: nothing more will be read from them
      heap_.clear();
      sources_.clear();
      pending_.reset();
      deferred_.reset();
      throw;
    }
  }

 private:
  // An input's current row as a heap entry. The time is cached here so the heap compares
  // without touching the cursors.
  struct Head {
    int64_t time;
    uint32_t input;
  };
  // The merged order: (time, input index); position is implicit, as each input is in order.
  static bool less(const Head& a, const Head& b) noexcept {
    return a.time < b.time || (a.time == b.time && a.input < b.input);
  }

  void sift_down(size_t k) noexcept {
    const size_t n = heap_.size();
    const Head x = heap_[k];
    for (;;) {
      const size_t l = 2 * k + 1;
      if (l >= n) break;
      const size_t m = (l + 1 < n && less(heap_[l + 1], heap_[l])) ? l + 1 : l;
      if (!less(heap_[m], x)) break;
      heap_[k] = heap_[m];
      k = m;
    }
    heap_[k] = x;
  }

  void start() {
    for (uint32_t i = 0; i < cursors_.size(); ++i) {
      if (pull(i)) heap_.push_back({cursors_[i].times[0], i});
    }
    for (size_t k = heap_.size() / 2; k-- > 0;) sift_down(k);
    started_ = true;
  }

  // Loads input i's next non-empty batch and validates its time column. False at the input's end.
  bool pull(uint32_t i) {
    Cursor& c = cursors_[i];
    c.rows_before += c.end;
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
    const int64_t n = c.batch.num_rows();
    const Column& col = c.batch.column(time_index_);
    if (col.may_have_nulls()) {
      for (int64_t r = 0; r < n; ++r) {
        if (!col.is_valid(r)) {
          throw Error(ErrorKind::kNullTime, "input " + std::to_string(i) +
                                                " has a null time in column '" +
                                                options_.time_column + "' at row " +
                                                std::to_string(c.rows_before + r));
        }
      }
    }
    if (time_type_.byte_width() == 8) {
      c.times = col.typed<int64_t>();
    } else {
      const int32_t* narrow = col.typed<int32_t>();
      c.widened.assign(narrow, narrow + n);
      c.times = c.widened.data();
    }
    const int64_t* t = c.times;
    if (c.has_last && t[0] < c.last_time) unsorted(i, c.rows_before, t[0], c.last_time);
    for (int64_t r = 1; r < n; ++r) {
      if (t[r] < t[r - 1]) unsorted(i, c.rows_before + r, t[r], t[r - 1]);
    }
    c.last_time = t[n - 1];
    c.has_last = true;
    c.end = n;
    return true;
  }

  [[noreturn]] void unsorted(uint32_t input, int64_t row, int64_t value, int64_t previous) const {
    throw Error(ErrorKind::kUnsorted,
                "input " + std::to_string(input) + " is not sorted by '" + options_.time_column +
                    "': row " + std::to_string(row) + " has " +
                    format_time_value(value, time_type_) + ", earlier than " +
                    format_time_value(previous, time_type_) + " at row " +
                    std::to_string(row - 1));
  }

  // One past the last row of the heap top's current batch that precedes every other input's
  // current row in the merged order. Gallops, so a run of length L costs O(log L) comparisons.
  int64_t run_end(uint32_t i) const noexcept {
    const Cursor& c = cursors_[i];
    if (heap_.size() == 1) return c.end;
    const Head& next = (heap_.size() > 2 && less(heap_[2], heap_[1])) ? heap_[2] : heap_[1];
    const int64_t tj = next.time;
    const bool i_first_on_ties = i < next.input;
    auto in_run = [&](int64_t t) { return i_first_on_ties ? t <= tj : t < tj; };
    const int64_t* t = c.times;
    int64_t last_in = c.pos;  // c.pos is in the run: i is the minimum
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

  // Moves the heap top's cursor on by n rows and restores the heap.
  void advance(uint32_t i, int64_t n) {
    Cursor& c = cursors_[i];
    c.pos += n;
    if (c.pos == c.end && !pull(i)) {
      heap_[0] = heap_.back();
      heap_.pop_back();
      if (heap_.empty()) return;
    } else {
      heap_[0].time = c.times[c.pos];
    }
    sift_down(0);
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
    while (!heap_.empty() && rows < options_.batch_size) {
      const uint32_t i = heap_[0].input;
      Cursor& c = cursors_[i];
      const int64_t run = run_end(i) - c.pos;
      if (run >= slice_rows_) {
        Batch slice = c.batch.slice(c.pos, run).with_schema(schema_);
        if (rows == 0) {
          // Move on at the next call, not now: reading the input's next batch now would run a
          // batch ahead of the consumer (and raise its errors before this batch is delivered).
          deferred_ = {i, run};
          return slice;
        }
        advance(i, run);
        pending_ = std::move(slice);  // emit what was gathered first, to keep the order
        break;
      }
      const int64_t take = std::min(run, options_.batch_size - rows);
      if (c.slot < 0) {
        c.slot = static_cast<int32_t>(sources_.size());
        sources_.push_back(c.batch);
      }
      const auto slot = static_cast<uint32_t>(c.slot);
      if (!segments_.empty() && segments_.back().source == slot &&
          segments_.back().start + segments_.back().length == c.pos) {
        segments_.back().length += take;
      } else {
        segments_.push_back(Segment{slot, c.pos, take});
      }
      rows += take;
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
  std::vector<Head> heap_;         // inputs with rows left, a binary min-heap under less()
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

}  // namespace pao::gate
