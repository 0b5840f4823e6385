// Unit tests of engine/core: types, schemas, batches, gather.
#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "core/builder.h"
#include "core/error.h"
#include "core/exact_sum.h"
#include "core/gather.h"
#include "core/values.h"
#include "helpers.h"
#include "unit.h"

using namespace pao;
using fixtures::type;

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

// Large buffers come back from the pool: a freed buffer's class serves the next request of that
// class (the same block), capacity is at most a quarter above the request, small and huge buffers
// bypass it, and pool_release() empties it. (Under AddressSanitizer the pool is off: nothing is
// reused, and the test checks only what holds either way.)
TEST(buffer_pool_reuses_large_buffers) {
  pool_release();
  for (size_t bytes : {size_t{64} << 10, (size_t{64} << 10) + 64, size_t{100032}, size_t{3} << 20, size_t{64} << 20}) {
    size_t capacity = 0;
    uint8_t* a = pool_allocate(bytes, &capacity);
    CHECK(capacity >= bytes);
    CHECK(capacity <= bytes + bytes / 4 + 64);
    CHECK(reinterpret_cast<uintptr_t>(a) % 64 == 0);
    a[0] = 1;
    a[bytes - 1] = 2;
    const PoolStats before = pool_stats();
    pool_free(a, capacity);
    size_t again = 0;
    uint8_t* b = pool_allocate(bytes, &again);
    CHECK_EQ(again, capacity);
    if (pool_stats().reused > before.reused) CHECK(b == a);
    pool_free(b, again);
  }
  const uint64_t idle = pool_stats().idle_bytes;
  CHECK_EQ(pool_release(), idle);
  CHECK_EQ(pool_stats().idle_bytes, 0u);
  size_t small = 0, huge = 0;
  uint8_t* s = pool_allocate(4096, &small);
  uint8_t* h = pool_allocate((size_t{64} << 20) + 64, &huge);
  CHECK_EQ(small, 4096u);
  CHECK_EQ(huge, (size_t{64} << 20) + 64);
  pool_free(s, small);
  pool_free(h, huge);
  CHECK_EQ(pool_stats().idle_bytes, 0u);
  // Buffers (every engine batch's memory) go through it.
  { Buffer big(size_t{1} << 20); big.data()[0] = 7; }
  Buffer next(size_t{1} << 20);
  CHECK(next.size() == size_t{1} << 20);
}

// A buffer freed into a full pool is kept, and the least recently freed idle buffer (another
// class's) goes back to the allocator instead: the pool follows the sizes in use.
TEST(buffer_pool_keeps_the_latest_buffers_when_full) {
  pool_release();
  const size_t big = kPoolMax;  // a class of its own, the largest
  const uint64_t limit = pool_stats().idle_limit;
  const size_t fill = static_cast<size_t>(limit / big);
  if (fill == 0) return;  // a limit below one block (PYARROW_OPS_IDLE_MIB): nothing to fill
  std::vector<std::pair<uint8_t*, size_t>> held(fill);
  for (auto& [block, capacity] : held) block = pool_allocate(big, &capacity);
  for (auto& [block, capacity] : held) pool_free(block, capacity);
  const PoolStats full = pool_stats();
  size_t capacity = 0;
  uint8_t* small = pool_allocate(size_t{1} << 20, &capacity);
  small[0] = 1;
  pool_free(small, capacity);
  const PoolStats after = pool_stats();
  CHECK(after.idle_bytes <= limit);
  size_t again = 0;
  uint8_t* b = pool_allocate(size_t{1} << 20, &again);
  if (full.idle_bytes == fill * big) {  // pooled (not under AddressSanitizer)
    CHECK_EQ(after.idle_bytes, (fill - 1) * big + capacity);  // one big block made room
    CHECK(b == small);
    CHECK_EQ(pool_stats().reused, after.reused + 1);
  }
  pool_free(b, again);
  pool_release();
}

