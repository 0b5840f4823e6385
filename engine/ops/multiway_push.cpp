// The multiway aggregate's push form: the user's threads push, heartbeat and close inputs.
#include "ops/multiway.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/clock.h"
#include "core/error.h"
#include "ops/completion_log.h"
#include "ops/multiway_internal.h"

namespace pao::ops {

namespace {
// Rows one push hands the feed at a time: a T-Gate arena, so that a full gate refuses the push
// instead of waiting inside it (pause_push() waits, and sees Ctrl-C).
constexpr int64_t kPushChunk = 4096;
}  // namespace

void MultiwayAggregate::load_states(const Batch& states) {
  if (sessions_) {
    sessions_->load_sessions(states);
  } else {
    out_->load_states(states);
  }
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

}  // namespace pao::ops
