#pragma once
// The multiway windowed aggregate (multiway aggregation paper, sections 4 and 5.3-5.7) in six
// designs that give the identical result:
//   kMQ      per-input queues behind a lock; the output thread scans every head for the least
//            tuple, then updates and outputs (the Borealis / StreamCloud baseline);
//   kMQLF    the same with lock-free single-producer single-consumer queues;
//   kTuMLSC  producers merge as they insert, concurrently, into the T-Gate; one thread reads
//            ready tuples, updates every window of each and outputs;
//   kSliced  TuMLSC with window slicing: the one thread updates one slice per tuple in the
//            W-Hive and combines slices as windows close;
//   kTuMLMC  the T-Gate read by several update threads, each applying the tuples of its own keys
//            to the W-Hive, and the output thread emitting what the W-Hive says is complete;
//   kWiML    no merge: producers apply their tuples straight to the W-Hive (every aggregate: float
//            sums are exact and first/last compare OrderKeys, so the order of updates is free).
// The output thread is the caller of next() on the result. Producers are either the engine's own
// threads pulling the inputs (make_multiway_aggregate) or the user's threads (MultiwayPush).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/batch.h"
#include "gate/times.h"
#include "sync/cache_line.h"
#include "sync/wakeup.h"
#include "window/sessions.h"
#include "window/whive.h"

namespace pao::ops {

enum class Design : uint8_t { kMQ, kMQLF, kTuMLSC, kSliced, kTuMLMC, kWiML };

const char* design_name(Design d) noexcept;

// design="auto": the design expected fastest for the query on this machine (docs/aggregate.md
// gives the rule and the measurements behind it).
Design choose_design(const Schema& input, const window::AggregateQuery& query);

struct MultiwayOptions {
  window::AggregateQuery query;
  Design design = Design::kTuMLSC;
  // Producer threads for pulled inputs, each feeding inputs i with i % threads == its index;
  // 0 = min(inputs, hardware threads).
  size_t threads = 0;
  // kTuMLMC: update threads reading the T-Gate; 0 = hardware threads.
  size_t update_threads = 0;
  int64_t batch_size = 65536;
  // Hand out completed window sets at once (streaming) rather than in full batches.
  bool flush_each_window = false;
  // Pulled inputs only: total tuples per second the producers pace themselves to (0 = as fast
  // as possible). For latency measurements at a given load.
  double rate = 0;
  // Called about every 50 ms while the output thread is in next(), waiting or busy; may throw
  // to stop the run. What it throws fails the run: producers stop, and next() throws it, on
  // this call and on any later one.
  std::function<void()> check_interrupt;
};

struct MultiwayStats {
  int64_t tuples = 0;
  int64_t window_sets = 0;
  // With flush_each_window, per emitted window set: nanoseconds from the moment it became
  // complete to the moment next() handed out the batch holding its rows. A window set ending at
  // E is complete once every input has handed the engine a tuple, heartbeat or close at or after
  // E; that moment is the start of the push (for paced inputs: the time the pacing gave it) or
  // heartbeat or close of the last input to get there (CompletionLog).
  std::vector<int64_t> latencies_ns;
};

class Intake;  // where producers put tuples: a Feed, or the W-Hive directly (WiML)
class Feed;    // the merged, ready order a reader takes (T-Gate or queues)
class CompletionLog;  // when each input's bound rose, for latencies

// The result: a BatchSource of window rows; also the handle for the push form.
class MultiwayAggregate : public BatchSource {
 public:
  MultiwayAggregate(std::shared_ptr<const Schema> input_schema, size_t inputs, MultiwayOptions options);
  ~MultiwayAggregate() override;

  const std::shared_ptr<const Schema>& schema() const noexcept override;
  std::optional<Batch> next() override;

  // Push form: any thread, at most one at a time per input. A call on an input already closed
  // throws kUsage naming the input and changes nothing (no row taken, no window lost, the run goes
  // on). push() validates the batch (schema, null and unsorted times, naming input and row; such
  // a fault fails the run) and waits while the engine is full: the
  // input's T-Gate arenas or queue, or for WiML kBacklogRows rows held (a WiML push holds what
  // the W-Hive cannot take yet rather than wait for the output thread). A waiting push sees
  // Ctrl-C through check_interrupt, as next() does.
  void push(uint32_t input, const Batch& batch);
  void heartbeat(uint32_t input, int64_t time);
  void close(uint32_t input);
  // Push form, a restore: the window states the run starts from (WindowOutput::load_states),
  // before any push, heartbeat, close or next(). The caller orders those after this call (the
  // output thread reads the states when it emits; the pushes that let it emit happen after).
  // Session windows: the open sessions (SessionAggregate::load_sessions).
  void load_states(const Batch& states);
  // Stops the run: producers and the output thread return, queued data is released.
  void cancel();
  // cancel(), then waits for the producer threads to return (at most `timeout`, if given) and
  // joins them. Returns false if some were still running at the timeout (one stuck pulling its
  // input). For a clean interpreter exit; the destructor calls it without a timeout. Any thread.
  bool stop(std::optional<std::chrono::milliseconds> timeout);

  // Pulled inputs: starts the producer threads.
  void start(std::vector<std::unique_ptr<BatchSource>> inputs);