// A builder's bulk values with nulls set afterwards (ColumnBuilder::set_null, the running sums'
// path) equal the same values and nulls appended one by one: before and after the first null,
// across byte boundaries, a row set null twice, and appends after.
TEST(builder_set_null_equals_appending_nulls) {
  std::mt19937_64 rng(5);
  DataType f64;
  f64.id = TypeId::kFloat64;
  for (int round = 0; round < 200; ++round) {
    ColumnBuilder bulk(f64), one(f64);
    std::vector<std::optional<double>> want;
    for (int chunk = 0, chunks = 1 + static_cast<int>(rng() % 4); chunk < chunks; ++chunk) {
      const int64_t n = static_cast<int64_t>(rng() % 40);
      const int64_t first = bulk.size();
      auto* o = reinterpret_cast<double*>(bulk.append_fixed_n(n));
      for (int64_t i = 0; i < n; ++i) {
        const bool null = rng() % 5 == 0;
        o[i] = static_cast<double>(rng() % 1000);
        want.push_back(null ? std::nullopt : std::optional<double>(o[i]));
        if (null) bulk.set_null(first + i);
        if (null && rng() % 2 == 0) bulk.set_null(first + i);
      }
      if (rng() % 3 == 0) {
        bulk.append_null();
        want.push_back(std::nullopt);
      }
    }
    for (const auto& w : want) w ? one.append_fixed(&*w) : one.append_null();
    REQUIRE(bulk.size() == static_cast<int64_t>(want.size()));
    REQUIRE(one.size() == bulk.size());
    auto owner = std::make_shared<BatchMemory>();
    const Column a = bulk.finish(*owner);
    const Column b = one.finish(*owner);
    CHECK_EQ(a.null_count, b.null_count);
    for (int64_t i = 0; i < static_cast<int64_t>(want.size()); ++i) {
      CHECK_EQ(a.is_valid(i), b.is_valid(i));
      CHECK_EQ(a.typed<double>()[i], b.typed<double>()[i]);
    }
  }
}

