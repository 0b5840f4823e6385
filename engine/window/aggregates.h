#pragma once
// Aggregate functions and their per-window state (docs/semantics.md, "Windowed aggregation").
// One interface serves every design: a design feeds tuples in the merged order, and
// order-sensitive functions (first, last) rely on exactly that.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/batch.h"
#include "core/builder.h"

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

// A tuple's place in the merged order, (time, input index, position in its input), packed as
// (time, input << 40 | position). first and last keep the value of the least / greatest
// Position they were given, so their result does not depend on the order in which tuples are
// applied: WiML applies them unmerged, each producer its own inputs. Callers that apply tuples
// in the merged order may pass equal Positions (the default): a tie goes to the tuple applied
// first (first) or last (last), which is then the merged order.
struct Position {
  int64_t time = 0;
  uint64_t seq = 0;
  static constexpr int kPositionBits = 40;  // rows per input before seq's input part is reached
  static Position of(int64_t time, uint32_t input, int64_t position) noexcept {
    return {time, (static_cast<uint64_t>(input) << kPositionBits) | static_cast<uint64_t>(position)};
  }
  bool operator<(const Position& o) const noexcept { return time < o.time || (time == o.time && seq < o.seq); }
};

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
  // Returns one slot to the fresh state, for tables whose slots are reused one at a time (the
  // pipeline's keyed window_aggregate keeps a ring of open windows per key).
  void reset(uint32_t slot);
  // One tuple's value. `slice` is the tuple's slice (WindowSpec::slice_of): float sums add the
  // values of one slice in the merged order, then the slices' sums in slice order, so every
  // design (sliced or not, any thread count) rounds identically (docs/semantics.md).
  // `at` is the tuple's Position (first and last only).
  void update(uint32_t slot, const Value& v, int64_t slice, Position at = {});
  // update(slots[i], v, slice, at) on *states[i] for i < n, states of one aggregate (the windows a
  // tuple falls in): one dispatch on the function for all of them.
  static void update_each(AggStates* const* states, const uint32_t* slots, size_t n, const Value& v,
                          int64_t slice, Position at = {});
  // Folds `from`'s state at `from_slot` into `slot`, as if its tuples came after this slot's
  // (first and last: unless their Positions say otherwise). For float sums `from` holds a single
  // slice, as every slice of the sliced designs does.
  void merge(uint32_t slot, const AggStates& from, uint32_t from_slot);
  // merge(to[i], from, i) for the slots i < n of `from`: one dispatch for the whole table (the
  // inner loop of combining slices into windows).
  void merge_all(const AggStates& from, const uint32_t* to, size_t n);
  size_t size() const noexcept { return cells_.size(); }
  void emit(uint32_t slot, ColumnBuilder& out) const;
  // emit(slots[i], out) for i < n: one dispatch on the function for a window's rows.
  void emit_each(const uint32_t* slots, size_t n, ColumnBuilder& out) const;
  // True when the result does not depend on the order in which tuples are applied (WiML's
  // requirement): every function but a float sum or mean (floating-point addition does not
  // commute exactly). min and max order floats totally (-0.0 before 0.0); first and last compare
  // Positions.
  bool order_insensitive() const noexcept;

 private:
  enum class Domain : uint8_t { kSigned, kUnsigned, kFloat, kString };
  struct Cell {
    int64_t n;  // tuples (count), values seen (sum, mean, min, max), or 1 once set (first, last)
    bool valid;
    union {
      int64_t i;
      uint64_t u;
      double f;       // float sum, mean: the sum of the slices before `slice`
      __int128 wide;  // exact integer sum for mean
    };
    union {
      struct {
        double part;    // the sum of slice `slice`'s values so far
        int64_t slice;  // the slice `part` belongs to
      } sum;            // float sum, mean
      Position at;      // first, last: the kept tuple's
    };
  };
  static constexpr Cell kFresh{0, false, {0}, {{0.0, INT64_MIN}}};

  void fold_float(Cell& c, double part, int64_t slice) const noexcept;
  bool better(const Value& v, const Cell& c) const noexcept;

  AggKind kind_;
  int column_ = -1;
  DataType in_type_;
  DataType out_type_;
  Domain domain_ = Domain::kSigned;
  std::vector<Cell> cells_;
  std::vector<std::string> strings_;  // first/last of string columns
};

}  // namespace pao::window
