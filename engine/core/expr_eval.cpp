// Evaluating a bound expression over a batch: one vectorized kernel call per node, Arrow's null
// semantics.
#include "core/expr_node.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <type_traits>

#include "core/builder.h"
#include "core/error.h"

namespace pao {

using namespace expr_detail;

namespace {


// An intermediate result: a column, or one value standing for every row (a literal, or what was
// computed from literals only). A scalar is a one-row column, so kernels read it as they read
// arrays and only the loops over two arguments tell the cases apart.
struct Datum {
  DataType type;
  Column column;
  bool scalar = false;
  std::shared_ptr<const void> owner;

  int64_t rows(int64_t n) const { return scalar ? 1 : n; }
  bool null_scalar() const { return scalar && !column.is_valid(0); }
};


// The bits [offset, offset + n) of `bits` from bit 0 of the returned pointer. Points into `bits`
// when the offset is a whole number of bytes (and then keeps `owner` alive with `out`); otherwise
// a shifted copy in `out`, so every word-wise loop below works on byte-aligned maps.
const uint8_t* aligned(const uint8_t* bits, int64_t offset, int64_t n, const std::shared_ptr<const void>& owner,
                       BatchMemory& out) {
  if ((offset & 7) == 0) {
    out.share(owner);
    return bits + offset / 8;
  }
  const int64_t nb = bitmap_bytes(n);
  uint8_t* copy = out.allocate(static_cast<size_t>(nb));
  const int shift = static_cast<int>(offset & 7);
  const uint8_t* src = bits + offset / 8;
  const int64_t src_bytes = bitmap_bytes(shift + n);
  for (int64_t i = 0; i < nb; ++i) {
    unsigned v = src[i] >> shift;
    if (i + 1 < src_bytes) v |= static_cast<unsigned>(src[i + 1]) << (8 - shift);
    copy[i] = static_cast<uint8_t>(v);
  }
  return copy;
}

// A bitmap argument of a word-wise loop: `bits` from bit 0, or (bits == nullptr) every bit `fill`.
struct Bits {
  const uint8_t* bits = nullptr;
  bool fill = true;
};

uint64_t load(const Bits& b, int64_t byte, int64_t count) {
  if (b.bits == nullptr) return b.fill ? ~uint64_t{0} : 0;
  uint64_t w = 0;
  std::memcpy(&w, b.bits + byte, static_cast<size_t>(count));
  return w;
}

// out = f(args...) over the bytes of n-bit maps, 64 bits at a time. Bits of the last byte past n
// are unspecified, as Arrow allows.
template <class F, class... B>
void bitwise(uint8_t* out, int64_t n, F f, const B&... args) {
  const int64_t nb = bitmap_bytes(n);
  int64_t i = 0;
  for (; i + 8 <= nb; i += 8) {
    const uint64_t w = f(load(args, i, 8)...);
    std::memcpy(out + i, &w, 8);
  }
  if (i < nb) {
    const uint64_t w = f(load(args, i, nb - i)...);
    std::memcpy(out + i, &w, static_cast<size_t>(nb - i));
  }
}

// Set bits among the first n of a byte-aligned map.
int64_t count_set(const uint8_t* bits, int64_t n) {
  int64_t count = 0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    uint64_t w;
    std::memcpy(&w, bits + i / 8, 8);
    count += popcount(w);
  }
  for (; i < n; ++i) count += get_bit(bits, i);
  return count;
}

// The validity of an array argument, aligned; nullptr when it has no nulls. Scalars: nullptr
// (callers deal with a null scalar before).
const uint8_t* validity_of(const Datum& d, int64_t n, BatchMemory& out) {
  if (d.scalar || !d.column.may_have_nulls()) return nullptr;
  return aligned(d.column.validity, d.column.offset, n, d.owner, out);
}

// A bool argument's values (or validity) as a word-wise operand: scalars broadcast their bit.
Bits value_bits(const Datum& d, int64_t n, BatchMemory& out) {
  if (d.scalar) return {nullptr, get_bit(static_cast<const uint8_t*>(d.column.values), d.column.offset)};
  return {aligned(static_cast<const uint8_t*>(d.column.values), d.column.offset, n, d.owner, out), true};
}
Bits validity_bits(const Datum& d, int64_t n, BatchMemory& out) {
  if (d.scalar) return {nullptr, d.column.is_valid(0)};
  const uint8_t* v = validity_of(d, n, out);
  return {v, true};
}

// The validity of a result that is null where either argument is; nullptr when neither has nulls.
const uint8_t* both_valid(const Datum& a, const Datum& b, int64_t n, BatchMemory& out) {
  const uint8_t* va = validity_of(a, n, out);
  const uint8_t* vb = validity_of(b, n, out);
  if (va == nullptr || vb == nullptr) return va != nullptr ? va : vb;
  uint8_t* both = out.allocate(static_cast<size_t>(bitmap_bytes(n)));
  bitwise(both, n, [](uint64_t x, uint64_t y) { return x & y; }, Bits{va}, Bits{vb});
  return both;
}

// Wraps the buffers of a computed column into a Datum; counts its nulls.
Datum finish(DataType type, bool scalar, int64_t rows, const void* values, const uint8_t* data,
             const uint8_t* validity, std::shared_ptr<BatchMemory> owned) {
  Datum d;
  d.type = std::move(type);
  d.scalar = scalar;
  d.column.values = values;
  d.column.data = data;
  d.column.null_count = 0;
  if (validity != nullptr) {
    const int64_t nulls = rows - count_set(validity, rows);
    if (nulls > 0) {
      d.column.validity = validity;
      d.column.null_count = nulls;
    }
  }
  d.owner = std::move(owned);
  return d;
}

// A result of `rows` nulls (a scalar when `scalar`): zeroed values, zeroed validity.
Datum all_null(const DataType& type, bool scalar, int64_t rows) {
  auto owned = std::make_shared<BatchMemory>();
  const size_t value_bytes = type.layout() == Layout::kFixed ? static_cast<size_t>(rows * type.byte_width())
                             : type.layout() == Layout::kBits ? static_cast<size_t>(bitmap_bytes(rows))
                             : type.layout() == Layout::kOffsets32 ? static_cast<size_t>(rows + 1) * 4
                                                                   : static_cast<size_t>(rows + 1) * 8;
  const void* values = owned->allocate_zeroed(value_bytes);
  const uint8_t* data = is_string(type.id) ? owned->allocate_zeroed(1) : nullptr;
  const uint8_t* validity = owned->allocate_zeroed(static_cast<size_t>(bitmap_bytes(rows)));
  return finish(type, scalar, rows, values, data, validity, std::move(owned));
}

// Calls f(std::type_identity<T>{}) with T the C++ type a fixed-width type is stored as.
template <class F>
void visit_fixed(const DataType& type, F&& f) {
  switch (type.id) {
    case TypeId::kInt8: return f(std::type_identity<int8_t>{});
    case TypeId::kInt16: return f(std::type_identity<int16_t>{});
    case TypeId::kInt32:
    case TypeId::kDate32: return f(std::type_identity<int32_t>{});
    case TypeId::kInt64:
    case TypeId::kTimestamp: return f(std::type_identity<int64_t>{});
    case TypeId::kUInt8: return f(std::type_identity<uint8_t>{});
    case TypeId::kUInt16: return f(std::type_identity<uint16_t>{});
    case TypeId::kUInt32: return f(std::type_identity<uint32_t>{});
    case TypeId::kUInt64: return f(std::type_identity<uint64_t>{});
    case TypeId::kFloat32: return f(std::type_identity<float>{});
    case TypeId::kFloat64: return f(std::type_identity<double>{});
    default: break;
  }
  throw Error(ErrorKind::kUnsupportedType, "no fixed-width kernel for " + type.to_string());
}

// Integer arithmetic wraps: it runs in an unsigned type at least as wide as unsigned int (narrower
// ones would be promoted to int, whose overflow is undefined), and converting back is modular.
template <class T>
using Wide = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <class T>
T add(T a, T b) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<Wide<T>>(a) + static_cast<Wide<T>>(b));
  else return a + b;
}
template <class T>
T sub(T a, T b) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<Wide<T>>(a) - static_cast<Wide<T>>(b));
  else return a - b;
}
template <class T>
T mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<Wide<T>>(a) * static_cast<Wide<T>>(b));
  else return a * b;
}
template <class T>
T neg(T a) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(Wide<T>{0} - static_cast<Wide<T>>(a));
  else return -a;
}

