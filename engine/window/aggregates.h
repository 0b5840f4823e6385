#pragma once
// Aggregate functions and their per-window state (docs/semantics.md, "Windowed aggregation").
// One interface serves every design, and no result depends on the order of updates: float sums
// are exact (core/exact_sum.h) and first and last compare OrderKeys.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/batch.h"
#include "core/builder.h"
#include "core/exact_sum.h"
#include "core/order_key.h"
#include "core/prefetch.h"

namespace pao::window {

enum class AggKind : uint8_t { kCount, kSum, kMean, kMin, kMax, kFirst, kLast };

struct AggSpec {
  std::string name;    // output column
  AggKind kind;
  std::string column;  // empty: count() of tuples
};

bool order_sensitive(AggKind kind) noexcept;
const char* agg_name(AggKind kind) noexcept;

// A value read from a column, in the domain the function computes in.
struct Value {
  bool valid = false;
  union {
    int64_t i;
    uint64_t u;
    double f;
  };
  std::string_view s;
  Value() : i(0) {}
};

// first and last keep the value of the least / greatest OrderKey (core/order_key.h) they were given,
// so their result does not depend on the order in which tuples are applied: WiML applies them
// unmerged, each producer its own inputs. Callers that apply tuples in the merged order may pass
// equal keys (the default, OrderKey{}, the least): a tie goes to the tuple applied first (first)
// or last (last), which is then the merged order.
//
// The states of one aggregate over the slots (keys) of one window set.
class AggStates {
 public:
  // Checks that the function applies to the column's type (kUnsupportedType otherwise).
  AggStates(const AggSpec& spec, const Schema& input);

  const DataType& output_type() const noexcept { return out_type_; }
  bool needs_value() const noexcept { return column_ >= 0; }
  // The value of this aggregate's column at `row`, read once per tuple and applied to every
  // window the tuple falls in.
  Value read(const Batch& batch, int64_t row) const;

