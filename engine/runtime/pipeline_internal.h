#pragma once
// The ordered runtime's own bookkeeping (pipeline.h's Pipeline): morsels (Work) and their pieces,
// what an operator hands its reorder buffer, and the state of each source and each stage. Shared by
// the units of runtime/: pipeline.cpp (building, moving and processing morsels), pipeline_ingress.cpp
// (the ingress thread and helpers), pipeline_pick.cpp (the scheduling heuristics),
// pipeline_elastic.cpp (the elastic controller) and pipeline_results.cpp (result queues and
// statistics).
#include <atomic>
#include <deque>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "core/batch.h"
#include "core/gather.h"
#include "ops/fused.h"
#include "ops/multi_input.h"
#include "ops/operator.h"
#include "runtime/pipeline.h"
#include "sync/queues.h"
#include "sync/reorder.h"

namespace pao::runtime {

// The largest morsel: between operators an output is cut only above it (pipeline.cpp,
// morsel_rows_for, says why and what was measured).
inline constexpr int64_t kMaxMorsel = 32768;

// One morsel at one operator. For a partitioned operator it is cut into pieces, one per partition
// its rows fall into; the pieces are processed independently and the last to finish merges
// their outputs by source row.
struct Work {
  Batch batch;
  // A morsel of a planned output (MultiInputOperator::push_plan): rows [plan_begin, plan_begin +
  // plan_rows) of `plan`, gathered into `batch` by the worker that takes it (step()), so the
  // copying of a merge's rows runs on the consumers' workers, in parallel.
  std::shared_ptr<const GatherPlan> plan;
  int64_t plan_begin = 0;
  int64_t plan_rows = 0;
  int64_t rows() const noexcept { return plan ? plan_rows : batch.num_rows(); }
  uint64_t serial = 0;
  uint32_t port = 0;
  // After this morsel the stream sends no time below `bound` (INT64_MIN: no promise; INT64_MAX:
  // its end). Read by multi-input operators and passed on by operators that keep the time column.
  int64_t bound = INT64_MIN;
  // The row of the operator's input stream that batch's row 0 is (set by link(), in order), so
  // that errors name the row within the input, not within the morsel.
  int64_t first_row = 0;
  // When operator 0 began on it (0 = not yet). Atomic because the pieces of a partitioned morsel
  // may race to stamp it; any of their start times will do.
  std::atomic<int64_t> entry_ns{0};
  // Partitioned only.
  std::vector<std::vector<int64_t>> piece_rows;
  std::vector<uint32_t> piece_partition;
  std::vector<ops::Piece> results;
  std::atomic<uint32_t> pending{0};
};

// A piece of a partitioned Work: the worklist item of a partitioned operator.
struct PieceRef {
  Work* work;
  uint32_t index;
};

// What an operator hands its reorder buffer for one input morsel: the output, already cut and
// routed for each consumer (works[c] for consumer c), and the result batch for the result queues
// of the outputs the operator's node is.
struct Output {
  std::vector<std::vector<Work*>> works;
  Batch result;
  int64_t entry_ns = 0;
};

struct SourceState {
  std::unique_ptr<BatchSource> source;
  std::vector<Edge> consumers;
  std::vector<size_t> outputs;
  std::optional<size_t> time_index;  // the time column, whose values bound the stream
  std::optional<Batch> pending;      // pulled, not yet linked
  std::deque<Batch> resumed;         // a restored run's batches to send before pulling (Cut::held)
  // Checkpoints: the rows of each input a restored run's inputs left out (Cut::rows; empty: none),
  // and, once the source has ended, its position() (taken before it is released).
  std::vector<int64_t> base_rows;
  std::optional<BatchSource::Position> end_position;
  bool ended = false;
  // The least time it may still send: its last sent batch's last time or its latest heartbeat
  // (sent on as a pulse), whichever is later.
  int64_t floor = INT64_MIN;
};

struct Stage {
  ops::OperatorPtr op;
  size_t number = 0;                         // the first operator's number (GraphNode::number)
  const ops::FusedChain* fused = nullptr;    // op, when it is a fused chain
  ops::MultiInputOperator* multi = nullptr;  // op, when it takes several streams (ports > 1)
  ops::OpKind kind;
  size_t max_parallelism;
  std::vector<size_t> keys;
  // A partitioned operator's appended columns (Operator::appended_schema), when it computes only
  // those: its pieces carry them alone, and the merge sets them beside the morsel's columns.
  std::shared_ptr<const Schema> appended;
  bool scatter = false;  // every appended column fixed-width: the merge scatters (core/gather.h)
  size_t ports = 1;
  bool preserves_time = false;  // outputs carry their input morsel's bound
  // A stateful operator whose output waits on time (Operator::advances): a pulse calls advance().
  bool advances = false;
  // Passes pulses on (a source's heartbeat, an empty output's bound) towards an operator
  // downstream that takes them (multi-input, or advances): an operator that preserves time, with a
  // consumer that takes them or relays them. Its worker hands a pulse on without calling the
  // operator (a partitioned one gets it as a single piece without rows).
  bool relays_pulses = false;
  bool takes_pulses() const noexcept { return multi != nullptr || advances || relays_pulses; }
  // Its outputs leave as plans (MultiInputOperator::push_plan), gathered by its consumers'
  // workers: when it can, and only stateless or stateful operators (no partitioned one: routing
  // reads the keys at once) and no result queue consume it.
  bool planned = false;
  std::vector<Edge> consumers;
  std::vector<size_t> outputs;  // result queues this stage's node feeds
  // Cumulative selectivity: which stages and sources feed this one (for the heuristics).
  std::vector<size_t> producer_stages;
  size_t producer_sources = 0;
  // Several upstream drainers may link into a multi-input stage at once: they take turns here.
  std::mutex link_mutex;
  std::atomic<size_t> ports_closed{0};

