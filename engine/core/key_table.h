#pragma once
// Group-by keys: each distinct key of one or more columns gets a dense id (0, 1, 2, ...), so
// window state is indexed by arrays rather than hashed once per window.
//
// A key is stored in an order-preserving byte encoding: comparing two encodings bytewise gives
// the output order of docs/semantics.md (each column ascending, null last, NaN after every
// number, -0.0 equal to 0.0, strings by UTF-8 bytes). One encoding gives hashing, equality,
// ordering and, decoded, the output values. A single fixed-width key column (the common case:
// meter, song, user ids) uses the same order packed into one uint64, looked up in an array
// indexed by value while the keys lie close together, and in a flat hash table otherwise. Other
// keys (several columns, strings) keep their encodings back to back in one arena and find them
// through an open-addressing table of (hash, id): no allocation per key, so a table of millions
// of keys (per-user sessions) costs its bytes, not a heap node and a string each.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/batch.h"
#include "core/builder.h"

namespace pao {

// The value of a fixed-width or bool column at `row` as an unsigned integer whose order is the key
// order (signed values offset by 2^(bits-1); floats by the usual sign flip, every NaN one value above
// +inf, -0.0 folded into 0.0). Equal results mean equal keys. Not for string columns; the caller
// checks validity.
uint64_t key_order_value_of_any(const DataType& type, const Column& c, int64_t row);
// The same, with int64 and timestamp columns (ids and times, the usual keys) read inline.
inline uint64_t key_order_value(const DataType& type, const Column& c, int64_t row) {
  if (type.id == TypeId::kInt64 || type.id == TypeId::kTimestamp) {
    return static_cast<uint64_t>(c.typed<int64_t>()[row]) + (uint64_t{1} << 63);
  }
  return key_order_value_of_any(type, c, row);
}

class KeyTable {
 public:
  // `columns`: indices of the key columns in `schema`; empty for a single group.
  KeyTable(const Schema& schema, std::vector<size_t> columns);

