#include "ops/partitioned.h"

#include <charconv>
#include <set>

#include "core/gather.h"

namespace pao::ops {

size_t find_column(const Schema& schema, const std::string& name, const std::string& op, const std::string& role) {
  auto i = schema.find(name);
  if (!i) {
    throw Error(ErrorKind::kInvalidInput, op + ": " + role + " '" + name + "' not found; the columns are: " +
                                              schema.to_string());
  }
  return *i;
}

std::vector<size_t> find_keys(const Schema& schema, const std::vector<std::string>& keys, const std::string& op) {
  if (keys.empty()) throw Error(ErrorKind::kInvalidInput, op + ": needs at least one key column");
  std::vector<size_t> out;
  for (const std::string& k : keys) out.push_back(find_column(schema, k, op, "key column"));
  return out;
}

TimeColumn find_time(const Schema& schema, const std::string& time, const std::string& op) {
  const size_t i = find_column(schema, time, op, "time column");
  const DataType& type = schema.fields[i].type;
  if (!type.is_temporal_key()) {
    throw Error(ErrorKind::kUnsupportedType, op + ": time column '" + time + "' has type " + type.to_string() +
                                                 "; expected timestamp, date32, int32 or int64");
  }
  return {i, type, time};
}

void TimeColumn::null_at(int64_t row) const {
  throw Error(ErrorKind::kNullTime, "a null in time column '" + name + "'", row);
}

void TimeColumn::went_back(int64_t row, int64_t now, int64_t previous) const {
  throw Error(ErrorKind::kUnsorted,
              "time column '" + name + "' has " + format_time_value(now, type) + ", earlier than " +
                  format_time_value(previous, type) +
                  " of the same key's previous tuple; an operator before this one rewrote the time column, "
                  "and this one needs each key's tuples in time order",
              row);
}

std::shared_ptr<const Schema> extend_schema(const Schema& input, const std::vector<Field>& added, const std::string& op,
                                            const std::string& hint) {
  auto out = std::make_shared<Schema>(input);
  out->fields.insert(out->fields.end(), added.begin(), added.end());
  std::set<std::string> names;
  for (const Field& f : out->fields) {
    if (!names.insert(f.name).second) {
      throw Error(ErrorKind::kInvalidInput, op + ": the result would have two columns named '" + f.name + "'; " + hint);
    }
  }
  return out;
}

std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out;
}

Batch take_rows(const std::shared_ptr<const Schema>& schema, const Batch& in, std::span<const int64_t> rows) {
  std::vector<Segment> runs;
  for (int64_t r : rows) append_row(runs, 0, r);
  if (runs.size() == 1) return in.slice(runs[0].start, runs[0].length).with_schema(schema);
  return gather(schema, std::span(&in, 1), runs);
}

Batch built_batch(std::shared_ptr<const Schema> schema, int64_t rows, std::vector<ColumnBuilder>& built) {
  auto owner = std::make_shared<BatchMemory>();
  std::vector<Column> columns;
  columns.reserve(built.size());
  for (ColumnBuilder& b : built) columns.push_back(b.finish(*owner));
  return Batch(std::move(schema), rows, std::move(columns), std::move(owner));
}

Batch add_columns(std::shared_ptr<const Schema> schema, const Batch& base, std::vector<ColumnBuilder>& added) {
  // The new columns' memory, sharing base's, so the result owns both.
  auto owner = std::make_shared<BatchMemory>();
  owner->share(base.owner());
  std::vector<Column> columns;
  columns.reserve(base.num_columns() + added.size());
  for (size_t c = 0; c < base.num_columns(); ++c) columns.push_back(base.column(c));
  for (ColumnBuilder& b : added) columns.push_back(b.finish(*owner));
  return Batch(std::move(schema), base.num_rows(), std::move(columns), std::move(owner));
}


std::shared_ptr<const Schema> key_state_schema(const Schema& input, const std::vector<size_t>& keys) {
  std::vector<Field> fields;
  for (size_t k : keys) fields.push_back({input.fields[k].name, input.fields[k].type, true});
  DataType text;
  text.id = TypeId::kLargeUtf8;
  fields.push_back({"state", text, false});
  return std::make_shared<const Schema>(Schema{std::move(fields)});
}

std::vector<uint32_t> key_state_partitions(const Batch& state, size_t keys, size_t partitions, const std::string& op) {
  if (state.num_columns() != keys + 1 || state.schema()->fields[keys].type.id != TypeId::kLargeUtf8) {
    throw Error(ErrorKind::kInvalidInput, op + ": a checkpoint's state is a batch of the key columns and 'state'");
  }
  std::vector<uint64_t> hashes;
  key_hashes(state, key_state_columns(keys), hashes);
  std::vector<uint32_t> out(hashes.size());
  for (size_t r = 0; r < hashes.size(); ++r) out[r] = partition_of(hashes[r], partitions);
  return out;
}

std::string_view key_state_text(const Batch& state, int64_t row) {
  DataType text;
  text.id = TypeId::kLargeUtf8;
  return string_at(state.column(state.num_columns() - 1), text, row);
}

std::vector<size_t> key_state_columns(size_t keys) {
  std::vector<size_t> at(keys);
  for (size_t k = 0; k < keys; ++k) at[k] = k;
  return at;
}

void StateReader::bad() const {
  throw Error(ErrorKind::kInvalidInput, "a checkpoint's operator state is not what this operator wrote (near '" +
                                            std::string(in.substr(0, 40)) + "')");
}

// The decimal number before the next `delimiter`, both taken (std::from_chars: digits only, no
// sign, no overflow).
uint64_t StateReader::number(char delimiter) {
  const size_t end = in.find(delimiter);
  uint64_t v = 0;
  if (end == std::string_view::npos || end == 0) bad();
  const auto [at, error] = std::from_chars(in.data(), in.data() + end, v);
  if (error != std::errc() || at != in.data() + end) bad();
  in.remove_prefix(end + 1);
  return v;
}

uint64_t StateReader::get_u() { return number(' '); }

int64_t StateReader::get() {
  const bool negative = !in.empty() && in[0] == '-';
  if (negative) in.remove_prefix(1);
  const uint64_t v = get_u();
  return negative ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
}

std::string_view StateReader::get_text() {
  const uint64_t n = number(':');
  if (in.size() < n) bad();
  const std::string_view out = in.substr(0, n);
  in.remove_prefix(n);
  return out;
}

}  // namespace pao::ops
