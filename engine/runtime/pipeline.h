#pragma once
// The ordered parallel runtime (ordered-processing paper, sections 2.2, 3 to 6): a graph of
// operators run by a pool of workers that any operator may use, with the output of a sequential
// run on every output. A chain (one source, one output) is the simplest graph.
//
// The path of a morsel (a row range of a batch):
//   ingress thread   pulls the sources (each a merged set of inputs; the source whose next batch
//                    is earliest first), cuts their batches into morsels, prepares them for each
//                    consumer (partitioned: routes each row to its key's partition) and links them
//                    into the consumers' worklists, assigning serial numbers 0, 1, 2, ...
//   workers          ask the scheduler (heuristic QST, LP, ET or CT) for an operator, take
//                    morsels from its worklist for a time slice, run the operator, prepare the
//                    output for every consumer (in parallel: routing is done here, not by
//                    whoever links) and deposit it in the operator's reorder buffer under the
//                    input's serial;
//   reorder buffer   links outputs into the consumers' worklists in serial order (new serials
//                    there; a node used twice gets both consumers the same batches, no copy), and
//                    into the result queue of each output the node is;
//   next(output)     hands result batches to the caller in order.
// An operator whose input is complete and whose every output has left runs finish() once; what
// it returns follows its last output, and then its consumers' inputs are complete.
//
// Operators of several inputs (ops/multi_input.h: union, joins) have one port per input; each port
// receives its stream in order, with the stream's bound (the least time still to come) attached
// to its morsels. A stream's bound comes from its source (each morsel's last time: sources are
// sorted) through operators that keep the time column (Operator::preserves_time), or from a
// multi-input operator's own output_bound(); an operator that does neither promises nothing until
// it finishes. Empty outputs still send their bound to multi-input consumers (the paper's pulses),
// so a union never waits on a branch whose filter dropped everything.
//
// Back-pressure: the ingress thread stops pulling while too many morsels are alive anywhere
// (in worklists, being processed, in reorder buffers or in result queues), so memory is
// bounded whatever the input rate. Result batches count too: an output nobody reads holds at most
// max_inflight batches, and then the run waits for it (read several outputs together).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/batch.h"
#include "core/gather.h"
#include "ops/multi_input.h"
#include "ops/operator.h"
#include "sync/port_list.h"
#include "sync/queues.h"
#include "sync/reorder.h"
#include "sync/wakeup.h"

