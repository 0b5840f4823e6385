#include "runtime/elastic.h"

#include <algorithm>

namespace pao::runtime {

ElasticLevel::ElasticLevel(Options options) : options_(options) {
  options_.max_level = std::max<size_t>(1, options_.max_level);
  options_.confirm = std::max(1, options_.confirm);
  records_.resize(options_.max_level + 1);
}

size_t ElasticLevel::observe(double throughput) {
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
    } else {
      now.mean = options_.smoothing * throughput + (1 - options_.smoothing) * now.mean;
    }
  } else {
    now.mean = throughput;
    now.trusted = true;
  }
  strikes_ = 0;
  direction_ = 0;

  // 3: the paper's rules, on the records' means.
  const bool below = trusted(level_ - 1);
  const bool above = trusted(level_ + 1);
  const bool trend_below = below && beats(now.mean, records_[level_ - 1].mean);
  const bool trend_above = above && beats(records_[level_ + 1].mean, now.mean);
  if (((trend_below && !above) || trend_above || (level_ == 1 && !above)) && level_ < options_.max_level) {
    ++level_;
  } else if (level_ > 1 && (!below || !trend_below)) {
    --level_;
  }
  return level_;
}

}  // namespace pao::runtime