  // The id of row `row`'s key, assigning the next id to a new key.
  uint32_t id(const Batch& batch, int64_t row) {
    if (columns_.empty()) return 0;
    if (lent_ > count_) settle();
    if (packed_) return packed_id(batch.column(columns_[0]), row);
    return encoded_id(batch, row);
  }
  // id() of rows[i] into out[i] for each i (out is resized), new keys numbered in row order: the
  // bulk path of the partitioned operators. The keys are read column by column (one type dispatch
  // per column), then looked up with the table entry of a row a few places ahead already
  // requested from memory, so a table larger than the caches (millions of keys) costs overlapping
  // misses rather than one full miss per row.
  void ids(const Batch& batch, std::span<const int64_t> rows, std::vector<uint32_t>& out);
  // How many rows ahead ids() requests table entries, and the keyed operators their per-key
  // state: enough to overlap several misses, few enough that the lines are still cached when
  // their row comes. A lookup costs a few ns besides its miss, so 8 rows ahead (the old value)
  // was under one memory latency: on the sessions pipeline (10M clicks, 1M users, 1 worker)
  // sessionize took 35.5-36.4 ns per tuple at 8, 20.6-24.3 at 32, 17.7-20.7 at 64.
  static constexpr size_t kPrefetchAhead = 32;
  // Keyed fusion (ops/operator.h, KeyedRows): this table stands in for `lender`, a table over the
  // same key columns that has been fed the same rows in the same order, so it numbers the keys
  // as this table would. Its keys new to this table are lent rather than taken in: size() counts
  // them, and the methods that look keys up or add them (id, ids, set_columns) take them in first
  // (settle). So a fused chain's later members keep no copy of the first member's keys while it
  // runs: the sessions pipeline's `running` took 44.3-45.2 ns per tuple with a copy (each new
  // key looked up and added again), 35.8-36.8 without (4 inputs, 2 workers). The readers
  // (find, append, append_each, sort) need the keys taken in: a checkpoint settles first. A
  // lender's own lender, if any, lends in its place, so every lent key comes from the table that
  // holds it. `lender` must outlive this table's lent state: the members of a chain get new
  // tables together (Operator::set_partitions), and a chain lends anew on every piece.
  void lend(const KeyTable& lender) {
    lender_ = lender.lender_ != nullptr ? lender.lender_ : &lender;
    lent_ = std::max(lent_, lender.size());
  }
  // Takes in the keys lent so far, checking that each gets the lender's id (kUsage otherwise).
  void settle();
  // The id of row `row`'s key if the table has it, without adding it. Const: several threads may
  // call it at once while nobody calls id() (a lookup table built once, then read).
  std::optional<uint32_t> find(const Batch& batch, int64_t row) const;
  size_t size() const noexcept { return columns_.empty() ? 1 : std::max(count_, lent_); }
  // Output order of two ids (keys taken in: see lend()).
  bool less(uint32_t a, uint32_t b) const noexcept {
    if (packed_) {
      if (a == null_id_ || b == null_id_) return b == null_id_ && a != b;  // null sorts last
      return value_of_[a] < value_of_[b];
    }
    return encoding(a) < encoding(b);  // char_traits<char> compares as unsigned char: bytewise
  }
  // Appends key `id`'s values to builders[first..first + columns).
  void append(uint32_t id, std::vector<ColumnBuilder>& builders, size_t first) const;
  // append() of ids[order[i]] for i < n: the bulk path of emitting a window's rows.
  void append_each(const uint32_t* ids, const uint32_t* order, size_t n, std::vector<ColumnBuilder>& builders,
                   size_t first) const;
  // Sorts `order`, the positions 0..order.size() - 1 of `ids` (distinct key ids), into output
  // order. A packed key is sorted by its normalized value without comparisons (a window set of
  // the song queries has thousands of keys): values dense in their range by one bit per value,
  // others by radix, a few passes over the positions rather than n log n indirect loads; other
  // keys compare their encodings.
  void sort(const uint32_t* ids, std::vector<uint32_t>& order);

  const std::vector<size_t>& columns() const noexcept { return columns_; }
  // Reads the same keys from other columns of batches of another schema (their types must be the
  // key's, in order): a checkpoint's state batch holds the keys first (ops/partitioned.h).
  void set_columns(std::vector<size_t> columns) {
    if (lent_ > count_) settle();
    columns_ = std::move(columns);
  }

 private:
  uint32_t packed_id(const Column& c, int64_t row);
  // The id of the packed key of normalized value `v` (not the null key), added if new.
  uint32_t value_id(uint64_t v);
  uint32_t encoded_id(const Batch& batch, int64_t row);
  // Appends the order-preserving encoding of row `row`'s key (the encoded path) to `out`.
  void encode(const Batch& batch, int64_t row, std::string& out) const;
  uint32_t add_packed(uint64_t normalized);
  // A value outside dense_'s range: widens the range, or leaves the dense path for good.
  uint32_t dense_miss(uint64_t normalized);
  // The widest range of values dense_ may cover for the keys so far.
  uint64_t dense_limit() const noexcept;
  // dense_ rebuilt over [dense_min_, dense_max_] with room to spare (at least `at_least`
  // entries, within dense_limit()), holding every key; dense lookups on.
  void make_dense(uint64_t at_least);
  uint32_t hashed_id(uint64_t normalized);
  // Rebuilds the hash table with `size` (a power of two) entries from value_of_.
  void rehash(size_t size);

  // A reader called with keys lent and not yet taken in: a bug in the caller (kUsage).
  [[noreturn]] void unsettled() const;

  std::vector<size_t> columns_;
  std::vector<DataType> types_;
  size_t count_ = 0;
  // lend(): ids [count_, lent_) are the lender's keys, not yet taken in.
  const KeyTable* lender_ = nullptr;
  size_t lent_ = 0;