  // Worklist: stateless and stateful operators take Works from `fifo`; partitioned ones take
  // PieceRefs from `parts`.
  sync::Fifo<Work> fifo;
  std::unique_ptr<sync::PartitionQueue<PieceRef>> parts;
  std::unique_ptr<sync::Reorder<Output>> reorder;

  // Serial numbers handed out so far: written by the one thread linking into this stage at a
  // time (see reorder.h), read by finishers after `input_closed`.
  std::atomic<uint64_t> enqueued{0};
  // Rows linked so far per port: the next Work's first_row. Plain, like the linking itself: one
  // thread links into a stage at a time (each after the last, reorder.h; for several ports under
  // link_mutex), and finish() links only once every output has been linked (try_finish).
  std::vector<int64_t> rows_linked = std::vector<int64_t>(1, 0);
  // Set (release) once the upstream has linked its last output; nothing is linked after.
  std::atomic<bool> input_closed{false};
  std::atomic<bool> finishing{false};
  std::atomic<bool> finished{false};
  bool finished_before = false;  // restored from a cut taken after its finish(): not called again

  std::atomic<size_t> workers{0};
  std::atomic<size_t> peak_workers{0};
  std::atomic<int64_t> queued_rows{0};
  std::atomic<int64_t> tuples_in{0};
  std::atomic<int64_t> tuples_out{0};
  std::atomic<int64_t> busy_ns{0};
  std::atomic<int64_t> cpu_ns{0};  // the workers' CPU time in busy_ns (OperatorStats::cpu_ns)
  std::atomic<int64_t> morsels{0};
  std::atomic<int64_t> window_ns{0};  // CT: worker time in the current window

  uint64_t limit() const noexcept { return reorder->next() + reorder->capacity(); }
  bool ready() const {
    if (kind == ops::OpKind::kPartitioned) return parts->size() > 0 && parts->ready(limit());
    return fifo.size() > 0 && fifo.ready_below(limit());
  }
  bool may_finish() const {
    return input_closed.load(std::memory_order_acquire) && !finishing.load(std::memory_order_relaxed) &&
           reorder->next() == enqueued.load(std::memory_order_acquire);
  }
};

}  // namespace pao::runtime
