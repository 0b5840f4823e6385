#pragma once
// Building new batches from rows of existing ones.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/batch.h"

namespace pao {

// Rows [start, start + length) of sources[source].
struct Segment {
  uint32_t source;
  int64_t start;
  int64_t length;
};

// Appends rows [start, start + length) of sources[source] to `segments`, extending the last
// segment when they follow it in the same source: how a row-by-row choice of rows becomes
// gather()'s segments.
inline void append_rows(std::vector<Segment>& segments, uint32_t source, int64_t start, int64_t length) {
  if (!segments.empty() && segments.back().source == source && segments.back().start + segments.back().length == start) {
    segments.back().length += length;
  } else {
    segments.push_back({source, start, length});
  }
}
inline void append_row(std::vector<Segment>& segments, uint32_t source, int64_t row) {
  append_rows(segments, source, row, 1);
}

// One row of sources[source] (row < 2^32): a segment of one row. Inputs that interleave finely
// make segments of a row or two; a gather through one RowRef per row costs no branch per segment
// per column, where a loop over segments mispredicts each one's length once per column.
struct RowRef {
  uint32_t source;
  uint32_t row;
};

// Copies the rows the segments name, in segment order, into one new batch that owns its buffers.
// Every source must have `schema`'s layout. Works column by column so the type dispatch happens
// once per column, not once per row. Throws pao::Error if a utf8 column would pass 2 GiB.
// Segments of under two rows on average are copied row by row (through RowRefs made once for
// all columns, in a buffer each thread keeps), longer ones a segment at a time.
Batch gather(std::shared_ptr<const Schema> schema, std::span<const Batch> sources,
             std::span<const Segment> segments);
// How a gather writes its columns. kCached: plain stores, so an operator that reads the batch at
// once finds it in cache. kStreamed: for a batch read only after much else is written (merge()'s
// result, which the caller collects whole): fixed-width values of 4 and 8 bytes gathered row by
// row go around the cache (non-temporal stores, then a store fence before the batch is handed on),
// which spares the read of each line from memory that a plain store to a line not in cache makes
// first.
enum class Stores { kCached, kStreamed };

// Rows that take each source's rows in order, one after another (a merge's), marked by the caller
// as it writes them: source s's rows are the set bits of words [s * stride, s * stride + (rows + 63)
// / 64) of `words` (bit r % 64 of word r / 64 for rows[r]; none past the rows). For up to
// kMaxSources sources, where a gather plans such rows' bitmaps and string bytes by source: more
// than a gather plans by itself, as the marks cost it nothing. On the merge of smart-meter
// readings (benchmarks/merge.py, one thread) marks against rows one by one: 75 against 68-72 M t/s
// at 20 inputs, 68 against 66-67 at 24, 63 against 65-66 at 28, 59 against 62-63 at 32.
struct SourceMasks {
  static constexpr size_t kMaxSources = 24;
  const uint64_t* words;
  size_t stride;
};

// The same for rows named one by one (a merge of finely interleaved inputs decides its order a
// row at a time, so it writes RowRefs directly instead of segments). With `masks` the gather takes
// them as its plan of the rows instead of making one in a pass over them.
Batch gather(std::shared_ptr<const Schema> schema, std::span<const Batch> sources, std::span<const RowRef> rows,
             Stores stores = Stores::kCached, const SourceMasks* masks = nullptr);

// The rows of `in` whose bit is set in `keep` (a filter's selection: bit i of word i / 64 for row
// i, in (in.num_rows() + 63) / 64 words, bits past the rows zero), in row order, under `schema`
// (`in`'s layout). One run is a zero-copy slice; runs of two rows or more on average are copied a
// run at a time; scattered rows one by one, their bitmaps compressed a word of 64 rows at a time.
Batch gather_kept(std::shared_ptr<const Schema> schema, const Batch& in, const uint64_t* keep);

// Rows of `sources`, not yet copied: a gather() decided by one thread and carried out by others,
// each copying a range of the rows (gather_range). Named by segments, or one by one (RowRefs) where
// the rows interleave finely: a RowRef is a third of a Segment and needs no ends, and a range of
// them is gathered without copying its part of the plan. Immutable once made, so any number of
// threads may read one plan at once.
struct GatherPlan {
  std::shared_ptr<const Schema> schema;
  std::vector<Batch> sources;
  std::vector<Segment> segments;
  std::vector<int64_t> ends;  // ends[s]: the rows of segments 0..s together
  std::vector<RowRef> refs;   // or the rows one by one (then segments and ends are empty)
  GatherPlan(std::shared_ptr<const Schema> schema, std::vector<Batch> sources, std::vector<Segment> segments);
  GatherPlan(std::shared_ptr<const Schema> schema, std::vector<Batch> sources, std::vector<RowRef> refs);
  int64_t rows() const noexcept {
    return !refs.empty() ? static_cast<int64_t>(refs.size()) : ends.empty() ? 0 : ends.back();
  }
};
// Rows [begin, end) of `plan` as a batch: a zero-copy slice when they are consecutive rows of one
// source, otherwise gathered.
Batch gather_range(const GatherPlan& plan, int64_t begin, int64_t end);

// The inverse placement: row j of sources[p] becomes row positions[p][j] of a new batch of `rows`
// rows that owns its buffers; every position in [0, rows) is named exactly once. For columns of
// fixed width (no bools, no strings), which scatter() takes: one store per value, where a gather
// of rows that alternate between sources would make a segment per row. Every source must have
// `schema`'s layout.
bool can_scatter(const Schema& schema);
Batch scatter(std::shared_ptr<const Schema> schema, std::span<const Batch> sources,
              std::span<const std::vector<int64_t>> positions, int64_t rows);

}  // namespace pao
