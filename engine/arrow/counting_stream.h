#pragma once
// A producer for ownership tests: it forwards another stream and counts every array it hands out
// and every call of their release callbacks, so a test can prove each runs exactly once, on the
// success path, on errors and on cancellation. Shipped in the module (as
// pyarrow_ops._engine.testing.CountingStream) so the Python tests use the real boundary.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "arrow/c_abi.h"
#include "arrow/owned.h"

namespace pao::arrow {

class ReleaseCounts {
 public:
  ReleaseCounts() = default;
  ~ReleaseCounts();
  ReleaseCounts(const ReleaseCounts&) = delete;
  ReleaseCounts& operator=(const ReleaseCounts&) = delete;

  // Relaxed loads: callers read the counts after the threads that release have finished.
  int64_t arrays_made() const noexcept { return arrays_made_.load(std::memory_order_relaxed); }
  int64_t arrays_released() const noexcept { return arrays_released_.load(std::memory_order_relaxed); }
  int64_t repeated_releases() const noexcept { return repeated_.load(std::memory_order_relaxed); }
  int64_t stream_releases() const noexcept { return stream_releases_.load(std::memory_order_relaxed); }

  // One handed-out array: the producer's original, released by the first release call.
  struct Record {
    OwnedArray original;
    ReleaseCounts* counts = nullptr;
    bool released = false;
  };

 private:
  friend struct CountingAccess;
  std::atomic<int64_t> arrays_made_{0};
  std::atomic<int64_t> arrays_released_{0};
  std::atomic<int64_t> repeated_{0};
  std::atomic<int64_t> stream_releases_{0};
  // Records live until the counts die, so a second release of an array is counted, not a
  // use-after-free. Guarded by mutex_: arrays may be released from any thread.
  std::mutex mutex_;
  std::vector<std::unique_ptr<Record>> records_;
};

// Takes ownership of *inner and fills *out with the counting stream. `counts` must outlive every
// array the stream hands out. With fail_after >= 0, get_next fails (EIO) once that many arrays
// have been handed out, as a producer that breaks mid-stream would.
void make_counting_stream(ArrowArrayStream* inner, std::shared_ptr<ReleaseCounts> counts,
                          int64_t fail_after, ArrowArrayStream* out);

}  // namespace pao::arrow