// Floor division and its remainder (the remainder takes the divisor's sign). Integers: b != 0;
// the one overflowing quotient, min / -1, wraps. Floats: numpy's floor_divide and mod.
template <class T>
T floor_div(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (b == 0) return a / b;
    const T mod = std::fmod(a, b);
    T div = (a - mod) / b;
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
    if (div == 0) return std::copysign(T(0), a / b);
    // (a - mod) / b is an integer up to rounding: round it to the nearest one.
    T floor = std::floor(div);
    if (div - floor > T(0.5)) floor += 1;
    return floor;
  } else if constexpr (std::is_signed_v<T>) {
    if (b == -1) return neg(a);
    const T q = static_cast<T>(a / b);
    return static_cast<T>((a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q);
  } else {
    return static_cast<T>(a / b);
  }
}
template <class T>
T floor_mod(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (b == 0) return std::fmod(a, b);
    T mod = std::fmod(a, b);
    if (mod == 0) return std::copysign(T(0), b);
    if ((b < 0) != (mod < 0)) mod += b;
    return mod;
  } else if constexpr (std::is_signed_v<T>) {
    if (b == -1) return 0;
    const T r = static_cast<T>(a % b);
    return static_cast<T>((r != 0 && ((r < 0) != (b < 0))) ? r + b : r);
  } else {
    return static_cast<T>(a % b);
  }
}

