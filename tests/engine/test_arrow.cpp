// Unit tests of engine/arrow: import and export without copies, and exact ownership.
#include <cerrno>

#include "testing/counting_stream.h"
#include "arrow/export.h"
#include "arrow/import.h"
#include "arrow/owned.h"
#include "core/error.h"
#include "helpers.h"
#include "unit.h"

using namespace pao;
using fixtures::Counter;

TEST(import_schema_reads_supported_types) {
  ArrowSchema raw;
  fixtures::produce_schema("tsu:Asia/Tokyo", &raw);
  arrow::OwnedSchema owned(&raw);
  CHECK(raw.release == nullptr);  // ownership moved
  Schema s = arrow::import_schema(*owned.get());
  REQUIRE(s.fields.size() == 1);
  CHECK_EQ(s.fields[0].type.to_string(), std::string("timestamp[us, tz=Asia/Tokyo]"));
  CHECK(s.fields[0].nullable);
}

TEST(import_schema_names_unsupported_columns) {
  ArrowSchema raw;
  fixtures::produce_schema("+l", &raw);
  arrow::OwnedSchema owned(&raw);
  CHECK_THROWS_WITH(arrow::import_schema(*owned.get()), ErrorKind::kUnsupportedType,
                    "column 'x' has type list (Arrow format '+l')");
  ArrowSchema dec;
  fixtures::produce_schema("d:10,2", &dec);
  arrow::OwnedSchema owned_dec(&dec);
  CHECK_THROWS_WITH(arrow::import_schema(*owned_dec.get()), ErrorKind::kUnsupportedType,
                    "decimal");
}

TEST(import_batch_is_zero_copy_and_releases_once) {
  Counter counter;
  auto sch = fixtures::schema({{"x", fixtures::type(TypeId::kInt64)}});
  ArrowArray raw;
  fixtures::produce_array({5, 6, 7}, &counter, &raw);
  const void* values = raw.children[0]->buffers[1];
  {
    Batch b = arrow::import_batch(&raw, sch, "input 0");
    CHECK(raw.release == nullptr);
    CHECK_EQ(b.column(0).values, values);
    Batch s = b.slice(1, 2);
    b = Batch();
    CHECK_EQ(counter.released, 0);  // the slice still holds the producer's buffers
    CHECK_EQ(s.column(0).typed<int64_t>()[0], 6);
  }
  CHECK_EQ(counter.released, 1);
}

TEST(import_batch_rejects_mismatched_arrays_and_still_releases) {
  Counter counter;
  auto sch = fixtures::schema({{"x", fixtures::type(TypeId::kInt64)}, {"y", fixtures::type(TypeId::kInt64)}});
  ArrowArray raw;
  fixtures::produce_array({1}, &counter, &raw);
  CHECK_THROWS_WITH(arrow::import_batch(&raw, sch, "input 3"), ErrorKind::kInvalidInput,
                    "input 3: malformed Arrow array: it has 1 columns, its schema 2");
  CHECK_EQ(counter.released, 1);
}

TEST(export_then_import_round_trips_without_copy) {
  auto sch = fixtures::time_string_schema();
  Batch b = fixtures::time_string_batch(sch, {1, 2, 3}, {"a", "bb", "c"}, {true, false, true})
                .slice(1, 2);
  const int64_t live_before = arrow::live_exports();
  ArrowArray array;
  ArrowSchema schema;
  arrow::export_batch(b, &array);
  arrow::export_schema(*sch, &schema);
  CHECK(arrow::live_exports() > live_before);
  arrow::OwnedSchema owned_schema(&schema);
  auto back_schema = std::make_shared<const Schema>(arrow::import_schema(*owned_schema.get()));
  CHECK(!schema_difference(*sch, *back_schema));
  CHECK(!back_schema->fields[0].nullable);
  Batch back = arrow::import_batch(&array, back_schema, "round trip");
  CHECK_EQ(back.column(0).values, b.column(0).values);
  CHECK_EQ(back.column(1).data, b.column(1).data);
  CHECK_EQ(back.column(0).offset, 1);
  CHECK(!back.column(1).is_valid(0));
  back = Batch();
  owned_schema.reset();
  CHECK_EQ(arrow::live_exports(), live_before);
}

