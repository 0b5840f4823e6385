#pragma once
// Window assignment and the window sets of a windowed, grouped aggregate, fed one tuple at a time
// in the merged order by a single thread (the update and output stages of MQ, MQLF and TuMLSC).
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/batch.h"
#include "core/builder.h"
#include "window/aggregates.h"
#include "window/keys.h"

namespace pao::window {

// Windows [s, s + size) for s = offset + k * advance, every integer k (docs/semantics.md).
struct WindowSpec {
  int64_t size = 1;
  int64_t advance = 1;
  int64_t offset = 0;

  // The k of the windows containing time t: [first, last]; empty (first > last) in a gap.
  int64_t first_k(int64_t t) const noexcept { return floor_div(__int128{t} - offset - size, advance) + 1; }
  int64_t last_k(int64_t t) const noexcept { return floor_div(__int128{t} - offset, advance); }
  int64_t start(int64_t k) const noexcept { return static_cast<int64_t>(__int128{offset} + __int128{k} * advance); }
  int64_t end(int64_t k) const noexcept { return static_cast<int64_t>(__int128{start(k)} + size); }

  static int64_t floor_div(__int128 a, int64_t b) noexcept {
    __int128 q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return static_cast<int64_t>(q);
  }
};

struct AggregateQuery {
  std::string time_column;
  std::vector<std::string> keys;
  WindowSpec window;
  std::vector<AggSpec> aggs;
};

class WindowAggregate {
 public:
  // Validates the query against the input schema (unknown columns, unsupported types, windows).
  WindowAggregate(const Schema& input, const AggregateQuery& query, int64_t batch_size);

  const std::shared_ptr<const Schema>& output_schema() const noexcept { return out_schema_; }

  // One tuple, in the merged order; time is its time. Completes windows ending at or before it.
  void add(const Batch& batch, int64_t row, int64_t time);
  // No tuple earlier than `watermark` will come: completes windows ending at or before it.
  void advance(int64_t watermark);
  // No tuple will come.
  void finish();
  // A batch of finished rows: full batches (batch_size rows) always; with `flush`, any rows.
  std::optional<Batch> take(bool flush);
  // Window sets emitted so far (those with at least one row).
  int64_t window_sets_emitted() const noexcept { return emitted_; }
  bool has_output(bool flush) const noexcept {
    return !ready_.empty() || (flush && !builders_.empty() && builders_[0].size() > 0);
  }

 private:
  struct WindowSet {
    int64_t k = 0;
    std::vector<uint32_t> slot_of_key;  // key id -> slot, kNoSlot when absent
    std::vector<uint32_t> keys;         // slot -> key id
    std::vector<AggStates> aggs;
  };
  WindowSet* set_for(int64_t k);
  void emit_front();
  void cut_batch();

  WindowSpec window_;
  int64_t batch_size_;
  std::vector<AggSpec> specs_;
  KeyTable keys_;
  std::vector<AggStates> prototypes_;
  std::shared_ptr<const Schema> out_schema_;
  DataType time_type_;

  // Open window sets for k in [base_k_, base_k_ + open_.size()), null where none received a tuple.
  std::deque<std::unique_ptr<WindowSet>> open_;
  int64_t base_k_ = 0;
  std::vector<std::unique_ptr<WindowSet>> spare_;
  std::vector<Value> values_;
  std::vector<uint32_t> order_;

  std::vector<ColumnBuilder> builders_;
  std::deque<Batch> ready_;
  int64_t emitted_ = 0;
};

}  // namespace pao::window
