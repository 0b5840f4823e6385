#include "arrow/counting_stream.h"

#include <cerrno>

namespace pao::arrow {

// Private access to the counters for the callbacks below.
struct CountingAccess {
  static void record_release(ArrowArray* a) {
    auto* rec = static_cast<ReleaseCounts::Record*>(a->private_data);
    ReleaseCounts& counts = *rec->counts;
    std::lock_guard lock(counts.mutex_);
    if (rec->released) {
      counts.repeated_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    rec->released = true;
    rec->original.reset();
    counts.arrays_released_.fetch_add(1, std::memory_order_relaxed);
    a->release = nullptr;
  }

  static void wrap(ReleaseCounts& counts, ArrowArray* array) {
    auto rec = std::make_unique<ReleaseCounts::Record>();
    rec->original = OwnedArray(array);  // array->release is now nullptr; we refill it below
    rec->counts = &counts;
    *array = *rec->original.get();      // same buffers, children and lengths
    array->release = &record_release;
    array->private_data = rec.get();
    std::lock_guard lock(counts.mutex_);
    counts.records_.push_back(std::move(rec));
    counts.arrays_made_.fetch_add(1, std::memory_order_relaxed);
  }

  static void count_stream_release(ReleaseCounts& counts) {
    counts.stream_releases_.fetch_add(1, std::memory_order_relaxed);
  }
};

ReleaseCounts::~ReleaseCounts() = default;  // releases what a leaky consumer never released

namespace {

struct CountingStream {
  OwnedStream inner;
  std::shared_ptr<ReleaseCounts> counts;
  int64_t fail_after;
  int64_t handed_out = 0;
};

int counting_get_schema(ArrowArrayStream* s, ArrowSchema* out) {
  auto* cs = static_cast<CountingStream*>(s->private_data);
  return cs->inner->get_schema(cs->inner.get(), out);
}

int counting_get_next(ArrowArrayStream* s, ArrowArray* out) {
  auto* cs = static_cast<CountingStream*>(s->private_data);
  if (cs->fail_after >= 0 && cs->handed_out >= cs->fail_after) return EIO;
  if (int rc = cs->inner->get_next(cs->inner.get(), out); rc != 0) return rc;
  if (out->release == nullptr) return 0;
  CountingAccess::wrap(*cs->counts, out);
  ++cs->handed_out;
  return 0;
}

const char* counting_get_last_error(ArrowArrayStream* s) {
  auto* cs = static_cast<CountingStream*>(s->private_data);
  if (cs->fail_after >= 0 && cs->handed_out >= cs->fail_after) return "injected producer failure";
  return cs->inner->get_last_error(cs->inner.get());
}

void counting_release(ArrowArrayStream* s) {
  if (s->release == nullptr) return;
  auto* cs = static_cast<CountingStream*>(s->private_data);
  CountingAccess::count_stream_release(*cs->counts);
  delete cs;
  s->release = nullptr;
}

}  // namespace

void make_counting_stream(ArrowArrayStream* inner, std::shared_ptr<ReleaseCounts> counts,
                          int64_t fail_after, ArrowArrayStream* out) {
  auto cs = new CountingStream{OwnedStream(inner), std::move(counts), fail_after};
  out->get_schema = &counting_get_schema;
  out->get_next = &counting_get_next;
  out->get_last_error = &counting_get_last_error;
  out->release = &counting_release;
  out->private_data = cs;
}

}  // namespace pao::arrow
