#include "window/window_aggregate.h"

#include <algorithm>
#include <set>

#include "core/error.h"

namespace pao::window {
namespace {

constexpr uint32_t kNoSlot = UINT32_MAX;

std::vector<size_t> key_indices(const Schema& input, const std::vector<std::string>& keys) {
  std::vector<size_t> out;
  for (const std::string& k : keys) {
    auto i = input.find(k);
    if (!i) {
      throw Error(ErrorKind::kInvalidInput, "key column '" + k + "' not found in the inputs; their columns are: " +
                                                input.to_string());
    }
    out.push_back(*i);
  }
  return out;
}

}  // namespace

WindowAggregate::WindowAggregate(const Schema& input, const AggregateQuery& query, int64_t batch_size)
    : window_(query.window),
      batch_size_(batch_size),
      specs_(query.aggs),
      keys_(input, key_indices(input, query.keys)) {
  if (window_.size < 1 || window_.advance < 1) {
    throw Error(ErrorKind::kInvalidInput, "window size and advance must be at least 1, got size " +
                                              std::to_string(window_.size) + " and advance " +
                                              std::to_string(window_.advance));
  }
  if (batch_size_ < 1) throw Error(ErrorKind::kInvalidInput, "batch_size must be at least 1");
  auto time = input.find(query.time_column);
  if (!time) {
    throw Error(ErrorKind::kInvalidInput, "time column '" + query.time_column + "' not found; the columns are: " +
                                              input.to_string());
  }
  time_type_ = input.fields[*time].type;
  Schema out;
  out.fields.push_back({"window_start", time_type_, false});
  out.fields.push_back({"window_end", time_type_, false});
  for (size_t k : keys_.columns()) out.fields.push_back(input.fields[k]);
  for (const AggSpec& spec : specs_) {
    prototypes_.emplace_back(spec, input);
    out.fields.push_back({spec.name, prototypes_.back().output_type(), true});
  }
  std::set<std::string> names;
  for (const Field& f : out.fields) {
    if (!names.insert(f.name).second) {
      throw Error(ErrorKind::kInvalidInput, "the result would have two columns named '" + f.name +
                                                "'; rename the aggregate");
    }
  }
  out_schema_ = std::make_shared<const Schema>(std::move(out));
  values_.resize(specs_.size());
  for (const Field& f : out_schema_->fields) builders_.emplace_back(f.type);
}

WindowAggregate::WindowSet* WindowAggregate::set_for(int64_t k) {
  const auto idx = static_cast<size_t>(k - base_k_);
  if (idx >= open_.size()) open_.resize(idx + 1);
  std::unique_ptr<WindowSet>& ws = open_[idx];
  if (!ws) {
    if (!spare_.empty()) {
      ws = std::move(spare_.back());
      spare_.pop_back();
    } else {
      ws = std::make_unique<WindowSet>();
      ws->aggs = prototypes_;
    }
    ws->k = k;
  }
  return ws.get();
}

void WindowAggregate::add(const Batch& batch, int64_t row, int64_t time) {
  advance(time);
  const int64_t kf = window_.first_k(time);
  const int64_t kl = window_.last_k(time);
  if (kf > kl) return;  // in a gap between windows
  if (open_.empty()) base_k_ = kf;
  const uint32_t key = keys_.id(batch, row);
  for (size_t a = 0; a < prototypes_.size(); ++a) {
    if (prototypes_[a].needs_value()) values_[a] = prototypes_[a].read(batch, row);
  }
  for (int64_t k = kf; k <= kl; ++k) {
    WindowSet* ws = set_for(k);
    if (key >= ws->slot_of_key.size()) ws->slot_of_key.resize(keys_.size(), kNoSlot);
    uint32_t slot = ws->slot_of_key[key];
    if (slot == kNoSlot) {
      slot = static_cast<uint32_t>(ws->keys.size());
      ws->slot_of_key[key] = slot;
      ws->keys.push_back(key);
      for (AggStates& s : ws->aggs) s.resize(slot + 1);
    }
    for (size_t a = 0; a < ws->aggs.size(); ++a) ws->aggs[a].update(slot, values_[a]);
  }
}

void WindowAggregate::advance(int64_t watermark) {
  while (!open_.empty() && window_.end(base_k_) <= watermark) {
    emit_front();
    open_.pop_front();
    ++base_k_;
  }
}

void WindowAggregate::finish() {
  while (!open_.empty()) {
    emit_front();
    open_.pop_front();
    ++base_k_;
  }
}

void WindowAggregate::emit_front() {
  std::unique_ptr<WindowSet>& ws = open_.front();
  if (!ws) return;
  ++emitted_;
  const int64_t start = window_.start(ws->k);
  const int64_t end = window_.end(ws->k);
  order_.resize(ws->keys.size());
  for (uint32_t s = 0; s < order_.size(); ++s) order_[s] = s;
  std::sort(order_.begin(), order_.end(),
            [&](uint32_t a, uint32_t b) { return keys_.less(ws->keys[a], ws->keys[b]); });
  const size_t first_agg = 2 + keys_.columns().size();
  for (uint32_t slot : order_) {
    builders_[0].append_fixed(&start);
    builders_[1].append_fixed(&end);
    keys_.append(ws->keys[slot], builders_, 2);
    for (size_t a = 0; a < ws->aggs.size(); ++a) ws->aggs[a].emit(slot, builders_[first_agg + a]);
    if (builders_[0].size() == batch_size_) cut_batch();
  }
  // Recycle: only the touched entries need resetting.
  for (uint32_t key : ws->keys) ws->slot_of_key[key] = kNoSlot;
  ws->keys.clear();
  for (AggStates& s : ws->aggs) s.clear();
  spare_.push_back(std::move(ws));
}

void WindowAggregate::cut_batch() { ready_.push_back(finish_batch(out_schema_, builders_)); }

std::optional<Batch> WindowAggregate::take(bool flush) {
  if (ready_.empty() && flush && builders_[0].size() > 0) cut_batch();
  if (ready_.empty()) return std::nullopt;
  Batch b = std::move(ready_.front());
  ready_.pop_front();
  return b;
}

}  // namespace pao::window
