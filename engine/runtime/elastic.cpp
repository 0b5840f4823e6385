#include "runtime/elastic.h"

#include <algorithm>
#include <cmath>

namespace pao::runtime {

ElasticLevel::ElasticLevel(Options options) : options_(options) {
  options_.max_level = std::max<size_t>(1, options_.max_level);
  options_.confirm = std::max(1, options_.confirm);
  records_.resize(options_.max_level + 1);
}

size_t ElasticLevel::observe(double throughput, double free_cores) {
  // Half a core of slack: a period's CPU use is measured, not exact.
  const size_t fits = free_cores >= static_cast<double>(options_.max_level)
                          ? options_.max_level
                          : static_cast<size_t>(std::max(0.0, free_cores + 0.5));
  room_ = fits > level_ ? fits - level_ : 0;
  Record& now = records_[level_];
  // 1 and 2: a workload change (confirmed), or the record takes the measurement in.
  if (now.trusted) {
    const int direction = beats(throughput, now.mean) ? 1 : beats(now.mean, throughput) ? -1 : 0;
    if (direction != 0) {
      strikes_ = direction == direction_ ? strikes_ + 1 : 1;
      direction_ = direction;
      if (strikes_ < options_.confirm) return level_;  // an outlier so far: hold, keep the record
      // The workload changed: every other level's record is scaled by the change and untrusted,
      // so the search runs again over a curve of the old shape.
      const double ratio = now.mean > 0 ? throughput / now.mean : 1.0;
      for (size_t l = 1; l < records_.size(); ++l) {
        if (l == level_) continue;
        records_[l].mean *= ratio;
        records_[l].trusted = false;
      }
      now.mean = throughput;
      ++changes_;
      phase_ = Phase::kSteady;  // the rescaled records guide the search from here
    } else {
      now.mean = options_.smoothing * throughput + (1 - options_.smoothing) * now.mean;
    }
  } else {
    now.mean = throughput;
    now.trusted = true;
  }
  strikes_ = 0;
  direction_ = 0;

  // The first search: doubling, then bisecting (see the header).
  if (phase_ == Phase::kDoubling) {
    if (level_ == 1 || beats(now.mean, records_[from_].mean)) {
      if (level_ == options_.max_level) {
        phase_ = Phase::kSteady;
        stride_ = stride_at(level_);
        return level_;
      }
      const size_t next = std::min({2 * level_, options_.max_level, level_ + room_});
      if (next == level_) {  // no idle core to double into: the steady rules from here
        phase_ = Phase::kSteady;
        stride_ = stride_at(level_);
        return level_;
      }
      from_ = level_;
      level_ = next;
      return level_;
    }
    lo_ = from_;
    hi_ = level_;
    return next_probe();
  }
  if (phase_ == Phase::kBisecting) {
    (beats(now.mean, records_[lo_].mean) ? lo_ : hi_) = level_;
    return next_probe();
  }

  // 3: the paper's rules, on the records' means, with neighbours `stride_` levels away (with a
  // stride of 1, exactly the paper's).
  const size_t lower = level_ > stride_ ? level_ - stride_ : 1;
  const size_t upper = std::min(level_ + stride_, options_.max_level);
  const bool below = level_ > 1 && trusted(lower);
  const bool above = level_ < options_.max_level && trusted(upper);
  const bool trend_below = below && beats(now.mean, records_[lower].mean);
  const bool trend_above = above && beats(records_[upper].mean, now.mean);
  if (((trend_below && !above) || trend_above || (level_ == 1 && !above)) && level_ < options_.max_level &&
      upper - level_ <= room_) {
    level_ = upper;
  } else if (level_ > 1 && (!below || !trend_below)) {
    level_ = lower;
  }
  return level_;
}

size_t ElasticLevel::stride_at(size_t level) const noexcept {
  // The least stride over which a linear gain is twice the sensitivity (see the header).
  return std::max<size_t>(1, static_cast<size_t>(std::ceil(2 * options_.sensitivity * static_cast<double>(level))));
}

size_t ElasticLevel::next_probe() {
  // A probe needing more threads than idle cores could not run them: beyond the room counts as
  // not gaining.
  hi_ = std::max(lo_, std::min(hi_, level_ + room_ + 1));
  // Finer than the steady rules' stride is finer than they can tell apart.
  if (hi_ - lo_ <= stride_at(lo_)) {
    phase_ = Phase::kSteady;
    stride_ = stride_at(lo_);
    level_ = lo_;
  } else {
    phase_ = Phase::kBisecting;
    level_ = lo_ + (hi_ - lo_) / 2;
  }
  return level_;
}

}  // namespace pao::runtime
