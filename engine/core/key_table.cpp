#include "core/key_table.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <string_view>

#include "core/error.h"
#include "core/prefetch.h"
#include "core/values.h"

namespace pao {
namespace {

constexpr uint32_t kEmpty = UINT32_MAX;

// A hash of an encoded key: eight bytes at a time folded by multiply and shift, then a final
// mix so that the low bits (the slot) depend on every byte. Keys here are short (two 64-bit
// columns encode in 18 bytes), so a word loop beats a general-purpose byte hash.
uint64_t hash_bytes(std::string_view key) noexcept {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ key.size();
  const char* p = key.data();
  size_t n = key.size();
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  if (n > 0) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

// Inverse of key_order_value(): appends the value to `b`.
void append_normalized(ColumnBuilder& b, uint64_t v) {
  const DataType& type = b.type();
  switch (type.id) {
    case TypeId::kBool:
      b.append_bool(v != 0);
      return;
    case TypeId::kFloat32: {
      const auto n = static_cast<uint32_t>(v);
      const uint32_t bits = n == 0xFFFFFFFFu ? std::bit_cast<uint32_t>(std::nanf(""))
                            : (n >> 31)      ? (n & 0x7FFFFFFFu)
                                             : ~n;
      b.append_fixed(&bits);
      return;
    }
    case TypeId::kFloat64: {
      const uint64_t bits = v == ~uint64_t{0} ? std::bit_cast<uint64_t>(std::nan(""))
                            : (v >> 63)       ? (v & ~(uint64_t{1} << 63))
                                              : ~v;
      b.append_fixed(&bits);
      return;
    }
    default:
      break;
  }
  const int w = type.byte_width();
  const uint64_t raw = is_signed_storage(type.id) ? v - (uint64_t{1} << (w * 8 - 1)) : v;
  b.append_fixed(&raw);  // little-endian: the low w bytes are the value
}

int normalized_bytes(const DataType& type) {
  return type.id == TypeId::kBool ? 1 : type.byte_width();
}

}  // namespace

uint64_t key_order_value_of_any(const DataType& type, const Column& c, int64_t row) {
  const int64_t i = c.offset + row;
  switch (type.id) {
    case TypeId::kBool:
      return get_bit(static_cast<const uint8_t*>(c.values), i);
    case TypeId::kFloat32: {
      float f = static_cast<const float*>(c.values)[i];
      if (std::isnan(f)) return 0xFFFFFFFFu;
      if (f == 0.0f) f = 0.0f;
      const uint32_t b = std::bit_cast<uint32_t>(f);
      return (b >> 31) ? ~b : (b | 0x80000000u);
    }
    case TypeId::kFloat64: {
      double f = static_cast<const double*>(c.values)[i];
      if (std::isnan(f)) return ~uint64_t{0};
      if (f == 0.0) f = 0.0;
      const uint64_t b = std::bit_cast<uint64_t>(f);
      return (b >> 63) ? ~b : (b | (uint64_t{1} << 63));
    }
    default:
      break;
  }
  const int w = type.byte_width();
  const auto* p = static_cast<const uint8_t*>(c.values) + i * w;
  if (is_signed_storage(type.id)) {
    int64_t v = 0;
    switch (w) {
      case 1: v = *reinterpret_cast<const int8_t*>(p); break;
      case 2: { int16_t x; std::memcpy(&x, p, 2); v = x; break; }
      case 4: { int32_t x; std::memcpy(&x, p, 4); v = x; break; }
      default: std::memcpy(&v, p, 8); break;
    }
    return static_cast<uint64_t>(v) + (uint64_t{1} << (w * 8 - 1));
  }
  uint64_t v = 0;
  std::memcpy(&v, p, static_cast<size_t>(w));
  return v;
}

KeyTable::KeyTable(const Schema& schema, std::vector<size_t> columns) : columns_(std::move(columns)) {
  for (size_t c : columns_) types_.push_back(schema.fields[c].type);
  packed_ = columns_.size() == 1 && types_[0].layout() != Layout::kOffsets32 &&
            types_[0].layout() != Layout::kOffsets64;
  if (packed_) width_ = normalized_bytes(types_[0]);
  if (!packed_) {
    for (const DataType& t : types_) {
      if (is_string(t.id)) {
        fixed_stride_ = 0;
        break;
      }
      fixed_stride_ += 1 + static_cast<size_t>(normalized_bytes(t));
    }
  }
}

uint32_t KeyTable::add_packed(uint64_t v) {
  const auto id = static_cast<uint32_t>(count_++);
  value_of_.push_back(v);
  return id;
}

uint32_t KeyTable::packed_id(const Column& c, int64_t row) {
  if (c.validity != nullptr && !c.is_valid(row)) {
    if (null_id_ == kEmpty) null_id_ = add_packed(0);
    return null_id_;
  }
  return value_id(key_order_value(types_[0], c, row));
}

void KeyTable::settle() {
  const KeyTable* lender = lender_;
  const size_t lent = lent_;
  lender_ = nullptr;
  lent_ = 0;
  if (lent <= count_ || columns_.empty()) return;  // nothing lent (a single group has no keys)
  const KeyTable& from = *lender;
  if (from.columns_.size() != columns_.size() || from.packed_ != packed_) {
    throw Error(ErrorKind::kUsage, "a key table lent keys of another shape");
  }
  // In id order, so each key gets the id it has in the lender: ids number keys in order of
  // first appearance, and the lender's first appearances are this table's.
  while (count_ < lent) {
    const auto want = static_cast<uint32_t>(count_);
    uint32_t got;
    if (packed_) {
      got = want == from.null_id_ ? (null_id_ = add_packed(0)) : value_id(from.value_of_[want]);
    } else {
      const std::string_view key = from.encoding(want);
      const uint64_t hash = from.hash_of_[want];
      if (slots_.empty()) rehash_encoded(1024);
      size_t slot;
      got = probe_encoded(key, hash, slot);
      if (got == kEmpty) got = insert_encoded(key, hash, slot);
    }
    if (got != want) {
      throw Error(ErrorKind::kUsage, "key tables of a fused chain disagree: the lender's key " + std::to_string(want) +
                                         " is key " + std::to_string(got) + " here");
    }
  }
}

void KeyTable::unsettled() const {
  throw Error(ErrorKind::kUsage, "a key table read with " + std::to_string(lent_ - count_) +
                                     " lent keys not taken in (KeyTable::settle)");
}

uint32_t KeyTable::value_id(uint64_t v) {
  if (dense_on_) {
    const uint64_t i = v - dense_lo_;  // wraps to a large value below dense_lo_
    if (i < dense_.size() && dense_[i] != kEmpty) return dense_[i];
    return dense_miss(v);
  }
  return hashed_id(v);
}

uint32_t KeyTable::dense_miss(uint64_t v) {
  const uint64_t n = dense_.size();
  if (v - dense_lo_ < n) {  // a new key inside the range
    dense_min_ = std::min(dense_min_, v);
    dense_max_ = std::max(dense_max_, v);
    return dense_[v - dense_lo_] = add_packed(v);
  }
  // The range must cover v: widen it, at least doubling (amortized O(1) per key when keys arrive
  // in value order), while the keys' values span at most kDenseSpread entries per key, or
  // kDenseFloor entries (a few keys seen in random order of a small range, such as the first
  // songs, look spread).
  const uint64_t lo = n == 0 ? v : std::min(v, dense_min_);
  const uint64_t hi = n == 0 ? v : std::max(v, dense_max_);
  dense_min_ = lo;
  dense_max_ = hi;
  if (hi - lo >= dense_limit()) {
    // Spread-out values: hash the keys, until enough of them fill their range (hashed_id).
    dense_on_ = false;
    std::vector<uint32_t>().swap(dense_);
    rehash(std::bit_ceil(std::max<size_t>(1024, 4 * (count_ + 1))));
    return hashed_id(v);
  }
  make_dense(std::max<uint64_t>(2 * n, 64));
  return dense_[static_cast<size_t>(v - dense_lo_)] = add_packed(v);
}

uint64_t KeyTable::dense_limit() const noexcept {
  // 16 entries of 4 bytes per key: at most twice a hash table's 16-byte slots, a quarter to half
  // full, for one load per lookup instead of a hash and a probe; and a partition of a keyed
  // operator holds 1 key in P of a range (routed by hash), so 8 partitions of 100,000 meter ids
  // fill their range an eighth (at 8 per key, half of them hashed).
  constexpr uint64_t kDenseSpread = 16;
  constexpr uint64_t kDenseFloor = uint64_t{1} << 16;  // 256 KB
  return std::max(kDenseSpread * (count_ + 1), kDenseFloor);
}

void KeyTable::make_dense(uint64_t at_least) {
  // The spare room split around the keys' values [dense_min_, dense_max_] (either side may get
  // the next new key), clamped to the value range [0, 2^64 - 1].
  const uint64_t lo = dense_min_, hi = dense_max_;
  const uint64_t size = std::min(dense_limit(), std::max(hi - lo + 1, at_least));
  const uint64_t spare = size - (hi - lo + 1);
  const uint64_t top = ~uint64_t{0};
  const uint64_t new_lo = std::min(lo - std::min(lo, spare / 2), top - (size - 1));
  std::vector<uint32_t> grown(static_cast<size_t>(size), kEmpty);
  for (uint32_t id = 0; id < value_of_.size(); ++id) {
    if (id != null_id_) grown[static_cast<size_t>(value_of_[id] - new_lo)] = id;
  }
  dense_.swap(grown);
  dense_lo_ = new_lo;
  dense_on_ = true;
}

uint32_t KeyTable::hashed_id(uint64_t v) {
  const size_t mask = slots_.size() - 1;
  size_t s = static_cast<size_t>((v * 0x9E3779B97F4A7C15ULL) >> 20) & mask;
  for (;;) {
    const Entry& e = slots_[s];
    if (e.id == kEmpty) break;
    if (e.value == v) return e.id;
    s = (s + 1) & mask;
  }
  const uint32_t id = add_packed(v);
  slots_[s] = {v, id};
  dense_min_ = std::min(dense_min_, v);
  dense_max_ = std::max(dense_max_, v);
  if (count_ * 2 > slots_.size()) {  // grow at half full: probes stay short
    // Keys that looked spread while few (the first of 100,000 meter ids in random order) may
    // fill their range once many: then one array load per lookup beats a probe (dense_limit()).
    if (dense_max_ - dense_min_ < dense_limit()) {
      make_dense(0);
      std::vector<Entry>().swap(slots_);
    } else {
      rehash(slots_.size() * 2);
    }
  }
  return id;
}

void KeyTable::rehash(size_t size) {
  slots_.assign(size, Entry{0, kEmpty});
  const size_t mask = size - 1;
  for (uint32_t id = 0; id < value_of_.size(); ++id) {
    if (id == null_id_) continue;
    size_t t = static_cast<size_t>((value_of_[id] * 0x9E3779B97F4A7C15ULL) >> 20) & mask;
    while (slots_[t].id != kEmpty) t = (t + 1) & mask;
    slots_[t] = {value_of_[id], id};
  }
}

void KeyTable::encode(const Batch& batch, int64_t row, std::string& out) const {
  for (size_t k = 0; k < columns_.size(); ++k) {
    const Column& c = batch.column(columns_[k]);
    const DataType& type = types_[k];
    if (c.validity != nullptr && !c.is_valid(row)) {
      out.push_back('\x01');  // after every value's '\x00': nulls last
      // A fixed-width column's null keeps the value's width (zeros), so every key of such columns
      // has one length (ids() writes them column by column).
      if (!is_string(type.id)) out.append(static_cast<size_t>(normalized_bytes(type)), '\x00');
      continue;
    }
    out.push_back('\x00');
    if (is_string(type.id)) {
      // Each 0x00 escaped as 0x00 0xFF, the end marked 0x00 0x00: bytewise order is string order.
      for (char ch : string_at(c, type, row)) {
        out.push_back(ch);
        if (ch == '\0') out.push_back('\xFF');
      }
      out.push_back('\x00');
      out.push_back('\x00');
    } else {
      // Big-endian, so bytewise order is numeric order.
      const uint64_t v = key_order_value(type, c, row);
      const int w = normalized_bytes(type);
      char bytes[8];
      for (int b = 0; b < w; ++b) bytes[b] = static_cast<char>(v >> (8 * (w - 1 - b)));
      out.append(bytes, static_cast<size_t>(w));
    }
  }
}

std::optional<uint32_t> KeyTable::find(const Batch& batch, int64_t row) const {
  if (columns_.empty()) return 0;
  if (lent_ > count_) unsettled();
  if (!packed_) {
    if (count_ == 0) return std::nullopt;
    std::string key;
    encode(batch, row, key);  // appends to the empty string
    size_t slot;
    const uint32_t id = probe_encoded(key, hash_bytes(key), slot);
    if (id == kEmpty) return std::nullopt;
    return id;
  }
  const Column& c = batch.column(columns_[0]);
  if (c.validity != nullptr && !c.is_valid(row)) {
    if (null_id_ == kEmpty) return std::nullopt;
    return null_id_;
  }
  const uint64_t v = key_order_value(types_[0], c, row);
  if (dense_on_) {
    const uint64_t i = v - dense_lo_;
    if (i < dense_.size() && dense_[i] != kEmpty) return dense_[i];
    return std::nullopt;
  }
  if (slots_.empty()) return std::nullopt;
  const size_t mask = slots_.size() - 1;
  for (size_t s = static_cast<size_t>((v * 0x9E3779B97F4A7C15ULL) >> 20) & mask;; s = (s + 1) & mask) {
    const Entry& e = slots_[s];
    if (e.id == kEmpty) return std::nullopt;
    if (e.value == v) return e.id;
  }
}

void KeyTable::ids(const Batch& batch, std::span<const int64_t> rows, std::vector<uint32_t>& out) {
  if (lent_ > count_) settle();
  const size_t n = rows.size();
  out.resize(n);
  if (columns_.empty()) {
    std::fill(out.begin(), out.end(), 0u);
    return;
  }
  if (packed_) {
    const Column& c = batch.column(columns_[0]);
    const DataType& type = types_[0];
    bulk_values_.resize(n);
    for (size_t i = 0; i < n; ++i) bulk_values_[i] = key_order_value(type, c, rows[i]);
    const bool nullable = c.validity != nullptr;
    for (size_t i = 0; i < n; ++i) {
      if (i + kPrefetchAhead < n) {
        const uint64_t v = bulk_values_[i + kPrefetchAhead];
        if (dense_on_) {
          const uint64_t d = v - dense_lo_;
          if (d < dense_.size()) pao::prefetch(&dense_[static_cast<size_t>(d)]);
        } else {
          pao::prefetch(&slots_[static_cast<size_t>((v * 0x9E3779B97F4A7C15ULL) >> 20) & (slots_.size() - 1)]);
        }
      }
      if (nullable && !c.is_valid(rows[i])) {
        if (null_id_ == kEmpty) null_id_ = add_packed(0);
        out[i] = null_id_;
        continue;
      }
      out[i] = value_id(bulk_values_[i]);
    }
    return;
  }
  // Encoded keys: every row's encoding into scratch_, back to back, with its hash.
  scratch_.clear();
  bulk_values_.resize(n);
  bulk_ends_.resize(n);
  if (fixed_stride_ > 0) {
    // Fixed-width columns only: every encoding has fixed_stride_ bytes, so each column writes its
    // part of every row's encoding in one loop (encode()'s bytes: a null flag, then the value
    // big-endian).
    scratch_.resize(n * fixed_stride_);
    size_t at = 0;
    for (size_t k = 0; k < columns_.size(); ++k) {
      const Column& c = batch.column(columns_[k]);
      const DataType& type = types_[k];
      const int w = normalized_bytes(type);
      const bool nullable = c.validity != nullptr;
      for (size_t i = 0; i < n; ++i) {
        char* to = scratch_.data() + i * fixed_stride_ + at;
        if (nullable && !c.is_valid(rows[i])) {
          to[0] = '\x01';
          std::memset(to + 1, 0, static_cast<size_t>(w));  // equal keys, equal bytes
          continue;
        }
        to[0] = '\x00';
        const uint64_t v = key_order_value(type, c, rows[i]);
        for (int b = 0; b < w; ++b) to[1 + b] = static_cast<char>(v >> (8 * (w - 1 - b)));
      }
      at += 1 + static_cast<size_t>(w);
    }
    for (size_t i = 0; i < n; ++i) {
      bulk_ends_[i] = (i + 1) * fixed_stride_;
      bulk_values_[i] = hash_bytes(std::string_view(scratch_.data() + i * fixed_stride_, fixed_stride_));
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      const size_t begin = scratch_.size();
      encode(batch, rows[i], scratch_);
      bulk_ends_[i] = scratch_.size();
      bulk_values_[i] = hash_bytes(std::string_view(scratch_).substr(begin));
    }
  }
  if (slots_.empty()) rehash_encoded(1024);
  for (size_t i = 0; i < n; ++i) {
    if (i + kPrefetchAhead < n) {
      pao::prefetch(&slots_[static_cast<size_t>(bulk_values_[i + kPrefetchAhead]) & (slots_.size() - 1)]);
    }
    const size_t begin = i == 0 ? 0 : bulk_ends_[i - 1];
    const std::string_view key(scratch_.data() + begin, bulk_ends_[i] - begin);
    const uint64_t hash = bulk_values_[i];
    size_t slot;
    const uint32_t found = probe_encoded(key, hash, slot);
    if (found != kEmpty) {
      out[i] = found;
      continue;
    }
    out[i] = insert_encoded(key, hash, slot);
  }
}

uint32_t KeyTable::probe_encoded(std::string_view key, uint64_t hash, size_t& slot) const noexcept {
  const size_t mask = slots_.size() - 1;
  for (size_t s = static_cast<size_t>(hash) & mask;; s = (s + 1) & mask) {
    const Entry& e = slots_[s];
    if (e.id == kEmpty) {
      slot = s;
      return kEmpty;
    }
    if (e.value == hash && encoding(e.id) == key) return e.id;
  }
}

uint32_t KeyTable::encoded_id(const Batch& batch, int64_t row) {
  scratch_.clear();
  encode(batch, row, scratch_);
  const uint64_t hash = hash_bytes(scratch_);
  if (slots_.empty()) rehash_encoded(1024);
  size_t slot;
  const uint32_t found = probe_encoded(scratch_, hash, slot);
  return found != kEmpty ? found : insert_encoded(scratch_, hash, slot);
}

uint32_t KeyTable::insert_encoded(std::string_view key, uint64_t hash, size_t slot) {
  const auto id = static_cast<uint32_t>(count_++);
  arena_.append(key);
  ends_.push_back(arena_.size());
  hash_of_.push_back(hash);
  slots_[slot] = {hash, id};
  if (count_ * 2 > slots_.size()) rehash_encoded(slots_.size() * 2);  // half full at most: short probes
  return id;
}

void KeyTable::rehash_encoded(size_t size) {
  slots_.assign(size, Entry{0, kEmpty});
  const size_t mask = size - 1;
  for (uint32_t id = 0; id < hash_of_.size(); ++id) {
    size_t t = static_cast<size_t>(hash_of_[id]) & mask;
    while (slots_[t].id != kEmpty) t = (t + 1) & mask;
    slots_[t] = {hash_of_[id], id};
  }
}

void KeyTable::append(uint32_t id, std::vector<ColumnBuilder>& builders, size_t first) const {
  if (columns_.empty()) return;
  if (lent_ > count_) unsettled();
  if (packed_) {
    if (id == null_id_) {
      builders[first].append_null();
    } else {
      append_normalized(builders[first], value_of_[id]);
    }
    return;
  }
  const std::string_view e = encoding(id);
  size_t at = 0;
  for (size_t k = 0; k < columns_.size(); ++k) {
    ColumnBuilder& b = builders[first + k];
    const DataType& type = types_[k];
    if (e[at++] == '\x01') {
      b.append_null();
      if (!is_string(type.id)) at += static_cast<size_t>(normalized_bytes(type));  // the zeros in its place
      continue;
    }
    if (is_string(type.id)) {
      std::string value;
      for (;;) {
        const char ch = e[at++];
        if (ch != '\0') {
          value.push_back(ch);
          continue;
        }
        if (e[at++] == '\x00') break;  // end marker
        value.push_back('\0');          // escaped zero byte
      }
      b.append_string(value);
    } else {
      uint64_t v = 0;
      for (int i = 0; i < normalized_bytes(type); ++i) v = (v << 8) | static_cast<uint8_t>(e[at++]);
      append_normalized(b, v);
    }
  }
}

void KeyTable::append_each(const uint32_t* ids, const uint32_t* order, size_t n,
                           std::vector<ColumnBuilder>& builders, size_t first) const {
  if (columns_.empty()) return;
  if (lent_ > count_) unsettled();
  const TypeId t = packed_ ? types_[0].id : TypeId::kUtf8;
  const bool raw = packed_ && null_id_ == kEmpty && t != TypeId::kBool && t != TypeId::kFloat32 &&
                   t != TypeId::kFloat64;
  if (!raw) {
    for (size_t i = 0; i < n; ++i) append(ids[order[i]], builders, first);
    return;
  }
  // An integer or temporal key, never null: the stored values back to the column's width.
  const int w = width_;
  const uint64_t bias = is_signed_storage(t) ? uint64_t{1} << (w * 8 - 1) : 0;
  uint8_t* out = builders[first].append_fixed_n(static_cast<int64_t>(n));
  for (size_t i = 0; i < n; ++i) {
    const uint64_t v = value_of_[ids[order[i]]] - bias;
    std::memcpy(out + i * static_cast<size_t>(w), &v, static_cast<size_t>(w));  // little-endian: low bytes
  }
}

void KeyTable::sort(const uint32_t* ids, std::vector<uint32_t>& order) {
  if (lent_ > count_) settle();
  const size_t n = order.size();
  if (!packed_) {
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return encoding(ids[a]) < encoding(ids[b]); });
    return;
  }
  // The null key sorts last; every other id has its own normalized value (ids are distinct).
  ranked_.clear();
  bool null_seen = false;
  uint32_t null_at = 0;
  uint64_t lo = UINT64_MAX, hi = 0;
  for (uint32_t p = 0; p < n; ++p) {
    if (ids[p] == null_id_) {
      null_seen = true;
      null_at = p;
      continue;
    }
    const uint64_t v = value_of_[ids[p]];
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    ranked_.push_back({v, p});
  }
  const size_t m = ranked_.size();
  const uint64_t range = m == 0 ? 0 : hi - lo;
  if (m > 64 && range / 64 <= m && range < (uint64_t{1} << 24)) {
    // Values dense in their range (ids and codes: a song query's window holds thousands of the
    // 40,000 songs): mark each value's bit, note its position, and read the bits in order. A
    // pass over m positions and range / 64 words, where the radix sort below makes two or three
    // passes of counting and scattering 16-byte entries.
    const size_t words = static_cast<size_t>(range / 64) + 1;
    seen_.assign(words, 0);
    if (at_.size() < range + 1) at_.resize(static_cast<size_t>(range) + 1);
    for (const Ranked& r : ranked_) {
      const uint64_t d = r.value - lo;
      seen_[d >> 6] |= uint64_t{1} << (d & 63);
      at_[d] = r.position;
    }
    size_t i = 0;
    for (size_t w = 0; w < words; ++w) {
      for (uint64_t bits = seen_[w]; bits != 0; bits &= bits - 1) {
        order[i++] = at_[w * 64 + static_cast<size_t>(std::countr_zero(bits))];
      }
    }
    if (null_seen) order[m] = null_at;
    return;
  }
  if (m <= 64) {
    std::sort(ranked_.begin(), ranked_.end(), [](const Ranked& a, const Ranked& b) { return a.value < b.value; });
  } else {
    // LSD radix sort on value - lo, one byte per pass, only over the bytes that vary; each pass
    // scatters stably, so the result is sorted by the whole value.
    spare_.resize(m);
    for (int shift = 0; shift < 64 && (range >> shift) != 0; shift += 8) {
      size_t count[257] = {};
      for (const Ranked& r : ranked_) ++count[((r.value - lo) >> shift & 0xFF) + 1];
      for (int b = 0; b < 256; ++b) count[b + 1] += count[b];
      for (const Ranked& r : ranked_) spare_[count[(r.value - lo) >> shift & 0xFF]++] = r;
      ranked_.swap(spare_);
    }
  }
  for (size_t i = 0; i < m; ++i) order[i] = ranked_[i].position;
  if (null_seen) order[m] = null_at;
}

