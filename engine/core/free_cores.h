#pragma once
// How many cores other processes left free between two samples (the machine's cores less those
// the rest of the system kept busy), from /proc/stat and this process's CPU time (Linux): the
// elastic thread level's guard against taking cores other work keeps busy (runtime/elastic.h).
// This process's own threads do not count against it: they are the run's. Where /proc/stat cannot
// be read, a sample is infinity (unknown: the guard is off).
//
// A sample covers at least the last kWindowNs (or all the time since the first reading, unknown
// under kLeastNs), not only the time since the previous sample: /proc/stat counts in ticks of
// 10 ms per core, so over a 100 ms period on 2 cores its busy figure was off by up to 0.4 of a core
// (enough to read 1.2 free cores on an idle machine and keep a run at one worker), and the elastic
// search samples every 25 ms. Time the hypervisor stole from this machine's cores (a VM's `steal`)
// counts neither as busy nor as free: it is not work of this machine's other processes, and it
// falls on the cores this process keeps busy.
#include <cstdint>
#include <deque>
#include <limits>

namespace pao {

class FreeCores {
 public:
  static constexpr double kUnknown = std::numeric_limits<double>::infinity();

  static constexpr int64_t kWindowNs = 400'000'000;
  static constexpr int64_t kLeastNs = 100'000'000;

  FreeCores();  // the first sample's reading
  // The cores other processes left free, averaged over the window that ends now (see above);
  // kUnknown where /proc/stat is unreadable or under kLeastNs have passed.
  double sample();

 private:
  struct Reading {
    bool ok = false;
    uint64_t idle = 0;   // jiffies idle or waiting on I/O, all cores
    uint64_t total = 0;  // jiffies, all cores
    int cpus = 0;
    int64_t own_ns = 0;   // this process's CPU time
    int64_t wall_ns = 0;  // when
  };
  static Reading read();

  std::deque<Reading> readings_;  // oldest first; the first is at least kWindowNs before the last
                                  // sample, the second less (unless there are two)
};

}  // namespace pao
