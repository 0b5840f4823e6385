#include "window/aggregates.h"

#include <charconv>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/key_table.h"

namespace pao::window {

bool order_sensitive(AggKind kind) noexcept { return kind == AggKind::kFirst || kind == AggKind::kLast; }

const char* agg_name(AggKind kind) noexcept {
  switch (kind) {
    case AggKind::kCount: return "count";
    case AggKind::kSum: return "sum";
    case AggKind::kMean: return "mean";
    case AggKind::kMin: return "min";
    case AggKind::kMax: return "max";
    case AggKind::kFirst: return "first";
    case AggKind::kLast: return "last";
  }
  return "?";
}

namespace {

DataType of(TypeId id) {
  DataType t;
  t.id = id;
  return t;
}

bool is_float(TypeId id) { return id == TypeId::kFloat32 || id == TypeId::kFloat64; }
bool is_unsigned(TypeId id) {
  return id == TypeId::kUInt8 || id == TypeId::kUInt16 || id == TypeId::kUInt32 || id == TypeId::kUInt64 ||
         id == TypeId::kBool;
}
bool is_number(TypeId id) {
  return id != TypeId::kBool && id != TypeId::kDate32 && id != TypeId::kTimestamp &&
         id != TypeId::kUtf8 && id != TypeId::kLargeUtf8;
}

// A total order for min and max: NaN above every number, -0.0 below 0.0 (docs/semantics.md). Total,
// so the result does not depend on the tuples' order, which WiML needs.
bool float_less(double a, double b) noexcept {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(b) && !std::isnan(a);
  return a < b || (a == b && std::signbit(a) && !std::signbit(b));
}

}  // namespace

AggStates::AggStates(const AggSpec& spec, const Schema& input) : kind_(spec.kind) {
  if (spec.column.empty()) {
    if (kind_ != AggKind::kCount) {
      throw Error(ErrorKind::kInvalidInput, std::string(agg_name(kind_)) + "() needs a column (aggregate '" +
                                                spec.name + "')");
    }
    out_type_ = of(TypeId::kInt64);
    return;
  }
  auto index = input.find(spec.column);
  if (!index) {
    throw Error(ErrorKind::kInvalidInput, "aggregate '" + spec.name + "' reads column '" + spec.column +
                                              "', which the inputs do not have; their columns are: " +
                                              input.to_string());
  }
  column_ = static_cast<int>(*index);
  in_type_ = input.fields[*index].type;
  const TypeId id = in_type_.id;
  const bool strings = is_string(in_type_.id);
  domain_ = strings ? Domain::kString : is_float(id) ? Domain::kFloat : is_unsigned(id) ? Domain::kUnsigned
                                                                                      : Domain::kSigned;
  auto unsupported = [&](const char* what) {
    throw Error(ErrorKind::kUnsupportedType, std::string(agg_name(kind_)) + "('" + spec.column +
                                                 "') (aggregate '" + spec.name + "') needs " + what +
                                                 "; the column has type " + in_type_.to_string());
  };
  switch (kind_) {
    case AggKind::kCount:
      out_type_ = of(TypeId::kInt64);
      break;
    case AggKind::kSum:
      if (!is_number(id)) unsupported("a numeric column");
      out_type_ = of(is_float(id) ? TypeId::kFloat64 : is_unsigned(id) ? TypeId::kUInt64 : TypeId::kInt64);
      break;
    case AggKind::kMean:
      if (!is_number(id)) unsupported("a numeric column");
      out_type_ = of(TypeId::kFloat64);
      break;
    case AggKind::kMin:
    case AggKind::kMax:
      if (strings) unsupported("a numeric, boolean or temporal column");
      out_type_ = in_type_;
      break;
    case AggKind::kFirst:
    case AggKind::kLast:
      out_type_ = in_type_;
      break;
  }
}

Value AggStates::read(const Batch& batch, int64_t row) const {
  Value v;
  const Column& c = batch.column(static_cast<size_t>(column_));
  v.valid = c.validity == nullptr || c.is_valid(row);
  if (!v.valid) return v;
  const int64_t i = c.offset + row;
  const void* p = c.values;
  switch (in_type_.id) {
    case TypeId::kBool: v.u = get_bit(static_cast<const uint8_t*>(p), i); break;
    case TypeId::kInt8: v.i = static_cast<const int8_t*>(p)[i]; break;
    case TypeId::kInt16: v.i = static_cast<const int16_t*>(p)[i]; break;
    case TypeId::kInt32: case TypeId::kDate32: v.i = static_cast<const int32_t*>(p)[i]; break;
    case TypeId::kInt64: case TypeId::kTimestamp: v.i = static_cast<const int64_t*>(p)[i]; break;
    case TypeId::kUInt8: v.u = static_cast<const uint8_t*>(p)[i]; break;
    case TypeId::kUInt16: v.u = static_cast<const uint16_t*>(p)[i]; break;
    case TypeId::kUInt32: v.u = static_cast<const uint32_t*>(p)[i]; break;
    case TypeId::kUInt64: v.u = static_cast<const uint64_t*>(p)[i]; break;
    case TypeId::kFloat32: v.f = static_cast<const float*>(p)[i]; break;
    case TypeId::kFloat64: v.f = static_cast<const double*>(p)[i]; break;
    case TypeId::kUtf8: {
      const auto* o = static_cast<const int32_t*>(p);
      v.s = {reinterpret_cast<const char*>(c.data) + o[i], static_cast<size_t>(o[i + 1] - o[i])};
      break;
    }
    case TypeId::kLargeUtf8: {
      const auto* o = static_cast<const int64_t*>(p);
      v.s = {reinterpret_cast<const char*>(c.data) + o[i], static_cast<size_t>(o[i + 1] - o[i])};
      break;
    }
  }
  return v;
}

void AggStates::resize(size_t slots) {
  cells_.resize(slots, kFresh);
  if (domain_ == Domain::kString) strings_.resize(slots);
}

void AggStates::reset(uint32_t slot) {
  drop_wide(cells_[slot]);
  cells_[slot] = kFresh;
  if (domain_ == Domain::kString) strings_[slot].clear();
}

void AggStates::clear() {
  cells_.clear();
  strings_.clear();
  wide_.clear();
  spare_wide_.clear();
}

void AggStates::clear_used(size_t used) {
  std::fill_n(cells_.begin(), std::min(used, cells_.size()), kFresh);
  if (domain_ == Domain::kString) {
    for (size_t i = 0; i < std::min(used, strings_.size()); ++i) strings_[i].clear();
  }
  wide_.clear();
  spare_wide_.clear();
}

bool AggStates::better(const Value& v, const Cell& c) const noexcept {
  const bool min = kind_ == AggKind::kMin;
  switch (domain_) {
    case Domain::kSigned: return min ? v.i < c.i : c.i < v.i;
    case Domain::kUnsigned: return min ? v.u < c.u : c.u < v.u;
    case Domain::kFloat: return min ? float_less(v.f, c.f) : float_less(c.f, v.f);
    case Domain::kString: return false;
  }
  return false;
}

// A cell's float sum is its ExactSum until a term does not fit there; from then on its finite part
// lives in a WideSum (sum.m stays 0) and the ExactSum keeps only the NaN and infinity flags.
WideSum& AggStates::wide_of(uint32_t slot) {
  Cell& c = cells_[slot];
  if (c.wide == 0) {
    uint32_t i;
    if (!spare_wide_.empty()) {
      i = spare_wide_.back();
      spare_wide_.pop_back();
      wide_[i] = WideSum{};
    } else {
      i = static_cast<uint32_t>(wide_.size());
      wide_.emplace_back();
    }
    c.wide = i + 1;
    wide_[i].add(c.sum);
    c.sum.m = 0;
  }
  return wide_[c.wide - 1];
}

void AggStates::drop_wide(Cell& c) {
  if (c.wide != 0) spare_wide_.push_back(c.wide - 1);
  c.wide = 0;
}

void AggStates::add_float(uint32_t slot, double x) {
  Cell& c = cells_[slot];
  if ((c.wide == 0 || !std::isfinite(x)) && c.sum.add(x)) return;
  wide_of(slot).add(x);
}

bool AggStates::fold_exact(Cell& c, const Cell& o) noexcept {
  if (o.wide != 0 || c.wide != 0) return false;
  if (c.n == 0) {
    c = o;
    return true;
  }
  if (!c.sum.add(o.sum)) return false;
  c.n += o.n;
  c.sum.special |= o.sum.special;
  return true;
}

void AggStates::merge_float(uint32_t slot, const AggStates& from, uint32_t from_slot) {
  Cell& c = cells_[slot];
  const Cell& o = from.cells_[from_slot];
  if (o.n == 0 || fold_exact(c, o)) return;
  c.n += o.n;
  c.sum.special |= o.sum.special;
  WideSum& w = wide_of(slot);
  w.add(o.sum);
  if (o.wide != 0) w.add(from.wide_[o.wide - 1]);
}

double AggStates::float_sum(const Cell& c) const noexcept {
  return c.sum.value(c.wide == 0 ? c.sum.round() : wide_[c.wide - 1].round());
}

void AggStates::update(uint32_t slot, const Value& v, OrderKey at) {
  Cell& c = cells_[slot];
  switch (kind_) {
    case AggKind::kCount:
      c.n += column_ < 0 || v.valid;
      return;
    case AggKind::kSum:
      if (!v.valid) return;
      ++c.n;
      if (domain_ == Domain::kFloat) {
        add_float(slot, v.f);
      } else {
        c.u += v.u;  // two's complement: wraps like numpy for signed and unsigned alike
      }
      return;
    case AggKind::kMean:
      if (!v.valid) return;
      ++c.n;
      if (domain_ == Domain::kFloat) {
        add_float(slot, v.f);
      } else {
        c.isum += domain_ == Domain::kSigned ? static_cast<__int128>(v.i) : static_cast<__int128>(v.u);
      }
      return;
    case AggKind::kMin:
    case AggKind::kMax:
      if (!v.valid) return;
      if (c.n++ == 0 || better(v, c)) c.u = v.u;
      return;
    case AggKind::kFirst:
    case AggKind::kLast:
      if (c.n != 0 && (kind_ == AggKind::kFirst ? !(at < c.at) : at < c.at)) return;
      c.n = 1;
      c.valid = v.valid;
      c.u = v.u;
      c.at = at;
      if (domain_ == Domain::kString) strings_[slot].assign(v.s);
      return;
  }
}

void AggStates::update_each(AggStates* const* states, const uint32_t* slots, size_t n, const Value& v,
                            OrderKey at) {
  if (n == 0) return;
  const AggStates& f = *states[0];
  switch (f.kind_) {
    case AggKind::kCount: {
      const int64_t add = f.column_ < 0 || v.valid;
      for (size_t i = 0; i < n; ++i) states[i]->cells_[slots[i]].n += add;
      return;
    }
    case AggKind::kFirst:
    case AggKind::kLast: {
      if (f.domain_ == Domain::kString) break;
      const bool first = f.kind_ == AggKind::kFirst;
      for (size_t i = 0; i < n; ++i) {
        Cell& c = states[i]->cells_[slots[i]];
        if (c.n != 0 && (first ? !(at < c.at) : at < c.at)) continue;  // as update()
        c.n = 1;
        c.valid = v.valid;
        c.u = v.u;
        c.at = at;
      }
      return;
    }
    case AggKind::kSum:
    case AggKind::kMean:
      if (f.domain_ != Domain::kFloat) break;
      if (!v.valid) return;
      for (size_t i = 0; i < n; ++i) {
        ++states[i]->cells_[slots[i]].n;
        states[i]->add_float(slots[i], v.f);
      }
      return;
    case AggKind::kMin:
    case AggKind::kMax:
      if (!v.valid) return;
      for (size_t i = 0; i < n; ++i) {
        Cell& c = states[i]->cells_[slots[i]];
        if (c.n++ == 0 || f.better(v, c)) c.u = v.u;
      }
      return;
    default:
      break;
  }
  for (size_t i = 0; i < n; ++i) states[i]->update(slots[i], v, at);
}

// update(slots[i], read(batch, row_of(i)), at_of(i)) for i < n, with one dispatch on the function
// for the run: update_rows (contiguous rows) and update_indexed (a piece's rows) share it.
template <class RowOf, class AtOf>
void AggStates::update_many(const uint32_t* slots, const Batch& batch, size_t n, RowOf row_of, AtOf at_of) {
  if (order_sensitive(kind_)) {
    for (size_t i = 0; i < n; ++i) update(slots[i], read(batch, row_of(i)), at_of(i));
    return;
  }
  // A slot's state is data-dependent (a key's): requested KeyTable::kPrefetchAhead rows ahead, so
  // states larger than the caches (100,000 keys' windows) cost overlapping misses.
  const auto ahead = [&](size_t i) {
    if (i + KeyTable::kPrefetchAhead < n) prefetch(slots[i + KeyTable::kPrefetchAhead]);
  };
  if (column_ < 0) {  // count()
    for (size_t i = 0; i < n; ++i) {
      ahead(i);
      ++cells_[slots[i]].n;
    }
    return;
  }
  const Column& c = batch.column(static_cast<size_t>(column_));
  const bool all_valid = !c.may_have_nulls();
  if (kind_ == AggKind::kCount) {
    for (size_t i = 0; i < n; ++i) {
      ahead(i);
      cells_[slots[i]].n += all_valid || c.is_valid(row_of(i));
    }
    return;
  }
  if ((kind_ == AggKind::kSum || kind_ == AggKind::kMean) && in_type_.id == TypeId::kFloat64) {
    const double* v = c.typed<double>();
    for (size_t i = 0; i < n; ++i) {
      ahead(i);
      const int64_t row = row_of(i);
      if (!all_valid && !c.is_valid(row)) continue;
      ++cells_[slots[i]].n;
      add_float(slots[i], v[row]);
    }
    return;
  }
  for (size_t i = 0; i < n; ++i) update(slots[i], read(batch, row_of(i)));
}

void AggStates::update_rows(const uint32_t* slots, const Batch& batch, int64_t first, size_t n, const int64_t* times,
                            uint32_t input, uint64_t position) {
  update_many(
      slots, batch, n, [first](size_t i) { return first + static_cast<int64_t>(i); },
      [times, input, position](size_t i) { return OrderKey::of(times[i], input, position + i); });
}

void AggStates::update_indexed(const uint32_t* slots, const Batch& batch, const int64_t* rows, size_t n) {
  update_many(slots, batch, n, [rows](size_t i) { return rows[i]; }, [](size_t) { return OrderKey{}; });
}

void AggStates::run_indexed(const uint32_t* slots, const Batch& batch, const int64_t* rows, const uint8_t* restarts,
                            size_t n, ColumnBuilder& out) {
  // Requests the state of the row KeyTable::kPrefetchAhead places on (its key's slot is
  // data-dependent, as the key table's probes are).
  const auto ahead = [&](size_t i) {
    if (i + KeyTable::kPrefetchAhead < n) prefetch(slots[i + KeyTable::kPrefetchAhead]);
  };
  const Column* c = column_ >= 0 ? &batch.column(static_cast<size_t>(column_)) : nullptr;
  const bool all_valid = c == nullptr || !c->may_have_nulls();
  if (kind_ == AggKind::kCount) {  // count() and count(column): the counts, in bulk
    auto* o = reinterpret_cast<int64_t*>(out.append_fixed_n(static_cast<int64_t>(n)));
    // A count's step is a few operations, so the state it will need is requested further ahead
    // than the key table's distance: a memory access's latency is more of its rows (sessions
    // pipeline, 1 input, 2 workers: running 41.1-42.3 ns per tuple with KeyTable::kPrefetchAhead,
    // 38.9-40.7 with 96 rows, 37.3-39.8 with 192).
    constexpr size_t kAhead = 6 * KeyTable::kPrefetchAhead;
    for (size_t i = 0; i < n; ++i) {
      // A count touches its cell's first 8 bytes only: one line.
      if (i + kAhead < n) pao::prefetch(&cells_[slots[i + kAhead]].n);
      Cell& cell = cells_[slots[i]];
      if (restarts != nullptr && restarts[i]) cell.n = 0;  // a count's whole state
      cell.n += all_valid || c->is_valid(rows[i]);
      o[i] = cell.n;
    }
    return;
  }
  if (!order_sensitive(kind_) && (kind_ == AggKind::kSum || kind_ == AggKind::kMean) &&
      in_type_.id == TypeId::kFloat64) {
    const double* v = c->typed<double>();
    // A sum's values are written in bulk and its rare nulls (no value yet) set after; a mean's
    // divide and its nulls go through emit().
    const bool sum = kind_ == AggKind::kSum;
    const int64_t first = out.size();
    auto* o = sum ? reinterpret_cast<double*>(out.append_fixed_n(static_cast<int64_t>(n))) : nullptr;
    for (size_t i = 0; i < n; ++i) {
      ahead(i);
      const uint32_t slot = slots[i];
      if (restarts != nullptr && restarts[i]) reset(slot);
      Cell& cell = cells_[slot];
      if (all_valid || c->is_valid(rows[i])) {
        ++cell.n;
        const double x = v[rows[i]];
        // The exact sum's own inline step first (add_float's fast path), add_float for the rest.
        if (cell.wide != 0 || !cell.sum.add(x)) add_float(slot, x);
      }
      if (!sum) {
        emit(slot, out);
      } else if (cell.n == 0) [[unlikely]] {
        out.set_null(first + static_cast<int64_t>(i));
      } else {
        o[i] = cell.wide == 0 ? cell.sum.value(cell.sum.round()) : float_sum(cell);
      }
    }
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    ahead(i);
    if (restarts != nullptr && restarts[i]) reset(slots[i]);
    update(slots[i], c != nullptr ? read(batch, rows[i]) : Value());
    emit(slots[i], out);
  }
}

void AggStates::merge(uint32_t slot, const AggStates& from, uint32_t from_slot) {
  Cell& c = cells_[slot];
  const Cell& o = from.cells_[from_slot];
  const auto take = [&] {
    c = o;
    if (domain_ == Domain::kString) strings_[slot] = from.strings_[from_slot];
  };
  switch (kind_) {
    case AggKind::kCount:
      c.n += o.n;
      return;
    case AggKind::kSum:
    case AggKind::kMean:
      if (domain_ == Domain::kFloat) return merge_float(slot, from, from_slot);
      if (o.n == 0) return;
      if (c.n == 0) return take();
      c.n += o.n;
      if (kind_ == AggKind::kSum) {
        c.u += o.u;
      } else {
        c.isum += o.isum;
      }
      return;
    case AggKind::kMin:
    case AggKind::kMax: {
      if (o.n == 0) return;
      if (c.n == 0) return take();
      c.n += o.n;
      Value v;
      v.u = o.u;
      if (better(v, c)) c.u = o.u;
      return;
    }
    case AggKind::kFirst:
      if (o.n != 0 && (c.n == 0 || o.at < c.at)) take();
      return;
    case AggKind::kLast:
      if (o.n != 0 && (c.n == 0 || !(o.at < c.at))) take();
      return;
  }
}

void AggStates::merge_all(const AggStates& from, const uint32_t* to, size_t n) {
  if (kind_ == AggKind::kCount) {
    for (size_t i = 0; i < n; ++i) cells_[to[i]].n += from.cells_[i].n;
    return;
  }
  if ((kind_ == AggKind::kSum || kind_ == AggKind::kMean) && domain_ == Domain::kFloat) {
    // fold_exact() inlined for the common cells; merge_float() for the rest (a WideSum on either
    // side, or a sum that stops fitting).
    for (size_t i = 0; i < n; ++i) {
      const Cell& o = from.cells_[i];
      if (o.n == 0 || fold_exact(cells_[to[i]], o)) continue;
      merge_float(to[i], from, static_cast<uint32_t>(i));
    }
    return;
  }
  // The loops below are merge()'s cases with the dispatch on the function and domain taken once
  // per table rather than per cell (combining a window of the song queries folds thousands of
  // cells per slice).
  const Cell* src = from.cells_.data();
  Cell* dst = cells_.data();
  // first, last: the cell whose kept OrderKey `wins` over the other's.
  const auto kept = [&](auto wins) {
    for (size_t i = 0; i < n; ++i) {
      Cell& c = dst[to[i]];
      if (src[i].n != 0 && (c.n == 0 || wins(src[i].at, c.at))) c = src[i];
    }
  };
  // min, max, integer sum and mean: an empty cell takes the other's state; otherwise the counts
  // add and `fold` combines the values.
  const auto counted = [&](auto fold) {
    for (size_t i = 0; i < n; ++i) {
      Cell& c = dst[to[i]];
      const Cell& o = src[i];
      if (o.n == 0) continue;
      if (c.n == 0) {
        c = o;
        continue;
      }
      c.n += o.n;
      fold(c, o);
    }
  };
  const bool min = kind_ == AggKind::kMin;
  switch (domain_ == Domain::kString ? AggKind::kCount : kind_) {  // strings: merge()
    case AggKind::kFirst:
      return kept([](const OrderKey& o, const OrderKey& c) { return o < c; });
    case AggKind::kLast:
      return kept([](const OrderKey& o, const OrderKey& c) { return !(o < c); });
    case AggKind::kMin:
    case AggKind::kMax:
      if (domain_ == Domain::kSigned) {
        return counted([min](Cell& c, const Cell& o) {
          if (min ? o.i < c.i : c.i < o.i) c.i = o.i;
        });
      }
      if (domain_ == Domain::kUnsigned) {
        return counted([min](Cell& c, const Cell& o) {
          if (min ? o.u < c.u : c.u < o.u) c.u = o.u;
        });
      }
      break;  // floats: float_less's NaN and -0.0 rules, in merge()
    case AggKind::kSum:  // integer domains (float sums returned above)
      return counted([](Cell& c, const Cell& o) { c.u += o.u; });
    case AggKind::kMean:
      return counted([](Cell& c, const Cell& o) { c.isum += o.isum; });
    case AggKind::kCount:
      break;
  }
  for (size_t i = 0; i < n; ++i) merge(to[i], from, static_cast<uint32_t>(i));
}

namespace {

// Reads the fields of a saved state (AggStates::save) one by one; `ok` turns false at the first
// field that is missing or malformed (and every later read gives 0).
class StateText {
 public:
  explicit StateText(std::string_view text) : rest_(text) {}
  template <class T>
  T number() {
    const size_t end = std::min(rest_.find(' '), rest_.size());
    T v{};
    const auto [p, ec] = std::from_chars(rest_.data(), rest_.data() + end, v);
    if (ec != std::errc() || p != rest_.data() + end) ok = false;
    rest_.remove_prefix(std::min(end + 1, rest_.size()));
    return ok ? v : T{};
  }
  __int128 wide() {
    const auto hi = number<int64_t>();
    const auto lo = number<uint64_t>();
    return static_cast<__int128>((static_cast<unsigned __int128>(static_cast<uint64_t>(hi)) << 64) | lo);
  }
  bool word(std::string_view w) {
    if (rest_.substr(0, w.size()) != w || (rest_.size() > w.size() && rest_[w.size()] != ' ')) return false;
    rest_.remove_prefix(std::min(w.size() + 1, rest_.size()));
    return true;
  }
  std::string_view rest() const noexcept { return rest_; }
  // Every field read, and nothing left over.
  bool done() const noexcept { return ok && rest_.empty(); }

