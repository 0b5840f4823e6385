#include "core/free_cores.h"

#include <time.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "core/clock.h"

namespace pao {

FreeCores::FreeCores() : readings_{read()} {}

FreeCores::Reading FreeCores::read() {
  Reading r;
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  r.own_ns = static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  r.wall_ns = now_ns();
  std::ifstream in("/proc/stat");
  std::string line;
  if (!in || !std::getline(in, line) || line.rfind("cpu ", 0) != 0) return r;
  // cpu  user nice system idle iowait irq softirq steal [guest guest_nice: counted in user, nice]
  std::istringstream fields(line.substr(4));
  uint64_t v[8] = {};
  for (uint64_t& x : v) {
    if (!(fields >> x)) return r;
  }
  r.idle = v[3] + v[4];
  for (int i = 0; i < 7; ++i) r.total += v[i];  // not v[7], steal (see the header)
  while (std::getline(in, line) && line.rfind("cpu", 0) == 0) ++r.cpus;
  r.ok = r.cpus > 0;
  return r;
}

double FreeCores::sample() {
  const Reading now = read();
  while (readings_.size() >= 2 && now.wall_ns - readings_[1].wall_ns >= kWindowNs) readings_.pop_front();
  const Reading was = readings_.front();
  readings_.push_back(now);
  if (!now.ok || !was.ok || now.total <= was.total || now.idle < was.idle || now.wall_ns - was.wall_ns < kLeastNs) {
    return kUnknown;
  }
  const double busy = static_cast<double>((now.total - was.total) - (now.idle - was.idle)) /
                      static_cast<double>(now.total - was.total) * now.cpus;
  const double own = static_cast<double>(now.own_ns - was.own_ns) / static_cast<double>(now.wall_ns - was.wall_ns);
  return now.cpus - std::max(0.0, busy - own);
}

}  // namespace pao
