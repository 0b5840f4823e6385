#pragma once
// How many cores other processes left free between two samples (the machine's cores less those
// the rest of the system kept busy), from /proc/stat and this process's CPU time (Linux): the
// elastic thread level's guard against taking cores other work keeps busy (runtime/elastic.h).
// This process's own threads do not count against it: they are the run's. Where /proc/stat cannot
// be read, a sample is infinity (unknown: the guard is off).
#include <cstdint>
#include <limits>

namespace pao {

class FreeCores {
 public:
  static constexpr double kUnknown = std::numeric_limits<double>::infinity();

  FreeCores();  // the first sample's reading
  // The cores other processes left free since the last sample, averaged over the time between
  // them; kUnknown where /proc/stat is unreadable or no time has passed.
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

  Reading last_;
};

}  // namespace pao
