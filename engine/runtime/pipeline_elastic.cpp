// The ordered runtime's elastic controller (threads="auto", issue 30): what it measures each
// period and how it moves the level (runtime/elastic.h decides; this file measures).
#include <algorithm>
#include <chrono>

#include "core/clock.h"
#include "core/free_cores.h"
#include "runtime/elastic.h"
#include "runtime/pipeline.h"
#include "runtime/pipeline_internal.h"

namespace pao::runtime {

// The elastic controller: once per period, the tuples all operators took in over it and the cores
// other processes left free, and the level for the next period (runtime/elastic.h). The first period
// is the pipeline filling up (its throughput climbs whatever the level), so it is reported but not
// judged. Ends with the run.
//
// The fill and the first search run on a quarter of `elastic_period` (at least 10 ms, never more
// than it): their comparisons are between levels that differ by half or more, which a short
// measurement tells apart, and a run spends those periods below its best level (on 16 cores the
// fill and the climb to 16 took 0.5 s of 100 ms periods, three times a 0.16 s benchmark run). The steady rules, which judge 5 % differences
// between neighbours, get the whole period. (A longer period for large morsels, until it held 8
// completed morsels per worker, measured worse on runs of a second than the credit below: a run of
// large morsels then spends even longer at one worker.)
void Pipeline::elastic_main() {
  ElasticLevel control({.max_level = threads_});
  FreeCores cpu;
  // Tuples taken in: those of completed steps, plus, for each step in flight, the tuples its time so
  // far is worth at its stage's mean cost per tuple. Counting completed steps alone measures partly
  // where their ends fall: a step of 32,768 tuples at 1 us each lasts 33 ms, so a 25 ms period saw
  // 0, 1 or 2 of them per worker (2 cores: two workers measured as no faster than one, and the
  // level fell back to 1). The credit is an estimate, and it is taken back at the next period,
  // whose completed count holds the whole step. A step at a stage with no cost yet (none of its
  // slices has finished: on a chain, the first morsel's way through it) is credited at the mean
  // cost of all stages so far; with none, `known` turns false, and the period that begins there is
  // not judged (its count would hold time from before it), as the fill is not.
  bool known = true;
  auto taken = [&](int64_t at) {
    known = true;
    double n = 0;
    int64_t all_in = 0;
    int64_t all_busy = 0;
    for (const auto& st : stages_) {
      all_in += st->tuples_in.load(std::memory_order_relaxed);
      all_busy += st->busy_ns.load(std::memory_order_relaxed);
    }
    n += static_cast<double>(all_in);
    for (size_t w = 0; w <= threads_; ++w) {
      const int64_t since = in_flight_[w].since.load(std::memory_order_relaxed);
      if (since == 0 || since >= at) continue;
      const Stage& st = *stages_[in_flight_[w].stage.load(std::memory_order_relaxed)];
      int64_t in = st.tuples_in.load(std::memory_order_relaxed);
      int64_t busy = st.busy_ns.load(std::memory_order_relaxed);
      if (in <= 0 || busy <= 0) {
        in = all_in;
        busy = all_busy;
      }
      if (in > 0 && busy > 0) {
        n += static_cast<double>(at - since) * static_cast<double>(in) / static_cast<double>(busy);
      } else {
        known = false;
      }
    }
    return n;
  };
  int64_t last_at = now_ns();
  double last_taken = taken(last_at);
  bool filled = false;  // the first period is the fill, not judged
  std::unique_lock lock(elastic_mutex_);
  for (;;) {
    const auto period = control.searching()
                            ? std::min(options_.elastic_period,
                                       std::max(options_.elastic_period / 4, std::chrono::milliseconds(10)))
                            : options_.elastic_period;
    const bool over = elastic_cv_.wait_for(lock, period, [&] {
      return stop_.load(std::memory_order_relaxed) ||
             stages_finished_.load(std::memory_order_acquire) == stages_.size();
    });
    if (over) return;
    const int64_t at = now_ns();
    const bool from_known = known;
    const double n = taken(at);
    const double rate = std::max(0.0, n - last_taken) * 1e9 / static_cast<double>(std::max<int64_t>(1, at - last_at));
    const size_t ran = level_.load(std::memory_order_relaxed);
    const double free_cores = cpu.sample();
    levels_.push_back({at - std::chrono::duration_cast<std::chrono::nanoseconds>(start_.time_since_epoch()).count(),
                       ran, rate, free_cores});
    if (filled && from_known) level_.store(control.observe(rate, free_cores), std::memory_order_relaxed);
    filled = true;
    last_at = at;
    last_taken = n;
    wake();
  }
}

}  // namespace pao::runtime
