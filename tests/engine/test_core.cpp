// Unit tests of engine/core: types, schemas, batches, gather.
#include <cstring>

#include "core/error.h"
#include "core/gather.h"
#include "helpers.h"
#include "unit.h"

using namespace pao;
using testing::type;

TEST(type_names_match_pyarrow) {
  DataType ts = type(TypeId::kTimestamp);
  ts.unit = TimeUnit::kMilli;
  ts.timezone = "UTC";
  CHECK_EQ(ts.to_string(), std::string("timestamp[ms, tz=UTC]"));
  CHECK_EQ(type(TypeId::kFloat64).to_string(), std::string("double"));
  CHECK_EQ(type(TypeId::kLargeUtf8).to_string(), std::string("large_string"));
  CHECK_EQ(type(TypeId::kDate32).byte_width(), 4);
  CHECK(type(TypeId::kDate32).is_temporal_key());
  CHECK(!type(TypeId::kFloat64).is_temporal_key());
}

TEST(time_values_render_as_iso) {
  DataType ts = type(TypeId::kTimestamp);
  ts.unit = TimeUnit::kMicro;
  CHECK_EQ(format_time_value(1704067205000001, ts),
           std::string("2024-01-01T00:00:05.000001 (1704067205000001)"));
  ts.unit = TimeUnit::kSecond;
  ts.timezone = "Europe/Paris";
  CHECK_EQ(format_time_value(-1, ts), std::string("1969-12-31T23:59:59Z (-1)"));
  CHECK_EQ(format_time_value(19723, type(TypeId::kDate32)), std::string("2024-01-01 (19723)"));
  CHECK_EQ(format_time_value(42, type(TypeId::kInt64)), std::string("42"));
}

TEST(schema_difference_names_the_column) {
  Schema a{{{"t", type(TypeId::kInt64)}, {"v", type(TypeId::kFloat64)}}};
  Schema b = a;
  CHECK(!schema_difference(a, b));
  b.fields[1].nullable = false;
  CHECK(!schema_difference(a, b));  // nullability is not a difference
  b.fields[1].type = type(TypeId::kInt32);
  CHECK_EQ(*schema_difference(a, b), std::string("column 'v' has type int32; expected double"));
  b.fields[1].name = "w";
  CHECK_EQ(*schema_difference(a, b), std::string("column 1 is 'w'; expected 'v'"));
  b.fields.pop_back();
  CHECK_EQ(*schema_difference(a, b), std::string("it has 1 columns (t); expected 2 (t, v)"));
}

TEST(slice_shares_buffers) {
  auto sch = testing::time_string_schema();
  Batch b = testing::time_string_batch(sch, {1, 2, 3, 4}, {"a", "bb", "", "d"},
                                       {true, false, true, true});
  Batch s = b.slice(1, 2);
  CHECK_EQ(s.num_rows(), 2);
  CHECK_EQ(s.column(0).values, b.column(0).values);
  CHECK_EQ(s.column(0).offset, 1);
  CHECK_EQ(*s.column(0).typed<int64_t>(), 2);
  CHECK(!s.column(1).is_valid(0));
  CHECK_EQ(s.column(1).null_count, -1);  // unknown after a partial slice
  CHECK_EQ(s.owner().get(), b.owner().get());
  CHECK_EQ(b.slice(0, 4).column(1).null_count, 1);
}

TEST(gather_copies_rows_in_segment_order) {
  auto sch = testing::time_string_schema();
  std::vector<Batch> sources{
      testing::time_string_batch(sch, {1, 2, 3}, {"a", "bb", "ccc"}, {true, false, true}),
      testing::time_string_batch(sch, {10, 20}, {"x", "yy"}).slice(1, 1),
  };
  std::vector<Segment> segs{{0, 2, 1}, {1, 0, 1}, {0, 0, 2}};
  Batch out = gather(sch, sources, segs);
  REQUIRE(out.num_rows() == 4);
  const int64_t* t = out.column(0).typed<int64_t>();
  CHECK_EQ(t[0], 3);
  CHECK_EQ(t[1], 20);
  CHECK_EQ(t[2], 1);
  CHECK_EQ(t[3], 2);
  const Column& s = out.column(1);
  const int32_t* off = s.typed<int32_t>();
  CHECK_EQ(std::string(reinterpret_cast<const char*>(s.data) + off[0], off[1] - off[0]),
           std::string("ccc"));
  CHECK_EQ(std::string(reinterpret_cast<const char*>(s.data) + off[1], off[2] - off[1]),
           std::string("yy"));
  CHECK(s.is_valid(0) && s.is_valid(1) && s.is_valid(2) && !s.is_valid(3));
  CHECK_EQ(s.null_count, 1);
  CHECK(out.column(0).validity == nullptr);  // no source had nulls in t
  CHECK_EQ(reinterpret_cast<uintptr_t>(out.column(0).values) % 64, uintptr_t{0});
}

TEST(gather_bools_and_narrow_types) {
  auto sch = testing::schema({{"b", type(TypeId::kBool)}, {"i", type(TypeId::kInt16)}});
  auto storage = std::make_shared<std::vector<uint8_t>>(std::vector<uint8_t>{0b10110, 0, 0, 0});
  auto shorts = std::make_shared<std::vector<int16_t>>(std::vector<int16_t>{7, -8, 9, -10, 11});
  std::vector<Column> cols(2);
  cols[0].values = storage->data();
  cols[0].null_count = 0;
  cols[1].values = shorts->data();
  cols[1].null_count = 0;
  auto owner = std::make_shared<std::pair<decltype(storage), decltype(shorts)>>(storage, shorts);
  std::vector<Batch> sources{Batch(sch, 5, cols, owner)};
  std::vector<Segment> segs{{0, 4, 1}, {0, 1, 3}};
  Batch out = gather(sch, sources, segs);
  const auto* bits = static_cast<const uint8_t*>(out.column(0).values);
  // rows 4,1,2,3 of 0b10110 -> 1,1,1,0
  CHECK_EQ(int(bits[0] & 0xF), 0b0111);
  CHECK_EQ(out.column(1).typed<int16_t>()[0], int16_t{11});
  CHECK_EQ(out.column(1).typed<int16_t>()[3], int16_t{-10});
}

UNIT_MAIN()
