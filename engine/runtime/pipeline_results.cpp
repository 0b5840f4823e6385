// The ordered runtime's outputs: result queues read by next() / next_any(), discarded outputs, the
// run's error handed to a reader once, and stats().
#include <algorithm>

#include "core/clock.h"
#include "core/error.h"
#include "runtime/pipeline.h"
#include "runtime/pipeline_internal.h"

namespace pao::runtime {

// Under out_mutex_ (held by `lock`): throws the run's error, handing it out once. Joins the
// run's threads holding neither lock: a thread being joined may be failing (fail() takes both),
// and a cancel() on another thread may be the one joining, while this call waits for it.
void Pipeline::rethrow_error(std::unique_lock<std::mutex>& lock) {
  std::exception_ptr err;
  {
    std::lock_guard e(error_mutex_);
    if (!error_) return;
    err = error_;
    // Hand the error out once and keep only a plain one: a Python exception holds its traceback,
    // whose frames hold the result that holds this pipeline, a reference cycle through C++ that
    // Python's collector cannot see and that would keep every batch alive.
    error_ = std::make_exception_ptr(Error(ErrorKind::kUsage, "the pipeline failed; its error was raised by an earlier call"));
  }
  lock.unlock();
  stop_threads();
  std::rethrow_exception(err);
}

// Under out_mutex_: the end of output `q` has been reached by a reader.
void Pipeline::mark_drained(ResultQueue& q, std::unique_lock<std::mutex>& lock) {
  if (!q.drained) {
    q.drained = true;
    ++drained_;
  }
  if (drained_ == results_.size()) {
    lock.unlock();
    stop_threads();
    lock.lock();
  }
}

// Waits on out_cv_ a while (kManual: works, on this thread, without the lock, and waits only when
// nothing moved), then lets Ctrl-C through (check_interrupt) without the lock.
void Pipeline::wait_for_results(std::unique_lock<std::mutex>& lock) {
  if (manual_) {
    lock.unlock();
    bool moved = false;
    if (std::unique_lock pumping(pump_mutex_, std::try_to_lock); pumping.owns_lock()) {
      moved = pump();
      const int64_t now = now_ns();
      if (options_.check_interrupt && now >= next_interrupt_ns_) {
        next_interrupt_ns_ = now + 50'000'000;
        try {
          options_.check_interrupt();
        } catch (...) {
          fail(std::current_exception());
        }
      }
    }
    lock.lock();
    // Nothing to do here: what is missing waits for another output's reader or a live input.
    if (!moved) out_cv_.wait_for(lock, std::chrono::milliseconds(1));
    return;
  }
  out_cv_.wait_for(lock, std::chrono::milliseconds(50));
  if (options_.check_interrupt) {
    lock.unlock();
    try {
      options_.check_interrupt();
    } catch (...) {
      fail(std::current_exception());
    }
    lock.lock();
  }
}

std::optional<Batch> Pipeline::next(size_t output) {
  std::unique_lock lock(out_mutex_);
  ResultQueue& q = results_.at(output);
  for (;;) {
    rethrow_error(lock);
    if (q.discarded) return std::nullopt;
    if (!q.batches.empty()) {
      Batch b = std::move(q.batches.front());
      q.batches.pop_front();
      inflight_.fetch_sub(1, std::memory_order_relaxed);
      return b;
    }
    if (q.closed) {
      q.end_told = true;
      mark_drained(q, lock);
      return std::nullopt;
    }
    wait_for_results(lock);
  }
}

std::optional<std::pair<size_t, std::optional<Batch>>> Pipeline::next_any() {
  std::unique_lock lock(out_mutex_);
  for (;;) {
    rethrow_error(lock);
    bool open = false;
    for (size_t o = 0; o < results_.size(); ++o) {
      ResultQueue& q = results_[o];
      if (q.discarded || q.end_told) continue;
      open = true;
      if (!q.batches.empty()) {
        Batch b = std::move(q.batches.front());
        q.batches.pop_front();
        inflight_.fetch_sub(1, std::memory_order_relaxed);
        return std::make_pair(o, std::optional<Batch>(std::move(b)));
      }
      if (q.closed) {
        q.end_told = true;
        mark_drained(q, lock);
        return std::make_pair(o, std::optional<Batch>());
      }
    }
    if (!open) return std::nullopt;
    wait_for_results(lock);
  }
}

void Pipeline::discard(size_t output) {
  bool all = false;
  {
    std::lock_guard lock(out_mutex_);
    ResultQueue& q = results_.at(output);
    if (q.discarded) return;
    q.discarded = true;
    inflight_.fetch_sub(static_cast<int64_t>(q.batches.size()), std::memory_order_relaxed);
    q.batches.clear();
    if (!q.drained) {
      q.drained = true;
      ++drained_;
    }
    all = drained_ == results_.size();
  }
  // Nobody reads any output: the threads may stop (they are joined at destruction; joining here
  // could deadlock, as the caller may hold the GIL a map_batches worker waits for).
  if (all) stop_.store(true, std::memory_order_seq_cst);
  wake();  // the ingress may wait for the room this made, or for the stop
}

PipelineStats Pipeline::stats() const {
  PipelineStats s;
  for (const auto& st : stages_) {
    if (st->fused != nullptr) {
      // A fused chain reports each of its operators; the scheduling figures are the chain's.
      // The chain's time outside its operators' calls (routing its output, merging a keyed
      // chain's pieces) goes to its last operator, which an unfused run would charge for it.
      const size_t members = st->fused->ops().size();
      int64_t inside = 0;
      for (size_t k = 0; k < members; ++k) inside += st->fused->counts(k).busy_ns;
      const int64_t busy = st->busy_ns.load(std::memory_order_relaxed);
      const int64_t outside = std::max<int64_t>(0, busy - inside);
      // The chain's CPU time is read per slice, not per operator call (a system call each): each
      // operator gets the share its busy_ns has of the chain's.
      const double cpu_share =
          busy > 0 ? static_cast<double>(st->cpu_ns.load(std::memory_order_relaxed)) / static_cast<double>(busy) : 0.0;
      for (size_t k = 0; k < members; ++k) {
        const ops::FusedChain::Counts c = st->fused->counts(k);
        OperatorStats o;
        o.number = st->number + k;
        o.name = st->fused->ops()[k]->name();
        o.kind = st->fused->ops()[k]->kind();
        o.tuples_in = c.tuples_in;
        o.tuples_out = c.tuples_out;
        o.busy_ns = c.busy_ns + (k + 1 == members ? outside : 0);
        o.cpu_ns = static_cast<int64_t>(cpu_share * static_cast<double>(o.busy_ns));
        o.morsels = st->morsels.load(std::memory_order_relaxed);
        o.queued = k == 0 ? st->queued_rows.load(std::memory_order_relaxed) : 0;
        o.max_parallelism = st->max_parallelism;
        o.peak_workers = st->peak_workers.load(std::memory_order_relaxed);
        o.fused = true;
        s.operators.push_back(std::move(o));
      }
      continue;
    }
    OperatorStats o;
    o.number = st->number;
    o.name = st->op->name();
    o.kind = st->kind;
    o.tuples_in = st->tuples_in.load(std::memory_order_relaxed);
    o.tuples_out = st->tuples_out.load(std::memory_order_relaxed);
    o.busy_ns = st->busy_ns.load(std::memory_order_relaxed);
    o.cpu_ns = st->cpu_ns.load(std::memory_order_relaxed);
    o.morsels = st->morsels.load(std::memory_order_relaxed);
    o.queued = st->queued_rows.load(std::memory_order_relaxed);
    o.max_parallelism = st->max_parallelism;
    o.peak_workers = st->peak_workers.load(std::memory_order_relaxed);
    s.operators.push_back(std::move(o));
  }
  // One entry per operator, in number order: the copies the planner ran on each input of a merge
  // report together.
  std::stable_sort(s.operators.begin(), s.operators.end(),
                   [](const OperatorStats& a, const OperatorStats& b) { return a.number < b.number; });
  std::vector<OperatorStats> merged;
  for (OperatorStats& o : s.operators) {
    if (merged.empty() || merged.back().number != o.number) {
      merged.push_back(std::move(o));
      continue;
    }
    OperatorStats& m = merged.back();
    m.tuples_in += o.tuples_in;
    m.tuples_out += o.tuples_out;
    m.busy_ns += o.busy_ns;
    m.cpu_ns += o.cpu_ns;
    m.morsels += o.morsels;
    m.queued += o.queued;
    m.peak_workers = std::max(m.peak_workers, o.peak_workers);
    ++m.copies;
  }
  s.operators = std::move(merged);
  s.tuples_in = tuples_in_.load(std::memory_order_relaxed);
  s.threads = threads_;
  s.partitions = partitions_;
  s.morsel_rows = morsel_rows_;
  s.peak_inflight = static_cast<size_t>(peak_inflight_.load(std::memory_order_relaxed));
  s.ingress_steps = helped_.load(std::memory_order_relaxed);
  s.helper_steps = helped_by_others_.load(std::memory_order_relaxed);
  {
    std::lock_guard lock(elastic_mutex_);
    s.levels = levels_;
  }
  std::lock_guard lock(out_mutex_);
  s.tuples_out = tuples_out_;
  s.latencies_ns = latencies_ns_;
  return s;
}

}  // namespace pao::runtime
