#include "ops/completion_log.h"

#include <algorithm>

namespace pao::ops {

// Per input, the earliest stamp of the raises at or past `end`: stamps need not grow with the
// bound (a paced push running late is stamped when it was due, which may precede an earlier
// heartbeat), and the earliest never understates a latency.
std::optional<int64_t> CompletionLog::completed_at(int64_t end) {
  int64_t at = INT64_MIN;
  for (In& in : inputs_) {
    std::lock_guard lock(in.mutex);
    auto it = std::lower_bound(in.entries.begin(), in.entries.end(), end,
                               [](const std::pair<int64_t, int64_t>& e, int64_t v) { return e.first < v; });
    if (it == in.entries.end()) return std::nullopt;
    int64_t first = it->second;
    for (; it != in.entries.end(); ++it) first = std::min(first, it->second);
    at = std::max(at, first);
  }
  return at;
}

void CompletionLog::forget_below(int64_t end) {
  for (In& in : inputs_) {
    std::lock_guard lock(in.mutex);
    while (!in.entries.empty() && in.entries.front().first < end) in.entries.pop_front();
  }
}

// Window sets are looked up in end order.
std::vector<int64_t> CompletionLog::resolve(std::vector<int64_t>& ended, int64_t handed_out_ns) {
  for (int64_t end : ended) unresolved_.emplace_back(end, handed_out_ns);
  ended.clear();
  std::vector<int64_t> latencies;
  size_t done = 0;
  for (; done < unresolved_.size(); ++done) {
    const auto [end, at] = unresolved_[done];
    const std::optional<int64_t> complete = completed_at(end);
    if (!complete) break;
    latencies.push_back(at - *complete);
  }
  if (done == 0) return latencies;
  // Ends only grow: nothing below the last one looked up is asked about again.
  forget_below(unresolved_[done - 1].first);
  unresolved_.erase(unresolved_.begin(), unresolved_.begin() + static_cast<std::ptrdiff_t>(done));
  return latencies;
}

}  // namespace pao::ops
