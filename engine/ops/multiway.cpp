#include "ops/multiway.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <deque>

#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

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

// A batch kept for later hand-over to the intake, with its times. InputTimes' buffer is reused by
// its next read, so the times are copied unless they point into the batch (8-byte time columns).
struct TimedBatch {
  Batch batch;
  const int64_t* times = nullptr;
  std::vector<int64_t> copy;
  void keep(Batch b, const int64_t* t, bool times_in_batch) {
    batch = std::move(b);
    if (times_in_batch) {
      times = t;
    } else {
      copy.assign(t, t + batch.num_rows());
      times = copy.data();
    }
  }
};

}  // namespace

// A counter of events the output thread may wait for. bump() takes the mutex only when a waiter
// is registered; the seq_cst increment and waiters_ load pair with the waiter's seq_cst
// registration and counter re-check, so a bump never falls between check and sleep unnoticed
// (and the 50 ms bound covers the rest).
class Signal {
 public:
  void bump() {
    count_.fetch_add(1, std::memory_order_seq_cst);
    if (waiters_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard lock(mutex_);
      cv_.notify_all();
    }
  }
  uint64_t value() const { return count_.load(std::memory_order_seq_cst); }
  void wait(uint64_t seen) {
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    {
      std::unique_lock lock(mutex_);
      cv_.wait_for(lock, std::chrono::milliseconds(50), [&] { return value() != seen; });
    }
    waiters_.fetch_sub(1, std::memory_order_relaxed);
  }

 private:
  std::atomic<uint64_t> count_{0};
  std::atomic<int> waiters_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
};

// When each input's bound (the least time it may still send) rose, for latency measurement: a
// window set ending at E became complete when the last input's bound reached E. An entry is
// (bound, steady-clock ns when the push, heartbeat or close that raised it began), appended by
// the input's producer (before a heartbeat or close, which cannot fail to land; after a push,
// which may take nothing) and read by the output thread, hence a mutex per input; it runs only
// when latencies are recorded. Entries below the earliest end still to
// be looked up are dropped, so a long live run keeps only what it may still ask about.
class CompletionLog {
 public:
  explicit CompletionLog(size_t inputs) : inputs_(inputs) {}

  void raise(uint32_t input, int64_t bound, int64_t at_ns) {
    In& in = inputs_[input];
    std::lock_guard lock(in.mutex);
    if (in.entries.empty() || bound > in.entries.back().first) in.entries.emplace_back(bound, at_ns);
  }
  // When every input's bound had reached `end`, or nullopt while some input's has not. Per
  // input, the earliest stamp of the raises at or past `end`: stamps need not grow with the
  // bound (a paced push running late is stamped when it was due, which may precede an earlier
  // heartbeat), and the earliest never understates a latency.
  std::optional<int64_t> completed_at(int64_t end) {
    int64_t at = INT64_MIN;
    for (In& in : inputs_) {
      std::lock_guard lock(in.mutex);
      auto it = std::lower_bound(in.entries.begin(), in.entries.end(), end,
                                 [](const std::pair<int64_t, int64_t>& e, int64_t v) { return e.first < v; });
      if (it == in.entries.end()) return std::nullopt;
      int64_t first = it->second;
      for (; it != in.entries.end(); ++it) first = std::min(first, it->second);
      at = std::max(at, first);
    }
    return at;
  }
  // No end below `end` will be looked up again.
  void forget_below(int64_t end) {
    for (In& in : inputs_) {
      std::lock_guard lock(in.mutex);
      while (!in.entries.empty() && in.entries.front().first < end) in.entries.pop_front();
    }
  }

 private:
  struct In {
    std::mutex mutex;
    std::deque<std::pair<int64_t, int64_t>> entries;  // bounds strictly increasing
  };
  std::vector<In> inputs_;
};