// out[i] = f(a[i], b[i]) over `rows` values, a scalar argument read once.
template <class T, class R, class F>
void map2(const Datum& a, const Datum& b, int64_t rows, R* out, F f) {
  const T* x = a.column.typed<T>();
  const T* y = b.column.typed<T>();
  if (a.scalar && !b.scalar) {
    const T s = x[0];
    for (int64_t i = 0; i < rows; ++i) out[i] = f(s, y[i]);
  } else if (b.scalar && !a.scalar) {
    const T s = y[0];
    for (int64_t i = 0; i < rows; ++i) out[i] = f(x[i], s);
  } else {
    for (int64_t i = 0; i < rows; ++i) out[i] = f(x[i], y[i]);
  }
}

// Packs get(0..rows) into a bitmap, eight results per byte.
template <class Get>
void pack_bits(int64_t rows, uint8_t* out, Get get) {
  int64_t i = 0;
  for (; i + 8 <= rows; i += 8) {
    unsigned byte = 0;
    for (int j = 0; j < 8; ++j) byte |= static_cast<unsigned>(get(i + j)) << j;
    out[i >> 3] = static_cast<uint8_t>(byte);
  }
  if (i < rows) {
    unsigned byte = 0;
    for (int j = 0; i + j < rows; ++j) byte |= static_cast<unsigned>(get(i + j)) << j;
    out[i >> 3] = static_cast<uint8_t>(byte);
  }
}

// Calls f with the comparison function object of a comparison op.
template <class F>
void visit_comparison(Op op, F&& f) {
  switch (op) {
    case Op::kEq: return f(std::equal_to<>{});
    case Op::kNe: return f(std::not_equal_to<>{});
    case Op::kLt: return f(std::less<>{});
    case Op::kLe: return f(std::less_equal<>{});
    case Op::kGt: return f(std::greater<>{});
    default: return f(std::greater_equal<>{});
  }
}

// The rows of a string column (or scalar) as string_views.
template <class O>
struct Strings {
  const O* offsets;
  const char* data;
  bool scalar;
  explicit Strings(const Datum& d)
      : offsets(d.column.typed<O>()), data(reinterpret_cast<const char*>(d.column.data)), scalar(d.scalar) {}
  std::string_view operator[](int64_t i) const {
    if (scalar) i = 0;
    return {data + offsets[i], static_cast<size_t>(offsets[i + 1] - offsets[i])};
  }
};

// Calls f(Strings<O>) for a string datum of either offset width.
template <class F>
void visit_strings(const Datum& d, F&& f) {
  if (d.type.id == TypeId::kUtf8) return f(Strings<int32_t>(d));
  return f(Strings<int64_t>(d));
}

// sizeof(W) bytes at `p`, any alignment (one move).
template <class W>
W load(const char* p) noexcept {
  W w;
  std::memcpy(&w, p, sizeof(W));
  return w;
}

// `row` is the row of the batch being evaluated; the pipeline runtime names the operator and the
// row within its input (core/error.h).
[[noreturn]] void row_error(const Node& node, const std::string& what, int64_t row) {
  throw Error(ErrorKind::kInvalidInput, what + " in " + node.text, row);
}

// The first row where `bad` holds among the non-null rows of a result, if any.
template <class Bad>
std::optional<int64_t> first_bad_row(int64_t rows, const uint8_t* validity, Bad bad) {
  for (int64_t i = 0; i < rows; ++i) {
    if ((validity == nullptr || get_bit(validity, i)) && bad(i)) return i;
  }
  return std::nullopt;
}

struct Context {
  const Batch& batch;
  int64_t n;
};

Datum eval(const NodePtr& node, const Context& ctx);

// ---- arithmetic and comparisons