TEST(slice_shares_buffers) {
  auto sch = fixtures::time_string_schema();
  Batch b = fixtures::time_string_batch(sch, {1, 2, 3, 4}, {"a", "bb", "", "d"},
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
  auto sch = fixtures::time_string_schema();
  std::vector<Batch> sources{
      fixtures::time_string_batch(sch, {1, 2, 3}, {"a", "bb", "ccc"}, {true, false, true}),
      fixtures::time_string_batch(sch, {10, 20}, {"x", "yy"}).slice(1, 1),
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

// `n` random rows of `sch`: bools, fixed-width values (random bits), strings of up to 19 bytes;
// the value in column c is null where null(c) says so (asked once per value).
// A column of every layout: bools, 1- to 8-byte values, 32- and 64-bit offsets.
std::shared_ptr<const Schema> every_layout_schema() {
  return fixtures::schema({{"b", type(TypeId::kBool)}, {"u8", type(TypeId::kUInt8)},
                           {"i16", type(TypeId::kInt16)}, {"f32", type(TypeId::kFloat32)},
                           {"i64", type(TypeId::kInt64)}, {"s", type(TypeId::kUtf8)},
                           {"ls", type(TypeId::kLargeUtf8)}});
}

Batch random_rows(std::mt19937_64& rng, const std::shared_ptr<const Schema>& sch, int64_t n,
                  const std::function<bool(size_t)>& null) {
  std::vector<ColumnBuilder> b;
  for (const Field& f : sch->fields) b.emplace_back(f.type);
  for (int64_t r = 0; r < n; ++r) {
    for (size_t c = 0; c < b.size(); ++c) {
      const Layout layout = sch->fields[c].type.layout();
      if (null(c)) {
        b[c].append_null();
      } else if (layout == Layout::kBits) {
        b[c].append_bool(rng() % 2 == 0);
      } else if (layout != Layout::kFixed) {
        b[c].append_string(std::string(rng() % 20, static_cast<char>('a' + rng() % 26)));
      } else {
        const uint64_t v = rng();
        b[c].append_fixed(&v);
      }
    }
  }
  auto owner = std::make_shared<BatchMemory>();
  std::vector<Column> cols;
  for (ColumnBuilder& x : b) cols.push_back(x.finish(*owner));
  return Batch(sch, n, std::move(cols), owner);
}

// scatter() puts each source row where its position says: the same batch as gathering the rows in
// position order, nulls included, over random splits of random fixed-width columns.
TEST(scatter_equals_gather_in_position_order) {
  std::mt19937_64 rng(7);
  auto sch = fixtures::schema({{"i", type(TypeId::kInt64)}, {"f", type(TypeId::kFloat64)},
                               {"s", type(TypeId::kInt16)}, {"u", type(TypeId::kUInt8)}});
  for (int round = 0; round < 200; ++round) {
    const int64_t rows = 1 + static_cast<int64_t>(rng() % 100);
    const size_t parts = 1 + rng() % 5;
    std::vector<std::vector<int64_t>> positions(parts);
    for (int64_t r = 0; r < rows; ++r) positions[rng() % parts].push_back(r);
    std::vector<Batch> sources;
    for (size_t p = 0; p < parts; ++p) {
      sources.push_back(random_rows(rng, sch, static_cast<int64_t>(positions[p].size()),
                                    [&](size_t c) { return c > 0 && rng() % 4 == 0; }));
    }
    std::vector<std::pair<uint32_t, int64_t>> at(static_cast<size_t>(rows));
    for (uint32_t p = 0; p < parts; ++p)
      for (size_t j = 0; j < positions[p].size(); ++j) at[static_cast<size_t>(positions[p][j])] = {p, static_cast<int64_t>(j)};
    std::vector<Segment> segs;
    for (const auto& [p, j] : at) segs.push_back({p, j, 1});
    REQUIRE(can_scatter(*sch));
    const Batch want = gather(sch, sources, segs);
    const Batch got = scatter(sch, sources, positions, rows);
    REQUIRE(got.num_rows() == rows);
    for (size_t c = 0; c < sch->fields.size(); ++c) {
      const int w = sch->fields[c].type.byte_width();
      const Column& g = got.column(c);
      const Column& e = want.column(c);
      CHECK_EQ(g.null_count == 0 ? int64_t{0} : g.null_count, e.validity == nullptr ? int64_t{0} : e.null_count);
      for (int64_t r = 0; r < rows; ++r) {
        CHECK_EQ(g.is_valid(r), e.is_valid(r));
        if (e.is_valid(r)) {
          CHECK(std::memcmp(static_cast<const uint8_t*>(g.values) + r * w,
                            static_cast<const uint8_t*>(e.values) + r * w, static_cast<size_t>(w)) == 0);
        }
      }
    }
  }
  CHECK(!can_scatter(*fixtures::time_string_schema()));
}

// gather_range() of any row range of a plan equals that range of the whole gather: strings
// (short ones, copied without a library call, and long), nulls, segments cut at both ends, and
// ranges inside one segment (zero-copy slices).
TEST(gather_range_equals_the_range_of_the_whole_gather) {
  std::mt19937_64 rng(11);
  auto sch = fixtures::time_string_schema();
  for (int round = 0; round < 100; ++round) {
    std::vector<Batch> sources;
    for (int p = 0; p < 3; ++p) {
      const int64_t n = 1 + static_cast<int64_t>(rng() % 20);
      std::vector<int64_t> t;
      std::vector<std::string> v;
      std::vector<bool> valid;
      for (int64_t r = 0; r < n; ++r) {
        t.push_back(r);
        v.push_back(std::string(rng() % 24, static_cast<char>('a' + rng() % 26)));
        valid.push_back(rng() % 5 != 0);
      }
      sources.push_back(fixtures::time_string_batch(sch, t, v, valid));
    }
    std::vector<Segment> segs;
    for (int k = 0; k < 8; ++k) {
      const auto src = static_cast<uint32_t>(rng() % 3);
      const int64_t n = sources[src].num_rows();
      const int64_t start = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
      segs.push_back({src, start, 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(n - start))});
    }
    const Batch whole = gather(sch, sources, segs);
    // The same rows as segments and one by one (RowRefs): every range of either is those rows.
    std::vector<RowRef> refs;
    for (const Segment& seg : segs) {
      for (int64_t r = seg.start; r < seg.start + seg.length; ++r) refs.push_back({seg.source, static_cast<uint32_t>(r)});
    }
    for (const GatherPlan& plan : {GatherPlan(sch, sources, segs), GatherPlan(sch, sources, refs)}) {
      REQUIRE(plan.rows() == whole.num_rows());
      for (int k = 0; k < 10; ++k) {
        const int64_t begin = static_cast<int64_t>(rng() % static_cast<uint64_t>(plan.rows()));
        const int64_t end = begin + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(plan.rows() - begin));
        const Batch got = gather_range(plan, begin, end);
        REQUIRE(got.num_rows() == end - begin);
        for (int64_t r = 0; r < got.num_rows(); ++r) {
          CHECK_EQ(got.column(0).typed<int64_t>()[r], whole.column(0).typed<int64_t>()[begin + r]);
          CHECK_EQ(got.column(1).is_valid(r), whole.column(1).is_valid(begin + r));
          CHECK(string_at(got.column(1), sch->fields[1].type, r) == string_at(whole.column(1), sch->fields[1].type, begin + r));
        }
      }
    }
  }
}

TEST(gather_bools_and_narrow_types) {
  auto sch = fixtures::schema({{"b", type(TypeId::kBool)}, {"i", type(TypeId::kInt16)}});
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

// `got` holds `rows` of `sources`, in order: every value, validity and bool bit, and each
// column's null count where it is known.
void check_gathered(const std::shared_ptr<const Schema>& sch, const std::vector<Batch>& sources,
                    const std::vector<RowRef>& rows, const Batch& got) {
  REQUIRE(got.num_rows() == static_cast<int64_t>(rows.size()));
  std::vector<int64_t> nulls(sch->fields.size(), 0);
  for (size_t row = 0; row < rows.size(); ++row) {
    const Batch& from = sources[rows[row].source];
    const int64_t i = rows[row].row;
    const auto r = static_cast<int64_t>(row);
    for (size_t c = 0; c < sch->fields.size(); ++c) {
      const Column& e = from.column(c);
      const Column& g = got.column(c);
      CHECK_EQ(g.is_valid(r), e.is_valid(i));
      if (!e.is_valid(i)) {
        ++nulls[c];
        continue;
      }
      const DataType& t = sch->fields[c].type;
      if (t.layout() == Layout::kBits) {
        CHECK_EQ(get_bit(static_cast<const uint8_t*>(g.values), g.offset + r),
                 get_bit(static_cast<const uint8_t*>(e.values), e.offset + i));
      } else if (t.layout() != Layout::kFixed) {
        CHECK(string_at(g, t, r) == string_at(e, t, i));
      } else {
        const int w = t.byte_width();
        CHECK(std::memcmp(static_cast<const uint8_t*>(g.values) + (g.offset + r) * w,
                          static_cast<const uint8_t*>(e.values) + (e.offset + i) * w, static_cast<size_t>(w)) == 0);
      }
    }
  }
  for (size_t c = 0; c < sch->fields.size(); ++c) {
    const Column& g = got.column(c);
    if (g.null_count < 0) continue;  // unknown: a zero-copy slice's
    CHECK_EQ(g.validity == nullptr ? int64_t{0} : g.null_count, nulls[c]);
  }
}

// gather() against a row-by-row reference, on both of its paths: segments of a row or two (copied
// through a row index) and long ones (copied per segment); every layout (bools, 1- to 8-byte
// values, 32- and 64-bit offsets), sources sliced at odd offsets, with and without nulls.
TEST(gather_equals_a_row_by_row_copy) {
  std::mt19937_64 rng(23);
  auto sch = every_layout_schema();
  for (int round = 0; round < 300; ++round) {
    const size_t parts = 1 + rng() % 4;
    std::vector<Batch> sources;
    for (size_t p = 0; p < parts; ++p) {
      const int64_t n = 1 + static_cast<int64_t>(rng() % 150);
      const bool nulls = rng() % 2 == 0;  // a source without nulls has no bitmaps to read
      const Batch whole = random_rows(rng, sch, n, [&](size_t) { return nulls && rng() % 5 == 0; });
      const int64_t cut = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));  // odd offsets
      sources.push_back(whole.slice(cut, n - cut));
    }
    const bool short_runs = round % 2 == 0;
    std::vector<Segment> segs;
    for (int k = 0; k < 40; ++k) {
      const auto src = static_cast<uint32_t>(rng() % parts);
      const int64_t n = sources[src].num_rows();
      const int64_t start = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
      const int64_t most = short_runs ? 2 : n - start;
      segs.push_back({src, start, 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(std::min(most, n - start)))});
    }
    std::vector<RowRef> rows;
    for (const Segment& sg : segs) {
      for (int64_t i = sg.start; i < sg.start + sg.length; ++i) rows.push_back({sg.source, static_cast<uint32_t>(i)});
    }
    check_gathered(sch, sources, rows, gather(sch, sources, segs));
  }
}