namespace pao::runtime {

// Scheduling heuristics (section 6): queue-size throttling, last in pipeline, estimated time,
// current throughput.
enum class Heuristic : uint8_t { kQST, kLP, kET, kCT };

// How a run uses threads (issue 30's threading models). kOrdered: the ordered runtime's workers
// (`threads`, picked by the heuristics) and an ingress thread. kManual: no thread of its own: the
// thread that asks for a result (next) reads the input and runs the operators itself until one is
// ready, the same stages, reorder buffers and back-pressure on one core, with the lowest latency.
// kDedicated: a thread per operator (per stage: a fused chain is one), which runs that operator
// alone, and the ingress thread; pipeline parallelism only, `threads` ignored. kDynamic: the IBM
// Streams scheduler's choice instead of the heuristics: `threads` workers take operators from a
// lock-free free list in least recently used order (sync/port_list.h), an operator is listed
// when work is linked to it or a worker leaves it with work left, and the decisions happen only
// there; the operators' own parallelism and the reorder buffers are the ordered runtime's.
enum class Threading : uint8_t { kOrdered, kManual, kDedicated, kDynamic };

// A consistent cut of a run, for checkpoints (docs/checkpoints.md): every operator's state after
// exactly the rows its sources had sent, and everything made of those rows that had not been
// taken by next(). A run restored from it (PipelineOptions::resume) over the same inputs less the
// rows the cut counts gives the rest of the output, exactly.
struct Cut {
  std::vector<std::string> stages;                  // each stage's operator name, to check the restore's plan
  std::vector<std::vector<Batch>> states;           // per stage: Operator::save_state()
  std::vector<uint8_t> finished;                    // per stage: its finish() had run
  std::vector<std::vector<int64_t>> rows;           // per source: rows taken from each input (BatchSource::position)
  std::vector<std::vector<Batch>> held;             // per source: batches made of them, not sent yet
  // Per source: its inputs' own state (lateness buffers: BatchSource::Position::inputs), which the
  // caller hands each restored input; empty where they keep none.
  std::vector<std::vector<BatchSource::InputState>> inputs;
  std::vector<std::pair<size_t, size_t>> origin;    // per source: Graph::source_origin (SIZE_MAX: the whole merge)
  std::vector<std::vector<Batch>> queued;           // per output: result batches next() had not returned
};

struct PipelineOptions {
  Threading threading = Threading::kOrdered;
  size_t threads = 0;  // workers; 0 = hardware threads (kManual: the caller's alone; kDedicated: one per stage)
  Heuristic scheduler = Heuristic::kCT;
  sync::ReorderScheme reorder = sync::ReorderScheme::kNonBlocking;
  sync::Partitioning partitioning = sync::Partitioning::kHybrid;
  // Partitions of a partitioned operator; 0 = 4 per worker for kHybrid (several per worker
  // balance skew), the number of workers for kPartitioned and kShared (the paper's setting).
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
  // Adjacent stateless operators run as one task (runtime/planner.h); false: each on its own.
  bool fuse = true;
  // Filters and projections run on each input before the merge of several (runtime/planner.h,
  // push_below_merges); false: the inputs are merged first.
  bool push_down = true;
  // Called about every 50 ms while next() waits; what it throws fails the run.
  std::function<void()> check_interrupt;
  // Elastic: `threads` becomes the most workers, and how many of them run adapts to the measured
  // throughput (runtime/elastic.h), from 1, once per `elastic_period` (a quarter of it, at least
  // 10 ms, during the first search and for the fill period before it). The output is the same.
  bool elastic = false;
  std::chrono::milliseconds elastic_period{100};
  // A restore: the cut the run goes on from (its operators' states, held and queued batches); the
  // sources must be the cut's inputs less the rows it counts, and the plan the cut's.
  std::shared_ptr<const Cut> resume;
};

struct OperatorStats {
  size_t number = 0;  // the operator's number (GraphNode::number)
  std::string name;
  ops::OpKind kind;
  int64_t tuples_in = 0;
  int64_t tuples_out = 0;
  int64_t busy_ns = 0;    // worker time spent in the operator (including reordering), by the clock
  // The workers' CPU time in it: busy_ns less the time the OS ran other threads on their cores
  // (on a machine with more runnable threads than cores, busy_ns counts that too). A fused
  // chain's is split among its operators in proportion to their busy_ns.
  int64_t cpu_ns = 0;
  int64_t morsels = 0;
  int64_t queued = 0;     // tuples waiting in its worklist now
  size_t max_parallelism = 0;
  size_t peak_workers = 0;
  bool fused = false;  // ran in a fused chain (runtime/planner.h): morsels and workers are the chain's
  // Nodes that ran it: more than one when the planner ran it on each input of a merge
  // (push_below_merges); the figures are their sums (peak_workers: the largest).
  size_t copies = 1;
};

struct PipelineStats {
  std::vector<OperatorStats> operators;
  int64_t tuples_in = 0;   // rows pulled from the input
  int64_t tuples_out = 0;  // rows handed out by next()
  size_t threads = 0;
  size_t partitions = 0;
  int64_t morsel_rows = 0;
  size_t peak_inflight = 0;
  // Operator steps the ingress ran while back-pressure held it (the workers' work, on their behalf).
  int64_t ingress_steps = 0;
  // Operator steps threads the runtime does not own ran through help() (LiveInput pushers).
  int64_t helper_steps = 0;
  // Per result batch: nanoseconds from when the first operator began processing the input
  // morsel it came from to when it entered the result queue (the paper's processing latency).
  std::vector<int64_t> latencies_ns;
  // Elastic runs: per period, when it ended (ns since the start), the workers that ran in it, the
  // tuples per second all operators took in over it, and the cores other processes left free over
  // it (core/free_cores.h; infinity: unknown).
  struct LevelSample {
    int64_t at_ns;
    size_t level;
    double tuples_per_s;
    double free_cores;
  };
  std::vector<LevelSample> levels;
};

// A node of a graph: a source (op null: the stream of sources[source]) or an operator over the
// streams of `inputs`, earlier nodes, one per port in port order (one for a single-input operator).
struct GraphNode {
  static constexpr size_t kUnnumbered = SIZE_MAX;
  ops::OperatorPtr op;
  std::vector<size_t> inputs;
  size_t source = 0;
  // The operator's number in errors and statistics ("operator 3 (join)"); unnumbered: its place
  // among the graph's operators. A fused chain has its first operator's, and the others follow.
  size_t number = kUnnumbered;
};

struct Graph {
  std::vector<std::unique_ptr<BatchSource>> sources;
  std::vector<GraphNode> nodes;    // in topological order: a node's inputs come before it
  std::vector<size_t> outputs;     // the nodes whose streams the run hands out, in order
  // The time column every stream shares: sources' morsels carry their last time as the stream's
  // bound. Empty: no bounds (only for graphs without multi-input operators).
  std::string time;
  // Per source, where it came from when the planner took a merge of several inputs apart
  // (push_below_merges): {the merged source's index, the input's index in it}. Empty: as given.
  std::vector<std::pair<size_t, size_t>> source_origin;
};

struct Stage;
struct Work;
struct Output;
struct SourceState;
struct Edge {
  size_t stage;  // index among the operator nodes
  size_t port;
};

class Pipeline : public BatchSource {
 public:
  // Starts the ingress thread and the workers at once. Every operator's input schema must equal
  // its input node's output schema (each port's, for several inputs); at least one operator.
  Pipeline(Graph graph, PipelineOptions options);
  // A chain: `ops` in order over `source`, one output.
  Pipeline(std::unique_ptr<BatchSource> source, std::vector<ops::OperatorPtr> ops, PipelineOptions options);
  ~Pipeline() override;

