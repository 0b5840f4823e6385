#pragma once
// The ordered parallel runtime (ordered-processing paper, sections 2.2, 3 to 6): a linear chain of
// operators run by a pool of workers that any operator may use, with the output sequence of a
// sequential run.
//
// The path of a morsel (a row range of a batch):
//   ingress thread   pulls the (merged) input, cuts it into morsels, prepares them for operator
//                    0 (partitioned: routes each row to its key's partition) and links them into
//                    its worklist, assigning serial numbers 0, 1, 2, ...
//   workers          ask the scheduler (heuristic QST, LP, ET or CT) for an operator, take
//                    morsels from its worklist for a time slice, run the operator, prepare the
//                    output for the next operator (in parallel: routing is done here, not by
//                    whoever links) and deposit it in the operator's reorder buffer under the
//                    input's serial;
//   reorder buffer   links outputs into the next worklist in serial order (new serials there),
//                    or, after the last operator, into the result queue;
//   next()           hands result batches to the caller in order.
// An operator whose input is complete and whose every output has left runs finish() once; what
// it returns follows its last output, and then the next operator's input is complete.
//
// Back-pressure: the ingress thread stops pulling while too many morsels are alive anywhere
// (in worklists, being processed, in reorder buffers or in the result queue), so memory is
// bounded whatever the input rate.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/batch.h"
#include "ops/operator.h"
#include "sync/queues.h"
#include "sync/reorder.h"
#include "sync/wakeup.h"

namespace pao::runtime {

// Scheduling heuristics (section 6): queue-size throttling, last in pipeline, estimated time,
// current throughput.
enum class Heuristic : uint8_t { kQST, kLP, kET, kCT };

struct PipelineOptions {
  size_t threads = 0;  // workers; 0 = hardware threads
  Heuristic scheduler = Heuristic::kCT;
  sync::ReorderScheme reorder = sync::ReorderScheme::kNonBlocking;
  sync::Partitioning partitioning = sync::Partitioning::kHybrid;
  // Partitions of a partitioned operator; 0 = 64 for kHybrid (fine partitions balance skew),
  // the number of workers for kPartitioned and kShared (the paper's setting for them).
  size_t partitions = 0;
  // Rows per morsel; 0 = adaptive (see pipeline.cpp, `morsel_rows_for`).
  int64_t morsel_rows = 0;
  // Reorder buffer slots per operator (admitted inputs ahead of the oldest unfinished one).
  size_t reorder_capacity = 1024;
  // Morsels alive at once before the ingress waits; 0 = 16 per worker, at least 64.
  size_t max_inflight = 0;
  // The time a worker stays with one operator before asking the scheduler again.
  std::chrono::microseconds slice{200};
  // CT's window over which worker time per operator is measured.
  std::chrono::microseconds ct_window{10000};
  // Input tuples per second the ingress paces itself to (0 = as fast as possible): for latency
  // measurements at a given load.
  double rate = 0;
  // Called about every 50 ms while next() waits; what it throws fails the run.
  std::function<void()> check_interrupt;
};

struct OperatorStats {
  std::string name;
  ops::OpKind kind;
  int64_t tuples_in = 0;
  int64_t tuples_out = 0;
  int64_t busy_ns = 0;    // worker time spent in the operator (including reordering)
  int64_t morsels = 0;
  int64_t queued = 0;     // tuples waiting in its worklist now
  size_t max_parallelism = 0;
  size_t peak_workers = 0;
};

struct PipelineStats {
  std::vector<OperatorStats> operators;
  int64_t tuples_in = 0;   // rows pulled from the input
  int64_t tuples_out = 0;  // rows handed out by next()
  size_t threads = 0;
  size_t partitions = 0;
  int64_t morsel_rows = 0;
  size_t peak_inflight = 0;
  // Per result batch: nanoseconds from when the first operator began processing the input
  // morsel it came from to when it entered the result queue (the paper's processing latency).
  std::vector<int64_t> latencies_ns;
};

struct Stage;
struct Work;
struct Output;

class Pipeline : public BatchSource {
 public:
  // Starts the ingress thread and the workers at once. `ops` must chain: each operator's input
  // schema equals the previous one's output schema (and operator 0's, the source's).
  Pipeline(std::unique_ptr<BatchSource> source, std::vector<ops::OperatorPtr> ops, PipelineOptions options);
  ~Pipeline() override;

  const std::shared_ptr<const Schema>& schema() const noexcept override { return schema_; }
  // The next result batch in order; nullopt at the end. Rethrows the run's first error.
  std::optional<Batch> next() override;

  PipelineStats stats() const;
  // Fails the run (next() throws) and stops every thread; joins them. Any thread; idempotent.
  void cancel();

 private:
  void ingress_main();
  void worker_main(size_t index);
  int pick(size_t worker, uint64_t excluded);
  size_t run_stage(size_t i, size_t worker);
  size_t step(size_t i, size_t worker);
  void process_work(size_t i, Work* w);
  void complete(size_t i, Work* w, Batch out);
  Output* prepare(size_t i, Batch batch, int64_t entry_ns);
  void link(size_t i, Output* out);
  bool try_finish(size_t i);
  void fail(std::exception_ptr e);
  [[noreturn]] void in_operator(size_t i, int64_t first_row) const;  // inside a catch block
  void wake();
  void stop_threads();
  void release_all();

  std::unique_ptr<BatchSource> source_;
  std::shared_ptr<const Schema> schema_;
  PipelineOptions options_;
  size_t threads_;
  size_t partitions_;
  int64_t morsel_rows_;
  size_t max_inflight_;
  std::vector<std::unique_ptr<Stage>> stages_;

  // Result queue (after the last operator's reorder buffer).
  mutable std::mutex out_mutex_;
  std::condition_variable out_cv_;
  std::vector<Batch> results_;  // FIFO: results_[out_head_..]
  size_t out_head_ = 0;
  bool out_closed_ = false;
  std::vector<int64_t> latencies_ns_;
  int64_t tuples_out_ = 0;

  // Morsels alive anywhere (Work objects and queued results); the ingress waits above the bound.
  std::atomic<int64_t> inflight_{0};
  std::atomic<int64_t> peak_inflight_{0};
  std::atomic<int64_t> tuples_in_{0};

  // Idle workers (and the ingress, waiting for room) sleep on work_ until wake().
  sync::Wakeup work_;

  std::atomic<bool> stop_{false};
  std::mutex error_mutex_;
  std::exception_ptr error_;

  std::chrono::steady_clock::time_point start_;
  std::atomic<int64_t> ct_window_start_{0};

  std::thread ingress_;
  std::vector<std::thread> workers_;
  std::once_flag stopped_;
};

}  // namespace pao::runtime
