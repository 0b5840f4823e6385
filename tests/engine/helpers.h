#pragma once
// Builders of test data: batches over vectors, a hand-made Arrow producer that counts releases,
// and a BatchSource over a list of batches.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "arrow/c_abi.h"
#include "core/batch.h"
#include "core/builder.h"
#include "core/error.h"

namespace fixtures {

inline pao::DataType type(pao::TypeId id) {
  pao::DataType t;
  t.id = id;
  return t;
}

// Every value of a batch of int64 columns, row by row, appended to `out`.
inline void append_values(const pao::Batch& b, std::vector<int64_t>& out) {
  for (int64_t r = 0; r < b.num_rows(); ++r)
    for (size_t c = 0; c < b.num_columns(); ++c) out.push_back(b.column(c).typed<int64_t>()[r]);
}

inline std::shared_ptr<const pao::Schema> schema(std::vector<pao::Field> fields) {
  return std::make_shared<const pao::Schema>(pao::Schema{std::move(fields)});
}

// Memory behind a test batch: any vectors, kept alive together.
struct Storage {
  std::vector<std::vector<int64_t>> i64;
  std::vector<std::vector<int32_t>> i32;
  std::vector<std::vector<uint8_t>> bytes;
};

// A batch of an int64 column "t" (times) and a nullable utf8 column "s". Null strings where
// `valid` is false (if given).
inline pao::Batch time_string_batch(const std::shared_ptr<const pao::Schema>& sch,
                                    std::vector<int64_t> times, std::vector<std::string> strings,
                                    std::vector<bool> valid = {}) {
  auto st = std::make_shared<Storage>();
  const auto n = static_cast<int64_t>(times.size());
  st->i64.push_back(std::move(times));
  std::vector<int32_t> offsets{0};
  std::vector<uint8_t> data;
  for (const std::string& s : strings) {
    data.insert(data.end(), s.begin(), s.end());
    offsets.push_back(static_cast<int32_t>(data.size()));
  }
  st->i32.push_back(std::move(offsets));
  st->bytes.push_back(std::move(data));
  std::vector<uint8_t> bits((n + 7) / 8, 0);
  int64_t nulls = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool v = valid.empty() || valid[i];
    if (v) bits[i / 8] |= uint8_t(1) << (i % 8);
    nulls += !v;
  }
  st->bytes.push_back(std::move(bits));
  std::vector<pao::Column> cols(2);
  cols[0].values = st->i64[0].data();
  cols[0].null_count = 0;
  cols[1].values = st->i32[0].data();
  cols[1].data = st->bytes[0].data();
  cols[1].validity = nulls ? st->bytes[1].data() : nullptr;
  cols[1].null_count = nulls;
  return pao::Batch(sch, n, std::move(cols), st);
}

inline std::shared_ptr<const pao::Schema> time_string_schema() {
  return schema({{"t", type(pao::TypeId::kInt64), false}, {"s", type(pao::TypeId::kUtf8), true}});
}

// A BatchSource that hands out given batches, optionally failing after some.
class ListSource final : public pao::BatchSource {
 public:
  ListSource(std::shared_ptr<const pao::Schema> s, std::vector<pao::Batch> batches)
      : schema_(std::move(s)), batches_(std::move(batches)) {}
  const std::shared_ptr<const pao::Schema>& schema() const noexcept override { return schema_; }
  std::optional<pao::Batch> next() override {
    if (next_ == batches_.size()) return std::nullopt;
    return batches_[next_++];
  }

 private:
  std::shared_ptr<const pao::Schema> schema_;
  std::vector<pao::Batch> batches_;
  size_t next_ = 0;
};

// A live input, as pyarrow_ops.LiveInput is one: a producer thread push()es batches and
// heartbeat()s, then close()s; next() waits for the next item (a heartbeat comes out as a batch
// of 0 rows, with bound() its time), ready() tells whether one is at hand.
class LiveSource final : public pao::BatchSource {
 public:
  explicit LiveSource(std::shared_ptr<const pao::Schema> s) : schema_(std::move(s)) {}
  const std::shared_ptr<const pao::Schema>& schema() const noexcept override { return schema_; }
  int64_t bound() const noexcept override { return bound_; }  // the reader's thread only
  bool ready() override {
    std::lock_guard lock(mutex_);
    return !items_.empty();
  }
  std::optional<pao::Batch> next() override {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !items_.empty(); });
    Item item = std::move(items_.front());
    items_.pop_front();
    if (item.end) return std::nullopt;
    if (item.heartbeat) {
      bound_ = std::max(bound_, *item.heartbeat);
      return pao::empty_batch(schema_);
    }
    return item.batch;
  }
  void push(pao::Batch b) { put({std::move(b), std::nullopt, false}); }
  void heartbeat(int64_t time) { put({{}, time, false}); }
  void close() { put({{}, std::nullopt, true}); }

 private:
  struct Item {
    pao::Batch batch;
    std::optional<int64_t> heartbeat;
    bool end = false;
  };
  void put(Item item) {
    std::lock_guard lock(mutex_);
    items_.push_back(std::move(item));
    changed_.notify_all();
  }
  std::shared_ptr<const pao::Schema> schema_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Item> items_;
  int64_t bound_ = INT64_MIN;
};

