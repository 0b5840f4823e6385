#include "runtime/pipeline.h"

#include "runtime/pipeline_internal.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/builder.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/gather.h"
#include "core/key_table.h"
#include "ops/fused.h"
#include "runtime/planner.h"

namespace pao::runtime {

namespace {

// Rows per morsel when options.morsel_rows is 0. At the ingress: about two morsels per worker per
// input batch, so a small live batch still spreads over the workers and its latency is one
// morsel's processing time, between 64 rows (below that fixed per-morsel costs dominate cheap
// operators) and kMaxMorsel. Between operators an output is cut only above kMaxMorsel: cutting
// again would shrink morsels stage by stage (a filter's output is smaller than its input), and
// each partitioned operator already splits a morsel into one piece per partition it touches.
// Measured on 2M tuples through with_columns -> filter -> sessionize -> running (2 cores, 64
// hybrid partitions): 1.66 / 2.47 Mt/s (1 / 2 workers) at 2048-row morsels, 3.87 / 5.09 at 8192,
// 4.17 / 8.52 at 32768 (docs/pipeline.md, "Morsel size").
int64_t morsel_rows_for(int64_t batch_rows, size_t threads) {
  const int64_t per_worker = (batch_rows + 2 * static_cast<int64_t>(threads) - 1) / (2 * static_cast<int64_t>(threads));
  return std::clamp<int64_t>(per_worker, 64, kMaxMorsel);
}

Graph chain(std::unique_ptr<BatchSource> source, std::vector<ops::OperatorPtr> ops) {
  Graph g;
  g.sources.push_back(std::move(source));
  g.nodes.push_back(GraphNode{nullptr, {}, 0});
  for (ops::OperatorPtr& op : ops) g.nodes.push_back(GraphNode{std::move(op), {g.nodes.size() - 1}, 0});
  g.outputs.push_back(g.nodes.size() - 1);
  return g;
}

}  // namespace

Pipeline::Pipeline(std::unique_ptr<BatchSource> source, std::vector<ops::OperatorPtr> ops, PipelineOptions options)
    : Pipeline(chain(std::move(source), std::move(ops)), std::move(options)) {}

Pipeline::Pipeline(Graph graph, PipelineOptions options) : options_(std::move(options)) {
  manual_ = options_.threading == Threading::kManual;
  dedicated_ = options_.threading == Threading::kDedicated;
  if (options_.elastic && (manual_ || dedicated_)) {
    throw Error(ErrorKind::kUsage, "an elastic thread level needs the ordered or the dynamic threading");
  }
  if (manual_ && options_.threads > 1) {
    throw Error(ErrorKind::kUsage, "manual threading runs on the calling thread alone; threads must be 1 or unset");
  }
  if (options_.reorder_capacity == 0) throw Error(ErrorKind::kUsage, "reorder_capacity must be at least 1");
  graph = key_by_epochs(std::move(graph));
  if (options_.push_down) graph = push_below_merges(std::move(graph));
  const Plan p = plan(graph, options_.fuse);
  Graph fused = apply_fusion(std::move(graph), p);
  size_t stages = 0;
  for (const GraphNode& n : fused.nodes) stages += n.op != nullptr;
  cores_ = std::max(1u, std::thread::hardware_concurrency());
  threads_ = manual_ ? 1
             : dedicated_ ? std::max<size_t>(1, stages)
             : options_.threads != 0 ? options_.threads
                                     : std::max(1u, std::thread::hardware_concurrency());
  // Hybrid: four partitions per worker, enough for the workers to balance a skewed key
  // distribution among them, few enough that each partition's pieces stay large and its key
  // table dense. 64 at 2 workers cut a 32,768-row morsel into 64 pieces of about 500 rows and left
  // each partition 1/64 of the keys spread over their whole range, which the key table then had
  // to hash: the sessions pipeline ran 8.1 M tuples/s at 2 threads, against 12.2 with 8
  // partitions (docs/pipeline.md, "Partitions").
  partitions_ = options_.partitions != 0 ? options_.partitions
                : options_.partitioning == sync::Partitioning::kHybrid ? 4 * threads_
                                                                       : threads_;
  morsel_rows_ = options_.morsel_rows;
  max_inflight_ = options_.max_inflight != 0 ? options_.max_inflight : std::max<size_t>(64, 16 * threads_);
  build(std::move(fused));
  if (dedicated_) stage_work_ = std::make_unique<sync::Wakeup[]>(stages_.size());
  if (options_.threading == Threading::kDynamic) ports_ = std::make_unique<sync::PortList>(stages_.size());

  start_ = std::chrono::steady_clock::now();
  ct_window_start_.store(now_ns(), std::memory_order_relaxed);
  level_.store(options_.elastic ? 1 : threads_, std::memory_order_relaxed);
  if (options_.elastic) in_flight_ = std::make_unique<InFlight[]>(threads_ + 1);
  if (manual_) return;  // the caller runs everything (pump)
  try {
    workers_.reserve(threads_);
    for (size_t w = 0; w < threads_; ++w) workers_.emplace_back([this, w] { worker_main(w); });
    ingress_ = std::thread([this] { ingress_main(); });
    if (options_.elastic) elastic_ = std::thread([this] { elastic_main(); });
  } catch (...) {
    cancel();
    throw;
  }
}

// Checks the graph and makes a stage per operator node, a SourceState per source.
void Pipeline::build(Graph graph) {
  const size_t n = graph.nodes.size();
  // Per node: a source's index in sources_, or an operator's stage index.
  std::vector<size_t> index(n);
  std::vector<bool> is_source(n);
  std::vector<const Schema*> schema(n);
  for (size_t i = 0; i < n; ++i) {
    const GraphNode& node = graph.nodes[i];
    for (size_t in : node.inputs) {
      if (in >= i) throw Error(ErrorKind::kUsage, "graph node " + std::to_string(i) + " reads a later node");
    }
    if (!node.op) {
      if (node.source >= graph.sources.size() || !graph.sources[node.source]) {
        throw Error(ErrorKind::kUsage, "graph node " + std::to_string(i) + " names no source");
      }
      auto st = std::make_unique<SourceState>();
      st->source = std::move(graph.sources[node.source]);
      if (!graph.time.empty()) st->time_index = st->source->schema()->find(graph.time);
      schema[i] = st->source->schema().get();
      is_source[i] = true;
      index[i] = sources_.size();
      sources_.push_back(std::move(st));
      source_origin_.push_back(graph.source_origin.empty() ? std::pair<size_t, size_t>{node.source, SIZE_MAX}
                                                           : graph.source_origin[node.source]);
      continue;
    }
    auto st = std::make_unique<Stage>();
    const size_t stage = stages_.size();
    st->op = node.op;
    st->number = node.number == GraphNode::kUnnumbered ? stage : node.number;
    st->fused = dynamic_cast<const ops::FusedChain*>(node.op.get());
    st->kind = node.op->kind();
    st->multi = dynamic_cast<ops::MultiInputOperator*>(node.op.get());
    st->ports = st->multi ? st->multi->ports() : 1;
    if (node.inputs.size() != st->ports) {
      throw Error(ErrorKind::kUsage, "operator " + std::to_string(stage) + " (" + node.op->name() + ") takes " +
                                         std::to_string(st->ports) + " inputs, given " +
                                         std::to_string(node.inputs.size()));
    }
    st->rows_linked.assign(st->ports, 0);
    for (size_t p = 0; p < st->ports; ++p) {
      const size_t in = node.inputs[p];
      const Schema& expected = st->multi ? *st->multi->port_schema(p) : *node.op->input_schema();
      if (auto diff = schema_difference(expected, *schema[in])) {
        throw Error(ErrorKind::kSchemaMismatch, "operator " + std::to_string(stage) + " (" + node.op->name() +
                                                    ") does not take its input's schema: " + *diff);
      }
      const Edge e{stage, p};
      if (is_source[in]) {
        sources_[index[in]]->consumers.push_back(e);
        ++st->producer_sources;
      } else {
        stages_[index[in]]->consumers.push_back(e);
        st->producer_stages.push_back(index[in]);
      }
    }
    st->preserves_time = !graph.time.empty() && !st->multi && node.op->preserves_time(graph.time);
    st->advances = !graph.time.empty() && st->kind == ops::OpKind::kStateful && !st->multi && node.op->advances();
    switch (st->kind) {
      case ops::OpKind::kStateful: st->max_parallelism = 1; break;
      case ops::OpKind::kPartitioned:
        st->max_parallelism = partitions_;
        st->keys = node.op->key_columns();
        st->op->set_partitions(partitions_);
        st->parts = sync::make_partition_queue<PieceRef>(options_.partitioning, partitions_);
        if (const auto* appended = node.op->appended_schema()) {
          st->appended = *appended;
          st->scatter = can_scatter(**appended);
        }
        break;
      case ops::OpKind::kStateless:
        st->max_parallelism = node.op->max_parallelism() != 0 ? node.op->max_parallelism() : threads_;
        break;
    }
    if (st->multi) st->max_parallelism = 1;
    Stage* self = st.get();
    auto sink = [this, self](uint64_t, Output* out) { link(self->consumers, self->outputs, out); };
    st->reorder = sync::make_reorder<Output>(options_.reorder, options_.reorder_capacity, std::move(sink));
    schema[i] = node.op->output_schema().get();
    index[i] = stage;
    stages_.push_back(std::move(st));
  }
  if (graph.outputs.empty()) throw Error(ErrorKind::kUsage, "a pipeline needs at least one output");
  for (size_t o = 0; o < graph.outputs.size(); ++o) {
    const size_t node = graph.outputs[o];
    if (node >= n) throw Error(ErrorKind::kUsage, "output " + std::to_string(o) + " names no node");
    (is_source[node] ? sources_[index[node]]->outputs : stages_[index[node]]->outputs).push_back(o);
    out_schemas_.push_back(is_source[node] ? sources_[index[node]]->source->schema()
                                           : stages_[index[node]]->op->output_schema());
  }
  results_.resize(graph.outputs.size());
  if (options_.resume) apply_resume(*options_.resume);
  // Consumers come after their producers: one backward pass settles who relays pulses.
  for (size_t s = stages_.size(); s-- > 0;) {
    Stage& st = *stages_[s];
    st.relays_pulses = st.preserves_time && !st.advances &&
                       std::any_of(st.consumers.begin(), st.consumers.end(),
                                   [&](const Edge& e) { return stages_[e.stage]->takes_pulses(); });
  }
  for (auto& st : stages_) {
    st->planned = st->multi != nullptr && st->multi->plans_output() && st->outputs.empty() && !st->consumers.empty() &&
                  std::all_of(st->consumers.begin(), st->consumers.end(), [&](const Edge& e) {
                    return stages_[e.stage]->kind != ops::OpKind::kPartitioned;
                  });
  }
}

Pipeline::~Pipeline() {
  cancel();
}

void Pipeline::cancel() {
  {
    // The result queues' `closed` are written under out_mutex_ (try_finish); next() takes
    // out_mutex_ before error_mutex_, and so do we, so the two locks are always taken in one order.
    std::lock_guard out(out_mutex_);
    std::lock_guard lock(error_mutex_);
    const bool complete = std::all_of(results_.begin(), results_.end(), [](const ResultQueue& q) { return q.closed; });
    if (!error_ && !complete) error_ = std::make_exception_ptr(Error(ErrorKind::kUsage, "the pipeline was cancelled"));
  }
  stop_threads();
}

// An operator's error, rethrown naming the operator and, for a fault in one row, that row within
// the operator's input (the morsel starts at first_row). Other exceptions (a Python function's)
// pass unchanged.
[[noreturn]] void Pipeline::in_operator(size_t i, int64_t first_row) const {
  const Stage& st = *stages_[i];
  auto rethrow = [&](const Error& e, size_t number, const std::string& name) {
    std::string where = "operator " + std::to_string(number) + " (" + name + ")";
    if (e.row() >= 0 && first_row >= 0) where += ", row " + std::to_string(first_row + e.row()) + " of its input";
    throw Error(e.kind(), where + ": " + e.what());
  };
  try {
    throw;
  } catch (const ops::FusedError& e) {
    // The chain's operator that failed, by its own number (a row only for the chain's first).
    rethrow(e, st.number + e.index(), st.fused->ops()[e.index()]->name());
  } catch (const Error& e) {
    rethrow(e, st.number, st.op->name());
  }
  throw;  // unreachable: every branch above throws
}

void Pipeline::stop_threads() {
  std::call_once(stopped_, [this] {
    stop_.store(true, std::memory_order_seq_cst);
    wake();
    out_cv_.notify_all();
    {
      std::lock_guard lock(elastic_mutex_);  // so the notify cannot fall between its check and its wait
    }
    elastic_cv_.notify_all();
    if (elastic_.joinable()) elastic_.join();
    if (ingress_.joinable()) ingress_.join();
    for (auto& t : workers_)
      if (t.joinable()) t.join();
    release_all();
  });
}

// After every thread has stopped: frees what is still in worklists and reorder buffers, so a
// cancelled run releases every batch it held.
void Pipeline::release_all() {
  for (size_t i = 0; i < stages_.size(); ++i) {
    Stage& st = *stages_[i];
    std::vector<Work*> works;
    st.fifo.take_all(works);
    for (Work* w : works) delete w;
    if (st.parts) {
      std::vector<PieceRef*> refs;
      st.parts->take_all(refs);
      std::vector<Work*> owners;
      for (PieceRef* r : refs) {
        owners.push_back(r->work);
        delete r;
      }
      std::sort(owners.begin(), owners.end());
      owners.erase(std::unique(owners.begin(), owners.end()), owners.end());
      for (Work* w : owners) delete w;
    }
    // Outputs deposited but not linked: their reorder slots are freed by the reorder buffer's
    // owner below; the Outputs themselves we free here.
    for (Output* o : st.reorder->take_all()) {
      for (auto& ws : o->works)
        for (Work* w : ws) delete w;
      delete o;
    }
  }
}

void Pipeline::fail(std::exception_ptr e) {
  {
    std::lock_guard lock(error_mutex_);
    if (!error_) error_ = e;
  }
  stop_.store(true, std::memory_order_seq_cst);
  wake();
  {
    std::lock_guard lock(out_mutex_);
  }
  out_cv_.notify_all();
}

void Pipeline::wake() { work_.notify(); }

namespace {
// A pulse: an empty morsel that only carries the stream's bound, for an operator waiting on this
// stream's progress (section 4.3.3's pulses; a multi-input operator, or one whose output waits on
// time), or one that relays it there; nobody else needs it.
void add_pulse(const Stage& st, std::vector<Work*>& works, const Batch& empty, int64_t bound, int64_t entry_ns) {
  if (!st.takes_pulses() || bound == INT64_MIN) return;
  auto* w = new Work;
  w->batch = empty;
  w->bound = bound;
  if (st.kind == ops::OpKind::kPartitioned) {
    // One piece without rows, in partition 0: it keeps the pulse's place among the stage's
    // morsels (the reorder buffer releases it in order), and no operator call is made for it.
    w->piece_rows.emplace_back();
    w->piece_partition.push_back(0);
    w->results.resize(1);
    w->pending.store(1, std::memory_order_relaxed);
  }
  w->entry_ns.store(entry_ns, std::memory_order_relaxed);
  works.push_back(w);
}
}  // namespace

Output* Pipeline::prepare(const std::vector<Edge>& consumers, const std::vector<size_t>& outputs, Batch batch,
                          int64_t entry_ns, int64_t bound, const SourceState* source) {
  // A source's time column: its morsels bound the stream by their own last time.
  const bool timed = source != nullptr && source->time_index.has_value();
  const size_t time_col = timed ? *source->time_index : 0;
  auto* out = new Output;
  out->entry_ns = entry_ns;
  out->works.resize(consumers.size());
  const int64_t rows = batch.num_rows();
  const int64_t m = morsel_rows_ != 0 ? morsel_rows_ : source != nullptr ? morsel_rows_for(rows, threads_) : kMaxMorsel;
  // Morsels of m rows, except the first ones of an elastic run's start (slow_start_rows_), whose
  // lengths are decided once here so that every consumer gets the same cut. Usually empty: no
  // allocation on this path.
  std::vector<int64_t> small;
  if (source != nullptr && options_.elastic && morsel_rows_ == 0) {
    for (int64_t covered = 0; covered < rows && slow_start_rows_ < m; slow_start_rows_ *= 2) {
      small.push_back(std::min(slow_start_rows_, rows - covered));
      covered += small.back();
    }
  }
  for (size_t c = 0; c < consumers.size(); ++c) {
    const Stage& st = *stages_[consumers[c].stage];
    std::vector<Work*>& works = out->works[c];
    if (rows == 0) {
      add_pulse(st, works, batch, bound, entry_ns);
      continue;
    }
    // Keys hashed per morsel, into buffers reused across the batch's morsels: an input batch can
    // be a whole table, and its hashes at once were 80 MB at 10M rows (no speed-up measured
    // beyond the machine's swings; the memory is the gain).
    std::vector<uint64_t> hashes;
    std::vector<uint32_t> part_of;
    size_t e = 0;
    for (int64_t start = 0, len = 0; start < rows; start += len) {
      len = e < small.size() ? small[e++] : std::min(m, rows - start);
      auto* w = new Work;
      w->batch = batch.slice(start, len);
      w->entry_ns.store(entry_ns, std::memory_order_relaxed);
      if (timed) {
        // A source is sorted: nothing after this morsel is earlier than its last time.
        w->bound = time_at(w->batch, time_col, len - 1);
      } else if (start + len == rows) {
        w->bound = bound;
      }
      if (st.kind == ops::OpKind::kPartitioned) {
        // Route each row to its key's partition (partition_of). Rows stay ascending within a piece.
        // Two passes: each row's partition and the pieces' sizes, then the rows into pieces
        // reserved at their size (pushing into growing vectors copied each piece about a dozen
        // times per morsel).
        key_hashes(w->batch, st.keys, hashes);
        std::vector<int32_t> piece_of(partitions_, -1);
        part_of.resize(static_cast<size_t>(len));
        std::vector<size_t> sizes;
        for (int64_t r = 0; r < len; ++r) {
          const uint32_t p = partition_of(hashes[static_cast<size_t>(r)], partitions_);
          part_of[static_cast<size_t>(r)] = p;
          if (piece_of[p] < 0) {
            piece_of[p] = static_cast<int32_t>(sizes.size());
            sizes.push_back(0);
            w->piece_partition.push_back(p);
          }
          ++sizes[static_cast<size_t>(piece_of[p])];
        }
        w->piece_rows.resize(sizes.size());
        for (size_t k = 0; k < sizes.size(); ++k) w->piece_rows[k].reserve(sizes[k]);
        for (int64_t r = 0; r < len; ++r) {
          w->piece_rows[static_cast<size_t>(piece_of[part_of[static_cast<size_t>(r)]])].push_back(r);
        }
        w->results.resize(w->piece_rows.size());
        w->pending.store(static_cast<uint32_t>(w->piece_rows.size()), std::memory_order_relaxed);
      }
      works.push_back(w);
    }
  }
  size_t made = 0;
  for (const auto& ws : out->works) made += ws.size();
  if (!outputs.empty()) out->result = std::move(batch);
  count_inflight(made);
  busy_.fetch_add(static_cast<int64_t>(made) + 1, std::memory_order_relaxed);  // the works and the Output
  return out;
}

Output* Pipeline::prepare_plan(const std::vector<Edge>& consumers, std::shared_ptr<const GatherPlan> plan,
                               int64_t entry_ns, int64_t bound) {
  auto* out = new Output;
  out->entry_ns = entry_ns;
  out->works.resize(consumers.size());
  const int64_t rows = plan->rows();
  const int64_t m = morsel_rows_ != 0 ? morsel_rows_ : kMaxMorsel;
  size_t made = 0;
  for (size_t c = 0; c < consumers.size(); ++c) {
    const Stage& st = *stages_[consumers[c].stage];
    std::vector<Work*>& works = out->works[c];
    if (rows == 0) add_pulse(st, works, empty_batch(plan->schema), bound, entry_ns);
    for (int64_t start = 0; start < rows; start += m) {
      auto* w = new Work;
      w->plan = plan;
      w->plan_begin = start;
      w->plan_rows = std::min(m, rows - start);
      w->entry_ns.store(entry_ns, std::memory_order_relaxed);
      if (start + w->plan_rows == rows) w->bound = bound;
      works.push_back(w);
    }
    made += works.size();
  }
  count_inflight(made);
  busy_.fetch_add(static_cast<int64_t>(made) + 1, std::memory_order_relaxed);  // the works and the Output
  return out;
}

void Pipeline::count_inflight(size_t made) {
  if (made == 0) return;
  const int64_t live = inflight_.fetch_add(static_cast<int64_t>(made), std::memory_order_relaxed) + static_cast<int64_t>(made);
  int64_t peak = peak_inflight_.load(std::memory_order_relaxed);
  while (live > peak && !peak_inflight_.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

// Links an operator's (or a source's) output, in serial order and one thread at a time per
// producer, into each consumer's worklist and each result queue it feeds.
void Pipeline::link(const std::vector<Edge>& consumers, const std::vector<size_t>& outputs, Output* out) {
  bool added = false;
  for (size_t c = 0; c < consumers.size(); ++c) {
    if (out->works[c].empty()) continue;
    link_into(consumers[c], out->works[c]);
    added = true;
  }
  if (!outputs.empty() && out->result.num_rows() > 0) {
    const int64_t lat = out->entry_ns != 0 ? now_ns() - out->entry_ns : -1;
    std::lock_guard lock(out_mutex_);
    for (size_t o : outputs) {
      if (results_[o].discarded) continue;
      inflight_.fetch_add(1, std::memory_order_relaxed);
      tuples_out_ += out->result.num_rows();
      results_[o].batches.push_back(out->result);  // several outputs share the batch
    }
    if (lat >= 0) latencies_ns_.push_back(lat);
    out_cv_.notify_all();
  }
  delete out;
  busy_.fetch_sub(1, std::memory_order_release);  // after its works and results: see busy_
  if (added) wake();
}

void Pipeline::link_into(const Edge& e, std::vector<Work*>& works) {
  Stage& st = *stages_[e.stage];
  // Several producers feed a multi-input stage; one producer's links come one at a time already.
  std::unique_lock<std::mutex> turn;
  if (st.ports > 1) turn = std::unique_lock(st.link_mutex);
  uint64_t serial = st.enqueued.load(std::memory_order_relaxed);
  for (Work* w : works) {
    w->serial = serial++;
    w->port = static_cast<uint32_t>(e.port);
    w->first_row = st.rows_linked[e.port];
    st.rows_linked[e.port] += w->rows();
    st.queued_rows.fetch_add(w->rows(), std::memory_order_relaxed);
    if (st.kind == ops::OpKind::kPartitioned) {
      // Once its last piece is pushed a worker may finish the morsel and free `w`: read
      // everything first.
      const auto pieces = static_cast<uint32_t>(w->piece_rows.size());
      const uint64_t s = w->serial;
      std::vector<uint32_t> partition = w->piece_partition;
      for (uint32_t k = 0; k < pieces; ++k) st.parts->push({new PieceRef{w, k}, partition[k], s});
    } else {
      st.fifo.push({w, 0, w->serial});
    }
  }
  st.enqueued.store(serial, std::memory_order_release);
  if (ports_) ports_->offer(static_cast<uint32_t>(e.stage));  // after the work: see PortList
  if (stage_work_) stage_work_[e.stage].notify();             // after the work: see Wakeup
}

void Pipeline::close_port(const Edge& e) {
  Stage& st = *stages_[e.stage];
  if (st.multi != nullptr) {
    // The end reaches the operator in order, after the stream's last morsel.
    auto* end = new Work;
    end->batch = empty_batch(st.multi->port_schema(e.port));
    end->bound = INT64_MAX;
    inflight_.fetch_add(1, std::memory_order_relaxed);
    busy_.fetch_add(1, std::memory_order_relaxed);
    std::vector<Work*> works{end};
    link_into(e, works);
  }
  // acq_rel: the closer of the last port sees every other closer's links (they came first).
  if (st.ports_closed.fetch_add(1, std::memory_order_acq_rel) + 1 == st.ports) {
    st.input_closed.store(true, std::memory_order_release);
  }
  if (stage_work_) stage_work_[e.stage].notify();
  wake();
}

void Pipeline::close_output(size_t output) {
  std::lock_guard lock(out_mutex_);
  results_[output].closed = true;
  out_cv_.notify_all();
}

// Runs operator i's finish() once its input is complete and every output has left; links what
// it returns and closes its consumers' inputs. True if this call did it.
bool Pipeline::try_finish(size_t i) {
  Stage& st = *stages_[i];
  if (!st.may_finish()) return false;
  // Not while a cut is taken (cut(): the Dekker pair finishers_ / paused_); a cut that set paused_
  // first waits for finishers_ to fall to 0.
  finishers_.fetch_add(1, std::memory_order_seq_cst);
  struct Leave {
    std::atomic<int64_t>& n;
    ~Leave() { n.fetch_sub(1, std::memory_order_release); }
  } leave{finishers_};
  if (paused_.load(std::memory_order_seq_cst) || st.finishing.exchange(true, std::memory_order_acq_rel)) return false;
  // All of this stage's outputs have been linked (next == enqueued: the drainer's release store
  // of next follows its last link), so we are now the only thread linking from this stage.
  Batch rest;
  try {
    if (!st.finished_before) rest = st.op->finish();
  } catch (...) {
    in_operator(i, -1);  // finish() has no input row of its own
  }
  if (rest.num_rows() > 0) {
    st.tuples_out.fetch_add(rest.num_rows(), std::memory_order_relaxed);
    link(st.consumers, st.outputs, prepare(st.consumers, st.outputs, std::move(rest), 0, INT64_MIN, nullptr));
  }
  st.finished.store(true, std::memory_order_release);
  stages_finished_.fetch_add(1, std::memory_order_acq_rel);
  for (const Edge& e : st.consumers) close_port(e);
  for (size_t o : st.outputs) close_output(o);
  wake();
  return true;
}

void Pipeline::worker_main(size_t index) {
  try {
    int idle_spins = 0;
    while (!stop_.load(std::memory_order_relaxed)) {
      // Read before looking for work, so a wake() that comes after the look keeps us awake. A
      // dedicated worker sleeps on its own stage's wakeup instead.
      sync::Wakeup& wakeup = stage_work_ ? stage_work_[index] : work_;
      const uint64_t seen = wakeup.value();
      // Above the elastic level: wait until it rises (elastic_main wakes everyone) or the run
      // ends. Any worker may take any operator and partition, so the running ones lack nothing.
      if (index >= level_.load(std::memory_order_relaxed)) {
        if (stages_finished_.load(std::memory_order_acquire) == stages_.size()) return;
        work_.wait(seen, std::chrono::milliseconds(1), [&] { return stop_.load(std::memory_order_relaxed); });
        continue;
      }
      if (worker_step(index)) {
        idle_spins = 0;
        continue;
      }
      if (stages_finished_.load(std::memory_order_acquire) == stages_.size()) return;
      if (dedicated_ && stages_[index]->finished.load(std::memory_order_acquire)) return;  // its stage is done
      if (++idle_spins < 64) {
        std::this_thread::yield();
        continue;
      }
      // Dynamic: before sleeping, list every operator with admitted work, which covers readiness
      // that changed without a link (a reorder buffer that drained admits more).
      if (ports_) {
        for (size_t i = 0; i < stages_.size(); ++i)
          if (!stages_[i]->finished.load(std::memory_order_relaxed) && stages_[i]->ready()) ports_->offer(static_cast<uint32_t>(i));
      }
      // Sleep until something changes. The timeout covers what does not wake (try_finish()'s
      // conditions, the consumer freeing room), not a lost wake-up.
      wakeup.wait(seen, std::chrono::milliseconds(1), [&] { return stop_.load(std::memory_order_relaxed); });
    }
  } catch (...) {
    fail(std::current_exception());
  }
}

bool Pipeline::worker_step(size_t index) {
  if (dedicated_) {
    // Its own operator, and nothing else (finishing included: every stage has its worker). A run
    // of no operators (the inputs merged, nothing more) still has one worker, which has none.
    if (index >= stages_.size()) return false;
    bool worked = try_finish(index);
    const Stage& own = *stages_[index];
    if (own.finished.load(std::memory_order_relaxed) || !own.ready()) return worked;
    return run_claimed(index, index) > 0 || worked;
  }
  bool worked = false;
  for (size_t i = 0; i < stages_.size(); ++i) worked |= try_finish(i);
  if (stages_finished_.load(std::memory_order_acquire) == stages_.size()) return worked;
  if (ports_) return dynamic_step(index) || worked;
  std::vector<uint64_t> excluded((stages_.size() + 63) / 64, 0);
  for (;;) {
    const int i = pick(index, excluded);
    if (i < 0) break;
    const size_t done = run_claimed(static_cast<size_t>(i), index);
    if (done == kNotClaimed) continue;
    if (done > 0) return true;
    excluded[static_cast<size_t>(i) >> 6] |= uint64_t{1} << (i & 63);  // admitted work went to others: try the next best
  }
  return worked;
}

size_t Pipeline::run_claimed(size_t i, size_t worker, bool share) {
  Stage& st = *stages_[i];
  size_t w = st.workers.load(std::memory_order_relaxed);
  // Claim a place on the operator; the CAS keeps it within max_parallelism (for a stateful
  // operator: exclusive, and acq_rel makes this worker see the previous one's state, released
  // by its fetch_sub below).
  if (w >= st.max_parallelism || !st.workers.compare_exchange_strong(w, w + 1, std::memory_order_acq_rel)) {
    return kNotClaimed;
  }
  size_t peak = st.peak_workers.load(std::memory_order_relaxed);
  while (w + 1 > peak && !st.peak_workers.compare_exchange_weak(peak, w + 1, std::memory_order_relaxed)) {
  }
  // Dynamic, with room for another worker and more work: listed again at once, so another worker
  // can join (our intra-operator parallelism; the paper's port takes one thread at a time).
  if (share && w + 1 < st.max_parallelism && st.ready()) ports_->offer(static_cast<uint32_t>(i));
  const size_t done = run_stage(i, worker);
  st.workers.fetch_sub(1, std::memory_order_acq_rel);
  return done;
}

bool Pipeline::dynamic_step(size_t index) {
  // At most one pass over the list's length: an operator that cannot be claimed now goes back.
  for (size_t tries = 0; tries < stages_.size(); ++tries) {
    const std::optional<uint32_t> taken = ports_->take();
    if (!taken) return false;
    Stage& st = *stages_[*taken];
    // Nothing admitted now: whatever admits more (a link, this operator's own progress) offers it.
    if (st.finished.load(std::memory_order_relaxed) || !st.ready()) continue;
    const size_t done = run_claimed(*taken, index, /*share=*/true);
    // Busy at its limit (a stateful operator), or work left: back at the tail, least recently
    // used first.
    if (done == kNotClaimed || st.ready()) ports_->offer(*taken);
    if (done != kNotClaimed && done > 0) return true;
  }
  return false;
}

bool Pipeline::pump() {
  try {
    if (worker_step(0)) return true;
    // A cut under way (this thread's own). Acquire, as the ingress's check: after a cut on another
    // thread, its reads of the sources come before this pump's reads of new input.
    if (paused_.load(std::memory_order_acquire)) return false;
    return inflight_.load(std::memory_order_relaxed) < static_cast<int64_t>(max_inflight_) && ingress_step();
  } catch (...) {
    fail(std::current_exception());
    return true;
  }
}

size_t Pipeline::run_stage(size_t i, size_t worker) {
  Stage& st = *stages_[i];
  const int64_t t0 = now_ns();
  const int64_t cpu0 = thread_cpu_ns();
  const int64_t slice = std::chrono::duration_cast<std::chrono::nanoseconds>(options_.slice).count();
  size_t done = 0;
  InFlight* flight = in_flight_ ? &in_flight_[worker] : nullptr;
  if (flight != nullptr) {
    flight->stage.store(i, std::memory_order_relaxed);
    flight->since.store(t0, std::memory_order_relaxed);
  }
  for (;;) {
    const size_t n = step(i, worker);
    done += n;
    if (n == 0 || stop_.load(std::memory_order_relaxed)) break;
    const int64_t at = now_ns();
    if (at - t0 >= slice) break;
    if (flight != nullptr) flight->since.store(at, std::memory_order_relaxed);
  }
  if (flight != nullptr) flight->since.store(0, std::memory_order_relaxed);
  // The CPU clock's reads lie inside the clock's, so cpu_ns <= busy_ns.
  const int64_t cpu = thread_cpu_ns() - cpu0;
  const int64_t spent = now_ns() - t0;
  if (done > 0) {
    st.busy_ns.fetch_add(spent, std::memory_order_relaxed);
    st.cpu_ns.fetch_add(cpu, std::memory_order_relaxed);
    st.window_ns.fetch_add(spent, std::memory_order_relaxed);
  }
  return done;
}

// Takes one item of stage i's worklist that the reorder buffer admits and processes it; returns
// how many items it ran (0: none available to this worker now).
size_t Pipeline::step(size_t i, size_t worker) {
  Stage& st = *stages_[i];
  if (st.kind == ops::OpKind::kPartitioned) {
    return st.parts->consume(st.limit(), 1, worker, [&](PieceRef* ref) {
      Work* w = ref->work;
      const uint32_t k = ref->index;
      delete ref;
      if (st.producer_sources > 0 && w->entry_ns.load(std::memory_order_relaxed) == 0)
        w->entry_ns.store(now_ns(), std::memory_order_relaxed);
      try {
        if (w->batch.num_rows() == 0) {
          // A pulse (add_pulse): nothing for the operator to do.
        } else if (st.appended) {
          w->results[k].batch = st.op->process_appended(w->batch, w->piece_rows[k], w->piece_partition[k]);
        } else {
          w->results[k] = st.op->process_rows(w->batch, w->piece_rows[k], w->piece_partition[k]);
        }
      } catch (...) {
        // The run fails (the worker's caller records it); the morsel is freed by whoever holds
        // its last piece: us now, or release_all() for pieces still queued.
        const int64_t first_row = w->first_row;
        if (w->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
          delete w;
          inflight_.fetch_sub(1, std::memory_order_relaxed);
          busy_.fetch_sub(1, std::memory_order_release);
        }
        in_operator(i, first_row);
      }
      // acq_rel: the last piece to finish must see every other piece's result.
      if (w->pending.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
      if (w->batch.num_rows() == 0) {
        complete(i, w, Batch(), w->bound);  // a pulse, relayed (relays_pulses)
        return;
      }
      if (st.appended) {
        complete(i, w, merge_appended(st, *w), st.preserves_time ? w->bound : INT64_MIN);
        return;
      }
      // Merge the pieces by source row: a counting sort over the morsel's rows, then runs of one
      // piece's consecutive output rows become gather segments. Pieces without rows (operators
      // may return an empty Piece{} without a schema) take no part.
      std::vector<const ops::Piece*> parts;
      for (const auto& p : w->results)
        if (p.batch.num_rows() > 0) parts.push_back(&p);
      Batch merged;
      if (parts.size() == 1) {
        merged = parts[0]->batch;
      } else if (parts.size() > 1) {
        const int64_t rows = w->batch.num_rows();
        std::vector<int64_t> start(static_cast<size_t>(rows) + 1, 0);
        for (const ops::Piece* p : parts)
          for (int64_t s : p->source_rows) ++start[static_cast<size_t>(s) + 1];
        for (size_t r = 0; r < static_cast<size_t>(rows); ++r) start[r + 1] += start[r];
        const int64_t total = start[static_cast<size_t>(rows)];
        std::vector<std::pair<uint32_t, int64_t>> order(static_cast<size_t>(total));
        for (uint32_t p = 0; p < parts.size(); ++p) {
          const auto& src = parts[p]->source_rows;
          for (size_t j = 0; j < src.size(); ++j)
            order[static_cast<size_t>(start[static_cast<size_t>(src[j])]++)] = {p, static_cast<int64_t>(j)};
        }
        std::vector<Batch> sources;
        sources.reserve(parts.size());
        for (const ops::Piece* p : parts) sources.push_back(p->batch);
        std::vector<Segment> segs;
        for (const auto& [p, j] : order) append_row(segs, p, j);
        merged = gather(st.op->output_schema(), sources, segs);
      }
      complete(i, w, std::move(merged), st.preserves_time ? w->bound : INT64_MIN);
    });
  }
  std::optional<sync::Entry<Work>> e = st.fifo.pop_below(st.limit());
  if (!e) return 0;
  Work* w = e->item;
  if (st.producer_sources > 0 && w->entry_ns.load(std::memory_order_relaxed) == 0) {
    w->entry_ns.store(now_ns(), std::memory_order_relaxed);
  }
  Batch out;
  std::shared_ptr<const GatherPlan> plan;
  int64_t bound = INT64_MIN;
  try {
    if (w->plan) {
      // A morsel of a planned output: this worker does its share of the producer's gather.
      w->batch = gather_range(*w->plan, w->plan_begin, w->plan_begin + w->plan_rows);
      w->plan.reset();
    }
    if (st.planned) {
      plan = std::make_shared<const GatherPlan>(st.multi->push_plan(w->port, w->batch, w->bound));
      bound = st.multi->output_bound();
    } else if (st.multi != nullptr) {
      out = st.multi->push(w->port, w->batch, w->bound);
      bound = st.multi->output_bound();
    } else if (w->batch.num_rows() == 0 && st.advances) {
      out = st.op->advance(w->bound);  // a pulse: what the bound makes due
    } else if (w->batch.num_rows() == 0) {
      bound = w->bound;  // a pulse, relayed (relays_pulses): nothing for the operator to do
    } else {
      out = st.op->process(w->batch);
      if (st.preserves_time) bound = w->bound;
    }
  } catch (...) {
    const int64_t first_row = w->first_row;
    delete w;  // the run fails; nothing else holds this morsel
    inflight_.fetch_sub(1, std::memory_order_relaxed);
    busy_.fetch_sub(1, std::memory_order_release);
    in_operator(i, first_row);
  }
  complete(i, w, std::move(out), bound, std::move(plan));
  return 1;
}

// The output of a morsel whose pieces hold only appended columns: piece k's row j belongs to
// morsel row w.piece_rows[k][j] (exactly one output per row), so the pieces' rows are put in
// morsel order (a scatter, or a gather where a column is not fixed-width, of the narrow appended
// columns alone; nothing for a single piece) and set
// beside the morsel's own columns, which are not copied.
Batch Pipeline::merge_appended(const Stage& st, const Work& w) {
  Batch added;
  if (w.results.size() == 1) {
    added = w.results[0].batch;
  } else if (st.scatter) {
    std::vector<Batch> sources;
    sources.reserve(w.results.size());
    for (const ops::Piece& p : w.results) sources.push_back(p.batch);
    added = scatter(st.appended, sources, w.piece_rows, w.batch.num_rows());
  } else {
    std::vector<std::pair<uint32_t, int64_t>> order(static_cast<size_t>(w.batch.num_rows()));
    std::vector<Batch> sources;
    sources.reserve(w.results.size());
    for (uint32_t p = 0; p < w.results.size(); ++p) {
      const std::vector<int64_t>& rows = w.piece_rows[p];
      for (size_t j = 0; j < rows.size(); ++j) order[static_cast<size_t>(rows[j])] = {p, static_cast<int64_t>(j)};
      sources.push_back(w.results[p].batch);
    }
    std::vector<Segment> segs;
    for (const auto& [p, j] : order) append_row(segs, p, j);
    added = gather(st.appended, sources, segs);
  }
  return side_by_side(st.op->output_schema(), w.batch, added);
}

// Stage i is done with Work w whose output is `out`, after which its stream sends nothing below
// `bound`: prepares it for the consumers (in this worker, in parallel with others) and deposits
// it in the reorder buffer.
void Pipeline::complete(size_t i, Work* w, Batch out, int64_t bound, std::shared_ptr<const GatherPlan> plan) {
  Stage& st = *stages_[i];
  const int64_t rows_in = w->batch.num_rows();
  st.tuples_in.fetch_add(rows_in, std::memory_order_relaxed);
  st.tuples_out.fetch_add(plan ? plan->rows() : out.num_rows(), std::memory_order_relaxed);
  st.morsels.fetch_add(1, std::memory_order_relaxed);
  st.queued_rows.fetch_sub(rows_in, std::memory_order_relaxed);
  const uint64_t serial = w->serial;
  const int64_t entry_ns = w->entry_ns.load(std::memory_order_relaxed);
  Output* o = plan ? prepare_plan(st.consumers, std::move(plan), entry_ns, bound)
                   : prepare(st.consumers, st.outputs, std::move(out), entry_ns, bound, nullptr);
  delete w;
  inflight_.fetch_sub(1, std::memory_order_relaxed);
  busy_.fetch_sub(1, std::memory_order_release);  // after its Output was counted (prepare)
  st.reorder->send(serial, o);
}

}  // namespace pao::runtime
