#pragma once
// The elastic thread level (the IBM Streams scheduler paper, section 4.2; issue 30): given the
// throughput measured over each period at the current thread level, the level to run the next
// period at. Pure: no clock, no threads, so its decisions are tested on synthetic traces.
//
// The paper's rules, per level a record of what was measured there and whether it is trusted:
//  1. a workload change (the current level's throughput moves by more than `sensitivity` from
//     what it was) untrusts every other level's record;
//  2. the current level's record takes the new measurement and is trusted;
//  3. go up if the level below is trusted and this one beats it by more than `sensitivity` and
//     nothing above is trusted yet, or if the level above is trusted and beats this one so, or at
//     level 1 with nothing trusted above; otherwise go down if the level below is untrusted or this
//     one does not beat it; otherwise stay.
//
// Where the paper admits a weakness (its section 5.4: noisy throughput reads as a workload change,
// every record is wiped and the level oscillates), we keep history:
//  - a change must be confirmed: `confirm` periods in a row off the record in the same direction.
//    A single outlier is dropped (it neither wipes the history nor enters the record);
//  - a record is the mean of its level's accepted measurements (an exponential mean, weight
//    `smoothing` for the newest), not only the last one, so noise within `sensitivity` averages out;
//  - after a confirmed change the other levels' records are not forgotten but rescaled by the
//    change's ratio and untrusted: the search starts again (as in the paper) from a curve of the
//    old shape, and a record is trusted again once its level is measured anew.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace pao::runtime {

class ElasticLevel {
 public:
  struct Options {
    size_t max_level = 1;       // at most this many threads (the cores)
    double sensitivity = 0.05;  // differences above 5% count (the paper's SENS)
    double smoothing = 0.5;     // weight of the newest measurement in a level's mean
    int confirm = 2;            // periods in a row that confirm a workload change
  };

  explicit ElasticLevel(Options options);

  size_t level() const noexcept { return level_; }
  // The throughput measured over the last period, which ran at level(); returns the level for the
  // next period.
  size_t observe(double throughput);

  // For stats and tests: a level's record.
  struct Record {
    double mean = 0;
    bool trusted = false;
  };
  const Record& record(size_t level) const { return records_.at(level); }
  // How many workload changes were confirmed.
  uint64_t changes() const noexcept { return changes_; }

 private:
  bool beats(double a, double b) const noexcept { return a > b && a - b > options_.sensitivity * b; }
  bool trusted(size_t level) const noexcept { return level >= 1 && level <= options_.max_level && records_[level].trusted; }

  Options options_;
  std::vector<Record> records_;  // by level; [0] unused
  size_t level_ = 1;
  int strikes_ = 0;      // consecutive measurements off the current level's record, same direction
  int direction_ = 0;    // +1 above the record, -1 below
  double pending_ = 0;   // the first of those measurements
  uint64_t changes_ = 0;
};

}  // namespace pao::runtime
