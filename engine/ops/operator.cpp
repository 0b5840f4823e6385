#include "ops/operator.h"

#include "core/builder.h"
#include "core/error.h"
#include "ops/partitioned.h"

namespace pao::ops {

std::vector<std::string> key_names(const Operator& op) {
  std::vector<std::string> out;
  for (size_t c : op.key_columns()) out.push_back(op.input_schema()->fields[c].name);
  return out;
}

const char* kind_name(OpKind k) noexcept {
  switch (k) {
    case OpKind::kStateless: return "stateless";
    case OpKind::kPartitioned: return "partitioned";
    case OpKind::kStateful: return "stateful";
  }
  return "?";
}

const char* selectivity_name(Selectivity s) noexcept {
  switch (s) {
    case Selectivity::kExactlyOne: return "exactly one";
    case Selectivity::kAtMostOne: return "at most one";
    case Selectivity::kAny: return "any";
  }
  return "?";
}

namespace {

class Carry final : public Operator {
 public:
  Carry(OperatorPtr inner, size_t column) : inner_(std::move(inner)), column_(column) {
    Field field = inner_->input_schema()->fields[column];
    field.nullable = true;  // finish() rows have no producing row
    output_ = extend_schema(*inner_->output_schema(), {field}, inner_->name(), "");
  }

  std::string name() const override { return inner_->name(); }
  std::string describe() const override { return inner_->describe(); }
  OpKind kind() const override { return inner_->kind(); }
  Selectivity selectivity() const override { return inner_->selectivity(); }
  std::vector<size_t> key_columns() const override { return inner_->key_columns(); }
  size_t max_parallelism() const override { return inner_->max_parallelism(); }
  bool preserves_time(const std::string& time) const override { return inner_->preserves_time(time); }
  bool passes_through(const std::string& column) const override { return inner_->passes_through(column); }
  bool may_fail() const override { return inner_->may_fail(); }
  const std::shared_ptr<const Schema>& input_schema() const override { return inner_->input_schema(); }
  const std::shared_ptr<const Schema>& output_schema() const override { return output_; }
  void set_partitions(size_t partitions) override { inner_->set_partitions(partitions); }

  Piece process_rows(const Batch& in, std::span<const int64_t> rows, size_t partition) override {
    Piece piece = inner_->process_rows(in, rows, partition);
    const Column& from = in.column(column_);
    std::vector<ColumnBuilder> added;
    added.emplace_back(output_->fields.back().type);
    for (int64_t r : piece.source_rows) {
      if (from.is_valid(r)) {
        added.back().append_fixed(static_cast<const int64_t*>(from.values) + from.offset + r);
      } else {
        added.back().append_null();
      }
    }
    if (piece.batch.num_columns() == 0) return piece;  // no rows: nothing to add to
    piece.batch = add_columns(output_, piece.batch, added);
    return piece;
  }

  Batch finish() override {
    Batch out = inner_->finish();
    if (out.num_columns() == 0 || out.num_rows() == 0) return out;
    std::vector<ColumnBuilder> added;
    added.emplace_back(output_->fields.back().type);
    for (int64_t r = 0; r < out.num_rows(); ++r) added.back().append_null();
    return add_columns(output_, out, added);
  }

 private:
  OperatorPtr inner_;
  size_t column_;
  std::shared_ptr<const Schema> output_;
};

}  // namespace

OperatorPtr carry_column(OperatorPtr inner, const std::string& column) {
  const size_t c = find_column(*inner->input_schema(), column, inner->name(), "carried column");
  if (inner->input_schema()->fields[c].type.id != TypeId::kInt64) {
    throw Error(ErrorKind::kUnsupportedType, inner->name() + ": the carried column '" + column + "' must be int64");
  }
  if (inner->kind() != OpKind::kPartitioned) {
    throw Error(ErrorKind::kInvalidInput, inner->name() + ": only a partitioned operator reports which row produced "
                                          "each output row, so only one can carry '" + column + "'");
  }
  return std::make_shared<Carry>(std::move(inner), c);
}

}  // namespace pao::ops