  // The first output (the chain form's only one).
  const std::shared_ptr<const Schema>& schema() const noexcept override { return out_schemas_[0]; }
  std::optional<Batch> next() override { return next(0); }

  size_t outputs() const noexcept { return out_schemas_.size(); }
  const std::shared_ptr<const Schema>& schema(size_t output) const { return out_schemas_[output]; }
  // The next result batch of `output`, in order; nullopt at its end. Rethrows the run's first
  // error. One caller at a time per output; different outputs may be read from different threads.
  std::optional<Batch> next(size_t output);
  // The next result batch of whichever output has one: (output, batch), or (output, nullopt)
  // once for each output at its end; nullopt when every output has ended. The way to read several
  // outputs together: reading one alone waits (next(output)) once the others hold max_inflight
  // batches between them, while this never waits on one output when another has a batch.
  std::optional<std::pair<size_t, std::optional<Batch>>> next_any();
  // Nobody will read `output` any more (its result was closed): its queued batches are freed and
  // no more are kept for it, so it never holds the run back. Any thread.
  void discard(size_t output);

  PipelineStats stats() const;
  // Fails the run (next() throws) and stops every thread; joins them. Any thread; idempotent.
  void cancel();
  // A consistent cut for a checkpoint: stops reading the sources, lets every morsel in flight
  // through every operator (finish() waits meanwhile), saves each operator's state and what the
  // outputs hold, and goes on. The result queues keep their batches (copied into the cut, shared).
  // Nullopt when an operator cannot save its state (Operator::saves_state), a source cannot say
  // its position, the run has failed, or the ingress is waiting for a live input's producer and
  // does not come back within kIngressWait (the caller may be that producer). One caller at a time; with manual threading, the
  // thread that reads the results (it runs the operators meanwhile). `take`: the queued result
  // batches leave the queues into the cut (a writer that commits them with the snapshot: its
  // snapshot then holds none of them), as if next() had returned them.
  std::optional<Cut> cut(bool take = false);
  static constexpr std::chrono::milliseconds kIngressWait{500};
  // A thread the runtime does not own (a LiveInput's pusher waiting for room in its queue) runs
  // one step of operator work on the workers' behalf, as the ingress does under back-pressure
  // (ingress_main): only while fewer workers run than the machine has cores, and not for manual
  // or dedicated threading. True if it did any. A failure it meets fails the run. Any thread,
  // several at once.
  bool help();

