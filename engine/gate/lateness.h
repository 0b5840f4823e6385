#pragma once
// Inputs out of order within a bound (issue 31): one input's rows, arriving out of time order by
// at most `bound`, put back in time order before anything downstream (the merge, the T-Gate, a
// pipeline) sees them, with the rows that come later than the bound allows handled by a policy.
//
// The definition, per input and by arrival position only (so it is the same whatever the batch
// sizes, thread counts or designs):
//  - the watermark before row r is W_r = max(the latest time of a row before r that was not late
//    - bound, the latest heartbeat), INT64_MIN before anything;
//  - row r is late when its time is below W_r. A late row never moves the watermark;
//  - the rows that are not late leave in (time, arrival position) order, each as soon as its
//    time is at most the watermark: every row not yet seen that is not late has a time of at
//    least the watermark, and arrives later, so it sorts after. With bound 0 nothing is held: a
//    row leaves as it arrives, and a late row is exactly what the sorted check refuses today.
// The watermark is a promise about what leaves: nothing earlier follows (a heartbeat for the
// consumer, which is how readiness accounts for the bound).
//
// What the paper's readiness (Definition 1) needs is a sorted input; this is the smallest buffer
// that makes one out of a bounded disorder. Held rows stay in their batches (no copy until they
// leave); each batch's rows that are not late form a run sorted by time (stably, so ties keep
// arrival order), and a release merges the runs' prefixes at or below the watermark. Rows that
// leave together from one run in arrival order leave as zero-copy slices where long enough.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/batch.h"

namespace pao::gate {

enum class LatePolicy : uint8_t {
  kError,  // a late row fails the input (kUnsorted naming the input, row, time and watermark)
  kDrop,   // counted, then left out
  kSide,   // counted and kept for a second result (LateRows::take)
};

// Late rows of the inputs of one run, shared by their Lateness objects (each input's own thread
// may add) and read by the caller. Thread-safe (a mutex: late rows are the exception).
class LateRows {
 public:
  struct Chunk {
    uint32_t input;
    std::vector<int64_t> rows;  // positions in the input's arrival order
    Batch batch;                // those rows, in that order (kSide; empty for kDrop)
  };
  void add(Chunk chunk);
  // How many late rows an input had (all inputs with input < 0).
  int64_t count(int64_t input = -1) const;
  // The kept chunks, by input and then arrival position; taken once.
  std::vector<Chunk> take();
  // Input `input`'s chunks not taken yet, left in place (a checkpoint's copy).
  std::vector<Chunk> peek(uint32_t input) const;

 private:
  mutable std::mutex mutex_;
  std::vector<Chunk> chunks_;
  std::vector<int64_t> counts_;  // by input
};

struct LatenessOptions {
  int64_t bound = 0;  // in the time column's unit, >= 0
  LatePolicy policy = LatePolicy::kError;
};

class Lateness {
 public:
  // `label` names the input in errors ("input 2"); `column` is the time column of `schema`.
  Lateness(uint32_t input, std::string label, std::shared_ptr<const Schema> schema, const std::string& column,
           LatenessOptions options, std::shared_ptr<LateRows> late);

  // Takes the next batch in arrival order; appends to `out` the rows it releases, in order.
  // Throws kNullTime for a null time, kUnsorted for a late row under kError (nothing of that
  // batch is taken).
  void push(const Batch& batch, std::vector<Batch>& out);
  // A promise that no row earlier than `time` follows (rows that break it are late); releases what
  // it can. Throws kUnsorted if it goes back before an earlier heartbeat.
  void heartbeat(int64_t time, std::vector<Batch>& out);
  // The end of the input: every held row, in order.
  void finish(std::vector<Batch>& out);

  // Nothing earlier than this leaves from now on (INT64_MIN before anything).
  int64_t watermark() const noexcept { return watermark_; }
  int64_t held() const noexcept { return held_; }
  int64_t rows() const noexcept { return rows_; }
  // A restore (pyarrow_ops/checkpoint.py): the input's first `rows` rows were taken by an earlier
  // run, so the next row is at that position (in errors and late rows). Before any push only.
  void resume_at(int64_t rows);
  const std::shared_ptr<const Schema>& schema() const noexcept { return schema_; }
  const std::string& label() const noexcept { return label_; }
  // Late rows so far (this input's), and the latest heartbeat (INT64_MIN: none).
  int64_t late_rows() const noexcept { return late_rows_; }
  int64_t heartbeat_of() const noexcept { return heartbeat_; }
  // Checkpoints (a pipeline's cut): the buffer as a batch of one row (rows taken, latest time,
  // heartbeat, watermark, late rows) and the rows it holds, in arrival order, and with kSide a
  // third: its late rows not taken from LateRows yet (the input's columns, then `row`, their
  // arrival positions). restore() takes the first two into a fresh buffer (before any push), which
  // then judges and releases every row to come as this one would have: its held rows are above
  // the watermark, so none leaves or is late again. The late rows are the caller's to keep.
  std::vector<Batch> save() const;
  void restore(const std::vector<Batch>& state);

 private:
  struct Run {
    Batch batch;
    std::vector<int64_t> times;  // of the kept rows, sorted
    std::vector<int64_t> rows;   // their rows in `batch`, in (time, arrival) order
    size_t next = 0;             // the first not yet released
  };
  void release(int64_t upto, std::vector<Batch>& out);
  [[noreturn]] void late_error(int64_t row, int64_t time, int64_t latest) const;

  uint32_t input_;
  std::string label_;
  std::shared_ptr<const Schema> schema_;
  std::string column_;
  size_t time_index_;
  DataType type_;
  LatenessOptions options_;
  std::shared_ptr<LateRows> late_;

  std::vector<Run> runs_;  // in arrival order
  int64_t latest_ = INT64_MIN;     // latest time of a row that was not late
  int64_t heartbeat_ = INT64_MIN;  // latest heartbeat
  int64_t watermark_ = INT64_MIN;
  int64_t held_ = 0;
  int64_t rows_ = 0;  // rows taken in, late ones included
  int64_t late_rows_ = 0;
  std::vector<int64_t> widened_;
};

// An input stream put in time order by a Lateness: what merge, aggregate and pipelines read in
// place of an input given a bound.
// `resume`: a restore's (BatchSource::InputState of a cut): the buffer's state (Lateness::save)
// and the rows it had released that were not merged yet, which leave first.
std::unique_ptr<BatchSource> within_lateness(std::unique_ptr<BatchSource> input, uint32_t index, std::string label,
                                             const std::string& column, LatenessOptions options,
                                             std::shared_ptr<LateRows> late,
                                             const BatchSource::InputState* resume = nullptr);

}  // namespace pao::gate