Datum eval_arithmetic(const Node& node, const Datum& a, const Datum& b, int64_t n) {
  const bool scalar = a.scalar && b.scalar;
  const int64_t rows = scalar ? 1 : n;
  if (a.null_scalar() || b.null_scalar()) return all_null(node.type, scalar, rows);
  auto owned = std::make_shared<BatchMemory>();
  const uint8_t* validity = both_valid(a, b, rows, *owned);
  uint8_t* values = owned->allocate(static_cast<size_t>(rows * a.type.byte_width()));
  visit_fixed(a.type, [&]<class T>(std::type_identity<T>) {
    T* out = reinterpret_cast<T*>(values);
    switch (node.op) {
      case Op::kAdd: map2<T>(a, b, rows, out, add<T>); break;
      case Op::kSub: map2<T>(a, b, rows, out, sub<T>); break;
      case Op::kMul: map2<T>(a, b, rows, out, mul<T>); break;
      case Op::kDiv: map2<T>(a, b, rows, out, [](T x, T y) { return x / y; }); break;
      default: {
        const bool is_div = node.op == Op::kFloorDiv;
        if constexpr (std::is_integral_v<T>) {
          // A zero divisor is an error only in a row that is not null; compute with a safe
          // divisor first, then look for such a row if any divisor was zero.
          bool zero = false;
          map2<T>(a, b, rows, out, [&](T x, T y) {
            zero |= y == 0;
            const T d = y == 0 ? T(1) : y;
            return is_div ? floor_div(x, d) : floor_mod(x, d);
          });
          if (zero) {
            const T* y = b.column.typed<T>();
            if (auto row = first_bad_row(rows, validity, [&](int64_t i) { return y[b.scalar ? 0 : i] == 0; })) {
              row_error(node, "integer division by zero", *row);
            }
          }
        } else {
          map2<T>(a, b, rows, out, [&](T x, T y) { return is_div ? floor_div(x, y) : floor_mod(x, y); });
        }
      }
    }
  });
  return finish(node.type, scalar, rows, values, nullptr, validity, std::move(owned));
}

Datum eval_comparison(const Node& node, const Datum& a, const Datum& b, int64_t n) {
  const bool scalar = a.scalar && b.scalar;
  const int64_t rows = scalar ? 1 : n;
  if (a.null_scalar() || b.null_scalar()) return all_null(node.type, scalar, rows);
  auto owned = std::make_shared<BatchMemory>();
  const uint8_t* validity = both_valid(a, b, rows, *owned);
  uint8_t* out = owned->allocate(static_cast<size_t>(bitmap_bytes(rows)));
  if (a.type.id == TypeId::kBool) {
    // On bits: a == b is ~(a ^ b), a < b is ~a & b (false < true), and so on.
    const Bits x = value_bits(a, rows, *owned);
    const Bits y = value_bits(b, rows, *owned);
    switch (node.op) {
      case Op::kEq: bitwise(out, rows, [](uint64_t p, uint64_t q) { return ~(p ^ q); }, x, y); break;
      case Op::kNe: bitwise(out, rows, [](uint64_t p, uint64_t q) { return p ^ q; }, x, y); break;
      case Op::kLt: bitwise(out, rows, [](uint64_t p, uint64_t q) { return ~p & q; }, x, y); break;
      case Op::kLe: bitwise(out, rows, [](uint64_t p, uint64_t q) { return ~p | q; }, x, y); break;
      case Op::kGt: bitwise(out, rows, [](uint64_t p, uint64_t q) { return p & ~q; }, x, y); break;
      default: bitwise(out, rows, [](uint64_t p, uint64_t q) { return p | ~q; }, x, y); break;
    }
  } else if (is_string(a.type.id) && (node.op == Op::kEq || node.op == Op::kNe) && a.scalar != b.scalar) {
    // A column against one string (event == "view"): lengths first, bytes only when they match,
    // and a short literal compared byte by byte inline rather than through memcmp.
    const Datum& column = a.scalar ? b : a;
    const Datum& literal = a.scalar ? a : b;
    const bool eq = node.op == Op::kEq;
    visit_strings(literal, [&](const auto& l) {
      const std::string_view want = l[0];
      visit_strings(column, [&](const auto& x) {
        const auto* offsets = x.offsets;
        const size_t n = want.size();
        if (n >= 4 && n <= 16) {
          // Without a branch on the row: two fixed-size loads that overlap in the middle cover the
          // n bytes; a row of another length compares the literal with itself (its pointer
          // selected instead of the row's), so no load leaves the row's bytes or the literal's.
          auto words = [&]<class W>(std::type_identity<W>) {
            const W head = load<W>(want.data());
            const W tail = load<W>(want.data() + n - sizeof(W));
            pack_bits(rows, out, [&](int64_t i) {
              const auto begin = offsets[i];
              const bool len_ok = static_cast<size_t>(offsets[i + 1] - begin) == n;
              const char* p = len_ok ? x.data + begin : want.data();
              const bool same = len_ok & (load<W>(p) == head) & (load<W>(p + n - sizeof(W)) == tail);
              return same == eq;
            });
          };
          if (n >= 8) {
            words(std::type_identity<uint64_t>{});
          } else {
            words(std::type_identity<uint32_t>{});
          }
        } else if (n < 4) {
          pack_bits(rows, out, [&](int64_t i) {
            const auto begin = offsets[i];
            if (static_cast<size_t>(offsets[i + 1] - begin) != n) return !eq;
            const char* p = x.data + begin;
            bool same = true;
            for (size_t k = 0; k < n; ++k) same &= p[k] == want[k];
            return same == eq;
          });
        } else {
          pack_bits(rows, out, [&](int64_t i) {
            const auto begin = offsets[i];
            const bool same = static_cast<size_t>(offsets[i + 1] - begin) == want.size() &&
                              std::memcmp(x.data + begin, want.data(), want.size()) == 0;
            return same == eq;
          });
        }
      });
    });
  } else if (is_string(a.type.id)) {
    visit_comparison(node.op, [&](auto cmp) {
      visit_strings(a, [&](const auto& x) {
        visit_strings(b, [&](const auto& y) { pack_bits(rows, out, [&](int64_t i) { return cmp(x[i], y[i]); }); });
      });
    });
  } else {
    visit_comparison(node.op, [&](auto cmp) {
      visit_fixed(a.type, [&]<class T>(std::type_identity<T>) {
        const T* x = a.column.typed<T>();
        const T* y = b.column.typed<T>();
        if (a.scalar && !b.scalar) {
          const T s = x[0];
          pack_bits(rows, out, [&](int64_t i) { return cmp(s, y[i]); });
        } else if (b.scalar && !a.scalar) {
          const T s = y[0];
          pack_bits(rows, out, [&](int64_t i) { return cmp(x[i], s); });
        } else {
          pack_bits(rows, out, [&](int64_t i) { return cmp(x[i], y[i]); });
        }
      });
    });
  }
  return finish(node.type, scalar, rows, out, nullptr, validity, std::move(owned));
}