 private:
  void build(Graph graph);
  void ingress_main();
  void worker_main(size_t index);
  void elastic_main();
  // One batch of the source that starts earliest, linked to its consumers (or the ends of the
  // sources that ended now, closed); false once every source had ended before the call.
  bool ingress_step();
  // Links source s's pending batch to its consumers and outputs (paced by options_.rate).
  void send(SourceState& s);
  // One round of a worker: finishes the operators that may finish, then runs the first operator
  // the scheduler picks that has work for it; true if it did anything.
  bool worker_step(size_t index);
  // kDynamic's choice in worker_step: the least recently used listed operator that has work.
  bool dynamic_step(size_t index);
  // Claims a place on stage i (within its max_parallelism) and runs it (run_stage); the items run,
  // or kNotClaimed. `share` (kDynamic): lists the stage again first if another worker may join.
  static constexpr size_t kNotClaimed = SIZE_MAX;
  size_t run_claimed(size_t i, size_t worker, bool share = false);
  // kManual: one step on the calling thread (the operators first, then the input); true if it
  // did anything.
  bool pump();
  // Whether a thread that is not a worker (the ingress, help()) may run operators now: not for
  // manual, dedicated or elastic threading, and only while fewer workers run than the machine has
  // cores.
  bool may_help() const;
  // `excluded`: a bit per stage (64 to a word) the caller tried already this round.
  int pick(size_t worker, const std::vector<uint64_t>& excluded);
  size_t run_stage(size_t i, size_t worker);
  size_t step(size_t i, size_t worker);
  void complete(size_t i, Work* w, Batch out, int64_t bound, std::shared_ptr<const GatherPlan> plan = nullptr);
  Batch merge_appended(const Stage& st, const Work& w);
  // An output for `consumers` (cut into their morsels, routed) and for the result queues
  // `outputs`. From a `source` (else null): morsels sized for the workers, each carrying its own
  // last time as bound (a source is sorted); otherwise only the last morsel carries `bound`.
  Output* prepare(const std::vector<Edge>& consumers, const std::vector<size_t>& outputs, Batch batch,
                  int64_t entry_ns, int64_t bound, const SourceState* source);
  // The same for a planned output (Stage::planned): morsels of plan rows, gathered later.
  Output* prepare_plan(const std::vector<Edge>& consumers, std::shared_ptr<const GatherPlan> plan, int64_t entry_ns,
                       int64_t bound);
  void count_inflight(size_t made);
  void link(const std::vector<Edge>& consumers, const std::vector<size_t>& outputs, Output* out);
  void link_into(const Edge& e, std::vector<Work*>& works);
  // The stream into `e` has ended: multi-input operators get the end as a bound.
  void close_port(const Edge& e);
  void close_output(size_t output);
  bool try_finish(size_t i);
  void fail(std::exception_ptr e);
  [[noreturn]] void in_operator(size_t i, int64_t first_row) const;  // inside a catch block
  void wake();
  // Result queue helpers, under out_mutex_ (`lock` holds it).
  struct ResultQueue;
  void rethrow_error(std::unique_lock<std::mutex>& lock);
  void mark_drained(ResultQueue& q, std::unique_lock<std::mutex>& lock);
  void wait_for_results(std::unique_lock<std::mutex>& lock);
  void stop_threads();
  void release_all();

  std::vector<std::unique_ptr<SourceState>> sources_;
  std::vector<std::pair<size_t, size_t>> source_origin_;  // Graph::source_origin, per source (Cut::origin)
  std::vector<std::shared_ptr<const Schema>> out_schemas_;
  PipelineOptions options_;
  size_t threads_;
  size_t partitions_;
  int64_t morsel_rows_;
  size_t max_inflight_;
  std::vector<std::unique_ptr<Stage>> stages_;

  // Result queues, one per output, under out_mutex_.
  struct ResultQueue {
    std::deque<Batch> batches;
    bool closed = false;     // nothing more will be linked
    bool drained = false;    // next() returned its end, or discard()
    bool discarded = false;  // discard(): results are dropped, not queued
    bool end_told = false;   // next_any() reported its end
  };
  mutable std::mutex out_mutex_;
  std::condition_variable out_cv_;
  std::vector<ResultQueue> results_;
  size_t drained_ = 0;  // outputs whose end next() has returned
  std::vector<int64_t> latencies_ns_;
  int64_t tuples_out_ = 0;
  std::atomic<size_t> stages_finished_{0};