// A hand-made Arrow producer: one int64 column "x" per array, each array's release counted.
struct Counter {
  int released = 0;
};
struct ProducedArray {
  std::vector<int64_t> values;
  const void* child_buffers[2] = {nullptr, nullptr};
  const void* parent_buffers[1] = {nullptr};
  ArrowArray child{};
  ArrowArray* children[1] = {&child};
  Counter* counter = nullptr;
};

inline void release_child(ArrowArray* a) { a->release = nullptr; }
inline void release_produced(ArrowArray* a) {
  auto* p = static_cast<ProducedArray*>(a->private_data);
  if (p->child.release) p->child.release(&p->child);
  ++p->counter->released;
  delete p;
  a->release = nullptr;
}

inline void produce_array(std::vector<int64_t> values, Counter* counter, ArrowArray* out) {
  auto* p = new ProducedArray;
  p->values = std::move(values);
  p->counter = counter;
  p->child_buffers[1] = p->values.data();
  p->child = ArrowArray{static_cast<int64_t>(p->values.size()), 0, 0, 2, 0, p->child_buffers,
                        nullptr, nullptr, &release_child, nullptr};
  *out = ArrowArray{static_cast<int64_t>(p->values.size()), 0, 0, 1, 1, p->parent_buffers,
                    p->children, nullptr, &release_produced, p};
}

inline void release_schema_child(ArrowSchema* s) { s->release = nullptr; }
struct ProducedSchema {
  ArrowSchema child{};
  ArrowSchema* children[1] = {&child};
};
inline void release_produced_schema(ArrowSchema* s) {
  auto* p = static_cast<ProducedSchema*>(s->private_data);
  if (p->child.release) p->child.release(&p->child);
  delete p;
  s->release = nullptr;
}
// A struct schema with one column "x" of the given format.
inline void produce_schema(const char* format, ArrowSchema* out) {
  auto* p = new ProducedSchema;
  p->child = ArrowSchema{format, "x", nullptr, ARROW_FLAG_NULLABLE, 0, nullptr, nullptr,
                         &release_schema_child, nullptr};
  *out = ArrowSchema{"+s", "", nullptr, 0, 1, p->children, nullptr, &release_produced_schema, p};
}

// A producer stream over int64 arrays; fails with EIO at `fail_at` if >= 0.
struct ProducedStream {
  std::vector<std::vector<int64_t>> arrays;
  size_t next = 0;
  int fail_at = -1;
  Counter* counter;
  int* stream_released;
};
inline int ps_schema(ArrowArrayStream*, ArrowSchema* out) {
  produce_schema("l", out);
  return 0;
}
inline int ps_next(ArrowArrayStream* s, ArrowArray* out) {
  auto* p = static_cast<ProducedStream*>(s->private_data);
  if (p->fail_at >= 0 && static_cast<int>(p->next) == p->fail_at) return 5;  // EIO
  if (p->next == p->arrays.size()) {
    out->release = nullptr;
    return 0;
  }
  produce_array(p->arrays[p->next++], p->counter, out);
  return 0;
}
inline const char* ps_error(ArrowArrayStream*) { return "producer broke"; }
inline void ps_release(ArrowArrayStream* s) {
  auto* p = static_cast<ProducedStream*>(s->private_data);
  ++*p->stream_released;
  delete p;
  s->release = nullptr;
}
inline void produce_stream(std::vector<std::vector<int64_t>> arrays, Counter* counter,
                           int* stream_released, int fail_at, ArrowArrayStream* out) {
  auto* p = new ProducedStream{std::move(arrays), 0, fail_at, counter, stream_released};
  *out = ArrowArrayStream{&ps_schema, &ps_next, &ps_error, &ps_release, p};
}

}  // namespace fixtures