TEST(exported_children_may_be_moved_out_and_released_later) {
  auto sch = fixtures::time_string_schema();
  Batch b = fixtures::time_string_batch(sch, {1, 2}, {"a", "b"});
  const int64_t live_before = arrow::live_exports();
  ArrowArray array;
  arrow::export_batch(b, &array);
  ArrowArray moved = *array.children[1];
  array.children[1]->release = nullptr;
  array.release(&array);
  CHECK(array.release == nullptr);
  CHECK_EQ(arrow::live_exports(), live_before + 1);  // the moved child still holds its buffers
  moved.release(&moved);
  CHECK_EQ(arrow::live_exports(), live_before);
}

TEST(import_stream_pulls_lazily_and_releases_with_the_source) {
  Counter counter;
  int stream_released = 0;
  ArrowArrayStream raw;
  fixtures::produce_stream({{1, 2}, {3}}, &counter, &stream_released, -1, &raw);
  auto src = arrow::import_stream(&raw, "input 0");
  CHECK(raw.release == nullptr);
  auto b1 = src->next();
  REQUIRE(b1.has_value());
  CHECK_EQ(b1->num_rows(), 2);
  auto b2 = src->next();
  REQUIRE(b2.has_value());
  CHECK(!src->next().has_value());
  CHECK(!src->next().has_value());  // the end repeats
  // Not released inside next(): callers publish the end first, then destroy the source.
  CHECK_EQ(stream_released, 0);
  src.reset();
  CHECK_EQ(stream_released, 1);
  CHECK_EQ(counter.released, 0);  // the batches still hold their arrays
  b1.reset();
  b2.reset();
  CHECK_EQ(counter.released, 2);
}

TEST(import_stream_reports_producer_errors) {
  Counter counter;
  int stream_released = 0;
  ArrowArrayStream raw;
  fixtures::produce_stream({{1}, {2}}, &counter, &stream_released, 1, &raw);
  auto src = arrow::import_stream(&raw, "input 4");
  CHECK(src->next().has_value());
  CHECK_THROWS_WITH(src->next(), ErrorKind::kInputFailed, "input 4 failed: producer broke");
  CHECK_THROWS_WITH(src->next(), ErrorKind::kInputFailed, "producer broke");  // stays failed
  src.reset();
  CHECK_EQ(stream_released, 1);
  CHECK_EQ(counter.released, 1);
}

TEST(export_stream_maps_errors_to_codes) {
  Counter counter;
  int stream_released = 0;
  ArrowArrayStream producer;
  fixtures::produce_stream({{1}, {2}}, &counter, &stream_released, 1, &producer);
  ArrowArrayStream out;
  arrow::export_stream(arrow::import_stream(&producer, "input 0"), &out);
  arrow::OwnedStream owned(&out);
  ArrowSchema schema;
  CHECK_EQ(owned->get_schema(owned.get(), &schema), 0);
  schema.release(&schema);
  ArrowArray a;
  CHECK_EQ(owned->get_next(owned.get(), &a), 0);
  REQUIRE(a.release != nullptr);
  a.release(&a);
  CHECK_EQ(owned->get_next(owned.get(), &a), EIO);
  CHECK_EQ(std::string(owned->get_last_error(owned.get())), std::string("input 0 failed: producer broke"));
  owned.reset();
  CHECK_EQ(stream_released, 1);
  CHECK_EQ(counter.released, 1);
}

TEST(counting_stream_counts_every_release) {
  Counter counter;
  int stream_released = 0;
  ArrowArrayStream producer;
  fixtures::produce_stream({{1}, {2}, {3}}, &counter, &stream_released, -1, &producer);
  auto counts = std::make_shared<pao::testing::ReleaseCounts>();
  ArrowArrayStream counting;
  pao::testing::make_counting_stream(&producer, counts, 2, &counting);
  {
    auto src = arrow::import_stream(&counting, "input 0");
    CHECK(src->next().has_value());
    CHECK(src->next().has_value());
    CHECK_THROWS_WITH(src->next(), ErrorKind::kInputFailed, "injected producer failure");
  }
  CHECK_EQ(counts->arrays_made.load(), 2);
  CHECK_EQ(counts->arrays_released.load(), 2);
  CHECK_EQ(counts->repeated_releases.load(), 0);
  CHECK_EQ(counts->stream_releases.load(), 1);
  CHECK_EQ(counter.released, 2);
}

UNIT_MAIN()