  // A snapshot of the counters and latencies so far. Any thread, while next() runs on another.
  MultiwayStats stats() const;
  Design design() const noexcept { return options_.design; }

  // kTuMLMC and kWiML: per source (update thread, or input), every tuple before it was applied.
  struct alignas(sync::kCacheLine) Progress {
    std::atomic<int64_t> time{INT64_MIN};
    std::atomic<int64_t> tuples{0};  // applied by this source
  };

  // kTuMLSC: the most T-Gate arenas (at most 4096 rows each) alive at once so far, which bounds
  // the memory the gate held; nullopt for the queue designs. Any thread.
  std::optional<size_t> peak_live_arenas() const;
  const std::shared_ptr<const Schema>& input_schema() const noexcept { return input_schema_; }

 private:
  void produce(size_t slot, std::vector<uint32_t> mine, std::vector<std::unique_ptr<BatchSource>*> sources);
  void update_loop(size_t u);  // kTuMLMC
  // Pulled inputs: hands an ended input's source to release_ended(), after its close is published.
  void release_later(uint32_t input);
  void release_ended();  // the releaser thread
  void spawn(std::function<void()> body);
  std::optional<Batch> next_merged();
  std::optional<Batch> next_hive();
  std::optional<Batch> hand_out(bool flush);
  void maybe_check_interrupt(std::chrono::steady_clock::time_point& last);
  bool pause_push(int& pauses, std::chrono::steady_clock::time_point& last_check);
  bool drain(uint32_t input);  // kWiML push form, under push_locks_[input]
  // InputTimes::read returns a pointer into the batch (an 8-byte time column), not its buffer.
  bool times_in_batch() const { return input_schema_->fields[time_index_].type.byte_width() == 8; }
  void record_latencies(int64_t handed_out_ns);
  void refuse_if_closed(uint32_t input, const char* call) const;  // under push_locks_[input]
  void fail(std::exception_ptr e);
  void rethrow_failure();

  std::shared_ptr<const Schema> input_schema_;
  size_t inputs_;
  MultiwayOptions options_;
  size_t time_index_;
  std::unique_ptr<sync::Wakeup> signal_;  // wakes the output thread
  std::unique_ptr<Feed> feed_;      // every design but kWiML
  std::unique_ptr<Intake> intake_;  // kWiML
  Intake* in_ = nullptr;            // feed_ or intake_
  std::unique_ptr<window::WindowAggregate> agg_;  // kMQ, kMQLF, kTuMLSC
  std::unique_ptr<window::SessionAggregate> sessions_;  // the same designs, session windows
  std::unique_ptr<window::WHive> hive_;           // the others
  window::WindowOutput* out_ = nullptr;
  std::unique_ptr<Progress[]> progress_;
  size_t progress_count_ = 0;
  std::vector<std::unique_ptr<gate::InputTimes>> times_;
  std::vector<std::mutex> push_locks_;  // push form: one pusher per input at a time
  // Push form: inputs closed by close(); each entry guarded by its input's push lock.
  std::vector<char> closed_;
  // kWiML push form: per input, the rows a push could not apply yet (multiway_internal.h).
  struct Backlog;
  std::unique_ptr<Backlog[]> backlogs_;
  // As many rows as the T-Gate's back-pressure lets an input hold (16 arenas of 4096).
  static constexpr int64_t kBacklogRows = 65536;

  std::vector<std::unique_ptr<BatchSource>> sources_;
  std::vector<std::thread> threads_;
  std::mutex threads_mutex_;  // running_ and joining threads_
  std::condition_variable threads_done_;
  size_t running_ = 0;  // engine threads (producers, updaters, the releaser) not yet returned
  // Ended inputs whose sources the releaser thread destroys. Releasing a stream can take
  // milliseconds (pyarrow frees a reader over thousands of batches: 10-20 ms measured), and a
  // producer doing it itself held back the inputs it still fed, so the last window sets waited.
  // Handing over an index through release_mutex_ orders the producer's last use of the source
  // before the releaser's destruction of it. The releaser returns once every input is released,
  // or on cancel() (left-over sources then go with sources_ in the destructor, after stop()).
  std::mutex release_mutex_;
  std::condition_variable release_cv_;
  std::vector<uint32_t> to_release_;
  size_t released_ = 0;
  std::mutex failure_mutex_;
  std::exception_ptr failure_;
  std::atomic<bool> failed_{false};
  std::atomic<bool> stopping_{false};  // cancel() or a failure: producers return
  bool ended_ = false;

  // Statistics, written by the output thread (next()) and read by stats() on any thread. The
  // counters have one writer, so it adds with a relaxed load and store (no read-modify-write on
  // the per-tuple path); relaxed suffices because a snapshot promises no order with anything
  // else. The latencies vector is appended once per window set, under stats_mutex_.
  std::atomic<int64_t> tuples_{0};
  std::atomic<int64_t> window_sets_{0};
  mutable std::mutex stats_mutex_;
  std::vector<int64_t> latencies_ns_;
  // Latencies (flush_each_window): the log, and the ends of window sets emitted but not yet
  // handed out (filled by out_).
  std::unique_ptr<CompletionLog> completions_;
  std::vector<int64_t> emitted_ends_;
};

}  // namespace pao::ops
