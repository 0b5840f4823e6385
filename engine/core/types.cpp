#include "core/types.h"

#include <cstdio>
#include <utility>

namespace pao {

bool DataType::is_temporal_key() const noexcept {
  return id == TypeId::kTimestamp || id == TypeId::kDate32 || id == TypeId::kInt32 ||
         id == TypeId::kInt64;
}

std::string DataType::to_string() const {
  switch (id) {
    case TypeId::kBool: return "bool";
    case TypeId::kInt8: return "int8";
    case TypeId::kInt16: return "int16";
    case TypeId::kInt32: return "int32";
    case TypeId::kInt64: return "int64";
    case TypeId::kUInt8: return "uint8";
    case TypeId::kUInt16: return "uint16";
    case TypeId::kUInt32: return "uint32";
    case TypeId::kUInt64: return "uint64";
    case TypeId::kFloat32: return "float";
    case TypeId::kFloat64: return "double";
    case TypeId::kDate32: return "date32[day]";
    case TypeId::kUtf8: return "string";
    case TypeId::kLargeUtf8: return "large_string";
    case TypeId::kTimestamp: {
      static constexpr const char* kUnits[] = {"s", "ms", "us", "ns"};
      std::string out = "timestamp[";
      out += kUnits[static_cast<int>(unit)];
      if (!timezone.empty()) out += ", tz=" + timezone;
      return out + "]";
    }
  }
  return "?";
}

std::optional<DataType> parse_type_name(std::string_view name) {
  DataType t;
  static constexpr std::pair<std::string_view, TypeId> kNames[] = {
      {"bool", TypeId::kBool},          {"boolean", TypeId::kBool},       {"int8", TypeId::kInt8},
      {"int16", TypeId::kInt16},        {"int32", TypeId::kInt32},        {"int64", TypeId::kInt64},
      {"uint8", TypeId::kUInt8},        {"uint16", TypeId::kUInt16},      {"uint32", TypeId::kUInt32},
      {"uint64", TypeId::kUInt64},      {"float", TypeId::kFloat32},      {"float32", TypeId::kFloat32},
      {"double", TypeId::kFloat64},     {"float64", TypeId::kFloat64},    {"date32[day]", TypeId::kDate32},
      {"date32", TypeId::kDate32},      {"string", TypeId::kUtf8},        {"utf8", TypeId::kUtf8},
      {"large_string", TypeId::kLargeUtf8}, {"large_utf8", TypeId::kLargeUtf8},
  };
  for (const auto& [n, id] : kNames) {
    if (name == n) {
      t.id = id;
      return t;
    }
  }
  // timestamp[<unit>] or timestamp[<unit>, tz=<zone>]
  constexpr std::string_view kPrefix = "timestamp[";
  if (name.size() <= kPrefix.size() || name.substr(0, kPrefix.size()) != kPrefix || name.back() != ']') {
    return std::nullopt;
  }
  std::string_view inside = name.substr(kPrefix.size(), name.size() - kPrefix.size() - 1);
  std::string_view unit = inside.substr(0, inside.find(','));
  static constexpr std::pair<std::string_view, TimeUnit> kUnits[] = {
      {"s", TimeUnit::kSecond}, {"ms", TimeUnit::kMilli}, {"us", TimeUnit::kMicro}, {"ns", TimeUnit::kNano}};
  bool found = false;
  for (const auto& [n, u] : kUnits) {
    if (unit == n) {
      t.unit = u;
      found = true;
    }
  }
  if (!found) return std::nullopt;
  t.id = TypeId::kTimestamp;
  if (unit.size() < inside.size()) {
    constexpr std::string_view kTz = ", tz=";
    std::string_view rest = inside.substr(unit.size());
    if (rest.substr(0, kTz.size()) != kTz || rest.size() == kTz.size()) return std::nullopt;
    t.timezone = std::string(rest.substr(kTz.size()));
  }
  return t;
}

std::optional<size_t> Schema::find(std::string_view name) const {
  for (size_t i = 0; i < fields.size(); ++i) {
    if (fields[i].name == name) return i;
  }
  return std::nullopt;
}

std::string Schema::to_string() const {
  std::string out;
  for (const Field& f : fields) {
    if (!out.empty()) out += ", ";
    out += f.name + ": " + f.type.to_string();
  }
  return out;
}

std::optional<std::string> schema_difference(const Schema& expected, const Schema& actual) {
  auto names = [](const Schema& s) {
    std::string out;
    for (const Field& f : s.fields) out += (out.empty() ? "" : ", ") + f.name;
    return out;
  };
  if (expected.fields.size() != actual.fields.size()) {
    return "it has " + std::to_string(actual.fields.size()) + " columns (" + names(actual) +
           "); expected " + std::to_string(expected.fields.size()) + " (" + names(expected) + ")";
  }
  for (size_t i = 0; i < expected.fields.size(); ++i) {
    const Field& e = expected.fields[i];
    const Field& a = actual.fields[i];
    if (e.name != a.name) {
      return "column " + std::to_string(i) + " is '" + a.name + "'; expected '" + e.name + "'";
    }
    if (!(e.type == a.type)) {
      return "column '" + a.name + "' has type " + a.type.to_string() + "; expected " +
             e.type.to_string();
    }
  }
  return std::nullopt;
}

namespace {

// Days since 1970-01-01 to a proleptic Gregorian (year, month, day), by the era decomposition:
// 400-year eras of 146097 days, each split into centuries and 4-year cycles.
void civil_from_days(int64_t days, int64_t& y, unsigned& m, unsigned& d) {
  days += 719468;  // shift the epoch to 0000-03-01 so leap days fall at the end of a year
  const int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const auto doe = static_cast<unsigned>(days - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y = static_cast<int64_t>(yoe) + era * 400 + (m <= 2 ? 1 : 0);
}

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

}  // namespace

std::string format_time_value(int64_t value, const DataType& type) {
  char buf[96];
  if (type.id == TypeId::kDate32) {
    int64_t y;
    unsigned m, d;
    civil_from_days(value, y, m, d);
    std::snprintf(buf, sizeof buf, "%04lld-%02u-%02u (%lld)", static_cast<long long>(y), m, d,
                  static_cast<long long>(value));
    return buf;
  }
  if (type.id != TypeId::kTimestamp) return std::to_string(value);
  static constexpr int64_t kPerSecond[] = {1, 1000, 1000000, 1000000000};
  static constexpr int kDigits[] = {0, 3, 6, 9};
  const int64_t per_second = kPerSecond[static_cast<int>(type.unit)];
  const int64_t seconds = floor_div(value, per_second);
  const int64_t fraction = value - seconds * per_second;
  const int64_t days = floor_div(seconds, 86400);
  const int64_t sod = seconds - days * 86400;
  int64_t y;
  unsigned m, d;
  civil_from_days(days, y, m, d);
  int n = std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02lld:%02lld:%02lld",
                        static_cast<long long>(y), m, d, static_cast<long long>(sod / 3600),
                        static_cast<long long>(sod / 60 % 60), static_cast<long long>(sod % 60));
  if (kDigits[static_cast<int>(type.unit)] > 0) {
    n += std::snprintf(buf + n, sizeof buf - n, ".%0*lld", kDigits[static_cast<int>(type.unit)],
                       static_cast<long long>(fraction));
  }
  std::snprintf(buf + n, sizeof buf - n, "%s (%lld)", type.timezone.empty() ? "" : "Z",
                static_cast<long long>(value));
  return buf;
}

bool is_signed_integer(TypeId id) noexcept { return id >= TypeId::kInt8 && id <= TypeId::kInt64; }
bool is_unsigned_integer(TypeId id) noexcept { return id >= TypeId::kUInt8 && id <= TypeId::kUInt64; }
bool is_string(TypeId id) noexcept { return id == TypeId::kUtf8 || id == TypeId::kLargeUtf8; }
bool is_signed_storage(TypeId id) noexcept {
  return is_signed_integer(id) || id == TypeId::kDate32 || id == TypeId::kTimestamp;
}

}  // namespace pao
