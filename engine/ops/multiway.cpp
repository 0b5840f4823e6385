#include "ops/multiway.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <deque>

#include "core/error.h"
#include "gate/tgate.h"

namespace pao::ops {

using gate::ReadResult;
using State = ReadResult::State;

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// What the output thread reads: tuples in the merged order, each once it is ready.
class Feed {
 public:
  virtual ~Feed() = default;
  // Producer side (slot: the producer's index; one thread per input at a time).
  virtual bool push(size_t slot, uint32_t input, const Batch& batch, const int64_t* times, bool wait) = 0;
  virtual void heartbeat(uint32_t input, int64_t time) = 0;
  virtual void close(uint32_t input) = 0;
  virtual void cancel() = 0;
  // Output side.
  virtual ReadResult next() = 0;
  virtual uint64_t progress() const = 0;
  virtual void wait_for_progress(uint64_t seen) = 0;
  // T-Gate only: the most arenas alive at once (MultiwayAggregate::peak_live_arenas).
  virtual std::optional<size_t> peak_live_arenas() const { return std::nullopt; }
};

namespace {

class GateFeed final : public Feed {
 public:
  GateFeed(size_t inputs, size_t producers)
      : gate_(gate::TGateOptions{.inputs = inputs, .readers = 1, .producers = producers}) {}
  bool push(size_t slot, uint32_t input, const Batch& b, const int64_t* t, bool wait) override {
    return gate_.insert(slot, input, b, t, wait);
  }
  void heartbeat(uint32_t input, int64_t time) override { gate_.heartbeat(input, time); }
  void close(uint32_t input) override { gate_.close(input); }
  void cancel() override { gate_.cancel(); }
  ReadResult next() override { return gate_.next_ready_tuple(0); }
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
  int64_t arrival_ns;
  bool last;
};

// MQ: a deque behind a mutex per input, one lock per tuple on each side (the paper's baseline).
class LockedQueue {
 public:
  explicit LockedQueue(size_t capacity) : capacity_(capacity) {}
  size_t free_space() {
    std::lock_guard lock(mutex_);
    return capacity_ - items_.size();
  }
  bool try_push(const Item& item) {
    std::lock_guard lock(mutex_);
    if (items_.size() >= capacity_) return false;
    items_.push_back(item);
    return true;
  }
  bool front(Item& out) {
    std::lock_guard lock(mutex_);
    if (items_.empty()) return false;
    out = items_.front();
    return true;
  }
  void pop() {
    std::lock_guard lock(mutex_);
    items_.pop_front();
  }

