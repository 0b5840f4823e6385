#pragma once
// The multiway aggregate's internals (not for other users): where producers put tuples (an
// Intake) and, for the merging designs, the merged ready order the output or update threads read
// (a Feed): the T-Gate (TuMLSC, sliced, TuMLMC), per-input queues scanned at the head (MQ, MQLF),
// or, for WiML, no merge at all: the producers' tuples go straight into the W-Hive.
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "core/batch.h"
#include "gate/tgate.h"
#include "ops/multiway.h"
#include "sync/wakeup.h"
#include "window/whive.h"

namespace pao::ops {

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
  virtual gate::ReadResult next(size_t reader) = 0;
  virtual uint64_t progress() const = 0;
  virtual void wait_for_progress(uint64_t seen) = 0;
  // T-Gate only: the most arenas alive at once (MultiwayAggregate::peak_live_arenas).
  virtual std::optional<size_t> peak_live_arenas() const { return std::nullopt; }
};

// The T-Gate with `producers` producer slots and `readers` readers.
std::unique_ptr<Feed> make_gate_feed(size_t inputs, size_t producers, size_t readers);
// Per-input queues: behind a lock (MQ) or lock-free (MQLF).
std::unique_ptr<Feed> make_queue_feed(size_t inputs, bool lock_free);
// WiML: producers apply their rows to `hive` (updater = their slot) and publish per-input
// progress in `progress` (MultiwayAggregate::Progress, one per input); `signal` wakes the output
// thread when an input's progress rises.
std::unique_ptr<Intake> make_hive_intake(window::WHive& hive, MultiwayAggregate::Progress* progress, size_t inputs,
                                         sync::Wakeup& signal);

// A batch kept for later hand-over to an intake, with its times. InputTimes' buffer is reused by
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

}  // namespace pao::ops
