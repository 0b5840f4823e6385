#include "gate/tgate_bench.h"

#include <chrono>
#include <random>
#include <thread>
#include <vector>

namespace pao::gate {

GateBenchResult benchmark_gate(size_t inputs, int64_t tuples, Readiness readiness, size_t producers,
                               int64_t batch_rows) {
  producers = std::max<size_t>(1, std::min(producers, inputs));
  const int64_t per_input = tuples / static_cast<int64_t>(inputs);
  DataType int64;
  int64.id = TypeId::kInt64;
  auto schema = std::make_shared<const Schema>(Schema{{Field{"t", int64, false}}});
  std::vector<std::vector<int64_t>> times(inputs);
  std::vector<std::vector<Batch>> batches(inputs);
  std::mt19937_64 rng(42);
  for (size_t i = 0; i < inputs; ++i) {
    int64_t t = 0;
    times[i].resize(static_cast<size_t>(per_input));
    for (int64_t& v : times[i]) v = (t += static_cast<int64_t>(rng() % 3));
    for (int64_t s = 0; s < per_input; s += batch_rows) {
      const int64_t n = std::min(batch_rows, per_input - s);
      Column c;
      c.values = times[i].data() + s;
      c.null_count = 0;
      batches[i].emplace_back(schema, n, std::vector<Column>{c}, nullptr);
    }
  }
  TGate gate(TGateOptions{.inputs = inputs, .readers = 1, .producers = producers, .readiness = readiness});
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (size_t p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      // Round-robin over the owned inputs, batch by batch, heartbeating before blocking.
      std::vector<size_t> mine, next;
      for (size_t i = p; i < inputs; i += producers) mine.push_back(i);
      next.assign(mine.size(), 0);
      for (bool any = true; any;) {
        any = false;
        for (size_t m = 0; m < mine.size(); ++m) {
          const size_t i = mine[m];
          if (next[m] == batches[i].size()) continue;
          any = true;
          const int64_t offset = static_cast<int64_t>(next[m]) * batch_rows;
          const Batch& b = batches[i][next[m]];
          if (!gate.insert(p, static_cast<uint32_t>(i), b, times[i].data() + offset, false)) {
            for (size_t o = 0; o < mine.size(); ++o) {
              if (next[o] < batches[mine[o]].size()) {
                gate.heartbeat(static_cast<uint32_t>(mine[o]), times[mine[o]][next[o] * batch_rows]);
              }
            }
            gate.insert(p, static_cast<uint32_t>(i), b, times[i].data() + offset, true);
          }
          if (++next[m] == batches[i].size()) gate.close(static_cast<uint32_t>(i));
        }
      }
    });
  }
  GateBenchResult out;
  for (;;) {
    const uint64_t seen = gate.progress();
    ReadResult r = gate.next_ready_tuple(0);
    if (r.state == ReadResult::State::kTuple) {
      ++out.tuples;
    } else if (r.state == ReadResult::State::kEnd) {
      break;
    } else {
      gate.wait_for_progress(seen);
    }
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (std::thread& t : threads) t.join();
  out.peak_live_arenas = gate.peak_live_arenas();
  return out;
}

}  // namespace pao::gate
