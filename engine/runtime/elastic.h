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
//  - the first search does not climb one thread per period (on 16 cores that took 1.5 s of
//    100 ms periods, longer than many runs; on the paper's 176 threads, minutes): it doubles the
//    level while each doubling beats the level it doubled from, then bisects between the last
//    level that gained and the first that did not (the least level within `sensitivity` of the
//    best), in O(log cores) periods, and hands over to the rules above at that level, whose
//    neighbours' records the bisection mostly left trusted;
//  - the rules' neighbours are `stride` levels away, not one: the least stride over which a linear
//    gain is twice the sensitivity (10 %), so 1 below 11 threads (the paper's rules) and 2 at 16,
//    18 at 176. With one thread more out of 100, even a perfectly scaling operator gains 1%, under
//    any sensitivity that noise allows, so the paper's rules walk down from a high level that pays
//    (on a linear curve of 176 levels they settle near 20). A stride of a sixteenth of the level
//    (our first choice) still left 16 against 15 at 6.7 %, next to the 5 % sensitivity: on the
//    16-core machine, noise took the level to 15 and 14 and the rules held it there (6 % slower).
//
// The paper's second guard against oversubscribing the machine (its isCPUUsageAcceptable(): no
// increase while the whole system uses over 80% of its capacity) would cap a run at 80% of the
// cores even on a machine it has to itself, its own threads being most of that use. Ours asks
// whether the level would fit in the cores other processes leave free: the caller passes those
// (core/free_cores.h), and the level rises to at most that many (rounded), in every phase (a
// doubling or a bisection probe beyond it counts as a level that did not gain). So a run never
// takes cores other work keeps busy, yet climbs to every core when they are its own.
#include <cstddef>
#include <cstdint>
#include <limits>
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
  // Whether the first search (doubling, then bisecting) is still on: its decisions compare levels
  // at least a stride apart (usually twice), so a shorter period tells them apart.
  bool searching() const noexcept { return phase_ != Phase::kSteady; }
  // The throughput measured over the last period, which ran at level(), and the cores other
  // processes left free over it (unknown: all); returns the level for the next period.
  static constexpr double kFreeUnknown = std::numeric_limits<double>::infinity();
  size_t observe(double throughput, double free_cores = kFreeUnknown);

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

  size_t stride_at(size_t level) const noexcept;
  // After a bisection probe (or a failed doubling): the next probe, or the steady rules at lo_.
  size_t next_probe();

  enum class Phase : uint8_t { kDoubling, kBisecting, kSteady };

  Options options_;
  std::vector<Record> records_;  // by level; [0] unused
  size_t level_ = 1;
  Phase phase_ = Phase::kDoubling;
  size_t from_ = 1;  // doubling: the level this one doubled
  size_t lo_ = 1;    // bisecting: a level that gained over those below it
  size_t hi_ = 1;    //   and one that did not gain over lo_
  size_t stride_ = 1;  // steady: the rules' distance to a neighbour
  size_t room_ = 0;    // the most threads the level may add now (free cores, rounded, less the level)
  int strikes_ = 0;      // consecutive measurements off the current level's record, same direction
  int direction_ = 0;    // +1 above the record, -1 below
  double pending_ = 0;   // the first of those measurements
  uint64_t changes_ = 0;
};

}  // namespace pao::runtime
