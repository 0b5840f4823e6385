#include "window/window_aggregate.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "core/error.h"

namespace pao::window {
namespace {

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

TimeBounds time_bounds_for(const WindowSpec& window, const DataType& type) {
  const bool wide = type.byte_width() == 8;
  const __int128 margin = __int128{window.size} + window.advance;
  const auto clamp = [](__int128 v) { return static_cast<int64_t>(std::clamp<__int128>(v, INT64_MIN, INT64_MAX)); };
  const int64_t lo = clamp(__int128{wide ? INT64_MIN : INT32_MIN} + margin);
  const int64_t hi = clamp(__int128{wide ? INT64_MAX : INT32_MAX} - margin);
  return {lo, hi,
          "whose windows (size " + std::to_string(window.size) + ", advance " + std::to_string(window.advance) +
              ") fit the column's range, with one advance to spare, " +
              (lo > hi ? std::string("none") : format_time_value(lo, type) + " to " + format_time_value(hi, type))};
}

WindowOutput::WindowOutput(const Schema& input, const AggregateQuery& query, int64_t batch_size, bool sessions)
    : window_(query.window.normalized()), batch_size_(batch_size), keys_(input, key_indices(input, query.keys)) {
  if (query.session_gap && !sessions) {
    throw Error(ErrorKind::kInvalidInput,
                "session windows are computed by the designs mq, mqlf and tumlsc, whose one updater sees every "
                "tuple in the merged order; the W-Hive's designs (sliced, tumlmc, wiml) place a tuple in windows "
                "by its time alone, and a session depends on its key's earlier tuples");
  }
  if (query.session_gap && *query.session_gap < 0) {
    throw Error(ErrorKind::kInvalidInput,
                "a session gap must be at least 0 (in the time column's unit), got " + std::to_string(*query.session_gap));
  }
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
  const DataType time_type = input.fields[*time].type;
  Schema out;
  out.fields.push_back({"window_start", time_type, false});
  out.fields.push_back({"window_end", time_type, false});
  for (size_t k : keys_.columns()) out.fields.push_back(input.fields[k]);
  for (const AggSpec& spec : query.aggs) {
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
  input_columns_ = input.fields.size();
  for (const Field& f : out_schema_->fields) builders_.emplace_back(f.type);
  reserve_batch();
}

void WindowOutput::read_values(const Batch& batch, int64_t row, std::vector<Value>& out) const {
  for (size_t a = 0; a < prototypes_.size(); ++a) {
    if (prototypes_[a].needs_value()) out[a] = prototypes_[a].read(batch, row);
  }
}

void WindowOutput::emit(int64_t k, WindowSet& ws) {
  if (!states_.empty()) {
    emit_states_before(k);
    auto it = states_.find(k);
    if (it != states_.end()) {  // the loaded state first, then the tuples since (AggStates::merge)
      WindowSet& loaded = it->second;
      for (uint32_t s = 0; s < ws.keys.size(); ++s) {
        const uint32_t to = loaded.slot(ws.keys[s], prototypes_);
        for (size_t a = 0; a < loaded.aggs.size(); ++a) loaded.aggs[a].merge(to, ws.aggs[a], s);
      }
      ws.clear();
      emit_rows(k, loaded);
      states_.erase(it);
      return;
    }
  }
  emit_rows(k, ws);
}

void WindowOutput::emit_states_before(int64_t k) {
  while (!states_.empty() && states_.begin()->first < k) {
    emit_rows(states_.begin()->first, states_.begin()->second);
    states_.erase(states_.begin());
  }
}

void WindowOutput::emit_states_through(int64_t watermark) {
  while (!states_.empty() && window_.end(states_.begin()->first) <= watermark) {
    emit_rows(states_.begin()->first, states_.begin()->second);
    states_.erase(states_.begin());
  }
}

std::shared_ptr<const Schema> WindowOutput::states_schema() const {
  Schema s = *out_schema_;
  DataType text;
  text.id = TypeId::kUtf8;
  for (size_t i = 2 + keys_.columns().size(); i < s.fields.size(); ++i) s.fields[i] = {s.fields[i].name, text, false};
  return std::make_shared<const Schema>(std::move(s));
}

std::string_view WindowOutput::text_at(const Column& c, int64_t row) {
  const auto* o = c.typed<int32_t>();
  return {reinterpret_cast<const char*>(c.data) + o[row], static_cast<size_t>(o[row + 1] - o[row])};
}

Batch WindowOutput::key_view(const Batch& states) const {
  std::vector<Column> columns(input_columns_);
  for (size_t i = 0; i < keys_.columns().size(); ++i) columns[keys_.columns()[i]] = states.column(2 + i);
  return Batch(nullptr, states.num_rows(), std::move(columns), states.owner());
}

void WindowOutput::load_states(const Batch& states) {
  const std::shared_ptr<const Schema> want = states_schema();
  if (auto diff = schema_difference(*want, *states.schema())) {
    throw Error(ErrorKind::kInvalidInput, "the saved window states do not fit this query: " + *diff);
  }
  const size_t nkeys = keys_.columns().size();
  const Batch keys = key_view(states);
  for (int64_t row = 0; row < states.num_rows(); ++row) {
    const int64_t start = time_at(states, 0, row);
    const int64_t end = time_at(states, 1, row);
    const int64_t k = WindowSpec::floor_div(__int128{start} - window_.offset, window_.advance);
    const auto refuse = [&](const std::string& why) {
      throw Error(ErrorKind::kInvalidInput, "saved window state " + std::to_string(row) + " (window " +
                                                std::to_string(start) + " to " + std::to_string(end) + ") " + why);
    };
    if (window_.start(k) != start || window_.end(k) != end) refuse("is not a window of this query");
    const uint32_t key = keys_.id(keys, row);
    WindowSet& ws = states_[k];
    if (key < ws.slot_of_key.size() && ws.slot_of_key[key] != WindowSet::kNoSlot) {
      refuse("repeats a key of an earlier row");
    }
    const uint32_t slot = ws.slot(key, prototypes_);
    for (size_t a = 0; a < ws.aggs.size(); ++a) {
      if (!ws.aggs[a].load(slot, text_at(states.column(2 + nkeys + a), row))) {
        refuse("has a malformed state of aggregate '" + want->fields[2 + nkeys + a].name + "'");
      }
    }
  }
}

Batch WindowOutput::save_states(int64_t from_end) { return save_sets(states_, from_end); }

Batch WindowOutput::save_sets(const std::map<int64_t, WindowSet>& sets, int64_t from_end) {
  const std::shared_ptr<const Schema> schema = states_schema();
  std::vector<ColumnBuilder> out;
  for (const Field& f : schema->fields) out.emplace_back(f.type);
  std::vector<uint32_t> order;
  for (auto& [k, ws] : sets) {
    if (window_.end(k) < from_end || ws.keys.empty()) continue;
    const int64_t start = window_.start(k);
    const int64_t end = window_.end(k);
    const size_t n = ws.keys.size();
    order.resize(n);
    for (uint32_t s = 0; s < n; ++s) order[s] = s;
    keys_.sort(ws.keys.data(), order);
    out[0].append_repeat(&start, static_cast<int64_t>(n));
    out[1].append_repeat(&end, static_cast<int64_t>(n));
    keys_.append_each(ws.keys.data(), order.data(), n, out, 2);
    const size_t first_agg = 2 + keys_.columns().size();
    for (size_t a = 0; a < ws.aggs.size(); ++a) {
      for (uint32_t s : order) out[first_agg + a].append_string(ws.aggs[a].save(s));
    }
  }
  return finish_batch(schema, out);
}

void WindowOutput::emit_rows(int64_t k, WindowSet& ws) {
  if (ws.keys.empty()) return;
  ++emitted_;
  const int64_t start = window_.start(k);
  const int64_t end = window_.end(k);
  if (ends_ != nullptr) ends_->push_back(end);
  const size_t n = ws.keys.size();
  order_.resize(n);
  for (uint32_t s = 0; s < n; ++s) order_[s] = s;
  keys_.sort(ws.keys.data(), order_);
  // Column by column, in runs that end where a batch fills up.
  const size_t first_agg = 2 + keys_.columns().size();
  for (size_t i = 0; i < n;) {
    const size_t m = std::min(n - i, static_cast<size_t>(batch_size_ - builders_[0].size()));
    builders_[0].append_repeat(&start, static_cast<int64_t>(m));
    builders_[1].append_repeat(&end, static_cast<int64_t>(m));
    keys_.append_each(ws.keys.data(), order_.data() + i, m, builders_, 2);
    for (size_t a = 0; a < ws.aggs.size(); ++a) ws.aggs[a].emit_each(order_.data() + i, m, builders_[first_agg + a]);
    i += m;
    if (builders_[0].size() == batch_size_) cut_batch();
  }
  ws.clear();
}

void WindowOutput::emit_sessions(int64_t end, const int64_t* starts, const uint32_t* keys, const uint32_t* order,
                                 const uint32_t* slots, size_t n, const std::vector<AggStates>& aggs) {
  if (n == 0) return;
  ++emitted_;
  if (ends_ != nullptr) ends_->push_back(end);
  const size_t first_agg = 2 + keys_.columns().size();
  for (size_t i = 0; i < n;) {
    const size_t m = std::min(n - i, static_cast<size_t>(batch_size_ - builders_[0].size()));
    for (size_t j = 0; j < m; ++j) builders_[0].append_fixed(&starts[i + j]);  // the low bytes: int32 columns too
    builders_[1].append_repeat(&end, static_cast<int64_t>(m));
    keys_.append_each(keys, order + i, m, builders_, 2);
    for (size_t a = 0; a < aggs.size(); ++a) aggs[a].emit_each(slots + i, m, builders_[first_agg + a]);
    i += m;
    if (builders_[0].size() == batch_size_) cut_batch();
  }
}

void WindowOutput::cut_batch() {
  ready_.push_back(finish_batch(out_schema_, builders_));
  reserve_batch();
}

// A full batch's room up front, so the columns are written once rather than copied as their
// vectors double. Not for an unbounded batch (INT64_MAX: the pipeline operator's, one batch per
// call, cut by take(true)): it holds the windows that closed in one call, usually few, and
// reserving a large batch for each call allocated and freed megabytes per morsel (8 MiB a
// column at 1 Mi rows), which churned the allocator for every other operator of the run; it
// grows as it fills instead.
void WindowOutput::reserve_batch() {
  constexpr int64_t kLargestReserved = int64_t{1} << 20;
  if (batch_size_ > kLargestReserved) return;
  for (ColumnBuilder& b : builders_) b.reserve(batch_size_);
}

std::optional<Batch> WindowOutput::take(bool flush) {
  if (ready_.empty() && flush && builders_[0].size() > 0) cut_batch();
  if (ready_.empty()) return std::nullopt;
  Batch b = std::move(ready_.front());
  ready_.pop_front();
  return b;
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
    }
  }
  return ws.get();
}

void WindowAggregate::enter_slice(int64_t time) {
  advance(time);
  std::tie(slice_lo_, slice_hi_) = window_.slice_range(window_.slice_of(time));
  current_.clear();
  const int64_t kf = window_.first_k(time);
  const int64_t kl = window_.last_k(time);
  if (kf > kl) return;  // a gap between windows
  if (open_.empty()) base_k_ = kf;
  // Pointers into open_'s sets stay valid: sets live on the heap, and only advance() retires
  // them, which empties this range.
  for (int64_t k = kf; k <= kl; ++k) current_.push_back(set_for(k));
  slots_.resize(current_.size());
  states_.resize(current_.size());
}

void WindowAggregate::add(const Batch& batch, int64_t row, int64_t time) {
  if (time < slice_lo_ || time >= slice_hi_) enter_slice(time);
  const size_t n = current_.size();
  if (n == 0) return;  // in a gap between windows
  const uint32_t key = keys_.id(batch, row);
  read_values(batch, row, values_);
  for (size_t i = 0; i < n; ++i) slots_[i] = current_[i]->slot(key, prototypes_);
  for (size_t a = 0; a < prototypes_.size(); ++a) {
    for (size_t i = 0; i < n; ++i) states_[i] = &current_[i]->aggs[a];
    AggStates::update_each(states_.data(), slots_.data(), n, values_[a]);
  }
}

void WindowAggregate::advance(int64_t watermark) {
  bool completed = false;
  while (!open_.empty() && window_.end(base_k_) <= watermark) {
    if (open_.front()) {
      emit(base_k_, *open_.front());
      spare_.push_back(std::move(open_.front()));
    }
    open_.pop_front();
    ++base_k_;
    completed = true;
  }
  emit_states_through(watermark);
  if (completed) {  // current_ may point at retired sets: the next tuple looks its windows up again
    slice_lo_ = 1;
    slice_hi_ = 0;
  }
}

void WindowAggregate::finish() { advance(INT64_MAX); }

}  // namespace pao::window

namespace pao::window {

Batch WindowAggregate::save_open() {
  std::map<int64_t, WindowSet> all = WindowOutput::states_;  // (WindowAggregate::states_ is its slice cache)
  for (size_t i = 0; i < open_.size(); ++i) {
    const WindowSet* ws = open_[i].get();
    if (ws == nullptr || ws->keys.empty()) continue;
    WindowSet& into = all[base_k_ + static_cast<int64_t>(i)];  // after a loaded state, as emit() folds them
    for (uint32_t s = 0; s < ws->keys.size(); ++s) {
      const uint32_t to = into.slot(ws->keys[s], prototypes_);
      for (size_t a = 0; a < into.aggs.size(); ++a) into.aggs[a].merge(to, ws->aggs[a], s);
    }
  }
  return save_sets(all, INT64_MIN);
}

}  // namespace pao::window
