#include "core/gather_in_order.h"

#include <algorithm>
#include <bit>

#include "core/bits.h"

namespace pao::gather_detail {
namespace {

// out[i] = the set bits of in[i], i < n. A build for the baseline x86-64 counts them in a dozen
// operations each (core/bits.h, popcount); a merge of 20 inputs counts 20 masks per 64 rows, where
// that was 4% of its time (one thread: 2-4% faster with the instruction). So on x86-64 a second
// build of the loop uses the popcnt instruction, chosen once per process by what the CPU has. By a
// flag rather than GCC's target_clones: their ifunc resolver runs before ThreadSanitizer's runtime
// is set up, and crashed every test binary of a -fsanitize=thread build.
#if defined(__x86_64__) && !defined(__POPCNT__) && defined(__GNUC__)
[[gnu::target("popcnt")]] void popcounts_instruction(const uint64_t* in, size_t n, uint8_t* out) noexcept {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(__builtin_popcountll(in[i]));
}
void popcounts(const uint64_t* in, size_t n, uint8_t* out) noexcept {
  static const bool instruction = __builtin_cpu_supports("popcnt");
  if (instruction) return popcounts_instruction(in, n, out);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(popcount(in[i]));
}
#else
void popcounts(const uint64_t* in, size_t n, uint8_t* out) noexcept {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(popcount(in[i]));
}
#endif

}  // namespace

void InOrderRows::adopt(std::span<const RowRef> rows, size_t sources, const SourceMasks& given) {
  const size_t k = k_ = sources;
  rows_ = static_cast<int64_t>(rows.size());
  words_ = (rows.size() + 63) / 64;
  masks_.resize(words_ * k);
  first_.assign(k, 0);
  for (size_t s = 0; s < k; ++s) {
    const uint64_t* from = given.words + s * given.stride;
    bool seen = false;
    for (size_t w = 0; w < words_; ++w) {
      const uint64_t m = from[w];
      masks_[w * k + s] = m;
      if (!seen && m != 0) {
        first_[s] = rows[w * 64 + static_cast<size_t>(std::countr_zero(m))].row;
        seen = true;
      }
    }
  }
  count();
}

bool InOrderRows::plan(std::span<const RowRef> rows, size_t sources) {
  if (sources == 0 || sources > kMaxPlanned) return false;
  const size_t k = k_ = sources;
  const size_t n = rows.size();
  rows_ = static_cast<int64_t>(n);
  words_ = (n + 63) / 64;
  masks_.assign(words_ * k, 0);
  std::array<uint32_t, kMaxSources> next;  // 1 + the row each source gave last; 0 before its first
  next.fill(0);
  bool in_order = true;
  for (size_t w = 0; w < words_; ++w) {
    uint64_t* masks = masks_.data() + w * k;
    const RowRef* r = rows.data() + w * 64;
    const size_t m = std::min<size_t>(64, n - w * 64);
    for (size_t b = 0; b < m; ++b) {
      const uint32_t source = r[b].source;
      const uint32_t expect = next[source];
      in_order &= (expect == r[b].row) | (expect == 0);  // no branch: the answer is needed once
      next[source] = r[b].row + 1;  // rows are below 2^32 - 1 (gather's callers: batches of fewer rows)
      masks[source] |= uint64_t{1} << b;
    }
  }
  if (!in_order) return false;
  count();
  first_.assign(k, 0);
  for (size_t s = 0; s < k; ++s) first_[s] = next[s] == 0 ? 0 : int64_t{next[s]} - taken_[s];
  return true;
}

void InOrderRows::gather_bits(std::span<const SourceColumn> src, bool validity, uint8_t* out) const {
  std::array<From, kMaxSources> from;
  for (size_t s = 0; s < k_; ++s) {
    const SourceColumn& c = src[s];
    const auto* bits = validity ? c.validity : static_cast<const uint8_t*>(c.values);
    from[s] = {bits, c.offset + first_[s], bitmap_bytes(c.offset + c.rows)};
  }
  if (gather_sparse_bits(from, out)) return;
  for (size_t w = 0; w < words_; ++w) {
    const uint64_t* masks = masks_.data() + w * k_;
    const uint8_t* counts = counts_.data() + w * k_;
    uint64_t word = 0;
    for (size_t s = 0; s < k_; ++s) {
      const uint64_t mask = masks[s];
      if (mask == 0) continue;
      From& f = from[s];
      if (f.bits == nullptr) {
        word |= mask;
        continue;
      }
      const unsigned n = counts[s];
      word |= deposit(read_bits(f.bits, f.bytes, f.at, n), mask, n);
      f.at += n;
    }
    std::memcpy(out + w * 8, &word, sizeof word);
  }
}

bool InOrderRows::gather_sparse_bits(const std::array<From, kMaxSources>& from, uint8_t* out) const {
  if (k_ < kMinSparseSources) return false;
  int64_t ones = 0;
  for (size_t s = 0; s < k_; ++s) {
    const From& f = from[s];
    if (f.bits == nullptr) {
      ones += taken_[s];
      continue;
    }
    for (int64_t c = 0; c < taken_[s]; c += 64) {
      const auto n = static_cast<unsigned>(std::min<int64_t>(64, taken_[s] - c));
      ones += popcount(read_bits(f.bits, f.bytes, f.at + c, n));
    }
  }
  const bool majority = 2 * ones >= rows_;
  const int64_t exceptions = majority ? rows_ - ones : ones;
  if (exceptions * 256 > rows_ * static_cast<int64_t>(k_)) return false;
  if (majority && rows_ > 0) {
    std::memset(out, 0xff, words_ * 8);
    const auto tail = static_cast<unsigned>(rows_ % 64);  // the last word's rows, if it is not whole
    if (tail != 0) {
      const uint64_t last = (uint64_t{1} << tail) - 1;
      std::memcpy(out + (words_ - 1) * 8, &last, sizeof last);
    }
  }
  for (size_t s = 0; s < k_; ++s) {
    const From& f = from[s];
    const uint32_t* cum = cum_.data() + s * (words_ + 1);
    if (f.bits == nullptr) {
      if (majority) continue;
      for (size_t w = 0; w < words_; ++w) {  // all ones among mostly zeros: the source's rows
        uint64_t word;
        std::memcpy(&word, out + w * 8, sizeof word);
        word |= masks_[w * k_ + s];
        std::memcpy(out + w * 8, &word, sizeof word);
      }
      continue;
    }
    size_t w = 0;  // the output word of the last exception: later ones are at or after it
    for (int64_t c = 0; c < taken_[s]; c += 64) {
      const auto n = static_cast<unsigned>(std::min<int64_t>(64, taken_[s] - c));
      uint64_t x = read_bits(f.bits, f.bytes, f.at + c, n);
      if (majority) x = ~x & (n == 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1);
      for (; x != 0; x &= x - 1) {
        const auto rank = static_cast<uint32_t>(c + std::countr_zero(x));  // among the source's rows
        // The last word whose running count is at most rank, searched from the last one found:
        // doubling steps, then halving.
        size_t hi = w + 1;
        for (size_t step = 1; hi <= words_ && cum[hi] <= rank; step *= 2) {
          w = hi;
          hi += step;
        }
        w = static_cast<size_t>(std::upper_bound(cum + w, cum + std::min(hi, words_ + 1), rank) - cum) - 1;
        uint64_t mask = masks_[w * k_ + s];
        for (uint32_t r = rank - cum[w]; r > 0; --r) mask &= mask - 1;
        const int64_t row = static_cast<int64_t>(w) * 64 + std::countr_zero(mask);
        out[row >> 3] ^= static_cast<uint8_t>(1u << (row & 7));
      }
    }
  }
  return true;
}

void InOrderRows::count() {
  counts_.resize(words_ * k_);
  popcounts(masks_.data(), words_ * k_, counts_.data());
  cum_.resize(k_ * (words_ + 1));
  taken_.assign(k_, 0);
  for (size_t w = 0; w < words_; ++w) {
    for (size_t s = 0; s < k_; ++s) {
      cum_[s * (words_ + 1) + w] = static_cast<uint32_t>(taken_[s]);
      taken_[s] += counts_[w * k_ + s];
    }
  }
  for (size_t s = 0; s < k_; ++s) cum_[s * (words_ + 1) + words_] = static_cast<uint32_t>(taken_[s]);
}

uint64_t InOrderRows::deposit(uint64_t v, uint64_t mask, unsigned n) noexcept {
  const uint64_t all = n == 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
  if (v == all) return mask;
  if (v == 0) return 0;
  uint64_t out = 0;
  for (; mask != 0; mask &= mask - 1, v >>= 1) out |= (mask & (0 - mask)) & (0 - (v & 1));
  return out;
}

}  // namespace pao::gather_detail