  // Packed path: a flat table of normalized values; the null key, if seen, is null_id_.
  bool packed_ = false;
  int width_ = 0;
  // Dense ids first: while the keys' values span at most about kDenseSpread times their number
  // (ids and codes, such as the benchmarks' meter and song numbers), id = dense_[v - dense_lo_]
  // (kEmpty: not seen). That is one 4-byte load from an array about the keys' size, where the
  // hash table below takes 16 bytes per entry at up to 4 entries per key: 40,000 song keys are
  // 160 KB dense, which stays in L2, against 2 MB hashed, which does not (a cache miss per
  // tuple on that query's rarely seen songs). The first value outside that spread moves every
  // key into the hash table; the keys move back when the table grows and they fill their range
  // again (a few ids seen first in random order look spread; dense_min_ and dense_max_ are kept
  // in both modes for that).
  bool dense_on_ = true;
  uint64_t dense_lo_ = 0;              // dense_[i] is the id of value dense_lo_ + i
  uint64_t dense_min_ = 0, dense_max_ = 0;  // the least and greatest key value (once there is one)
  std::vector<uint32_t> dense_;
  // Open addressing; a value and its id side by side, so a probe touches one cache line.
  struct Entry {
    uint64_t value;
    uint32_t id;  // kEmpty: a free entry
  };
  std::vector<Entry> slots_;
  uint32_t null_id_ = UINT32_MAX;
  std::vector<uint64_t> value_of_;  // id -> normalized value
  struct Ranked {
    uint64_t value;
    uint32_t position;
  };
  std::vector<Ranked> ranked_, spare_;  // sort()'s buffers
  std::vector<uint64_t> seen_;          // sort() of dense values: a bit per value in the range
  std::vector<uint32_t> at_;            // and the position holding each marked value

  // Encoded path: key id i's encoding is arena_[ends_[i - 1], ends_[i]) (from 0 for i = 0), its
  // hash hash_of_[i]; slots_ holds (hash, id) pairs (Entry::value = the hash), grown at half full.
  std::string_view encoding(uint32_t id) const noexcept {
    const size_t begin = id == 0 ? 0 : ends_[id - 1];
    return {arena_.data() + begin, ends_[id] - begin};
  }
  // The id of the key encoded as `key` with hash `hash`, or kEmpty; `slot` receives where the
  // probe stopped (the free entry a new key goes to).
  uint32_t probe_encoded(std::string_view key, uint64_t hash, size_t& slot) const noexcept;
  // Adds the key `key` (hash `hash`) at `slot`, where probe_encoded() stopped; returns its id.
  uint32_t insert_encoded(std::string_view key, uint64_t hash, size_t slot);
  void rehash_encoded(size_t size);
  size_t fixed_stride_ = 0;  // the encoding's length when every key column is fixed-width; else 0
  std::string scratch_;
  std::vector<uint64_t> bulk_values_;  // ids(): the rows' normalized values or hashes
  std::vector<uint64_t> bulk_ends_;    // ids(), encoded path: each row's encoding's end in scratch_
  std::string arena_;
  std::vector<uint64_t> ends_;
  std::vector<uint64_t> hash_of_;
};

// A hash of each row's key in `columns` of `batch`, out[r] for rows [0, batch.num_rows()): rows
// whose keys KeyTable calls equal (-0.0 and 0.0, every NaN, nulls) hash equal, so routing rows
// to partitions by it sends each key to one partition. Column by column, so the type dispatch is
// once per column.
void key_hashes(const Batch& batch, const std::vector<size_t>& columns, std::vector<uint64_t>& out);
// The partition of `partitions` a row of key hash `hash` (key_hashes) goes to: the high bits of
// hash * partitions, uniform without a division. The runtime routes by it, and a checkpoint's
// state goes back to the partitions by it.
inline uint32_t partition_of(uint64_t hash, size_t partitions) noexcept {
  return static_cast<uint32_t>((static_cast<unsigned __int128>(hash) * partitions) >> 64);
}

}  // namespace pao
