// The multiway aggregate's engine threads: producers pulling the inputs, TuMLMC's update
// threads, and the releaser of ended inputs.
#include "ops/multiway.h"

#include <algorithm>
#include <chrono>
#include <thread>

#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "core/clock.h"
#include "core/error.h"
#include "ops/completion_log.h"
#include "ops/multiway_internal.h"

namespace pao::ops {

using gate::ReadResult;
using State = ReadResult::State;

void MultiwayAggregate::start(std::vector<std::unique_ptr<BatchSource>> inputs) {
  sources_ = std::move(inputs);
  for (size_t p = 0; p < options_.threads; ++p) {
    std::vector<uint32_t> mine;
    std::vector<std::unique_ptr<BatchSource>*> srcs;
    for (size_t i = p; i < inputs_; i += options_.threads) {
      mine.push_back(static_cast<uint32_t>(i));
      srcs.push_back(&sources_[i]);
    }
    spawn([this, p, mine, srcs] { produce(p, mine, srcs); });
  }
  spawn([this] { release_ended(); });
}

// An engine thread, counted in running_ so that stop() can wait for all of them with a timeout.
void MultiwayAggregate::spawn(std::function<void()> body) {
  {
    std::lock_guard lock(threads_mutex_);
    ++running_;
  }
  threads_.emplace_back([this, body = std::move(body)] {
    body();
    std::lock_guard lock(threads_mutex_);  // notify under the lock: stop() may destroy us next
    --running_;
    threads_done_.notify_all();
  });
}

// One producer thread: feeds its inputs in time order (the input whose next batch starts
// earliest goes first), and heartbeats the others with their next batch's first time, so no
// reader waits on an input this thread has simply not got to yet. Before blocking on a full
// input it has heartbeated all of them, which is what keeps back-pressure free of deadlock.
void MultiwayAggregate::produce(size_t slot, std::vector<uint32_t> mine,
                                std::vector<std::unique_ptr<BatchSource>*> sources) {
  struct Pending : TimedBatch {
    bool ended = false;
  };
  try {
    std::vector<Pending> pending(mine.size());
    auto pull = [&](size_t m) {
      Pending& p = pending[m];
      for (;;) {
        std::optional<Batch> b = (*sources[m])->next();
        if (!b) {
          p.ended = true;
          // Logged before the close: the output thread may end the run, and look its last window
          // sets up, as soon as the close lands.
          if (completions_) completions_->raise(mine[m], INT64_MAX, now_ns());
          in_->close(mine[m]);
          release_later(mine[m]);  // not here: this thread still feeds its other inputs
          return;
        }
        if (b->num_rows() == 0) {
          // Stopped: pull no more (an input may send empty batches without end). Nothing is
          // read any more, so the input is not closed; ended only skips its heartbeat.
          if (stopping_.load(std::memory_order_acquire)) {
            p.ended = true;
            return;
          }
          // A heartbeat of a live input (BatchSource::bound) goes to the gate at once: the
          // readers need not wait for this input's next rows to release the others' before it.
          if (const int64_t h = (*sources[m])->bound(); h != INT64_MIN) {
            gate::InputTimes& times = *times_[mine[m]];
            const int64_t before = times.floor();
            times.heartbeat(h);  // throws if it goes back
            if (times.floor() > before) {
              if (completions_) completions_->raise(mine[m], times.floor(), now_ns());
              in_->heartbeat(mine[m], times.floor());
            }
          }
          continue;
        }
        const int64_t* t = times_[mine[m]]->read(*b);
        p.keep(std::move(*b), t, times_in_batch());
        return;
      }
    };
    for (size_t m = 0; m < mine.size(); ++m) pull(m);
    const auto start = std::chrono::steady_clock::now();
    int64_t sent = 0;
    const double share = options_.rate > 0 ? options_.rate * mine.size() / static_cast<double>(inputs_) : 0;
    // Chunks of kChunk rows, and never a blocking push while another owned input could take
    // one: a thread blocks only when every input it owns is full. If every thread did, every
    // input would hold unread tuples, so the least of them would be ready and the output thread
    // would make room; hence no deadlock, whatever the batch sizes.
    constexpr int64_t kChunk = 4096;
    std::vector<int64_t> done(mine.size(), 0);  // rows of the pending batch already pushed
    std::vector<size_t> order(mine.size());
    for (;;) {
      // Stopped (cancel, a failure, an interrupt of the output thread): return before pulling
      // more. Without this check a queue design went on pulling its inputs until the queues
      // filled, which with a slow input (a Python generator) could take minutes.
      if (stopping_.load(std::memory_order_acquire)) return;
      order.clear();
      for (size_t m = 0; m < mine.size(); ++m) {
        if (!pending[m].ended) order.push_back(m);
      }
      if (order.empty()) return;
      std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return pending[a].times[done[a]] < pending[b].times[done[b]];
      });
      bool pushed = false;
      for (size_t m : order) {
        Pending& p = pending[m];
        const int64_t len = std::min(kChunk, p.batch.num_rows() - done[m]);
        // The arrival of these rows, for latencies: when the pacing schedules them (a live
        // source sends them then, whether or not the engine has room), else now.
        int64_t at = 0;
        if (share > 0) {  // pacing for latency measurements
          const auto due = start + std::chrono::nanoseconds(static_cast<int64_t>(sent / share * 1e9));
          std::this_thread::sleep_until(due);
          at = std::chrono::duration_cast<std::chrono::nanoseconds>(due.time_since_epoch()).count();
        } else if (completions_) {
          at = now_ns();
        }
        Batch part = (done[m] == 0 && len == p.batch.num_rows()) ? p.batch : p.batch.slice(done[m], len);
        const int64_t took = in_->push(slot, mine[m], part, p.times + done[m]);
        if (took == 0) {
          if (stopping_.load(std::memory_order_acquire)) return;
          continue;
        }
        if (completions_) completions_->raise(mine[m], p.times[done[m] + took - 1], at);
        pushed = true;
        sent += took;
        done[m] += took;
        if (done[m] == p.batch.num_rows()) {
          done[m] = 0;
          pull(m);
        }
        if (!pending[m].ended) {
          const int64_t next = pending[m].times[done[m]];
          if (completions_) completions_->raise(mine[m], next, now_ns());
          in_->heartbeat(mine[m], next);
        }
        break;
      }
      if (!pushed) {
        if (stopping_.load(std::memory_order_acquire)) return;
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  } catch (...) {
    fail(std::current_exception());
  }
}

// TuMLMC update thread u: reads every ready tuple from its own T-Gate reader in the merged order
// and applies those of its keys (`applied` counts the tuples read). Its progress is the time of the tuple it is about to apply (all
// earlier ones are applied: it reads in time order), published with a release store after the
// previous tuple's updates; the output thread is woken when that crosses into a new slice.
void MultiwayAggregate::update_loop(size_t u) {
  try {
    Progress& p = progress_[u];
    int64_t applied = 0;
    int64_t last_slice = INT64_MIN;
    const auto publish = [&](int64_t time) {
      if (time <= p.time.load(std::memory_order_relaxed)) return;
      p.time.store(time, std::memory_order_release);
      const int64_t slice = time == INT64_MAX ? INT64_MAX : options_.query.window.slice_of(time);
      if (slice != last_slice) {
        last_slice = slice;
        p.tuples.store(applied, std::memory_order_relaxed);
        signal_->notify();
      }
    };
    for (;;) {
      if (stopping_.load(std::memory_order_acquire)) return;
      const uint64_t seen = feed_->progress();
      ReadResult r = feed_->next(u);
      switch (r.state) {
        case State::kTuple:
          publish(r.tuple.time);
          // The merged order: equal OrderKeys, first and last keep the order of application.
          while (!hive_->update(u, *r.tuple.batch, r.tuple.row, OrderKey{r.tuple.time, 0})) {
            if (stopping_.load(std::memory_order_acquire)) return;
            std::this_thread::yield();
          }
          ++applied;
          break;
        case State::kNotReady:
          publish(r.watermark);
          feed_->wait_for_progress(seen);
          break;
        case State::kEnd:
          p.tuples.store(applied, std::memory_order_relaxed);
          publish(INT64_MAX);
          return;
      }
    }
  } catch (...) {
    fail(std::current_exception());
  }
}

void MultiwayAggregate::release_later(uint32_t input) {
  {
    std::lock_guard lock(release_mutex_);
    to_release_.push_back(input);
  }
  release_cv_.notify_one();
}

void MultiwayAggregate::release_ended() {
#if defined(__linux__)
  // Freeing is never urgent: at the lowest priority (Linux nice is per thread) the releaser takes
  // only idle time from the producers and the output thread while they still run.
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
#endif
  std::unique_lock lock(release_mutex_);
  std::vector<uint32_t> now;
  for (;;) {
    release_cv_.wait(lock, [&] {
      return !to_release_.empty() || released_ == inputs_ || stopping_.load(std::memory_order_acquire);
    });
    if (to_release_.empty()) return;  // every input released, or stopped
    now.swap(to_release_);
    lock.unlock();
    for (uint32_t i : now) sources_[i].reset();
    lock.lock();
    released_ += now.size();
    now.clear();
  }
}

}  // namespace pao::ops
