#include "ops/multiway.h"

// The multiway aggregate: construction, the output thread (next()), cancellation and failure.
// The feeds are in multiway_feeds.cpp, the push form in multiway_push.cpp, the engine's threads
// in multiway_producers.cpp, the latency log in completion_log.cpp.
#include <algorithm>
#include <chrono>

#include "core/clock.h"
#include "core/error.h"
#include "ops/completion_log.h"
#include "ops/multiway_internal.h"

namespace pao::ops {

using gate::ReadResult;
using State = ReadResult::State;

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
  if (query.session_gap) {
    const window::SessionAggregate probe(input, query, 1);  // validates the query
    return Design::kTuMLSC;  // of the designs that compute sessions, the one that merges on several threads
  }
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
  signal_ = std::make_unique<sync::Wakeup>();
  const window::AggregateQuery& q = options_.query;
  switch (options_.design) {
    case Design::kMQ:
    case Design::kMQLF:
      feed_ = make_queue_feed(inputs_, options_.design == Design::kMQLF);
      break;
    case Design::kTuMLSC:
    case Design::kSliced:
      feed_ = make_gate_feed(inputs_, slots, 1);
      break;
    case Design::kTuMLMC:
      feed_ = make_gate_feed(inputs_, slots, options_.update_threads);
      break;
    case Design::kWiML:
      break;
  }
  switch (options_.design) {
    case Design::kMQ:
    case Design::kMQLF:
    case Design::kTuMLSC:
      if (q.session_gap) {
        sessions_ = std::make_unique<window::SessionAggregate>(*input_schema_, q, options_.batch_size);
        out_ = sessions_.get();
      } else {
        agg_ = std::make_unique<window::WindowAggregate>(*input_schema_, q, options_.batch_size);
        out_ = agg_.get();
      }
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
    intake_ = make_hive_intake(*hive_, progress_.get(), inputs_, *signal_);
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
  const window::TimeBounds bounds = q.session_gap ? window::session_time_bounds(*q.session_gap, type)
                                                  : window::time_bounds_for(options_.query.window, type);
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
  signal_->notify();
  // Under the mutex, so the releaser cannot miss the flag between its check and its wait.
  { std::lock_guard lock(release_mutex_); }
  release_cv_.notify_all();
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

std::optional<Batch> MultiwayAggregate::hand_out(bool flush) {
  std::optional<Batch> b = out_->take(flush);
  if (completions_) record_latencies(now_ns());  // every emitted window set's rows are handed out
  return b;
}

void MultiwayAggregate::record_latencies(int64_t handed_out_ns) {
  const std::vector<int64_t> got = completions_->resolve(emitted_ends_, handed_out_ns);
  if (got.empty()) return;
  std::lock_guard lock(stats_mutex_);
  latencies_ns_.insert(latencies_ns_.end(), got.begin(), got.end());
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
    } else if (sessions_) {
      sessions_->advance(watermark);
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
        } else if (sessions_) {
          sessions_->add(*r.tuple.batch, r.tuple.row, r.tuple.time);
        } else {
          hive_->emit(r.tuple.time);
          // Never busy: emit(t) released every slice whose windows end at or before t.
          hive_->update(0, *r.tuple.batch, r.tuple.row, OrderKey{r.tuple.time, 0});
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
      signal_->wait(seen, std::chrono::milliseconds(50));
    }
  }
}

}  // namespace pao::ops