// Kleene logic: false & null = false, true | null = true, otherwise null wins. A value bit under
// a null is arbitrary; the validity formulas never let it decide a valid result.
Datum eval_logic(const Node& node, const Datum& a, const Datum& b, int64_t n) {
  const bool scalar = a.scalar && b.scalar;
  const int64_t rows = scalar ? 1 : n;
  auto owned = std::make_shared<BatchMemory>();
  const Bits x = value_bits(a, rows, *owned);
  const Bits y = value_bits(b, rows, *owned);
  const Bits vx = validity_bits(a, rows, *owned);
  const Bits vy = validity_bits(b, rows, *owned);
  const auto nb = static_cast<size_t>(bitmap_bytes(rows));
  uint8_t* values = owned->allocate(nb);
  uint8_t* validity = owned->allocate(nb);
  if (node.op == Op::kAnd) {
    bitwise(values, rows, [](uint64_t p, uint64_t q) { return p & q; }, x, y);
    // valid when both are, or when either is a valid false
    bitwise(validity, rows, [](uint64_t p, uint64_t q, uint64_t vp, uint64_t vq) {
      return (vp & vq) | (vp & ~p) | (vq & ~q);
    }, x, y, vx, vy);
  } else {
    bitwise(values, rows, [](uint64_t p, uint64_t q) { return p | q; }, x, y);
    // valid when both are, or when either is a valid true
    bitwise(validity, rows, [](uint64_t p, uint64_t q, uint64_t vp, uint64_t vq) {
      return (vp & vq) | (vp & p) | (vq & q);
    }, x, y, vx, vy);
  }
  return finish(node.type, scalar, rows, values, nullptr, validity, std::move(owned));
}

// ---- unary operations and string predicates

