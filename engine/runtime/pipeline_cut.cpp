// Checkpoints of the ordered runtime: a consistent cut of a running pipeline, and a run restored
// from one (runtime/pipeline.h, Cut; docs/checkpoints.md).
//
// The cut is a pause, not a barrier that travels with the data: the ingress stops between two
// batches, every morsel already sent runs through every operator and out to the result queues,
// and then nothing moves: each operator's state is exactly that of a sequential run over the rows
// the sources sent, whatever the threads, partitions and morsels. Its price is a drain of at most
// max_inflight morsels, during which workers that run out of work idle.
#include <thread>

#include "core/error.h"
#include "runtime/pipeline.h"
#include "runtime/pipeline_internal.h"

namespace pao::runtime {

std::optional<Cut> Pipeline::cut(bool take) {
  std::lock_guard one(cut_mutex_);
  for (const auto& st : stages_) {
    if (!st->op->saves_state()) return std::nullopt;
  }
  paused_.store(true, std::memory_order_seq_cst);
  struct Resume {
    Pipeline& p;
    ~Resume() {
      p.paused_.store(false, std::memory_order_seq_cst);
      p.wake();
      if (p.stage_work_)
        for (size_t i = 0; i < p.stages_.size(); ++i) p.stage_work_[i].notify();
    }
  } resume{*this};
  // A step under way ends, and none begins until resume; but a step may wait on a live input's
  // producer (the least input, with nothing at hand), who may be this caller: then no cut.
  // try_lock in a loop, not a timed_mutex: ThreadSanitizer does not see pthread_mutex_clocklock,
  // which try_lock_for uses, and then reports its unlock. The ingress, once it sees paused_, waits
  // without the lock, so the lock comes free within a step.
  const auto deadline = std::chrono::steady_clock::now() + kIngressWait;
  while (!ingress_mutex_.try_lock()) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  ingress_mutex_.unlock();
  for (;;) {
    if (stop_.load(std::memory_order_acquire)) {
      // Stopped: failed or cancelled (no cut), or every output read to its end, which stops the
      // threads once every stage has finished: then nothing moves, and the cut is the end.
      std::lock_guard lock(error_mutex_);
      if (error_ || stages_finished_.load(std::memory_order_acquire) != stages_.size()) return std::nullopt;
      break;
    }
    if (manual_) {
      // No workers: this thread runs what is in flight, as next() would (pump() reads no input
      // while paused_).
      std::lock_guard pumping(pump_mutex_);
      while (!stop_.load(std::memory_order_relaxed) && pump()) {
      }
    }
    // finishers_ first: a finish under way links its output (busy_) before it counts itself off.
    if (finishers_.load(std::memory_order_acquire) == 0 && busy_.load(std::memory_order_acquire) == 0) break;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  Cut c;
  for (const auto& st : stages_) {
    c.stages.push_back(st->op->name());
    c.states.push_back(st->op->save_state());
    c.finished.push_back(st->finished.load(std::memory_order_acquire) ? 1 : 0);
  }
  for (size_t k = 0; k < sources_.size(); ++k) {
    SourceState& s = *sources_[k];
    std::optional<BatchSource::Position> at = s.ended ? s.end_position : s.source->position();
    if (!at) return std::nullopt;
    std::vector<int64_t> rows = std::move(at->rows);
    std::vector<Batch> held;
    if (s.pending) held.push_back(*s.pending);
    held.insert(held.end(), s.resumed.begin(), s.resumed.end());
    held.insert(held.end(), at->held.begin(), at->held.end());
    if (!s.base_rows.empty()) {
      if (s.base_rows.size() != rows.size()) return std::nullopt;
      for (size_t i = 0; i < rows.size(); ++i) rows[i] += s.base_rows[i];
    }
    c.rows.push_back(std::move(rows));
    c.held.push_back(std::move(held));
    c.inputs.push_back(std::move(at->inputs));
    c.origin.push_back(source_origin_[k]);
  }
  {
    std::lock_guard lock(out_mutex_);
    for (ResultQueue& q : results_) {
      c.queued.emplace_back(q.batches.begin(), q.batches.end());
      if (!take) continue;
      inflight_.fetch_sub(static_cast<int64_t>(q.batches.size()), std::memory_order_relaxed);  // room made
      q.batches.clear();
    }
  }
  return c;
}

void Pipeline::apply_resume(const Cut& c) {
  bool same = c.stages.size() == stages_.size() && c.states.size() == stages_.size() &&
              c.finished.size() == stages_.size() && c.rows.size() == sources_.size() &&
              c.held.size() == sources_.size() && c.origin == source_origin_ && c.queued.size() == results_.size();
  for (size_t i = 0; same && i < stages_.size(); ++i) same = c.stages[i] == stages_[i]->op->name();
  if (!same) {
    throw Error(ErrorKind::kUsage, "this checkpoint was taken of another plan: restore it with the same query, "
                                   "inputs and options fuse= and push_down=");
  }
  for (size_t i = 0; i < stages_.size(); ++i) {
    stages_[i]->op->load_state(c.states[i]);
    stages_[i]->finished_before = c.finished[i] != 0;
  }
  for (size_t k = 0; k < sources_.size(); ++k) {
    sources_[k]->resumed.assign(c.held[k].begin(), c.held[k].end());
    sources_[k]->base_rows = c.rows[k];
  }
  for (size_t o = 0; o < results_.size(); ++o) {
    for (const Batch& b : c.queued[o]) {
      results_[o].batches.push_back(b);
      inflight_.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

}  // namespace pao::runtime
