// The scheduling heuristics of the ordered runtime (ordered-processing paper, section 6: QST, LP,
// ET, CT): which operator a worker takes next.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/clock.h"
#include "runtime/pipeline.h"
#include "runtime/pipeline_internal.h"

namespace pao::runtime {

// The heuristic's choice among the operators this worker could start now; -1 if none.
int Pipeline::pick(size_t, const std::vector<uint64_t>& excluded) {
  const size_t n = stages_.size();
  struct Cand {
    size_t i;
    double c;   // ns per input tuple
    double cs;  // cumulative selectivity from the input to this operator's input
    int64_t queued;
    size_t w;
  };
  std::vector<Cand> cands(n);
  size_t nc = 0;
  double cs_sum = 0.0;
  std::vector<double> cs_out(n);
  for (size_t i = 0; i < n; ++i) {
    const Stage& st = *stages_[i];
    const int64_t in = st.tuples_in.load(std::memory_order_relaxed);
    const int64_t out = st.tuples_out.load(std::memory_order_relaxed);
    const double sel = in > 0 ? static_cast<double>(out) / static_cast<double>(in) : 1.0;
    const double c = in > 0 ? static_cast<double>(st.busy_ns.load(std::memory_order_relaxed)) / static_cast<double>(in)
                            : 0.0;
    // Cumulative selectivity: tuples reaching this operator per source tuple, summed over the
    // paths that feed it (stages come in topological order).
    double cs_in = static_cast<double>(st.producer_sources);
    for (size_t p : st.producer_stages) cs_in += cs_out[p];
    cs_out[i] = cs_in * sel;
    cs_sum += cs_out[i];
    if ((excluded[i >> 6] >> (i & 63) & 1) == 0 && !st.finished.load(std::memory_order_relaxed) &&
        st.workers.load(std::memory_order_relaxed) < st.max_parallelism && st.ready()) {
      cands[nc++] = {i, c, cs_in, st.queued_rows.load(std::memory_order_relaxed),
                     st.workers.load(std::memory_order_relaxed)};
    }
  }
  if (nc == 0) return -1;
  switch (options_.scheduler) {
    case Heuristic::kLP:
      // The latest operator with work (section 6.2).
      return static_cast<int>(cands[nc - 1].i);
    case Heuristic::kQST: {
      // The earliest operator whose output queue is under its share T_i = C * cs_i / sum(cs)
      // of the capacity (equation 1); an operator feeding a result queue, which the consumer
      // empties, always qualifies.
      const double capacity = static_cast<double>(max_inflight_) *
                              static_cast<double>(morsel_rows_ != 0 ? morsel_rows_ : kMaxMorsel);
      for (size_t k = 0; k < nc; ++k) {
        const size_t i = cands[k].i;
        const Stage& st = *stages_[i];
        if (!st.outputs.empty() || st.consumers.empty()) return static_cast<int>(i);
        const double threshold = capacity * cs_out[i] / std::max(cs_sum, 1e-9);
        int64_t queued = 0;  // the fullest of its output queues
        for (const Edge& e : st.consumers) queued = std::max(queued, stages_[e.stage]->queued_rows.load(std::memory_order_relaxed));
        if (static_cast<double>(queued) < threshold) return static_cast<int>(i);
      }
      return static_cast<int>(cands[nc - 1].i);
    }
    case Heuristic::kET: {
      // The most estimated work per worker if one more joined: I_i * c_i / (w_i + 1) (eq. 2).
      // Unmeasured operators (c = 0) first, so every operator gets measured.
      size_t best = 0;
      double best_p = -1;
      for (size_t k = 0; k < nc; ++k) {
        const double p = cands[k].c == 0 ? std::numeric_limits<double>::infinity()
                                         : static_cast<double>(cands[k].queued) * cands[k].c /
                                               static_cast<double>(cands[k].w + 1);
        if (p > best_p) {
          best_p = p;
          best = k;
        }
      }
      return static_cast<int>(cands[best].i);
    }
    case Heuristic::kCT: {
      // The least normalised throughput in the current window: (T_w + w * s) / (c * cs)
      // (eq. 3), the operator likeliest to be the bottleneck. Windows restart every ct_window.
      const int64_t t = now_ns();
      int64_t ws = ct_window_start_.load(std::memory_order_relaxed);
      if (t - ws > std::chrono::duration_cast<std::chrono::nanoseconds>(options_.ct_window).count() &&
          ct_window_start_.compare_exchange_strong(ws, t, std::memory_order_relaxed)) {
        for (auto& st : stages_) st->window_ns.store(0, std::memory_order_relaxed);
      }
      const double slice = static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(options_.slice).count());
      size_t best = 0;
      double best_nw = std::numeric_limits<double>::infinity();
      for (size_t k = 0; k < nc; ++k) {
        const Stage& st = *stages_[cands[k].i];
        const double denom = cands[k].c * std::max(cands[k].cs, 1e-9);
        const double nw = denom == 0 ? -1.0  // unmeasured: run it first
                                     : (static_cast<double>(st.window_ns.load(std::memory_order_relaxed)) +
                                        static_cast<double>(cands[k].w) * slice) /
                                           denom;
        if (nw < best_nw) {
          best_nw = nw;
          best = k;
        }
      }
      return static_cast<int>(cands[best].i);
    }
  }
  return static_cast<int>(cands[0].i);
}

}  // namespace pao::runtime