// gather() of rows one by one that take each source's rows in order, one after another (a
// merge's rows: bitmaps by bit deposits or exceptions, string bytes from each source's range),
// against a row-by-row copy: 1 to 20 sources (past 16 the rows go one by one), batches of up to
// 300 rows (several words of 64), sources at odd offsets, nulls and bools at every density
// (none, all, sparse, half, rare), string columns without nulls. Rows out of order within a
// source take the general path and give the same batch.
TEST(gather_of_rows_in_each_sources_order_equals_a_row_by_row_copy) {
  std::mt19937_64 rng(29);
  auto sch = fixtures::schema({{"b", type(TypeId::kBool)}, {"i64", type(TypeId::kInt64)},
                               {"s", type(TypeId::kUtf8)}, {"f32", type(TypeId::kFloat32)},
                               {"ls", type(TypeId::kLargeUtf8)}, {"b2", type(TypeId::kBool)}});
  for (int round = 0; round < 400; ++round) {
    const size_t parts = round % 5 == 0 ? 12 + rng() % 9 : 1 + rng() % 6;
    // Of nulls and of true: none, all, 1 in 16, half, 1 in 128 (with 8 sources or more, bitmaps
    // of rare nulls or flags gather by exceptions).
    const int density = static_cast<int>(rng() % 5);
    auto pick = [&]() {
      switch (density) {
        case 0: return false;
        case 1: return true;
        case 2: return rng() % 16 == 0;
        case 3: return rng() % 2 == 0;
        default: return rng() % 128 == 0;
      }
    };
    std::vector<Batch> sources;
    for (size_t p = 0; p < parts; ++p) {
      const int64_t n = 1 + static_cast<int64_t>(rng() % 200);
      const bool nulls = rng() % 3 != 0;
      // Column 2 never has nulls (its string bytes then come from the range alone).
      Batch whole = random_rows(rng, sch, n, [&](size_t c) { return nulls && c != 2 && pick(); });
      const int64_t cut = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));  // odd offsets
      sources.push_back(whole.slice(cut, n - cut));
    }
    // Each source gives a run of consecutive rows from a random start; the runs interleave at random.
    std::vector<int64_t> next(parts);
    std::vector<int64_t> left(parts);
    int64_t total = 0;
    for (size_t p = 0; p < parts; ++p) {
      const int64_t n = sources[p].num_rows();
      next[p] = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
      left[p] = static_cast<int64_t>(rng() % static_cast<uint64_t>(n - next[p] + 1));
      total += left[p];
    }
    const int64_t want = std::min<int64_t>(total, 1 + static_cast<int64_t>(rng() % 300));
    std::vector<RowRef> rows;
    while (static_cast<int64_t>(rows.size()) < want) {
      const auto p = static_cast<uint32_t>(rng() % parts);
      if (left[p] == 0) continue;
      rows.push_back({p, static_cast<uint32_t>(next[p]++)});
      --left[p];
    }
    if (rows.empty()) continue;
    check_gathered(sch, sources, rows, gather(sch, sources, std::span<const RowRef>(rows)));
    if (rows.size() > 2 && round % 2 == 0) {
      std::swap(rows[0], rows[rows.size() - 1]);  // out of order (or a source's rows swapped): one by one
      check_gathered(sch, sources, rows, gather(sch, sources, std::span<const RowRef>(rows)));
    }
  }
}

