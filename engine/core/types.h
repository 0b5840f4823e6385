#pragma once
// The engine's logical types and schemas. Plain C++: nothing here knows the Arrow C structs;
// engine/arrow translates between these and Arrow format strings.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pao {

enum class TypeId : uint8_t {
  kBool,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUInt8,
  kUInt16,
  kUInt32,
  kUInt64,
  kFloat32,
  kFloat64,
  kDate32,
  kTimestamp,
  kUtf8,
  kLargeUtf8,
};

enum class TimeUnit : uint8_t { kSecond, kMilli, kMicro, kNano };

// How a column's values are laid out in memory; every kernel switches on this, not on TypeId.
enum class Layout : uint8_t {
  kBits,       // bool: one bit per value
  kFixed,      // fixed-width values of byte_width() bytes
  kOffsets32,  // utf8: int32 offsets + bytes
  kOffsets64,  // large_utf8: int64 offsets + bytes
};

struct DataType {
  TypeId id = TypeId::kInt64;
  TimeUnit unit = TimeUnit::kSecond;  // only for kTimestamp
  std::string timezone;               // only for kTimestamp; empty = naive

  // Inline, both: the keyed operators read a value (a row's time, a key) per row through them, and
  // a call into another unit per value was a visible share of a keyed pipeline's time.
  Layout layout() const noexcept {
    switch (id) {
      case TypeId::kBool: return Layout::kBits;
      case TypeId::kUtf8: return Layout::kOffsets32;
      case TypeId::kLargeUtf8: return Layout::kOffsets64;
      default: return Layout::kFixed;
    }
  }
  // Bytes per value for Layout::kFixed, 0 otherwise.
  int byte_width() const noexcept {
    switch (id) {
      case TypeId::kInt8:
      case TypeId::kUInt8: return 1;
      case TypeId::kInt16:
      case TypeId::kUInt16: return 2;
      case TypeId::kInt32:
      case TypeId::kUInt32:
      case TypeId::kFloat32:
      case TypeId::kDate32: return 4;
      case TypeId::kInt64:
      case TypeId::kUInt64:
      case TypeId::kFloat64:
      case TypeId::kTimestamp: return 8;
      default: return 0;
    }
  }
  // True for the types a time column may have: timestamp, date32, int32, int64.
  bool is_temporal_key() const noexcept;
  // pyarrow's spelling, e.g. "timestamp[ms, tz=UTC]", used in every error message.
  std::string to_string() const;

  friend bool operator==(const DataType&, const DataType&) = default;
};

// The inverse of DataType::to_string: a type from pyarrow's spelling ("int64", "double",
// "timestamp[ms, tz=UTC]", ...), also accepting the aliases "float32", "float64", "boolean",
// "utf8", "large_utf8" and "date32". Nullopt for anything else.
std::optional<DataType> parse_type_name(std::string_view name);

// Integer types: int8..int64, and uint8..uint64.
bool is_signed_integer(TypeId id) noexcept;
bool is_unsigned_integer(TypeId id) noexcept;
// utf8 and large_utf8.
bool is_string(TypeId id) noexcept;
// Types whose values are two's-complement integers (sign-extended when widened): the signed
// integers, date32 and timestamp.
bool is_signed_storage(TypeId id) noexcept;

struct Field {
  std::string name;
  DataType type;
  bool nullable = true;
};

struct Schema {
  std::vector<Field> fields;

  std::optional<size_t> find(std::string_view name) const;
  // "a: int64, b: string" for messages.
  std::string to_string() const;
};

// The first way `actual` differs from `expected` in column names, order or types (nullability
// aside), worded for an error message such as "column 'v' has type int32; expected double", or
// nullopt when they match.
std::optional<std::string> schema_difference(const Schema& expected, const Schema& actual);

// Renders a time value for an error message: timestamps and dates as ISO-8601 (UTC), integers as
// they are. The raw integer is always included so users can search their data for it.
std::string format_time_value(int64_t value, const DataType& type);

}  // namespace pao
