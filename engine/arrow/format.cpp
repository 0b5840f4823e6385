#include "arrow/format.h"

#include "core/error.h"

namespace pao::arrow {
namespace {

// Words for the formats we do not support, so the error says what the user has, not "+l".
std::string describe_format(std::string_view f) {
  struct Name {
    std::string_view prefix;
    std::string_view words;
  };
  static constexpr Name kNames[] = {
      {"vu", "string_view"}, {"vz", "binary_view"}, {"+vl", "list_view"},
      {"+vL", "large_list_view"}, {"+l", "list"}, {"+L", "large_list"},
      {"+w:", "fixed_size_list"}, {"+s", "struct"}, {"+m", "map"},
      {"+ud:", "dense_union"}, {"+us:", "sparse_union"}, {"+r", "run_end_encoded"},
      {"d:", "decimal"}, {"w:", "fixed_size_binary"}, {"tdm", "date64"},
      {"tts", "time32[s]"}, {"ttm", "time32[ms]"}, {"ttu", "time64[us]"}, {"ttn", "time64[ns]"},
      {"tD", "duration"}, {"tiM", "month_interval"}, {"tiD", "day_time_interval"},
      {"tin", "month_day_nano_interval"}, {"n", "null"}, {"z", "binary"}, {"Z", "large_binary"},
      {"e", "float16"},
  };
  for (const Name& n : kNames) {
    if (f.substr(0, n.prefix.size()) == n.prefix) return std::string(n.words);
  }
  return "unknown";
}

}  // namespace

DataType parse_format(std::string_view f, std::string_view column) {
  DataType t;
  if (f.size() == 1) {
    switch (f[0]) {
      case 'b': t.id = TypeId::kBool; return t;
      case 'c': t.id = TypeId::kInt8; return t;
      case 's': t.id = TypeId::kInt16; return t;
      case 'i': t.id = TypeId::kInt32; return t;
      case 'l': t.id = TypeId::kInt64; return t;
      case 'C': t.id = TypeId::kUInt8; return t;
      case 'S': t.id = TypeId::kUInt16; return t;
      case 'I': t.id = TypeId::kUInt32; return t;
      case 'L': t.id = TypeId::kUInt64; return t;
      case 'f': t.id = TypeId::kFloat32; return t;
      case 'g': t.id = TypeId::kFloat64; return t;
      case 'u': t.id = TypeId::kUtf8; return t;
      case 'U': t.id = TypeId::kLargeUtf8; return t;
      default: break;
    }
  } else if (f == "tdD") {
    t.id = TypeId::kDate32;
    return t;
  } else if (f.size() >= 4 && f.substr(0, 2) == "ts" && f[3] == ':') {
    t.id = TypeId::kTimestamp;
    switch (f[2]) {
      case 's': t.unit = TimeUnit::kSecond; break;
      case 'm': t.unit = TimeUnit::kMilli; break;
      case 'u': t.unit = TimeUnit::kMicro; break;
      case 'n': t.unit = TimeUnit::kNano; break;
      default: goto unsupported;
    }
    t.timezone = std::string(f.substr(4));
    return t;
  }
unsupported:
  throw Error(ErrorKind::kUnsupportedType,
              "column '" + std::string(column) + "' has type " + describe_format(f) +
                  " (Arrow format '" + std::string(f) +
                  "'), which pyarrow-ops does not support; supported: bool, int8-64, uint8-64, "
                  "float, double, timestamp, date32, string, large_string");
}

std::string to_format(const DataType& t) {
  switch (t.id) {
    case TypeId::kBool: return "b";
    case TypeId::kInt8: return "c";
    case TypeId::kInt16: return "s";
    case TypeId::kInt32: return "i";
    case TypeId::kInt64: return "l";
    case TypeId::kUInt8: return "C";
    case TypeId::kUInt16: return "S";
    case TypeId::kUInt32: return "I";
    case TypeId::kUInt64: return "L";
    case TypeId::kFloat32: return "f";
    case TypeId::kFloat64: return "g";
    case TypeId::kDate32: return "tdD";
    case TypeId::kUtf8: return "u";
    case TypeId::kLargeUtf8: return "U";
    case TypeId::kTimestamp: {
      static constexpr const char* kPrefix[] = {"tss:", "tsm:", "tsu:", "tsn:"};
      return kPrefix[static_cast<int>(t.unit)] + t.timezone;
    }
  }
  return "";
}

}  // namespace pao::arrow