// Fixed-width columns gathered row by row go several of one width at a time (as many as keep 16
// source streams), with plain or streamed stores: every width, 1 to 20 sources (1 to 4 columns a
// pass), rows in any order, nulls, odd offsets; the same batch as a row-by-row copy either way.
TEST(gather_of_many_fixed_columns_equals_a_row_by_row_copy) {
  std::mt19937_64 rng(37);
  std::vector<Field> fields;
  const TypeId ids[] = {TypeId::kInt64, TypeId::kFloat32, TypeId::kUInt8, TypeId::kFloat64, TypeId::kInt16,
                        TypeId::kInt32, TypeId::kTimestamp, TypeId::kUInt16, TypeId::kUInt32, TypeId::kInt8};
  for (int c = 0; c < 21; ++c) fields.push_back({"c" + std::to_string(c), type(ids[c % 10]), true});
  fields.push_back({"s", type(TypeId::kUtf8), true});
  auto sch = fixtures::schema(fields);
  for (int round = 0; round < 120; ++round) {
    const size_t parts = 1 + rng() % 20;
    std::vector<Batch> sources;
    for (size_t p = 0; p < parts; ++p) {
      const int64_t n = 1 + static_cast<int64_t>(rng() % 100);
      Batch whole = random_rows(rng, sch, n, [&](size_t c) { return c % 3 == 0 && rng() % 8 == 0; });
      const int64_t cut = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
      sources.push_back(whole.slice(cut, n - cut));
    }
    std::vector<RowRef> rows(1 + rng() % 300);
    for (RowRef& r : rows) {
      r.source = static_cast<uint32_t>(rng() % parts);
      r.row = static_cast<uint32_t>(rng() % static_cast<uint64_t>(sources[r.source].num_rows()));
    }
    const std::span<const RowRef> refs(rows);
    check_gathered(sch, sources, rows, gather(sch, sources, refs, round % 2 == 0 ? Stores::kStreamed : Stores::kCached));
  }
}

