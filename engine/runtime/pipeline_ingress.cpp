// The ordered runtime's ingress: the thread that pulls the sources, in time order across them,
// sends their batches (and heartbeats, as pulses) to the consumers, and keeps back-pressure.
#include <algorithm>
#include <thread>

#include "runtime/pipeline.h"
#include "runtime/pipeline_internal.h"

namespace pao::runtime {

void Pipeline::ingress_main() {
  try {
    for (;;) {
      // Back-pressure: while too many morsels are alive, the ingress runs operators on the
      // workers' behalf rather than only wait (the scheduler paper's threads it does not own,
      // issue 30), the morsels in flight being what it waits on; but only while fewer workers run
      // than the machine has cores, so that it takes a core that would idle, never one a worker
      // has (on a machine with as many workers as cores it only waited, and helping measured
      // slower). A guest worker index (threads_), which only picks where it starts looking among
      // an operator's partitions; claiming an operator is the workers' protocol (run_claimed).
      // Not for dedicated threading: there a worker index is its stage.
      while (inflight_.load(std::memory_order_relaxed) >= static_cast<int64_t>(max_inflight_)) {
        if (stop_.load(std::memory_order_relaxed)) return;
        if (may_help() && worker_step(threads_)) {
          helped_.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        // The consumer frees room without a wake-up: poll, woken early by the workers' progress.
        work_.wait(work_.value(), std::chrono::microseconds(100));
      }
      if (stop_.load(std::memory_order_relaxed)) return;
      {
        // A cut (cut()) sets paused_, then takes this lock: a step under way ends first, and no
        // step begins until the cut is done. Acquire: the cut reads the sources' positions after
        // it let go of this lock, and its resume (the release store of false) must order those
        // reads before this step's writes to the same sources.
        std::unique_lock lock(ingress_mutex_);
        if (paused_.load(std::memory_order_acquire)) {
          lock.unlock();
          work_.wait(work_.value(), std::chrono::microseconds(200));
          continue;
        }
        if (!ingress_step()) break;
      }
    }
    wake();
  } catch (...) {
    fail(std::current_exception());
  }
}

namespace {
// The time of a source's pending batch's first row (0 for a source without a time column).
int64_t first_time(const SourceState& s) { return s.time_index ? time_at(*s.pending, *s.time_index, 0) : 0; }
}  // namespace

bool Pipeline::may_help() const {
  // Not under an elastic level: the level is the controller's choice of how many threads run
  // operators, and a helper beside them would run one more than it chose and measured (at level 1
  // on 2 cores, the ingress helping made level 1 as fast as level 2, and the level stayed at 1).
  return !manual_ && !dedicated_ && !options_.elastic && !stop_.load(std::memory_order_relaxed) &&
         level_.load(std::memory_order_relaxed) < cores_;
}

bool Pipeline::help() {
  if (!may_help()) return false;
  try {
    if (!worker_step(threads_)) return false;
    helped_by_others_.fetch_add(1, std::memory_order_relaxed);
    return true;
  } catch (...) {
    fail(std::current_exception());
    return false;
  }
}

bool Pipeline::ingress_step() {
  // Every source holds its next batch; the one that starts earliest goes first, so sources
  // advance together in time and a union or join of two of them never waits long on one. A source
  // whose producer has nothing yet (a live input: BatchSource::ready) is pulled only when no batch
  // is held and it is the one the others wait for, the least floor (its last time or heartbeat):
  // a union releases rows by how far every input got, so while another source has something to
  // give, waiting on a quiet one would hold that back.
  bool ended_now = false;
  auto pull = [&](SourceState& s) {
    while (!s.ended && !s.pending) {
      if (!s.resumed.empty()) {  // a restored run's held batches go first
        s.pending = std::move(s.resumed.front());
        s.resumed.pop_front();
        break;
      }
      std::optional<Batch> b = s.source->next();
      if (!b) {
        s.ended = true;
        ended_now = true;
        s.end_position = s.source->position();
        for (const Edge& e : s.consumers) close_port(e);
        for (size_t o : s.outputs) close_output(o);
        s.source.reset();  // released once its end is published, so the release holds nothing back
      } else if (b->num_rows() > 0) {
        s.pending = std::move(*b);
      } else if (const int64_t bound = s.source->bound(); bound > s.floor) {
        // A heartbeat: a pulse to the consumers waiting on this stream's progress.
        s.floor = bound;
        link(s.consumers, {}, prepare(s.consumers, {}, std::move(*b), 0, bound, nullptr));
        return;
      }
    }
  };
  SourceState* next = nullptr;
  int64_t next_time = 0;
  SourceState* least = nullptr;  // of the open sources holding nothing, the least floor
  for (auto& src : sources_) {
    SourceState& s = *src;
    if (!s.ended && !s.pending && (!s.resumed.empty() || s.source->ready())) pull(s);
    if (s.pending) {
      const int64_t first = first_time(s);
      if (next == nullptr || first < next_time) {
        next = &s;
        next_time = first;
      }
    } else if (!s.ended && (least == nullptr || s.floor < least->floor)) {
      least = &s;
    }
  }
  if (next == nullptr) {
    if (least == nullptr) return ended_now;  // every source has ended (false once that is old news)
    pull(*least);  // may wait for its producer: nothing else can go on meanwhile
    return true;
  }
  send(*next);
  return true;
}

void Pipeline::send(SourceState& s) {
  Batch b = std::move(*s.pending);
  s.pending.reset();
  const int64_t before = tuples_in_.fetch_add(b.num_rows(), std::memory_order_relaxed);
  if (options_.rate > 0) {
    // Release the batch when its first tuple is due at the given rate.
    const auto due = start_ + std::chrono::nanoseconds(static_cast<int64_t>(static_cast<double>(before) * 1e9 / options_.rate));
    while (std::chrono::steady_clock::now() < due && !stop_.load(std::memory_order_relaxed)) {
      std::this_thread::sleep_until(std::min(due, std::chrono::steady_clock::now() + std::chrono::milliseconds(5)));
    }
  }
  if (s.time_index) s.floor = std::max(s.floor, time_at(b, *s.time_index, b.num_rows() - 1));
  link(s.consumers, s.outputs, prepare(s.consumers, s.outputs, std::move(b), 0, INT64_MIN, &s));
}

}  // namespace pao::runtime