  void resize(size_t slots);
  void clear();
  // Returns slots [0, used) to the fresh state and keeps the size, for a table whose slots past
  // `used` are fresh already (a WindowSet's): refilled one slot at a time, it need not grow again.
  void clear_used(size_t used);
  // Returns one slot to the fresh state, for tables whose slots are reused one at a time (the
  // pipeline's keyed window_aggregate keeps a ring of open windows per key).
  void reset(uint32_t slot);
  // One tuple's value; `at` is its OrderKey (first and last only).
  void update(uint32_t slot, const Value& v, OrderKey at = {});
  // update(slots[i], v, at) on *states[i] for i < n, states of one aggregate (the windows a tuple
  // falls in): one dispatch on the function for all of them.
  static void update_each(AggStates* const* states, const uint32_t* slots, size_t n, const Value& v,
                          OrderKey at = {});
  // update(slots[i], read(batch, first + i), at_i) for i < n, at_i = OrderKey::of(times[i], input,
  // position + i) (first and last only): one dispatch on the function for a run of rows (the
  // folding of a checkpoint's window states, window/window_states.h).
  void update_rows(const uint32_t* slots, const Batch& batch, int64_t first, size_t n, const int64_t* times,
                   uint32_t input, uint64_t position);
  // update(slots[i], read(batch, rows[i])) for i < n, in that order (first and last: by it, with
  // the default OrderKey): one dispatch for a run of a piece's rows (the pipeline's keyed
  // window_aggregate, ops/windowed.cpp).
  void update_indexed(const uint32_t* slots, const Batch& batch, const int64_t* rows, size_t n);
  // A running aggregate over a piece's rows: for each i < n in order, reset(slots[i]) where
  // restarts (if given) has restarts[i], update(slots[i], read(batch, rows[i])), emit(slots[i],
  // out). One dispatch for the run (the pipeline's `running`, ops/keyed.cpp); counts are written
  // into the output in bulk.
  void run_indexed(const uint32_t* slots, const Batch& batch, const int64_t* rows, const uint8_t* restarts,
                   size_t n, ColumnBuilder& out);
  // Folds `from`'s state at `from_slot` into `slot`, as if its tuples came after this slot's
  // (first and last: unless their OrderKeys say otherwise).
  void merge(uint32_t slot, const AggStates& from, uint32_t from_slot);
  // merge(to[i], from, i) for the slots i < n of `from`: one dispatch for the whole table (the
  // inner loop of combining slices into windows).
  void merge_all(const AggStates& from, const uint32_t* to, size_t n);
  size_t size() const noexcept { return cells_.size(); }
  // Asks for slot `slot`'s state to be brought into the cache (slot < size()): a caller walking
  // slots in a data-dependent order requests a few ahead, so their misses overlap. Both ends of
  // the 48-byte cell: half of the cells straddle two cache lines, and a float sum reads and a
  // reset writes all of it (the sessions pipeline's running, 2 workers: 73.8-79.2 ns per tuple
  // with the first line requested, 57.5-62.6 with both).
  void prefetch(uint32_t slot) const noexcept {
    const char* c = reinterpret_cast<const char*>(&cells_[slot]);
    pao::prefetch(c);
    pao::prefetch(c + sizeof(Cell) - 1);
  }
  // A slot's state as text, and back into a fresh slot (a checkpoint's window states,
  // docs/checkpoints.md, "The format"): space-separated decimal fields, per function
  //   count: n;  integer sum: n u (the wrapped sum's bits);  integer mean: n hi lo (the 128-bit sum);
  //   float sum and mean: n flags m_hi m_lo scale (an ExactSum) or n flags w l0 .. l33 (a WideSum);
  //   min, max: n bits;  first, last: 0, or 1 valid bits[ string] (the string's bytes follow one space).
  // first and last keep no OrderKey: a loaded state stands for tuples that precede, in the merged
  // order, every tuple applied after it, so it is loaded with the least key.
  std::string save(uint32_t slot) const;
  // False, with the slot fresh, when `text` is not a state of this function.
  bool load(uint32_t slot, std::string_view text);
  void emit(uint32_t slot, ColumnBuilder& out) const;
  // emit(slots[i], out) for i < n: one dispatch on the function for a window's rows.
  void emit_each(const uint32_t* slots, size_t n, ColumnBuilder& out) const;
 private:
  enum class Domain : uint8_t { kSigned, kUnsigned, kFloat, kString };
  struct Cell {
    int64_t n;  // tuples (count), values seen (sum, mean, min, max), or 1 once set (first, last)
    bool valid;
    uint32_t wide;  // float sum, mean: 1 + the index in wide_ of the part `sum` could not hold; 0: none
    union {
      struct {
        union {
          __int128 isum;  // integer mean: the exact sum (first: kFresh zeroes all 16 bytes)
          int64_t i;
          uint64_t u;
          double f;
        };
        OrderKey at;  // first, last: the kept tuple's
      };
      ExactSum sum;  // float sum, mean (overlays isum and at, so a fresh cell's is the empty sum)
    };
  };
  // Every byte zero: n, the flags, isum and at, and so the empty ExactSum that overlays them.
  static constexpr Cell kFresh{0, false, 0, {}};
  static_assert(sizeof(Cell) == 48, "a cell stays 48 bytes: the exact float sum overlays the other states");

  // Float sums: adds to the cell's ExactSum, moving to a WideSum when it no longer fits.
  void add_float(uint32_t slot, double x);
  template <class RowOf, class AtOf>
  void update_many(const uint32_t* slots, const Batch& batch, size_t n, RowOf row_of, AtOf at_of);
  void merge_float(uint32_t slot, const AggStates& from, uint32_t from_slot);
  // A non-empty `o` folded into `c` when both sums are ExactSums and the result still fits (an
  // empty `c` takes `o`'s state); false, with nothing changed, otherwise.
  static bool fold_exact(Cell& c, const Cell& o) noexcept;
  WideSum& wide_of(uint32_t slot);  // the slot's WideSum, taken from spare_wide_ or made
  void drop_wide(Cell& c);          // returns a slot's WideSum to spare_wide_
  double float_sum(const Cell& c) const noexcept;
  bool better(const Value& v, const Cell& c) const noexcept;
  bool load_fields(uint32_t slot, std::string_view text);  // load() on a fresh slot

  AggKind kind_;
  int column_ = -1;
  DataType in_type_;
  DataType out_type_;
  Domain domain_ = Domain::kSigned;
  std::vector<Cell> cells_;
  std::vector<std::string> strings_;  // first/last of string columns
  // Float sums that outgrew ExactSum (rare: terms spanning ~70 binary orders of magnitude), and
  // the indices of those whose slot was cleared, for reuse.
  std::vector<WideSum> wide_;
  std::vector<uint32_t> spare_wide_;
};

}  // namespace pao::window