// gather_kept() of a filter's selection against a row-by-row copy, on each of its paths: no row, one
// run (a slice), long runs (a run at a time) and scattered rows (one by one, bitmaps compressed a
// word at a time): every layout, sources at odd offsets, nulls and selections at every density.
TEST(gather_kept_equals_a_row_by_row_copy) {
  std::mt19937_64 rng(31);
  auto sch = every_layout_schema();
  for (int round = 0; round < 400; ++round) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 300);
    const int nulls = static_cast<int>(rng() % 3);  // none, 1 in 16, half
    const Batch whole = random_rows(rng, sch, n + 7, [&](size_t) { return nulls == 1 ? rng() % 16 == 0 : nulls == 2 && rng() % 2 == 0; });
    const Batch in = whole.slice(static_cast<int64_t>(rng() % 8), n);  // odd offsets
    const int shape = static_cast<int>(rng() % 5);  // none, all, sparse, half, long runs
    std::vector<uint64_t> keep(static_cast<size_t>((n + 63) / 64), 0);
    std::vector<RowRef> rows;
    bool on = false;
    for (int64_t i = 0; i < n; ++i) {
      switch (shape) {
        case 0: on = false; break;
        case 1: on = true; break;
        case 2: on = rng() % 16 == 0; break;
        case 3: on = rng() % 2 == 0; break;
        default: on = rng() % 12 == 0 ? !on : on; break;
      }
      if (!on) continue;
      keep[static_cast<size_t>(i / 64)] |= uint64_t{1} << (i % 64);
      rows.push_back({0, static_cast<uint32_t>(i)});
    }
    check_gathered(sch, {in}, rows, gather_kept(sch, in, keep.data()));
  }
}