// The producer side (slot: the producer's index; one thread per input at a time).
class Intake {
 public:
  virtual ~Intake() = default;
  // Takes rows of `batch` from the first until full and returns how many; never waits (queues
  // and the T-Gate take all rows or none; give the T-Gate at most one arena's rows, 4096). The
  // callers wait: produce() by feeding another input, push() in pause_push().
  virtual int64_t push(size_t slot, uint32_t input, const Batch& batch, const int64_t* times) = 0;
  virtual void heartbeat(uint32_t input, int64_t time) = 0;
  virtual void close(uint32_t input) = 0;
  virtual void cancel() = 0;
};

// Tuples in the merged order, each once it is ready, for reader 0 (the output thread) or, with
// the T-Gate, for each of several readers.
class Feed : public Intake {
 public:
  virtual ReadResult next(size_t reader) = 0;
  virtual uint64_t progress() const = 0;
  virtual void wait_for_progress(uint64_t seen) = 0;
  // T-Gate only: the most arenas alive at once (MultiwayAggregate::peak_live_arenas).
  virtual std::optional<size_t> peak_live_arenas() const { return std::nullopt; }
};

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
    signal_.bump();
    return n;
  }
  void heartbeat(uint32_t input, int64_t time) override {
    Input& in = inputs_[input];
    if (time > in.bound_local) {
      in.bound_local = time;
      in.bound.store(time, std::memory_order_release);
      signal_.bump();
    }
  }
  void close(uint32_t input) override {
    inputs_[input].closed.store(true, std::memory_order_release);
    signal_.bump();
  }
  void cancel() override {
    cancelled_.store(true, std::memory_order_release);
    signal_.bump();
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
  void wait_for_progress(uint64_t seen) override { signal_.wait(seen); }

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
  std::vector<Input> inputs_;
  std::mutex partial_mutex_;
  std::vector<std::unique_ptr<const Batch>> partial_;  // batches cut short by cancel (under partial_mutex_)
  std::vector<BoundEntry> bounds_;
  Item current_{};
  bool have_current_ = false;
  std::atomic<bool> cancelled_{false};
  Signal signal_;
};

// WiML's intake: a producer applies its rows straight to the W-Hive (updater = its slot), then
// publishes its input's progress. An input's progress P (release store after the updates) says
// that every tuple of the input before P has been applied; the output thread's watermark is the
// least progress over the inputs.
//
// Each tuple is applied with its Position (time, input, position in the input), so first and
// last keep the tuple the merged order would have kept. position_[input] counts the input's
// applied rows; one thread at a time touches it: a producer owns its inputs, and in the push form
// push(), heartbeat(), close() and the output thread's drain of a backlog hold the input's push
// lock, whose release and acquire order them.
class HiveIntake final : public Intake {
 public:
  HiveIntake(window::WHive& hive, MultiwayAggregate::Progress* progress, size_t inputs, Signal& signal)
      : hive_(hive), progress_(progress), position_(inputs, 0), signal_(signal) {}

