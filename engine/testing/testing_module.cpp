// pyarrow_ops._testing: the test suite's and the benchmarks' tools, in a module of their own that
// the wheel leaves out (built and installed only with PYARROW_OPS_TESTING=ON, as `make install`
// does). Its errors are pyarrow_ops._engine's classes.
#include <nanobind/nanobind.h>

#include <memory>

#include "arrow/owned.h"
#include "core/error.h"
#include "python/capsules.h"
#include "python/errors.h"
#include "python/gil.h"
#include "testing/counting_stream.h"
#include "testing/tgate_bench.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace pao::python {
namespace {

// The test producer as Python sees it: the counts, and the stream until it is exported.
struct CountingStream {
  std::shared_ptr<testing::ReleaseCounts> counts = std::make_shared<testing::ReleaseCounts>();
  arrow::OwnedStream stream;
};

int64_t load(const std::atomic<int64_t>& counter) { return counter.load(std::memory_order_relaxed); }

}  // namespace
}  // namespace pao::python

using namespace pao;
using namespace pao::python;

NB_MODULE(_testing, m) {
  m.doc() = "pyarrow-ops test and benchmark tools (not part of the product).";
  nb::module_::import_("pyarrow_ops._engine");  // the error classes this module raises
  translate_errors_into_engine_classes();

  nb::class_<CountingStream>(m, "CountingStream")
      .def(
          "__init__",
          [](CountingStream* self, nb::capsule capsule, int64_t fail_after) {
            new (self) CountingStream();
            testing::make_counting_stream(from_capsule<ArrowArrayStream>(capsule, "arrow_array_stream"),
                                          self->counts, fail_after, self->stream.get());
          },
          "capsule"_a, "fail_after"_a = -1)
      .def("__arrow_c_schema__",
           [](CountingStream& self) {
             if (self.stream.is_released()) throw Error(ErrorKind::kUsage, "CountingStream already exported");
             auto raw = std::make_unique<ArrowSchema>();
             if (self.stream->get_schema(self.stream.get(), raw.get()) != 0) {
               throw Error(ErrorKind::kInputFailed, "CountingStream: get_schema failed");
             }
             return to_capsule(std::move(raw), "arrow_schema");
           })
      .def(
          "__arrow_c_stream__",
          [](CountingStream& self, nb::handle /*requested_schema*/) {
            if (self.stream.is_released()) throw Error(ErrorKind::kUsage, "CountingStream already exported");
            auto raw = std::make_unique<ArrowArrayStream>(*self.stream.get());
            self.stream.get()->release = nullptr;  // moved into the capsule, which owns it now
            return to_capsule(std::move(raw), "arrow_array_stream");
          },
          "requested_schema"_a = nb::none())
      .def_prop_ro("arrays_made", [](const CountingStream& s) { return load(s.counts->arrays_made); })
      .def_prop_ro("arrays_released", [](const CountingStream& s) { return load(s.counts->arrays_released); })
      .def_prop_ro("repeated_releases", [](const CountingStream& s) { return load(s.counts->repeated_releases); })
      .def_prop_ro("stream_releases", [](const CountingStream& s) { return load(s.counts->stream_releases); });

  m.def(
      "benchmark_gate",
      [](size_t inputs, int64_t tuples, bool scan_all, size_t producers, int64_t batch_rows) {
        const testing::GateBenchResult r = without_gil([&] {
          return testing::benchmark_gate(inputs, tuples,
                                         scan_all ? gate::Readiness::kScanAll : gate::Readiness::kExact, producers,
                                         batch_rows);
        });
        return nb::make_tuple(r.seconds, r.tuples, r.peak_live_arenas);
      },
      "inputs"_a, "tuples"_a, "scan_all"_a, "producers"_a, "batch_rows"_a,
      "T-Gate throughput (Figure 7): (seconds, tuples read, peak live arenas).");
}