  // Morsels alive anywhere (Work objects and queued results); the ingress waits above the bound.
  std::atomic<int64_t> inflight_{0};
  // cut()'s count of morsels and outputs in flight (see paused_): beside inflight_, which the same
  // steps change, so that both live in one cache line.
  std::atomic<int64_t> busy_{0};
  std::atomic<int64_t> peak_inflight_{0};
  std::atomic<int64_t> helped_{0};  // ingress_steps (the ingress's only, relaxed: a counter)
  std::atomic<int64_t> helped_by_others_{0};  // helper_steps (help(); relaxed: a counter)
  size_t cores_ = 1;                 // the machine's (the ingress helps while fewer workers run)
  std::atomic<int64_t> tuples_in_{0};

  // Idle workers (and the ingress, waiting for room) sleep on work_ until wake().
  sync::Wakeup work_;
  // Dedicated threading: stage i's own worker sleeps on stage_work_[i], which the links into
  // stage i and the closing of its ports notify, so a link wakes one thread rather than every
  // stage's (a 1,000-operator chain is 1,000 threads). Null otherwise.
  std::unique_ptr<sync::Wakeup[]> stage_work_;

  // Checkpoints (cut()): paused_ stops the ingress and finish(); busy_ counts the morsels and
  // outputs in flight (a Work from its making to its completion, an Output from its making to the
  // end of its link: each made before the one it comes from is counted off, so busy_ is 0 only
  // when nothing is in flight). Its decrements release, so the cut's acquire load of 0 sees every
  // operator's writes. finishers_ counts try_finish calls past their check of paused_ (a Dekker
  // pair with paused_, both seq_cst). ingress_mutex_ is held around each ingress step, so a cut
  // that took it after setting paused_ knows no step is under way; the cut reads the sources after
  // letting go of that lock, so the ingress (and pump()) load paused_ with acquire, which the
  // resume's store of false releases: the cut's reads happen before the next step's writes.
  std::atomic<bool> paused_{false};
  std::atomic<int64_t> finishers_{0};
  std::mutex ingress_mutex_;
  std::mutex cut_mutex_;  // one cut at a time
  void apply_resume(const Cut& cut);

  std::atomic<bool> stop_{false};
  std::mutex error_mutex_;
  std::exception_ptr error_;

  std::chrono::steady_clock::time_point start_;
  std::atomic<int64_t> ct_window_start_{0};

  std::thread ingress_;
  std::vector<std::thread> workers_;
  std::once_flag stopped_;

  // Threading::kManual. Readers of different outputs may call next() from several threads at once:
  // one at a time pumps (pump_mutex_, taken with try_lock; the others wait on out_cv_ and retry),
  // so the ingress's state stays with one thread at a time, as with the ingress thread.
  bool manual_ = false;
  bool dedicated_ = false;  // Threading::kDedicated: worker i runs stage i alone
  std::unique_ptr<sync::PortList> ports_;  // Threading::kDynamic: the stages that may have work
  std::mutex pump_mutex_;
  int64_t next_interrupt_ns_ = 0;  // when the pumping caller next checks for Ctrl-C; under pump_mutex_

  // Elastic runs: workers with an index at or above level_ wait; elastic_main sets it.
  std::atomic<size_t> level_{0};
  std::thread elastic_;
  mutable std::mutex elastic_mutex_;  // guards levels_; elastic_cv_ waits on it
  std::condition_variable elastic_cv_;
  std::vector<PipelineStats::LevelSample> levels_;
  // Elastic runs: per worker, since when (0: not) it has been running which stage's current step
  // (run_stage), so elastic_main credits the tuples of steps in flight (see there). Written by the
  // worker, read by elastic_main, both relaxed: an estimate, which a torn pair (a stage from one
  // step, a start from the next) only makes a little less exact.
  struct alignas(64) InFlight {
    std::atomic<int64_t> since{0};
    std::atomic<size_t> stage{0};
  };
  std::unique_ptr<InFlight[]> in_flight_;  // threads_ + 1 (the guest index), elastic runs only
  // Elastic runs (with the adaptive morsel size): the first source morsels are this small and
  // double, 64, 128, ... up to the usual size, so that steps end and costs are known within the
  // controller's first periods (a step of the usual 32,768 tuples at 10 us each lasts 0.33 s, and
  // until one ends nothing can be measured: the level waited at 1 for 15-21 periods). Read and
  // doubled only where a source's batch is cut (prepare), which the ingress alone does.
  int64_t slow_start_rows_ = 64;
};

}  // namespace pao::runtime