Datum eval_unary(const Node& node, const Datum& a, int64_t n) {
  const int64_t rows = a.rows(n);
  auto owned = std::make_shared<BatchMemory>();
  if (node.op == Op::kIsNull || node.op == Op::kIsNotNull) {
    uint8_t* out = owned->allocate(static_cast<size_t>(bitmap_bytes(rows)));
    const Bits v = validity_bits(a, rows, *owned);
    if (node.op == Op::kIsNull) bitwise(out, rows, [](uint64_t p) { return ~p; }, v);
    else bitwise(out, rows, [](uint64_t p) { return p; }, v);
    return finish(node.type, a.scalar, rows, out, nullptr, nullptr, std::move(owned));
  }
  const uint8_t* validity = validity_of(a, rows, *owned);
  if (a.null_scalar()) return all_null(node.type, true, 1);
  if (node.op == Op::kNot) {
    uint8_t* out = owned->allocate(static_cast<size_t>(bitmap_bytes(rows)));
    bitwise(out, rows, [](uint64_t p) { return ~p; }, value_bits(a, rows, *owned));
    return finish(node.type, a.scalar, rows, out, nullptr, validity, std::move(owned));
  }
  uint8_t* values = owned->allocate(static_cast<size_t>(rows * a.type.byte_width()));
  visit_fixed(a.type, [&]<class T>(std::type_identity<T>) {
    const T* x = a.column.typed<T>();
    T* out = reinterpret_cast<T*>(values);
    for (int64_t i = 0; i < rows; ++i) out[i] = neg(x[i]);
  });
  return finish(node.type, a.scalar, rows, values, nullptr, validity, std::move(owned));
}

Datum eval_string_predicate(const Node& node, const Datum& a, int64_t n) {
  const int64_t rows = a.rows(n);
  if (a.null_scalar()) return all_null(node.type, true, 1);
  auto owned = std::make_shared<BatchMemory>();
  const uint8_t* validity = validity_of(a, rows, *owned);
  uint8_t* out = owned->allocate(static_cast<size_t>(bitmap_bytes(rows)));
  const std::string_view pattern = node.bytes;
  visit_strings(a, [&](const auto& s) {
    if (node.kind == Node::Kind::kContains) {
      pack_bits(rows, out, [&](int64_t i) { return s[i].find(pattern) != std::string_view::npos; });
    } else {
      pack_bits(rows, out, [&](int64_t i) { return s[i].substr(0, pattern.size()) == pattern; });
    }
  });
  return finish(node.type, a.scalar, rows, out, nullptr, validity, std::move(owned));
}

// ---- casts

// Whether a float truncated toward zero fits the integer type R.
template <class R, class T>
bool fits(T x) {
  const double t = std::trunc(static_cast<double>(x));  // NaN fails both comparisons
  // Both bounds are powers of two (or zero), exact in a double.
  const double lo = static_cast<double>(std::numeric_limits<R>::min());
  const double hi = 2.0 * static_cast<double>(std::numeric_limits<R>::max() / 2 + 1);
  return t >= lo && t < hi;
}

template <class T>
void append_number(ColumnBuilder& b, T x) {
  if constexpr (std::is_floating_point_v<T>) {
    b.append_string(python_float(static_cast<double>(x)));
  } else {
    char buf[32];
    const auto res = std::to_chars(buf, buf + sizeof buf, x);
    b.append_string(std::string_view(buf, static_cast<size_t>(res.ptr - buf)));
  }
}

// A string column built value by value: conversions to and from strings are not a hot path.
Datum finish_builder(ColumnBuilder& b, bool scalar) {
  auto storage = std::make_shared<BatchMemory>();
  Datum d;
  d.type = b.type();
  d.column = b.finish(*storage);
  d.scalar = scalar;
  d.owner = std::move(storage);
  return d;
}

Datum cast_to_string(const Node& node, const Datum& a, int64_t rows) {
  ColumnBuilder b(node.type);
  if (is_string(a.type.id)) {
    visit_strings(a, [&](const auto& s) {
      for (int64_t i = 0; i < rows; ++i) a.column.is_valid(i) ? b.append_string(s[i]) : b.append_null();
    });
  } else if (a.type.id == TypeId::kBool) {
    const auto* bits = static_cast<const uint8_t*>(a.column.values);
    for (int64_t i = 0; i < rows; ++i) {
      if (!a.column.is_valid(i)) b.append_null();
      else b.append_string(get_bit(bits, a.column.offset + i) ? "true" : "false");
    }
  } else {
    visit_fixed(a.type, [&]<class T>(std::type_identity<T>) {
      const T* x = a.column.typed<T>();
      for (int64_t i = 0; i < rows; ++i) a.column.is_valid(i) ? append_number(b, x[i]) : b.append_null();
    });
  }
  return finish_builder(b, a.scalar);
}

