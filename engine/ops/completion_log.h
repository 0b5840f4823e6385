#pragma once
// The multiway aggregate's latency log (flush_each_window): when each input's bound rose, and
// from that the latency of each window set the output thread hands out.
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace pao::ops {

// A window set ending at E became complete when the last input's bound (the least time it may
// still send) reached E. An entry is (bound, steady-clock ns when the push, heartbeat or close
// that raised it began), appended by the input's producer (before a heartbeat or close, which
// cannot fail to land; after a push, which may take nothing) and read by the output thread, hence
// a mutex per input; it runs only when latencies are recorded. Entries below the earliest end
// still to be looked up are dropped, so a long live run keeps only what it may still ask about.
class CompletionLog {
 public:
  explicit CompletionLog(size_t inputs) : inputs_(inputs) {}

  // Producers: input's bound rose to `bound` by a call that began at `at_ns`.
  void raise(uint32_t input, int64_t bound, int64_t at_ns) {
    In& in = inputs_[input];
    std::lock_guard lock(in.mutex);
    if (in.entries.empty() || bound > in.entries.back().first) in.entries.emplace_back(bound, at_ns);
  }

  // Output thread: the window sets ending at `ended` (ascending, appended to since the last
  // call; emptied) were handed out at `handed_out_ns`. Returns the latencies now known, in end
  // order: a window set whose completion the log does not show yet (its producer records the
  // raise after making it) waits, with its hand-out time, for a later call.
  std::vector<int64_t> resolve(std::vector<int64_t>& ended, int64_t handed_out_ns);

 private:
  // When every input's bound had reached `end`, or nullopt while some input's has not.
  std::optional<int64_t> completed_at(int64_t end);
  // No end below `end` will be looked up again.
  void forget_below(int64_t end);

  struct In {
    std::mutex mutex;
    std::deque<std::pair<int64_t, int64_t>> entries;  // bounds strictly increasing
  };
  std::vector<In> inputs_;
  std::vector<std::pair<int64_t, int64_t>> unresolved_;  // (end, hand-out ns), output thread only
};

}  // namespace pao::ops
