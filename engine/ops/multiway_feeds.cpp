#include "ops/multiway_internal.h"

#include <chrono>
#include <mutex>
#include <thread>

#include "sync/cache_line.h"
#include "sync/feed_queues.h"

namespace pao::ops {

using gate::ReadResult;
using State = ReadResult::State;

namespace {

class GateFeed final : public Feed {
 public:
  GateFeed(size_t inputs, size_t producers, size_t readers)
      : gate_(gate::TGateOptions{.inputs = inputs, .readers = readers, .producers = producers}) {}
  int64_t push(size_t slot, uint32_t input, const Batch& b, const int64_t* t) override {
    return gate_.insert(slot, input, b, t, false) ? b.num_rows() : 0;
  }
  void heartbeat(uint32_t input, int64_t time) override { gate_.heartbeat(input, time); }
  void close(uint32_t input) override { gate_.close(input); }
  void cancel() override { gate_.cancel(); }
  ReadResult next(size_t reader) override { return gate_.next_ready_tuple(reader); }
  uint64_t progress() const override { return gate_.progress(); }
  void wait_for_progress(uint64_t seen) override { gate_.wait_for_progress(seen); }
  std::optional<size_t> peak_live_arenas() const override { return gate_.peak_live_arenas(); }

 private:
  gate::TGate gate_;
};

// One queued tuple. The batch is held by a heap copy that the output thread deletes after the
// batch's last tuple (`last`).
struct Item {
  const Batch* batch;
  int64_t row;
  int64_t time;
  bool last;
};

template <class Queue>
class QueueFeed final : public Feed {
 public:
  explicit QueueFeed(size_t inputs) : inputs_(inputs) {
    for (size_t i = 0; i < inputs; ++i) inputs_[i].queue = std::make_unique<Queue>(kCapacity);
  }
  ~QueueFeed() override {
    if (have_current_) release_current();  // a run that ended by cancel or interrupt
    Item item;
    for (Input& in : inputs_) {
      while (in.queue->front(item)) {
        in.queue->pop();
        if (item.last) delete item.batch;
      }
    }
  }

  int64_t push(size_t, uint32_t input, const Batch& b, const int64_t* t) override {
    Input& in = inputs_[input];
    const int64_t n = b.num_rows();
    if (n == 0) return 0;
    // Cancelled: take nothing more (as the T-Gate does), even where the queue has room.
    if (cancelled_.load(std::memory_order_acquire)) return 0;
    if (in.queue->free_space() < static_cast<size_t>(n)) return 0;  // never stop mid-batch
    auto* held = new Batch(b);
    for (int64_t r = 0; r < n; ++r) {
      const Item item{held, r, t[r], r == n - 1};
      while (!in.queue->try_push(item)) {
        if (cancelled_.load(std::memory_order_acquire) || r == 0) {
          if (r == 0) {
            delete held;
          } else {
            // A partial batch, only on cancel: its queued rows point to `held`, but its last
            // row, whose reading would free it, never comes. The feed frees it at the end.
            std::lock_guard lock(partial_mutex_);
            partial_.emplace_back(held);
          }
          return 0;
        }
        std::this_thread::yield();
      }
      // The bound after the item (release): an output thread that reads this bound also sees
      // the item in the queue, and one that reads an older bound sees an older promise.
      if (t[r] > in.bound_local) {
        in.bound_local = t[r];
        in.bound.store(t[r], std::memory_order_release);
      }
    }
    signal_.notify();
    return n;
  }
  void heartbeat(uint32_t input, int64_t time) override {
    Input& in = inputs_[input];
    if (time > in.bound_local) {
      in.bound_local = time;
      in.bound.store(time, std::memory_order_release);
      signal_.notify();
    }
  }
  void close(uint32_t input) override {
    inputs_[input].closed.store(true, std::memory_order_release);
    signal_.notify();
  }
  void cancel() override {
    cancelled_.store(true, std::memory_order_release);
    signal_.notify();
  }

  // Scans every input's head (the cost linear in inputs that the T-Gate removes). An input with
  // an empty queue constrains readiness through its bound, read before its queue: whatever it
  // queues later sorts after that bound.
  ReadResult next(size_t) override {
    ReadResult out;
    if (have_current_) release_current();  // before the cancel check: it may be a batch's last tuple
    if (cancelled_.load(std::memory_order_acquire)) {
      out.state = State::kEnd;
      return out;
    }
    int best = -1;
    Item best_item{};
    bool all_closed = true;
    int64_t watermark = INT64_MAX;
    bool ready = true;
    bounds_.clear();
    for (uint32_t i = 0; i < inputs_.size(); ++i) {
      Input& in = inputs_[i];
      const bool closed = in.closed.load(std::memory_order_acquire);
      const int64_t bound = in.bound.load(std::memory_order_acquire);
      Item item;
      if (in.queue->front(item)) {
        all_closed = false;
        if (best < 0 || item.time < best_item.time) {  // ties: the lower input wins (scan order)
          best = static_cast<int>(i);
          best_item = item;
        }
        continue;
      }
      if (closed) continue;
      all_closed = false;
      bounds_.push_back({bound, i});
      watermark = std::min(watermark, bound);
    }
    if (best >= 0) {
      for (const auto& [time, input] : bounds_) {
        if (!(time > best_item.time || (time == best_item.time && input > static_cast<uint32_t>(best)))) {
          ready = false;
        }
      }
      if (ready) {
        inputs_[best].queue->pop();
        current_ = best_item;
        have_current_ = true;
        out.state = State::kTuple;
        out.tuple = {best_item.batch, best_item.row, best_item.time, static_cast<uint32_t>(best),
                     inputs_[best].read++};
        return out;
      }
      watermark = std::min(watermark, best_item.time);
    } else if (all_closed) {
      out.state = State::kEnd;
      return out;
    }
    out.state = State::kNotReady;
    out.watermark = watermark;
    return out;
  }
  uint64_t progress() const override { return signal_.value(); }
  // Timed: cancel() is seen through the signal too, so 50 ms only bounds a stray miss.
  void wait_for_progress(uint64_t seen) override { signal_.wait(seen, std::chrono::milliseconds(50)); }

