#pragma once
// A producer for ownership tests: it forwards another stream and counts every array it hands out
// and every call of their release callbacks, so a test can prove each runs exactly once, on the
// success path, on errors and on cancellation. Built into the C++ tests and the test-only module
// pyarrow_ops._testing (CountingStream), never into the product, so the Python tests use the real
// boundary.
//
// It must survive any release order a buggy consumer could produce, since finding such bugs is
// its job: each handed-out array's bookkeeping shares ownership of the counts, and is kept (at a
// few dozen bytes each) until the process exits, so a second release is counted, never a
// use-after-free.
#include <atomic>
#include <cstdint>
#include <memory>

#include "arrow/c_abi.h"

namespace pao::testing {

// Relaxed increments and loads throughout: each counter is a tally that orders no other memory,
// and tests read them after the threads that release have finished.
struct ReleaseCounts {
  std::atomic<int64_t> arrays_made{0};
  std::atomic<int64_t> arrays_released{0};
  std::atomic<int64_t> repeated_releases{0};
  std::atomic<int64_t> stream_releases{0};
};

// Takes ownership of *inner and fills *out with the counting stream. With fail_after >= 0,
// get_next fails (EIO) once that many arrays have been handed out, as a producer that breaks
// mid-stream would.
void make_counting_stream(ArrowArrayStream* inner, std::shared_ptr<ReleaseCounts> counts,
                          int64_t fail_after, ArrowArrayStream* out);

}  // namespace pao::testing