namespace {
// A 64-bit mixer (the finaliser of a multiplicative hash): good avalanche, no table.
inline uint64_t mix(uint64_t x) noexcept {
  x ^= x >> 32;
  x *= 0xd6e8feb86659fd93ull;
  x ^= x >> 32;
  x *= 0xd6e8feb86659fd93ull;
  x ^= x >> 32;
  return x;
}
}  // namespace

void key_hashes(const Batch& batch, const std::vector<size_t>& columns, std::vector<uint64_t>& out) {
  const int64_t n = batch.num_rows();
  out.assign(static_cast<size_t>(n), 0x9e3779b97f4a7c15ull);
  for (size_t c : columns) {
    const Column& col = batch.column(c);
    const DataType& type = batch.schema()->fields[c].type;
    constexpr uint64_t kNullHash = 0x5bd1e9955bd1e995ull;
    for (int64_t r = 0; r < n; ++r) {
      uint64_t h;
      if (!col.is_valid(r)) {
        h = kNullHash;
      } else if (is_string(type.id)) {
        const std::string_view s = string_at(col, type, r);
        h = std::hash<std::string_view>{}(s);
      } else {
        h = key_order_value(type, col, r);
      }
      out[static_cast<size_t>(r)] = mix(out[static_cast<size_t>(r)] ^ (h + 0x9e3779b97f4a7c15ull));
    }
  }
}

}  // namespace pao