  int64_t push(size_t slot, uint32_t input, const Batch& b, const int64_t* t) override {
    const int64_t n = b.num_rows();
    int64_t& position = position_[input];
    for (int64_t r = 0; r < n; ++r) {
      if (!hive_.update(slot, b, r, window::Position::of(t[r], input, position + r))) {
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
  void cancel() override { signal_.bump(); }

 private:
  void publish(uint32_t input, int64_t time, int64_t applied) {
    MultiwayAggregate::Progress& p = progress_[input];
    if (applied > 0) p.tuples.fetch_add(applied, std::memory_order_relaxed);
    if (time > p.time.load(std::memory_order_relaxed)) {
      p.time.store(time, std::memory_order_release);
      signal_.bump();
    }
  }

  window::WHive& hive_;
  MultiwayAggregate::Progress* progress_;
  std::vector<int64_t> position_;  // per input: rows applied (see the class comment)
  Signal& signal_;
};

}  // namespace

const char* design_name(Design d) noexcept {
  switch (d) {
    case Design::kMQ: return "mq";
    case Design::kMQLF: return "mqlf";
    case Design::kTuMLSC: return "tumlsc";
    case Design::kSliced: return "sliced";
    case Design::kTuMLMC: return "tumlmc";
    case Design::kWiML: return "wiml";
  }
  return "?";
}

Design choose_design(const Schema& input, const window::AggregateQuery& query) {
  const window::WindowOutput probe(input, query, 1);  // validates the query
  if (query.window.slices_per_window() > window::WHive::kMaxSlicesPerWindow) return Design::kTuMLSC;
  // WiML whatever the number of inputs and producer threads, pulled or pushed: with no merge, its
  // producer and output threads run side by side, and it measured faster than `sliced` with one
  // producer too, and with pushing threads (docs/aggregate.md).
  return Design::kWiML;
}

MultiwayAggregate::MultiwayAggregate(std::shared_ptr<const Schema> input_schema, size_t inputs,
                                     MultiwayOptions options)
    : input_schema_(std::move(input_schema)),
      inputs_(inputs),
      options_(std::move(options)),
      time_index_(gate::check_input_schemas({input_schema_}, options_.query.time_column).time_index),
      push_locks_(inputs),
      closed_(inputs, 0) {
  if (inputs_ == 0) throw Error(ErrorKind::kInvalidInput, "aggregate needs at least one input");
  options_.query.window = options_.query.window.normalized();
  const size_t cores = std::max<size_t>(1, std::thread::hardware_concurrency());
  if (options_.threads == 0) options_.threads = std::max<size_t>(1, std::min<size_t>(inputs_, cores));
  options_.threads = std::min(options_.threads, inputs_);
  if (options_.update_threads == 0) options_.update_threads = cores;
  // Push form: every input may have its own pushing thread; pulled: one slot per producer thread.
  const size_t slots = std::max(options_.threads, inputs_);
  signal_ = std::make_unique<Signal>();
  const window::AggregateQuery& q = options_.query;
  switch (options_.design) {
    case Design::kMQ:
      feed_ = std::make_unique<QueueFeed<LockedQueue>>(inputs_);
      break;
    case Design::kMQLF:
      feed_ = std::make_unique<QueueFeed<LockFreeQueue>>(inputs_);
      break;
    case Design::kTuMLSC:
    case Design::kSliced:
      feed_ = std::make_unique<GateFeed>(inputs_, slots, 1);
      break;
    case Design::kTuMLMC:
      feed_ = std::make_unique<GateFeed>(inputs_, slots, options_.update_threads);
      break;
    case Design::kWiML:
      break;
  }
  switch (options_.design) {
    case Design::kMQ:
    case Design::kMQLF:
    case Design::kTuMLSC:
      agg_ = std::make_unique<window::WindowAggregate>(*input_schema_, q, options_.batch_size);
      out_ = agg_.get();
      break;
    case Design::kSliced:
      hive_ = std::make_unique<window::WHive>(*input_schema_, q, options_.batch_size, 1, window::HiveMode::kSingle);
      break;
    case Design::kTuMLMC:
      hive_ = std::make_unique<window::WHive>(*input_schema_, q, options_.batch_size, options_.update_threads,
                                              window::HiveMode::kPartitioned);
      progress_count_ = options_.update_threads;
      break;
    case Design::kWiML:
      hive_ = std::make_unique<window::WHive>(*input_schema_, q, options_.batch_size, slots,
                                              window::HiveMode::kShared);
      progress_count_ = inputs_;
      break;
  }
  if (hive_) out_ = hive_.get();
  if (progress_count_ > 0) progress_ = std::make_unique<Progress[]>(progress_count_);
  if (options_.design == Design::kWiML) {
    intake_ = std::make_unique<HiveIntake>(*hive_, progress_.get(), inputs_, *signal_);
    backlogs_ = std::make_unique<Backlog[]>(inputs_);
    in_ = intake_.get();
  } else {
    in_ = feed_.get();
  }
  if (options_.flush_each_window) {
    completions_ = std::make_unique<CompletionLog>(inputs_);
    out_->record_ends(&emitted_ends_);
  }
  const DataType& type = input_schema_->fields[time_index_].type;
  const window::TimeBounds bounds = window::time_bounds_for(options_.query.window, type);
  for (size_t i = 0; i < inputs_; ++i) {
    times_.push_back(std::make_unique<gate::InputTimes>(static_cast<uint32_t>(i), options_.query.time_column,
                                                        time_index_, type));
    times_.back()->limit(bounds.lo, bounds.hi, bounds.why);
  }
  if (options_.design == Design::kTuMLMC) {
    for (size_t u = 0; u < options_.update_threads; ++u) spawn([this, u] { update_loop(u); });
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

const std::shared_ptr<const Schema>& MultiwayAggregate::schema() const noexcept { return out_->output_schema(); }

std::optional<size_t> MultiwayAggregate::peak_live_arenas() const {
  return feed_ ? feed_->peak_live_arenas() : std::nullopt;  // WiML has no feed
}

void MultiwayAggregate::cancel() {
  stopping_.store(true, std::memory_order_release);
  in_->cancel();
  signal_->bump();
  // Under the mutex, so the releaser cannot miss the flag between its check and its wait.
  { std::lock_guard lock(release_mutex_); }
  release_cv_.notify_all();
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

void MultiwayAggregate::fail(std::exception_ptr e) {
  {
    std::lock_guard lock(failure_mutex_);
    if (!failure_) failure_ = e;
  }
  failed_.store(true, std::memory_order_release);
  cancel();
}

void MultiwayAggregate::rethrow_failure() {
  if (!failed_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(failure_mutex_);
  std::rethrow_exception(failure_);
}

// WiML's push form: rows a push could not apply yet, because their slice's slot still holds an
// older slice or no watermark has come yet (whive.h), in push order, with a heartbeat or close
// that came after them. The input's push lock guards all of it; `held` lets the output thread
// skip inputs with nothing held without taking their locks (release by the holder after the
// change, acquire by the reader; a stale false only delays a drain to the output thread's next
// round, since the pusher itself drains too).
struct MultiwayAggregate::Backlog {
  struct Rows : TimedBatch {
    int64_t applied = 0;
  };
  std::deque<Rows> rows;
  int64_t count = 0;               // rows held, not applied
  int64_t bound = INT64_MIN;       // a heartbeat after the held rows
  bool closed = false;             // a close after the held rows
  std::atomic<bool> held{false};  // rows, bound or closed pending
};

namespace {
// Rows one push hands the feed at a time: a T-Gate arena, so that a full gate refuses the push
// instead of waiting inside it (pause_push() waits, and sees Ctrl-C).
constexpr int64_t kPushChunk = 4096;
}  // namespace

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
  refuse_if_closed(input, "push");
  try {
    const int64_t* t = times_[input]->read(batch);
    const int64_t at = now_ns();
    const int64_t n = batch.num_rows();
    if (n == 0) return;
    auto last_check = std::chrono::steady_clock::now();
    int pauses = 0;
    if (intake_) {
      // WiML: apply what the W-Hive takes now and hold the rest, so that a push never waits for
      // the output thread (a single thread may push every input, then read). Wait only while
      // the input holds kBacklogRows or more, as the T-Gate waits when an input's arenas are full.
      Backlog& b = backlogs_[input];
      const int64_t took = drain(input) ? in_->push(input, input, batch, t) : 0;
      if (took < n) {
        Backlog::Rows& r = b.rows.emplace_back();
        r.keep(batch, t, times_in_batch());
        r.applied = took;
        b.count += n - took;
        b.held.store(true, std::memory_order_release);
      }
      if (completions_) completions_->raise(input, t[n - 1], at);
      while (b.count >= kBacklogRows && !drain(input)) {
        if (!pause_push(pauses, last_check)) return;
      }
      return;
    }
    for (int64_t done = 0; done < n;) {
      const int64_t len = std::min(kPushChunk, n - done);
      const int64_t took = in_->push(input, input, done == 0 && len == n ? batch : batch.slice(done, len), t + done);
      if (took > 0) {
        done += took;
        pauses = 0;
      } else if (!pause_push(pauses, last_check)) {
        return;
      }
    }
    if (completions_) completions_->raise(input, t[n - 1], at);
  } catch (...) {
    fail(std::current_exception());  // nothing past the fault: the run stops here
    throw;
  }
}

// A push waiting for room. Room frees when the output thread reads, which sends no wake-up to
// pushers, so this polls: 20 us at first, doubling to 1 ms while the wait lasts, and every 50 ms
// it lets Python see Ctrl-C (a pusher may be the main thread). False once the run is stopping:
// the push returns, taking no more (a failure is thrown instead).
bool MultiwayAggregate::pause_push(int& pauses, std::chrono::steady_clock::time_point& last_check) {
  if (stopping_.load(std::memory_order_acquire)) {
    rethrow_failure();
    return false;
  }
  std::this_thread::sleep_for(std::chrono::microseconds(20 << std::min(pauses++, 5)));
  maybe_check_interrupt(last_check);
  return true;
}

// Applies the input's held rows in order, then a held heartbeat or close. True when nothing is
// held any more. The caller holds the input's push lock.
bool MultiwayAggregate::drain(uint32_t input) {
  Backlog& b = backlogs_[input];
  if (!b.held.load(std::memory_order_relaxed)) return true;
  while (!b.rows.empty()) {
    Backlog::Rows& r = b.rows.front();
    const int64_t n = r.batch.num_rows();
    const int64_t took = in_->push(input, input, r.batch.slice(r.applied, n - r.applied), r.times + r.applied);
    r.applied += took;
    b.count -= took;
    if (r.applied < n) return false;
    b.rows.pop_front();
  }
  if (b.closed) {
    in_->close(input);
  } else if (b.bound != INT64_MIN) {
    in_->heartbeat(input, b.bound);
  }
  b.bound = INT64_MIN;
  b.closed = false;
  b.held.store(false, std::memory_order_release);
  return true;
}

// Misuse of a closed input is refused before anything changes: a push after close() would
// otherwise reach a feed that has published the input's end (the T-Gate's readers would wait for
// a tuple behind +inf, the queues would drop it, the W-Hive would apply it to a window already
// emitted). Not a failure of the run: the caller's mistake, reported to the caller alone.
void MultiwayAggregate::refuse_if_closed(uint32_t input, const char* call) const {
  if (!closed_[input]) return;
  throw Error(ErrorKind::kUsage, std::string(call) + "() on input " + std::to_string(input) +
                                     ", which is closed: close() promised it sends nothing more; the call "
                                     "changed nothing");
}

void MultiwayAggregate::heartbeat(uint32_t input, int64_t time) {
  if (input >= inputs_) {
    throw Error(ErrorKind::kUsage, "input " + std::to_string(input) + " does not exist; the aggregate has " +
                                       std::to_string(inputs_) + " inputs");
  }
  std::lock_guard lock(push_locks_[input]);
  refuse_if_closed(input, "heartbeat");
  try {
    times_[input]->heartbeat(time);
  } catch (...) {
    fail(std::current_exception());
    throw;
  }
  if (completions_) completions_->raise(input, time, now_ns());
  if (intake_ && !drain(input)) {
    // Behind held rows: published once they are applied (a bound says every earlier tuple is).
    backlogs_[input].bound = std::max(backlogs_[input].bound, time);
    return;
  }
  in_->heartbeat(input, time);
}

void MultiwayAggregate::close(uint32_t input) {
  if (input >= inputs_) {
    throw Error(ErrorKind::kUsage, "input " + std::to_string(input) + " does not exist; the aggregate has " +
                                       std::to_string(inputs_) + " inputs");
  }
  std::lock_guard lock(push_locks_[input]);
  refuse_if_closed(input, "close");
  closed_[input] = 1;
  if (completions_) completions_->raise(input, INT64_MAX, now_ns());
  if (intake_ && !drain(input)) {
    backlogs_[input].closed = true;
    return;
  }
  in_->close(input);
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
        signal_->bump();
      }
    };
    for (;;) {
      if (stopping_.load(std::memory_order_acquire)) return;
      const uint64_t seen = feed_->progress();
      ReadResult r = feed_->next(u);
      switch (r.state) {
        case State::kTuple:
          publish(r.tuple.time);
          // The merged order: equal Positions, first and last keep the order of application.
          while (!hive_->update(u, *r.tuple.batch, r.tuple.row, window::Position{r.tuple.time, 0})) {
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

std::optional<Batch> MultiwayAggregate::hand_out(bool flush) {
  std::optional<Batch> b = out_->take(flush);
  if (completions_) record_latencies(now_ns());  // every emitted window set's rows are handed out
  return b;
}

// Window sets are looked up in end order; one whose completion the log does not show yet (its
// producer records the raise after making it) waits, with its hand-out time, for the next call.
void MultiwayAggregate::record_latencies(int64_t handed_out_ns) {
  for (int64_t end : emitted_ends_) unresolved_.emplace_back(end, handed_out_ns);
  emitted_ends_.clear();
  size_t done = 0;
  for (; done < unresolved_.size(); ++done) {
    const auto [end, at] = unresolved_[done];
    const std::optional<int64_t> complete = completions_->completed_at(end);
    if (!complete) break;
    std::lock_guard lock(stats_mutex_);
    latencies_ns_.push_back(at - *complete);
  }
  if (done == 0) return;
  // Ends only grow: nothing below the last one looked up is asked about again.
  completions_->forget_below(unresolved_[done - 1].first);
  unresolved_.erase(unresolved_.begin(), unresolved_.begin() + static_cast<std::ptrdiff_t>(done));
}

// Ctrl-C: check_interrupt is polled about every 50 ms, while waiting and also while busy (a run
// whose windows rarely complete may not return from next() for a long time). What it throws
// fails the run like a producer error does: the producers stop now, rather than when the result
// is dropped, and a later next() throws it again instead of finishing the open windows as if
// every input had ended.
void MultiwayAggregate::maybe_check_interrupt(std::chrono::steady_clock::time_point& last) {
  if (!options_.check_interrupt) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last < std::chrono::milliseconds(50)) return;
  last = now;
  try {
    options_.check_interrupt();
  } catch (...) {
    fail(std::current_exception());
    throw;
  }
}

MultiwayStats MultiwayAggregate::stats() const {
  MultiwayStats s;
  s.tuples = tuples_.load(std::memory_order_relaxed);
  s.window_sets = window_sets_.load(std::memory_order_relaxed);
  std::lock_guard lock(stats_mutex_);
  s.latencies_ns = latencies_ns_;
  return s;
}

std::optional<Batch> MultiwayAggregate::next() {
  rethrow_failure();
  std::optional<Batch> b = progress_count_ > 0 ? next_hive() : next_merged();
  // The end: every close is logged, so window sets still waiting for their completion resolve.
  if (!b && completions_) record_latencies(now_ns());
  return b;
}

// MQ, MQLF, TuMLSC, sliced: the output thread reads the merged order and updates the windows.
std::optional<Batch> MultiwayAggregate::next_merged() {
  const bool flush = options_.flush_each_window;
  auto last_check = std::chrono::steady_clock::now();
  const auto advance = [&](int64_t watermark) {
    if (agg_) {
      agg_->advance(watermark);
    } else {
      hive_->emit(watermark);
    }
  };
  for (;;) {
    if (out_->has_output(flush || ended_)) return hand_out(flush || ended_);
    if (ended_) return std::nullopt;
    const uint64_t seen = feed_->progress();
    const int64_t before = out_->window_sets_emitted();
    ReadResult r = feed_->next(0);
    switch (r.state) {
      case State::kTuple:
        tuples_.store(tuples_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        if (agg_) {
          agg_->add(*r.tuple.batch, r.tuple.row, r.tuple.time);
        } else {
          hive_->emit(r.tuple.time);
          // Never busy: emit(t) released every slice whose windows end at or before t.
          hive_->update(0, *r.tuple.batch, r.tuple.row, window::Position{r.tuple.time, 0});
        }
        if ((tuples_.load(std::memory_order_relaxed) & 4095) == 0) maybe_check_interrupt(last_check);
        break;
      case State::kNotReady:
        advance(r.watermark);
        if (!out_->has_output(flush)) {
          // Nothing more is ready: the finished rows leave now. batch_size bounds a batch; it is
          // never a reason to keep ready rows from a consumer while the inputs are quiet.
          if (out_->has_output(true)) return hand_out(true);
          rethrow_failure();
          maybe_check_interrupt(last_check);
          feed_->wait_for_progress(seen);
        }
        break;
      case State::kEnd:
        rethrow_failure();
        advance(INT64_MAX);
        ended_ = true;
        break;
    }
    window_sets_.store(window_sets_.load(std::memory_order_relaxed) + out_->window_sets_emitted() - before,
                       std::memory_order_relaxed);
  }
}

// TuMLMC, WiML: other threads update the W-Hive; the output thread emits what the least published
// progress (acquire loads, pairing with the sources' release stores) says is complete.
std::optional<Batch> MultiwayAggregate::next_hive() {
  const bool flush = options_.flush_each_window;
  auto last_check = std::chrono::steady_clock::now();
  for (;;) {
    if (out_->has_output(flush || ended_)) return hand_out(flush || ended_);
    if (ended_) return std::nullopt;
    rethrow_failure();
    if (stopping_.load(std::memory_order_acquire)) {
      ended_ = true;
      continue;
    }
    const uint64_t seen = signal_->value();
    int64_t watermark = INT64_MAX;
    for (size_t s = 0; s < progress_count_; ++s) {
      watermark = std::min(watermark, progress_[s].time.load(std::memory_order_acquire));
    }
    const int64_t before = out_->window_sets_emitted();
    hive_->emit(watermark);
    window_sets_.store(window_sets_.load(std::memory_order_relaxed) + out_->window_sets_emitted() - before,
                       std::memory_order_relaxed);
    // WiML's push form: the emit may have freed the slots held rows wait for. Apply them here,
    // so that they need no further push; an input whose pusher holds its lock drains itself.
    // Their progress bumps signal_ past `seen`, so the loop goes round again.
    if (backlogs_) {
      for (uint32_t i = 0; i < inputs_; ++i) {
        if (!backlogs_[i].held.load(std::memory_order_acquire) || !push_locks_[i].try_lock()) continue;
        std::lock_guard lock(push_locks_[i], std::adopt_lock);
        try {
          drain(i);
        } catch (...) {
          fail(std::current_exception());
          throw;
        }
      }
    }
    if (watermark == INT64_MAX) {
      ended_ = true;
      // WiML: each input's applied tuples; TuMLMC: every update thread reads every tuple.
      int64_t tuples = 0;
      const size_t counted = options_.design == Design::kTuMLMC ? 1 : progress_count_;
      for (size_t s = 0; s < counted; ++s) tuples += progress_[s].tuples.load(std::memory_order_relaxed);
      tuples_.store(tuples, std::memory_order_relaxed);
      continue;
    }
    if (!out_->has_output(flush)) {
      if (out_->has_output(true)) return hand_out(true);  // nothing more is complete: see next_merged()
      maybe_check_interrupt(last_check);
      signal_->wait(seen);
    }
  }
}

}  // namespace pao::ops
