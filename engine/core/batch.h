#pragma once
// Batches: the unit in which data enters, moves through and leaves the engine.
//
// A Batch is a set of column views over memory someone else owns. `owner` keeps that memory
// alive: for an imported batch it holds the producer's ArrowArray (released when the last
// Batch, slice or exported array referring to it is gone); for a batch the engine built it holds
// the engine's buffers. Copying or slicing a Batch never copies data.
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "core/bits.h"
#include "core/buffer_pool.h"
#include "core/types.h"

namespace pao {

// A view of one column's buffers. Element i of the view is element (offset + i) of the buffers,
// as in the Arrow format, so a slice only changes `offset`.
struct Column {
  const uint8_t* validity = nullptr;  // bit i set = valid; nullptr = no nulls
  const void* values = nullptr;       // fixed-width values, value bits, or string offsets
  const uint8_t* data = nullptr;      // string bytes (utf8 / large_utf8 only)
  int64_t offset = 0;
  int64_t null_count = -1;            // -1 = not computed

  bool is_valid(int64_t i) const noexcept {
    if (validity == nullptr) return true;
    return get_bit(validity, offset + i);
  }
  // True when the view may contain nulls (the null count is unknown or positive).
  bool may_have_nulls() const noexcept { return validity != nullptr && null_count != 0; }
  template <class T>
  const T* typed() const noexcept {
    return static_cast<const T*>(values) + offset;
  }
};

class Batch {
 public:
  Batch() = default;
  Batch(std::shared_ptr<const Schema> schema, int64_t num_rows, std::vector<Column> columns,
        std::shared_ptr<const void> owner)
      : schema_(std::move(schema)),
        num_rows_(num_rows),
        columns_(std::move(columns)),
        owner_(std::move(owner)) {}

  const std::shared_ptr<const Schema>& schema() const noexcept { return schema_; }
  int64_t num_rows() const noexcept { return num_rows_; }
  size_t num_columns() const noexcept { return columns_.size(); }
  const Column& column(size_t i) const noexcept { return columns_[i]; }
  const std::shared_ptr<const void>& owner() const noexcept { return owner_; }

  // Rows [start, start + length) sharing this batch's buffers and owner. Never copies.
  Batch slice(int64_t start, int64_t length) const;
  // The same data under another schema of the same layout (e.g. differing only in nullability).
  Batch with_schema(std::shared_ptr<const Schema> schema) const {
    return Batch(std::move(schema), num_rows_, columns_, owner_);
  }

 private:
  std::shared_ptr<const Schema> schema_;
  int64_t num_rows_ = 0;
  std::vector<Column> columns_;
  std::shared_ptr<const void> owner_;
};

// A pull-based producer of batches that all share schema(). Every stage of the engine that
// hands batches onwards (an imported stream, a merge, later a pipeline) is one, so stages compose
// and the export to Arrow needs to know only this interface.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual const std::shared_ptr<const Schema>& schema() const noexcept = 0;
  // The next batch, or nullopt at the end. Throws pao::Error on bad input; after a throw the
  // source is failed and throws the same error again. Not thread-safe: one caller at a time.
  virtual std::optional<Batch> next() = 0;
  // A promise about the rows still to come, read after next() returned a batch of 0 rows (a
  // heartbeat: a live input that is quiet but not done): none of them has a time, in the stream's
  // time column, below bound(). INT64_MIN when the source promises nothing of its own (the rows it
  // has delivered promise what sortedness does). A heartbeat never lowers it.
  virtual int64_t bound() const noexcept { return INT64_MIN; }
  // Polls without waiting: takes in what its own sources have at hand, then says whether next()
  // will return without waiting for a producer (rows, a heartbeat or the end): false while a live
  // input it needs has nothing queued. A reader of several sources turns to the others first. True
  // when next() only computes or reads (tables, files), and whenever the source cannot tell. One
  // caller at a time, as next().
  virtual bool ready() { return true; }
  // Checkpoints: how far this source has read its inputs (rows taken from each, in input order),
  // and the batches made of those rows that next() has not returned yet; the rest of its stream
  // is those batches, then the same source over its inputs less their first `rows`. Nullopt when
  // it cannot say (the restore then replays from the start). One caller at a time, as next().
  // A source that keeps state of its own between its input and its output (a lateness buffer)
  // says it in `state`, which a restored source takes back (gate/lateness.h); a merge gives, per
  // input, such an input's state and the rows it had handed out that the merge had not taken yet
  // (`inputs`, empty where its inputs keep no state).
  struct InputState {
    std::vector<Batch> state;
    std::vector<Batch> pending;
  };
  struct Position {
    std::vector<int64_t> rows;
    std::vector<Batch> held;
    std::vector<Batch> state;
    std::vector<InputState> inputs;
  };
  virtual std::optional<Position> position() const { return std::nullopt; }
};

