#include "testing/counting_stream.h"

#include <cerrno>
#include <mutex>
#include <vector>

#include "arrow/owned.h"

namespace pao::testing {
namespace {

// One handed-out array: the producer's original, released by the first release call.
struct Record {
  arrow::OwnedArray original;
  std::shared_ptr<ReleaseCounts> counts;
  std::atomic<bool> released{false};
};

// Every Record ever made, kept until exit (see the header). Guarded by registry_mutex().
std::vector<std::unique_ptr<Record>>& registry() {
  static auto* records = new std::vector<std::unique_ptr<Record>>();  // never destroyed: arrays
  return *records;                                                    // may be released at exit
}
std::mutex& registry_mutex() {
  static auto* m = new std::mutex();
  return *m;
}

void record_release(ArrowArray* a) {
  auto* rec = static_cast<Record*>(a->private_data);
  // acq_rel: the first caller's release of the original happens-before any later caller's
  // observation of `true`, which then touches nothing but the counter.
  if (rec->released.exchange(true, std::memory_order_acq_rel)) {
    rec->counts->repeated_releases.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  rec->original.reset();  // no lock held: this may run arbitrary producer code
  rec->counts->arrays_released.fetch_add(1, std::memory_order_relaxed);
  a->release = nullptr;
}

void wrap(const std::shared_ptr<ReleaseCounts>& counts, ArrowArray* array) {
  auto rec = std::make_unique<Record>();
  rec->original = arrow::OwnedArray(array);  // array->release is now nullptr; refilled below
  rec->counts = counts;
  *array = *rec->original.get();      // the same buffers, children and lengths
  array->release = &record_release;
  array->private_data = rec.get();
  {
    std::lock_guard lock(registry_mutex());
    registry().push_back(std::move(rec));
  }
  counts->arrays_made.fetch_add(1, std::memory_order_relaxed);
}

struct CountingStream {
  arrow::OwnedStream inner;
  std::shared_ptr<ReleaseCounts> counts;
  int64_t fail_after;
  int64_t handed_out = 0;

  bool failing() const { return fail_after >= 0 && handed_out >= fail_after; }
};

int counting_get_schema(ArrowArrayStream* s, ArrowSchema* out) {
  auto* cs = static_cast<CountingStream*>(s->private_data);
  return cs->inner->get_schema(cs->inner.get(), out);
}

int counting_get_next(ArrowArrayStream* s, ArrowArray* out) {
  auto* cs = static_cast<CountingStream*>(s->private_data);
  if (cs->failing()) return EIO;
  if (int rc = cs->inner->get_next(cs->inner.get(), out); rc != 0) return rc;
  if (out->release == nullptr) return 0;
  wrap(cs->counts, out);
  ++cs->handed_out;
  return 0;
}

const char* counting_get_last_error(ArrowArrayStream* s) {
  auto* cs = static_cast<CountingStream*>(s->private_data);
  if (cs->failing()) return "injected producer failure";
  return cs->inner->get_last_error(cs->inner.get());
}

void counting_release(ArrowArrayStream* s) {
  if (s->release == nullptr) return;
  auto* cs = static_cast<CountingStream*>(s->private_data);
  cs->counts->stream_releases.fetch_add(1, std::memory_order_relaxed);
  delete cs;
  s->release = nullptr;
}

}  // namespace

void make_counting_stream(ArrowArrayStream* inner, std::shared_ptr<ReleaseCounts> counts,
                          int64_t fail_after, ArrowArrayStream* out) {
  auto* cs = new CountingStream{arrow::OwnedStream(inner), std::move(counts), fail_after};
  out->get_schema = &counting_get_schema;
  out->get_next = &counting_get_next;
  out->get_last_error = &counting_get_last_error;
  out->release = &counting_release;
  out->private_data = cs;
}

}  // namespace pao::testing