 private:
  static constexpr size_t kCapacity = 65536;
  struct alignas(sync::kCacheLine) Input {
    std::unique_ptr<Queue> queue;
    std::atomic<int64_t> bound{INT64_MIN};
    std::atomic<bool> closed{false};
    int64_t bound_local = INT64_MIN;  // producer
    uint64_t read = 0;                // output thread: tuples taken
  };
  struct BoundEntry {
    int64_t time;
    uint32_t input;
  };

  // The tuple handed out last stays valid until the next call; then its batch may go.
  void release_current() {
    if (current_.last) delete current_.batch;
    have_current_ = false;
  }
  std::vector<Input> inputs_;
  std::mutex partial_mutex_;
  std::vector<std::unique_ptr<const Batch>> partial_;  // batches cut short by cancel (under partial_mutex_)
  std::vector<BoundEntry> bounds_;
  Item current_{};
  bool have_current_ = false;
  std::atomic<bool> cancelled_{false};
  sync::Wakeup signal_;
};

// WiML's intake: a producer applies its rows straight to the W-Hive (updater = its slot), then
// publishes its input's progress. An input's progress P (release store after the updates) says
// that every tuple of the input before P has been applied; the output thread's watermark is the
// least progress over the inputs.
//
// Each tuple is applied with its OrderKey (time, input, position in the input), so first and
// last keep the tuple the merged order would have kept. position_[input] counts the input's
// applied rows; one thread at a time touches it: a producer owns its inputs, and in the push form
// push(), heartbeat(), close() and the output thread's drain of a backlog hold the input's push
// lock, whose release and acquire order them.
class HiveIntake final : public Intake {
 public:
  HiveIntake(window::WHive& hive, MultiwayAggregate::Progress* progress, size_t inputs, sync::Wakeup& signal)
      : hive_(hive), progress_(progress), position_(inputs, 0), signal_(signal) {}

  int64_t push(size_t slot, uint32_t input, const Batch& b, const int64_t* t) override {
    const int64_t n = b.num_rows();
    int64_t& position = position_[input];
    for (int64_t r = 0; r < n; ++r) {
      if (!hive_.update(slot, b, r, OrderKey::of(t[r], input, position + r))) {
        // The slice's slot is busy until slower inputs let the output thread emit it (or no
        // watermark has come yet): publish what is done, and the time this input waits at, so
        // it never holds the watermark back; the caller feeds another input or waits.
        publish(input, t[r], r);
        position += r;
        return r;
      }
    }
    if (n > 0) publish(input, t[n - 1], n);
    position += n;
    return n;
  }
  void heartbeat(uint32_t input, int64_t time) override { publish(input, time, 0); }
  void close(uint32_t input) override { publish(input, INT64_MAX, 0); }
  void cancel() override { signal_.notify(); }

 private:
  void publish(uint32_t input, int64_t time, int64_t applied) {
    MultiwayAggregate::Progress& p = progress_[input];
    if (applied > 0) p.tuples.fetch_add(applied, std::memory_order_relaxed);
    if (time > p.time.load(std::memory_order_relaxed)) {
      p.time.store(time, std::memory_order_release);
      signal_.notify();
    }
  }

  window::WHive& hive_;
  MultiwayAggregate::Progress* progress_;
  std::vector<int64_t> position_;  // per input: rows applied (see the class comment)
  sync::Wakeup& signal_;
};

}  // namespace

std::unique_ptr<Feed> make_gate_feed(size_t inputs, size_t producers, size_t readers) {
  return std::make_unique<GateFeed>(inputs, producers, readers);
}

std::unique_ptr<Feed> make_queue_feed(size_t inputs, bool lock_free) {
  if (lock_free) return std::make_unique<QueueFeed<sync::SpscRing<Item>>>(inputs);
  return std::make_unique<QueueFeed<sync::LockedQueue<Item>>>(inputs);
}

std::unique_ptr<Intake> make_hive_intake(window::WHive& hive, MultiwayAggregate::Progress* progress, size_t inputs,
                                         sync::Wakeup& signal) {
  return std::make_unique<HiveIntake>(hive, progress, inputs, signal);
}

}  // namespace pao::ops