Datum cast_from_string(const Node& node, const Datum& a, int64_t rows) {
  auto owned = std::make_shared<BatchMemory>();
  const uint8_t* validity = validity_of(a, rows, *owned);
  uint8_t* values = owned->allocate(static_cast<size_t>(rows * node.type.byte_width()));
  visit_strings(a, [&](const auto& s) {
    visit_fixed(node.type, [&]<class R>(std::type_identity<R>) {
      R* out = reinterpret_cast<R*>(values);
      for (int64_t i = 0; i < rows; ++i) {
        out[i] = R{};
        if (validity != nullptr && !get_bit(validity, i)) continue;
        const std::string_view text = s[i];
        const char* end = text.data() + text.size();
        // from_chars takes no leading '+' (Python's int() and float() do); a float parse also
        // reads "inf" and "nan"
        const bool plus = text.size() > 1 && text[0] == '+' && text[1] != '-';
        const char* begin = text.data() + (plus ? 1 : 0);
        const auto res = std::from_chars(begin, end, out[i]);
        if (res.ec != std::errc() || res.ptr != end || text.empty()) {
          row_error(node, "cannot parse " + quote(text) + " as " + node.type.to_string(), i);
        }
      }
    });
  });
  return finish(node.type, a.scalar, rows, values, nullptr, validity, std::move(owned));
}

Datum eval_cast(const Node& node, const Datum& a, int64_t n) {
  const DataType& to = node.type;
  if (same_storage(a.type, to)) {  // e.g. timestamp -> int64: no value changes
    Datum relabeled = a;
    relabeled.type = to;
    return relabeled;
  }
  if (a.null_scalar()) return all_null(to, true, 1);
  const int64_t rows = a.rows(n);
  if (is_string(to.id)) return cast_to_string(node, a, rows);
  if (is_string(a.type.id)) return cast_from_string(node, a, rows);

  auto owned = std::make_shared<BatchMemory>();
  const uint8_t* validity = validity_of(a, rows, *owned);
  if (to.id == TypeId::kBool) {
    uint8_t* out = owned->allocate(static_cast<size_t>(bitmap_bytes(rows)));
    visit_fixed(a.type, [&]<class T>(std::type_identity<T>) {
      const T* x = a.column.typed<T>();
      pack_bits(rows, out, [&](int64_t i) { return x[i] != T(0); });
    });
    return finish(to, a.scalar, rows, out, nullptr, validity, std::move(owned));
  }
  uint8_t* values = owned->allocate(static_cast<size_t>(rows * to.byte_width()));
  if (a.type.id == TypeId::kBool) {
    const auto* bits = static_cast<const uint8_t*>(a.column.values);
    visit_fixed(to, [&]<class R>(std::type_identity<R>) {
      R* out = reinterpret_cast<R*>(values);
      for (int64_t i = 0; i < rows; ++i) out[i] = static_cast<R>(get_bit(bits, a.column.offset + i));
    });
  } else if (a.type.id == TypeId::kTimestamp && to.id == TypeId::kTimestamp) {
    // Unit scaling: to a finer unit multiplies (wrapping), to a coarser one truncates toward zero.
    const int steps = static_cast<int>(to.unit) - static_cast<int>(a.type.unit);
    int64_t factor = 1;
    for (int i = 0; i < std::abs(steps); ++i) factor *= 1000;
    const int64_t* x = a.column.typed<int64_t>();
    auto* out = reinterpret_cast<int64_t*>(values);
    for (int64_t i = 0; i < rows; ++i) out[i] = steps > 0 ? mul<int64_t>(x[i], factor) : x[i] / factor;
  } else {
    visit_fixed(a.type, [&]<class T>(std::type_identity<T>) {
      visit_fixed(to, [&]<class R>(std::type_identity<R>) {
        const T* x = a.column.typed<T>();
        R* out = reinterpret_cast<R*>(values);
        if constexpr (std::is_floating_point_v<T> && std::is_integral_v<R>) {
          // Out of range is undefined in C++: convert only what fits, then report the first
          // non-null value that did not.
          bool all_fit = true;
          for (int64_t i = 0; i < rows; ++i) {
            const bool ok = fits<R>(x[i]);
            all_fit &= ok;
            out[i] = ok ? static_cast<R>(x[i]) : R{};
          }
          if (!all_fit) {
            if (auto row = first_bad_row(rows, validity, [&](int64_t i) { return !fits<R>(x[i]); })) {
              row_error(node, "cannot cast " + python_float(static_cast<double>(x[*row])) + " to " + to.to_string(),
                        *row);
            }
          }
        } else {
          // Integer to integer is modular (C++20), integer to float rounds, float to float rounds.
          for (int64_t i = 0; i < rows; ++i) out[i] = static_cast<R>(x[i]);
        }
      });
    });
  }
  return finish(to, a.scalar, rows, values, nullptr, validity, std::move(owned));
}