// Exact float sums (core/exact_sum.h), with the WideSum fallback as window::AggStates uses it.
struct Summer {
  ExactSum fast{};
  WideSum wide;
  bool spilled = false;
  void add(double x) {
    if ((!spilled || !std::isfinite(x)) && fast.add(x)) return;
    move_to_wide();
    wide.add(x);
  }
  void add(const Summer& o) {
    fast.special |= o.fast.special;
    if (!spilled && !o.spilled && fast.add(o.fast)) return;
    move_to_wide();
    wide.add(o.fast);
    if (o.spilled) wide.add(o.wide);
  }
  void move_to_wide() {
    if (spilled) return;
    wide.add(fast);
    fast.m = 0;
    spilled = true;
  }
  double value() const { return fast.value(spilled ? wide.round() : fast.round()); }
};

double exact_sum(const std::vector<double>& xs) {
  Summer s;
  for (double x : xs) s.add(x);
  return s.value();
}

bool same_bits(double a, double b) { return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b); }

TEST(exact_sum_rounds_the_true_sum_once) {
  CHECK_EQ(exact_sum({0.1, 0.2, 0.3}), 0.6);  // added in order: 0.6000000000000001
  CHECK_EQ(exact_sum({1e300, 1e-300, -1e300}), 1e-300);  // needs the WideSum
  CHECK_EQ(exact_sum({DBL_MAX, DBL_MAX, -DBL_MAX}), DBL_MAX);  // no intermediate overflow
  CHECK_EQ(exact_sum({DBL_MAX, DBL_MAX}), INFINITY);
  CHECK_EQ(exact_sum({-DBL_MAX, -DBL_MAX / 2}), -INFINITY);
  CHECK_EQ(exact_sum({5e-324, 5e-324}), 1e-323);
  CHECK_EQ(exact_sum({DBL_MIN, -5e-324}), std::nextafter(DBL_MIN, 0.0));
  CHECK(same_bits(exact_sum({}), 0.0));
  CHECK(same_bits(exact_sum({-0.0, -0.0}), 0.0));
  CHECK(same_bits(exact_sum({1.5, -1.5}), 0.0));
  // Ties go to the even neighbour; a set bit below the tie breaks it.
  const double ulp_half = std::ldexp(1.0, -53);
  CHECK_EQ(exact_sum({1.0, ulp_half}), 1.0);
  CHECK_EQ(exact_sum({1.0 + 2 * ulp_half, ulp_half}), 1.0 + 4 * ulp_half);
  CHECK_EQ(exact_sum({1.0, ulp_half, std::ldexp(1.0, -200)}), 1.0 + 2 * ulp_half);
  CHECK_EQ(exact_sum({1e300, 1.0, ulp_half, std::ldexp(1.0, -900), -1e300}), 1.0 + 2 * ulp_half);
  CHECK_EQ(exact_sum({1e300, 1.0, ulp_half, std::ldexp(1.0, -900), -1e300, -std::ldexp(1.0, -900)}), 1.0);
  // Subnormal results round on the subnormal grid.
  CHECK_EQ(exact_sum({std::ldexp(1.0, -1070), std::ldexp(1.0, -1074) * 3, -std::ldexp(1.0, -1070)}), 1.5e-323);
  // Flags: NaN wins; both infinities make NaN; one infinity wins over any finite part.
  CHECK(std::isnan(exact_sum({1.0, NAN, INFINITY})));
  CHECK(std::isnan(exact_sum({INFINITY, 1e300, -INFINITY})));
  CHECK_EQ(exact_sum({-INFINITY, 1e300, 1e-300}), -INFINITY);
}

