#pragma once
// Arrow format strings <-> pao::DataType.
#include <string>
#include <string_view>

#include "core/types.h"

namespace pao::arrow {

// Parses a format string of a supported type. Throws Error(kUnsupportedType) naming the column
// and the type in words (e.g. "list", "decimal128(10, 2)") for anything else.
DataType parse_format(std::string_view format, std::string_view column);

// The format string of a supported type, e.g. "tsm:UTC".
std::string to_format(const DataType& type);

}  // namespace pao::arrow