  bool ok = true;

 private:
  std::string_view rest_;
};

void put(std::string& out, auto v) { out += ' ' + std::to_string(v); }
void put_wide(std::string& out, __int128 v) {
  put(out, static_cast<int64_t>(v >> 64));
  put(out, static_cast<uint64_t>(v));
}

}  // namespace

std::string AggStates::save(uint32_t slot) const {
  const Cell& c = cells_[slot];
  std::string out = std::to_string(c.n);
  if (c.n == 0 && kind_ != AggKind::kCount) return out;
  switch (kind_) {
    case AggKind::kCount:
      return out;
    case AggKind::kSum:
    case AggKind::kMean:
      if (domain_ == Domain::kFloat) {
        put(out, static_cast<unsigned>(c.sum.special));
        if (c.wide != 0) {
          out += " w";
          for (uint64_t limb : wide_[c.wide - 1].limbs()) put(out, limb);
        } else {
          put_wide(out, c.sum.m);
          put(out, c.sum.scale);
        }
      } else if (kind_ == AggKind::kSum) {
        put(out, c.u);
      } else {
        put_wide(out, c.isum);
      }
      return out;
    case AggKind::kMin:
    case AggKind::kMax:
      put(out, c.u);
      return out;
    case AggKind::kFirst:
    case AggKind::kLast:
      put(out, static_cast<unsigned>(c.valid));
      put(out, c.u);
      if (domain_ == Domain::kString) (out += ' ') += strings_[slot];
      return out;
  }
  return out;
}

bool AggStates::load(uint32_t slot, std::string_view text) {
  reset(slot);
  const bool ok = load_fields(slot, text);
  if (!ok) reset(slot);
  return ok;
}

bool AggStates::load_fields(uint32_t slot, std::string_view text) {
  Cell& c = cells_[slot];
  StateText in(text);
  c.n = in.number<int64_t>();
  if (c.n < 0 || (order_sensitive(kind_) && c.n > 1)) return false;
  if (c.n == 0 || kind_ == AggKind::kCount) return in.done();
  switch (kind_) {
    case AggKind::kCount:
      break;
    case AggKind::kSum:
    case AggKind::kMean:
      if (domain_ == Domain::kFloat) {
        const auto special = in.number<unsigned>();
        if (special > 7) return false;
        if (in.word("w")) {
          std::array<uint64_t, WideSum::kLimbs> limbs;
          for (uint64_t& limb : limbs) limb = in.number<uint64_t>();
          wide_of(slot).set_limbs(limbs);
        } else {
          c.sum.m = in.wide();
          c.sum.scale = in.number<int32_t>();
          if (!ExactSum::fits(c.sum.m) || c.sum.scale < -1074) return false;
        }
        c.sum.special = static_cast<uint8_t>(special);
      } else if (kind_ == AggKind::kSum) {
        c.u = in.number<uint64_t>();
      } else {
        c.isum = in.wide();
      }
      return in.done();
    case AggKind::kMin:
    case AggKind::kMax:
      c.u = in.number<uint64_t>();
      return in.done();
    case AggKind::kFirst:
    case AggKind::kLast: {
      const auto valid = in.number<unsigned>();
      if (valid > 1) return false;
      c.valid = valid != 0;
      c.at = OrderKey{INT64_MIN, 0};  // the least: every later tuple comes after it
      if (domain_ == Domain::kString) {
        // The string is what follows the bits' space (possibly nothing, or spaces).
        const std::string_view rest = in.rest();
        const size_t space = rest.find(' ');
        StateText bits(rest.substr(0, space));
        c.u = bits.number<uint64_t>();
        strings_[slot].assign(space == std::string_view::npos ? std::string_view{} : rest.substr(space + 1));
        return in.ok && bits.done();
      }
      c.u = in.number<uint64_t>();
      return in.done();
    }
  }
  return false;
}

void AggStates::emit(uint32_t slot, ColumnBuilder& out) const {
  const Cell& c = cells_[slot];
  switch (kind_) {
    case AggKind::kCount:
      out.append_fixed(&c.n);
      return;
    case AggKind::kSum:
      if (c.n == 0) {
        out.append_null();
      } else if (domain_ == Domain::kFloat) {
        const double sum = float_sum(c);
        out.append_fixed(&sum);
      } else {
        out.append_fixed(&c.u);
      }
      return;
    case AggKind::kMean: {
      if (c.n == 0) {
        out.append_null();
        return;
      }
      const double mean = domain_ == Domain::kFloat ? float_sum(c) / static_cast<double>(c.n)
                                                    : static_cast<double>(c.isum) / static_cast<double>(c.n);
      out.append_fixed(&mean);
      return;
    }
    default:
      break;
  }
  const bool has = (kind_ == AggKind::kMin || kind_ == AggKind::kMax) ? c.n > 0 : c.n > 0 && c.valid;
  if (!has) {
    out.append_null();
    return;
  }
  switch (domain_) {
    case Domain::kString:
      out.append_string(strings_[slot]);
      return;
    case Domain::kFloat:
      if (in_type_.id == TypeId::kFloat32) {
        const auto f = static_cast<float>(c.f);
        out.append_fixed(&f);
      } else {
        out.append_fixed(&c.f);
      }
      return;
    default:
      if (in_type_.id == TypeId::kBool) {
        out.append_bool(c.u != 0);
      } else {
        out.append_fixed(&c.u);  // the low bytes: the value in the column's own width
      }
      return;
  }
}

void AggStates::emit_each(const uint32_t* slots, size_t n, ColumnBuilder& out) const {
  // The fast paths below write whole runs of valid values; a run with a null result, a string,
  // a bool or a float32 takes emit() row by row.
  const auto all_set = [&](bool need_valid) {
    for (size_t i = 0; i < n; ++i) {
      const Cell& c = cells_[slots[i]];
      if (c.n == 0 || (need_valid && !c.valid)) return false;
    }
    return true;
  };
  const auto write = [&](auto value_of) {
    uint8_t* at = out.append_fixed_n(static_cast<int64_t>(n));
    for (size_t i = 0; i < n; ++i) {
      const auto v = value_of(cells_[slots[i]]);
      std::memcpy(at + i * sizeof(v), &v, sizeof(v));
    }
  };
  switch (kind_) {
    case AggKind::kCount:
      write([](const Cell& c) { return c.n; });
      return;
    case AggKind::kSum:
      if (!all_set(false)) break;
      if (domain_ == Domain::kFloat) {
        write([this](const Cell& c) { return float_sum(c); });
      } else {
        write([](const Cell& c) { return c.u; });
      }
      return;
    case AggKind::kMean:
      if (!all_set(false)) break;
      if (domain_ == Domain::kFloat) {
        write([this](const Cell& c) { return float_sum(c) / static_cast<double>(c.n); });
      } else {
        write([](const Cell& c) { return static_cast<double>(c.isum) / static_cast<double>(c.n); });
      }
      return;
    default: {
      const bool first_last = kind_ == AggKind::kFirst || kind_ == AggKind::kLast;
      if (domain_ == Domain::kString || in_type_.id == TypeId::kBool || in_type_.id == TypeId::kFloat32 ||
          !all_set(first_last)) {
        break;
      }
      const size_t w = static_cast<size_t>(in_type_.byte_width());
      uint8_t* at = out.append_fixed_n(static_cast<int64_t>(n));
      for (size_t i = 0; i < n; ++i) std::memcpy(at + i * w, &cells_[slots[i]].u, w);  // the low bytes
      return;
    }
  }
  for (size_t i = 0; i < n; ++i) emit(slots[i], out);
}

}  // namespace pao::window