// ExactSum::round() against integer rounding (the nearest double, ties to even, on the subnormal
// grid below 2^-1022) of random sums: magnitudes of 1 to 125 bits, scales from the least subnormal
// to past the largest double, exact ties and ties broken by a low bit.
TEST(exact_sum_round_is_the_nearest_double) {
  using u128 = unsigned __int128;
  auto reference = [](__int128 m, int32_t scale) {
    const u128 mag = m < 0 ? -static_cast<u128>(m) : static_cast<u128>(m);
    int length = 0;
    while (length < 128 && (mag >> length) != 0) ++length;
    const int32_t top = scale + length - 1;
    const int precision = top >= -1022 ? 53 : top + 1075;
    const int shift = std::max(length - precision, 0);
    auto q = static_cast<uint64_t>(mag >> shift);
    if (shift > 0) {
      const u128 half = u128{1} << (shift - 1);
      const u128 rest = mag & ((half << 1) - 1);
      if (rest > half || (rest == half && (q & 1) != 0)) ++q;
    }
    const double r = std::ldexp(static_cast<double>(q), scale + shift);
    return m < 0 ? -r : r;
  };
  std::mt19937_64 rng(37);
  for (int trial = 0; trial < 200000; ++trial) {
    const int bits = 1 + static_cast<int>(rng() % 125);
    u128 mag = (static_cast<u128>(rng()) << 64 | rng()) >> (128 - bits);
    mag |= u128{1} << (bits - 1);
    if (bits > 54 && trial % 3 == 0) {
      // An exact tie at the 53rd bit (or one broken by the lowest bit).
      const int cut = bits - 54;
      mag = (mag >> (cut + 1) << (cut + 1)) | (u128{1} << cut) | static_cast<u128>(trial % 2);
    }
    ExactSum s{};
    s.m = trial % 2 == 0 ? static_cast<__int128>(mag) : -static_cast<__int128>(mag);
    s.scale = -1074 + static_cast<int32_t>(rng() % 2200);
    const double want = reference(s.m, s.scale);
    const double got = s.round();
    if (!same_bits(got, want)) {
      CHECK(same_bits(got, want));
      break;
    }
  }
}

// The result does not depend on the order of the terms or on how partial sums are grouped, with
// and without the WideSum (terms spanning few or many orders of magnitude).
TEST(exact_sum_is_independent_of_order_and_grouping) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int spread = trial % 3 == 0 ? 600 : trial % 3 == 1 ? 40 : 4;
    std::uniform_int_distribution<int> exponent(-spread, spread);
    std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
    std::vector<double> xs(1 + rng() % 200);
    for (double& x : xs) x = std::ldexp(mantissa(rng), exponent(rng));
    if (trial % 5 == 0) xs.push_back(-xs[0]);  // cancellation
    const double want = exact_sum(xs);
    std::shuffle(xs.begin(), xs.end(), rng);
    CHECK(same_bits(exact_sum(xs), want));
    // Partial sums of random runs, merged in a random order.
    std::vector<Summer> parts;
    for (size_t i = 0; i < xs.size();) {
      const size_t n = 1 + rng() % 17;
      Summer p;
      for (size_t j = i; j < std::min(xs.size(), i + n); ++j) p.add(xs[j]);
      parts.push_back(p);
      i += n;
    }
    std::shuffle(parts.begin(), parts.end(), rng);
    Summer all;
    for (const Summer& p : parts) all.add(p);
    CHECK(same_bits(all.value(), want));
    // The WideSum alone agrees.
    WideSum w;
    for (double x : xs) w.add(x);
    CHECK(same_bits(w.round(), want));
  }
}

UNIT_MAIN()