// Memory the engine allocates for the batches it builds: 64-byte aligned (the alignment the Arrow
// format recommends, so kernels may use aligned vector loads) and uninitialised; large buffers are
// recycled (core/buffer_pool.h). A growing buffer
// (ColumnBuilder's) keeps spare capacity, doubling as it grows, so appends cost amortised O(1).
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t size) {
    reallocate(size);
    size_ = size;
  }
  uint8_t* data() const noexcept { return data_.get(); }
  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

  // Keeps the first min(size(), n) bytes; bytes past them are uninitialised. After any resize
  // data() is not null, even for size 0 (memcpy and memset may be handed it).
  void resize(size_t n) {
    if (n > capacity_ || !data_) reallocate(std::max(n, 2 * capacity_));
    size_ = n;
  }
  void reserve(size_t n) {
    if (n > capacity_) reallocate(n);
  }
  void push_back(uint8_t byte) {
    resize(size_ + 1);
    data_.get()[size_ - 1] = byte;
  }
  uint8_t& back() noexcept { return data_.get()[size_ - 1]; }
  // `n` more bytes at the end; returns where they go.
  uint8_t* grow_by(size_t n) {
    resize(size_ + n);
    return data_.get() + size_ - n;
  }

 private:
  void reallocate(size_t capacity);

  struct Free {
    size_t capacity;  // no default member initializer: GCC would not see Free as default-constructible here
    void operator()(uint8_t* p) const noexcept { pool_free(p, capacity); }
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// The memory of a batch the engine built, to be the Batch's owner: the buffers it allocated and
// the owners of memory it shares (the input batch whose columns it passes through, a borrowed
// bitmap). Buffers' data never moves once added, so columns may point into them at once.
class BatchMemory {
 public:
  uint8_t* allocate(size_t size) { return add(Buffer(size)); }
  uint8_t* allocate_zeroed(size_t size) {
    uint8_t* p = allocate(size);
    std::memset(p, 0, size);
    return p;
  }
  // Takes a filled buffer (a builder's); returns its data.
  uint8_t* add(Buffer buffer) {
    buffers_.push_back(std::move(buffer));
    return buffers_.back().data();
  }
  void share(std::shared_ptr<const void> owner) { shared_.push_back(std::move(owner)); }

 private:
  std::vector<Buffer> buffers_;
  std::vector<std::shared_ptr<const void>> shared_;
};

// `left`'s columns followed by `right`'s (equal row counts), under `schema`, sharing both batches'
// memory: no copy. Throws kUsage if the row counts differ.
Batch side_by_side(std::shared_ptr<const Schema> schema, const Batch& left, const Batch& right);

// Row `row`'s time in `column` of `b` (int64 and timestamp, or a 32-bit column widened).
inline int64_t time_at(const Batch& b, size_t column, int64_t row) {
  const Column& t = b.column(column);
  return b.schema()->fields[column].type.byte_width() == 8 ? t.typed<int64_t>()[row] : t.typed<int32_t>()[row];
}

}  // namespace pao