 private:
  std::mutex mutex_;
  std::deque<Item> items_;
  size_t capacity_;
};

// MQLF: a bounded single-producer single-consumer ring. The producer publishes a slot with a
// release store of tail_ and the consumer frees it with a release store of head_; each side
// acquires the other's index before touching a slot, so a slot is never read and written at once.
class LockFreeQueue {
 public:
  explicit LockFreeQueue(size_t capacity) : items_(std::bit_ceil(capacity)), mask_(items_.size() - 1) {}
  size_t free_space() {
    return items_.size() - (tail_.load(std::memory_order_relaxed) - head_.load(std::memory_order_acquire));
  }
  bool try_push(const Item& item) {
    const uint64_t t = tail_.load(std::memory_order_relaxed);
    if (t - head_.load(std::memory_order_acquire) == items_.size()) return false;
    items_[t & mask_] = item;
    tail_.store(t + 1, std::memory_order_release);
    return true;
  }
  bool front(Item& out) {
    const uint64_t h = head_.load(std::memory_order_relaxed);
    if (h == tail_.load(std::memory_order_acquire)) return false;
    out = items_[h & mask_];
    return true;
  }
  void pop() { head_.store(head_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

 private:
  std::vector<Item> items_;
  size_t mask_;
  alignas(64) std::atomic<uint64_t> head_{0};
  alignas(64) std::atomic<uint64_t> tail_{0};
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

  bool push(size_t, uint32_t input, const Batch& b, const int64_t* t, bool wait) override {
    Input& in = inputs_[input];
    const int64_t n = b.num_rows();
    if (n == 0) return true;
    // Cancelled: take nothing more (as the T-Gate does), even where the queue has room.
    if (cancelled_.load(std::memory_order_acquire)) return false;
    if (!wait && in.queue->free_space() < static_cast<size_t>(n)) return false;  // never stop mid-batch
    const int64_t arrival = now_ns();
    auto* held = new Batch(b);
    for (int64_t r = 0; r < n; ++r) {
      const Item item{held, r, t[r], arrival, r == n - 1};
      while (!in.queue->try_push(item)) {
        if (cancelled_.load(std::memory_order_acquire) || (r == 0 && !wait)) {
          if (r == 0) {
            delete held;
          } else {
            // A partial batch, only on cancel: its queued rows point to `held`, but its last
            // row, whose reading would free it, never comes. The feed frees it at the end.
            std::lock_guard lock(mutex_);
            partial_.emplace_back(held);
          }
          return false;
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
    bump();
    return true;
  }
  void heartbeat(uint32_t input, int64_t time) override {
    Input& in = inputs_[input];
    if (time > in.bound_local) {
      in.bound_local = time;
      in.bound.store(time, std::memory_order_release);
      bump();
    }
  }
  void close(uint32_t input) override {
    inputs_[input].closed.store(true, std::memory_order_release);
    bump();
  }
  void cancel() override {
    cancelled_.store(true, std::memory_order_release);
    bump();
  }

  // Scans every input's head (the cost linear in inputs that the T-Gate removes). An input with
  // an empty queue constrains readiness through its bound, read before its queue: whatever it
  // queues later sorts after that bound.
  ReadResult next() override {
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
                     inputs_[best].read++, best_item.arrival_ns};
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
  uint64_t progress() const override { return progress_.load(std::memory_order_seq_cst); }
  void wait_for_progress(uint64_t seen) override {
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    {
      std::unique_lock lock(mutex_);
      cv_.wait_for(lock, std::chrono::milliseconds(50),
                   [&] { return progress_.load(std::memory_order_seq_cst) != seen; });
    }
    waiters_.fetch_sub(1, std::memory_order_relaxed);
  }

 private:
  static constexpr size_t kCapacity = 65536;
  struct alignas(64) Input {
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
  void bump() {
    progress_.fetch_add(1, std::memory_order_seq_cst);
    if (waiters_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard lock(mutex_);
      cv_.notify_all();
    }
  }

  std::vector<Input> inputs_;
  std::vector<std::unique_ptr<const Batch>> partial_;  // batches cut short by cancel (under mutex_)
  std::vector<BoundEntry> bounds_;
  Item current_{};
  bool have_current_ = false;
  std::atomic<bool> cancelled_{false};
  std::atomic<uint64_t> progress_{0};
  std::atomic<int> waiters_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
};

std::unique_ptr<Feed> make_feed(Design design, size_t inputs, size_t producers) {
  switch (design) {
    case Design::kMQ: return std::make_unique<QueueFeed<LockedQueue>>(inputs);
    case Design::kMQLF: return std::make_unique<QueueFeed<LockFreeQueue>>(inputs);
    case Design::kTuMLSC: return std::make_unique<GateFeed>(inputs, producers);
  }
  return nullptr;
}

}  // namespace

MultiwayAggregate::MultiwayAggregate(std::shared_ptr<const Schema> input_schema, size_t inputs,
                                     MultiwayOptions options)
    : input_schema_(std::move(input_schema)),
      inputs_(inputs),
      options_(std::move(options)),
      time_index_(gate::check_input_schemas({input_schema_}, options_.query.time_column).time_index),
      agg_(*input_schema_, options_.query, options_.batch_size),
      push_locks_(inputs) {
  if (inputs_ == 0) throw Error(ErrorKind::kInvalidInput, "aggregate needs at least one input");
  if (options_.threads == 0) {
    options_.threads = std::max<size_t>(1, std::min<size_t>(inputs_, std::thread::hardware_concurrency()));
  }
  options_.threads = std::min(options_.threads, inputs_);
  // Push form: every input may have its own pushing thread; pulled: one slot per producer thread.
  feed_ = make_feed(options_.design, inputs_, std::max(options_.threads, inputs_));
  const DataType& type = input_schema_->fields[time_index_].type;
  for (size_t i = 0; i < inputs_; ++i) {
    times_.push_back(std::make_unique<gate::InputTimes>(static_cast<uint32_t>(i), options_.query.time_column,
                                                        time_index_, type));
  }
}

MultiwayAggregate::~MultiwayAggregate() { stop(std::nullopt); }

bool MultiwayAggregate::stop(std::optional<std::chrono::milliseconds> timeout) {
  cancel();
  std::unique_lock lock(threads_mutex_);
  auto none_running = [&] { return running_ == 0; };
  if (timeout) {
    if (!threads_done_.wait_for(lock, *timeout, none_running)) return false;
  } else {
    threads_done_.wait(lock, none_running);
  }
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();  // each has returned from produce(): at most a thread exit left
  }
  return true;
}

const std::shared_ptr<const Schema>& MultiwayAggregate::schema() const noexcept { return agg_.output_schema(); }

std::optional<size_t> MultiwayAggregate::peak_live_arenas() const { return feed_->peak_live_arenas(); }

void MultiwayAggregate::cancel() {
  stopping_.store(true, std::memory_order_release);
  feed_->cancel();
}

void MultiwayAggregate::fail(std::exception_ptr e) {
  {
    std::lock_guard lock(failure_mutex_);
    if (!failure_) failure_ = e;
  }
  failed_.store(true, std::memory_order_release);
  stopping_.store(true, std::memory_order_release);
  feed_->cancel();
}

void MultiwayAggregate::rethrow_failure() {
  if (!failed_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(failure_mutex_);
  std::rethrow_exception(failure_);
}

void MultiwayAggregate::push(uint32_t input, const Batch& batch) {
  if (input >= inputs_) {
    throw Error(ErrorKind::kUsage, "input " + std::to_string(input) + " does not exist; the aggregate has " +
                                       std::to_string(inputs_) + " inputs");
  }
  rethrow_failure();
  if (auto diff = schema_difference(*input_schema_, *batch.schema())) {
    throw Error(ErrorKind::kSchemaMismatch, "a batch pushed to input " + std::to_string(input) +
                                                " does not match the schema: " + *diff);
  }
  std::lock_guard lock(push_locks_[input]);
  try {
    const int64_t* t = times_[input]->read(batch);
    if (batch.num_rows() > 0) feed_->push(input, input, batch, t, true);
  } catch (...) {
    fail(std::current_exception());  // nothing past the fault: the run stops here
    throw;
  }
}

void MultiwayAggregate::heartbeat(uint32_t input, int64_t time) {
  std::lock_guard lock(push_locks_[input]);
  try {
    times_[input]->heartbeat(time);
  } catch (...) {
    fail(std::current_exception());
    throw;
  }
  feed_->heartbeat(input, time);
}

void MultiwayAggregate::close(uint32_t input) {
  std::lock_guard lock(push_locks_[input]);
  feed_->close(input);
}

void MultiwayAggregate::start(std::vector<std::unique_ptr<BatchSource>> inputs) {
  sources_ = std::move(inputs);
  for (size_t p = 0; p < options_.threads; ++p) {
    std::vector<uint32_t> mine;
    std::vector<std::unique_ptr<BatchSource>*> srcs;
    for (size_t i = p; i < inputs_; i += options_.threads) {
      mine.push_back(static_cast<uint32_t>(i));
      srcs.push_back(&sources_[i]);
    }
    {
      std::lock_guard lock(threads_mutex_);
      ++running_;
    }
    threads_.emplace_back([this, p, mine, srcs] {
      produce(p, mine, srcs);
      std::lock_guard lock(threads_mutex_);  // notify under the lock: stop() may destroy us next
      --running_;
      threads_done_.notify_all();
    });
  }
}

// One producer thread: feeds its inputs in time order (the input whose next batch starts
// earliest goes first), and heartbeats the others with their next batch's first time, so no
// reader waits on an input this thread has simply not got to yet. Before blocking on a full
// input it has heartbeated all of them, which is what keeps back-pressure free of deadlock.
void MultiwayAggregate::produce(size_t slot, std::vector<uint32_t> mine,
                                std::vector<std::unique_ptr<BatchSource>*> sources) {
  struct Pending {
    Batch batch;
    const int64_t* times = nullptr;
    std::vector<int64_t> copy;  // InputTimes' buffer is reused on the next read
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
          sources[m]->reset();  // release the input as soon as it ends
          feed_->close(mine[m]);
          return;
        }
        if (b->num_rows() == 0) {
          // Stopped: pull no more (an input may send empty batches without end). Nothing is
          // read any more, so the input is not closed; ended only skips its heartbeat.
          if (stopping_.load(std::memory_order_acquire)) {
            p.ended = true;
            return;
          }
          continue;
        }
        const int64_t* t = times_[mine[m]]->read(*b);
        p.batch = std::move(*b);
        if (input_schema_->fields[time_index_].type.byte_width() == 8) {  // t points into the batch
          p.times = t;
        } else {
          p.copy.assign(t, t + p.batch.num_rows());
          p.times = p.copy.data();
        }
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
        if (share > 0) {  // pacing for latency measurements
          std::this_thread::sleep_until(start + std::chrono::nanoseconds(static_cast<int64_t>(sent / share * 1e9)));
        }
        Batch part = (done[m] == 0 && len == p.batch.num_rows()) ? p.batch : p.batch.slice(done[m], len);
        if (!feed_->push(slot, mine[m], part, p.times + done[m], false)) {
          if (stopping_.load(std::memory_order_acquire)) return;
          continue;
        }
        pushed = true;
        sent += len;
        done[m] += len;
        if (done[m] == p.batch.num_rows()) {
          done[m] = 0;
          pull(m);
        }
        if (!pending[m].ended) feed_->heartbeat(mine[m], pending[m].times[done[m]]);
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

std::optional<Batch> MultiwayAggregate::next() {
  rethrow_failure();
  const bool flush = options_.flush_each_window;
  auto last_check = std::chrono::steady_clock::now();
  // Ctrl-C: check_interrupt is polled about every 50 ms, while waiting and also while busy (a
  // run whose windows rarely complete may not return from next() for a long time). What it
  // throws fails the run like a producer error does: the producers stop now, rather than when
  // the result is dropped (until then they went on pulling their inputs), and a later next()
  // throws it again instead of finishing the open windows as if every input had ended.
  auto poll_interrupt = [&] {
    if (!options_.check_interrupt) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_check < std::chrono::milliseconds(50)) return;
    last_check = now;
    try {
      options_.check_interrupt();
    } catch (...) {
      fail(std::current_exception());
      throw;
    }
  };
  for (;;) {
    if (agg_.has_output(flush || ended_)) {
      std::optional<Batch> b = agg_.take(flush || ended_);
      if (flush) {  // every emitted window set's rows have now been handed out
        const int64_t t = now_ns();
        for (int64_t a : pending_arrivals_) stats_.latencies_ns.push_back(t - a);
        pending_arrivals_.clear();
      }
      return b;
    }
    if (ended_) return std::nullopt;
    const uint64_t seen = feed_->progress();
    const int64_t before = agg_.window_sets_emitted();
    int64_t arrival = 0;
    ReadResult r = feed_->next();
    switch (r.state) {
      case State::kTuple:
        ++stats_.tuples;
        agg_.add(*r.tuple.batch, r.tuple.row, r.tuple.time);
        arrival = r.tuple.arrival_ns;
        if ((stats_.tuples & 4095) == 0) poll_interrupt();
        break;
      case State::kNotReady:
        agg_.advance(r.watermark);
        arrival = now_ns();
        if (!agg_.has_output(flush)) {
          rethrow_failure();
          poll_interrupt();
          feed_->wait_for_progress(seen);
        }
        break;
      case State::kEnd:
        rethrow_failure();
        agg_.finish();
        arrival = now_ns();
        ended_ = true;
        break;
    }
    const int64_t done = agg_.window_sets_emitted() - before;
    stats_.window_sets += done;
    if (flush) pending_arrivals_.insert(pending_arrivals_.end(), static_cast<size_t>(done), arrival);
  }
}

}  // namespace pao::ops