// One value for every row, as a column of n rows.
Datum broadcast(const Datum& d, int64_t n) {
  if (d.null_scalar()) return all_null(d.type, false, n);
  auto owned = std::make_shared<BatchMemory>();
  const void* values = nullptr;
  const uint8_t* data = nullptr;
  switch (d.type.layout()) {
    case Layout::kBits: {
      uint8_t* bits = owned->allocate(static_cast<size_t>(bitmap_bytes(n)));
      std::memset(bits, get_bit(static_cast<const uint8_t*>(d.column.values), d.column.offset) ? 0xFF : 0,
                  static_cast<size_t>(bitmap_bytes(n)));
      values = bits;
      break;
    }
    case Layout::kFixed: {
      uint8_t* out = owned->allocate(static_cast<size_t>(n * d.type.byte_width()));
      visit_fixed(d.type, [&]<class T>(std::type_identity<T>) {
        std::fill_n(reinterpret_cast<T*>(out), n, d.column.typed<T>()[0]);
      });
      values = out;
      break;
    }
    default: {
      ColumnBuilder b(d.type);
      visit_strings(d, [&](const auto& s) {
        for (int64_t i = 0; i < n; ++i) b.append_string(s[0]);
      });
      return finish_builder(b, false);
    }
  }
  return finish(d.type, false, n, values, data, nullptr, std::move(owned));
}

Datum eval(const NodePtr& node, const Context& ctx) {
  const Node& nd = *node;
  switch (nd.kind) {
    case Node::Kind::kColumn: {
      Datum d;
      d.type = nd.type;
      d.column = ctx.batch.column(nd.column);
      d.owner = ctx.batch.owner();
      return d;
    }
    case Node::Kind::kLiteral: {
      Datum d;
      d.type = nd.type;
      d.column = nd.literal_column();
      d.scalar = true;
      d.owner = node;  // the column points into the node
      return d;
    }
    case Node::Kind::kCast:
      return eval_cast(nd, eval(nd.args[0], ctx), ctx.n);
    case Node::Kind::kUnary:
      return eval_unary(nd, eval(nd.args[0], ctx), ctx.n);
    case Node::Kind::kContains:
    case Node::Kind::kStartsWith:
      return eval_string_predicate(nd, eval(nd.args[0], ctx), ctx.n);
    case Node::Kind::kBinary:
      break;
  }
  const Datum a = eval(nd.args[0], ctx);
  const Datum b = eval(nd.args[1], ctx);
  switch (nd.op) {
    case Op::kAnd:
    case Op::kOr: return eval_logic(nd, a, b, ctx.n);
    case Op::kEq:
    case Op::kNe:
    case Op::kLt:
    case Op::kLe:
    case Op::kGt:
    case Op::kGe: return eval_comparison(nd, a, b, ctx.n);
    default: return eval_arithmetic(nd, a, b, ctx.n);
  }
}

}  // namespace

Value evaluate(const BoundExpr& bound, const Batch& batch) {
  const Context ctx{batch, batch.num_rows()};
  Datum d = eval(bound.root(), ctx);
  if (d.scalar) d = broadcast(d, ctx.n);
  Value v;
  v.type = bound.type();  // relabels (timestamp + int) keep the bound type
  v.length = ctx.n;
  v.column = d.column;
  v.owner = std::move(d.owner);
  return v;
}

const uint64_t* true_bits(const Value& value, BatchMemory& scratch) {
  const int64_t n = value.length;
  const uint8_t* values =
      aligned(static_cast<const uint8_t*>(value.column.values), value.column.offset, n, value.owner, scratch);
  const uint8_t* validity = value.column.may_have_nulls()
                                ? aligned(value.column.validity, value.column.offset, n, value.owner, scratch)
                                : nullptr;
  const int64_t words = (n + 63) / 64;
  auto* out = reinterpret_cast<uint64_t*>(scratch.allocate(static_cast<size_t>(std::max<int64_t>(words, 1)) * 8));
  for (int64_t word = 0; word < words; ++word) {
    const int64_t base = word * 64;
    const int64_t count = std::min<int64_t>(64, n - base);
    const int64_t bytes = bitmap_bytes(count);
    uint64_t w = load(Bits{values}, base / 8, bytes) & load(Bits{validity}, base / 8, bytes);
    if (count < 64) w &= (uint64_t{1} << count) - 1;
    out[word] = w;
  }
  return out;
}

}  // namespace pao
