#include "testing/tgate_bench.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "core/error.h"

namespace pao::testing {

using gate::ReadResult;

GateBenchResult benchmark_gate(size_t inputs, int64_t tuples, gate::Readiness readiness, size_t producers,
                               int64_t batch_rows) {
  if (inputs < 1 || tuples < 0 || batch_rows < 1) {
    throw Error(ErrorKind::kInvalidInput, "benchmark_gate needs inputs >= 1, tuples >= 0 and batch_rows >= 1");
  }
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
  gate::TGate gate(gate::TGateOptions{.inputs = inputs, .readers = 1, .producers = producers, .readiness = readiness});
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (size_t p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      // The owned input with the least next time goes next, an arena's rows at a time, and the
      // others are heartbeated at their next times before an insert may block: the rule under
      // which a producer of several inputs cannot deadlock (TGate::insert). Whole batches of
      // more than an arena could block part-way with their inserted part past the owned inputs'
      // times, and the readers would wait for those inputs (it hung with 65536-row batches).
      const auto arena = gate.options().arena_rows;
      std::vector<size_t> mine;
      for (size_t i = p; i < inputs; i += producers) mine.push_back(i);
      std::vector<int64_t> next(mine.size(), 0);  // the owned inputs' next row
      if (per_input == 0) {
        for (size_t i : mine) gate.close(static_cast<uint32_t>(i));
      }
      for (;;) {
        size_t best = mine.size();
        for (size_t m = 0; m < mine.size(); ++m) {
          if (next[m] == per_input) continue;
          if (best == mine.size() || times[mine[m]][next[m]] < times[mine[best]][next[best]]) best = m;
        }
        if (best == mine.size()) break;
        const size_t i = mine[best];
        const int64_t row = next[best];
        const int64_t len = std::min({arena, batch_rows - row % batch_rows, per_input - row});
        const Batch& b = batches[i][static_cast<size_t>(row / batch_rows)];
        const Batch part = len == b.num_rows() ? b : b.slice(row % batch_rows, len);
        if (!gate.insert(p, static_cast<uint32_t>(i), part, times[i].data() + row, false)) {
          for (size_t m = 0; m < mine.size(); ++m) {
            if (next[m] < per_input) gate.heartbeat(static_cast<uint32_t>(mine[m]), times[mine[m]][next[m]]);
          }
          gate.insert(p, static_cast<uint32_t>(i), part, times[i].data() + row, true);
        }
        if ((next[best] += len) == per_input) gate.close(static_cast<uint32_t>(i));
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

}  // namespace pao::testing
