#include "ops/stateless.h"

#include "core/error.h"
#include "core/gather.h"

namespace pao::ops {
namespace {

class Filter final : public Operator {
 public:
  Filter(std::shared_ptr<const Schema> schema, const ExprPtr& predicate)
      : schema_(std::move(schema)), predicate_(bind(*predicate, *schema_)) {
    if (predicate_.type().id != TypeId::kBool) {
      throw Error(ErrorKind::kUnsupportedType, "filter needs a bool predicate; " + predicate_.text() +
                                                   " has type " + predicate_.type().to_string());
    }
  }

  std::string name() const override { return "filter"; }
  std::string describe() const override { return "keeps the rows where " + predicate_.text() + " is true"; }
  OpKind kind() const override { return OpKind::kStateless; }
  Selectivity selectivity() const override { return Selectivity::kAtMostOne; }
  bool preserves_time(const std::string&) const override { return true; }  // rows pass as they are
  bool may_fail() const override { return pao::may_fail(predicate_); }
  bool passes_through(const std::string& column) const override { return schema_->find(column).has_value(); }
  const std::shared_ptr<const Schema>& input_schema() const override { return schema_; }
  const std::shared_ptr<const Schema>& output_schema() const override { return schema_; }

  Batch process(const Batch& in) override {
    BatchMemory scratch;
    return gather_kept(schema_, in, true_bits(evaluate(predicate_, in), scratch));
  }

 private:
  std::shared_ptr<const Schema> schema_;
  BoundExpr predicate_;
};

// One column of a projection's output: an input column passed on as it is, or an expression.
struct OutputColumn {
  std::optional<size_t> input;
  std::optional<BoundExpr> expr;
};

// select and with_columns: a batch of columns each passed on or computed from the input.
class Project final : public Operator {
 public:
  Project(std::string name, std::shared_ptr<const Schema> input, std::shared_ptr<const Schema> output,
          std::vector<OutputColumn> columns, std::string description)
      : name_(std::move(name)),
        input_(std::move(input)),
        output_(std::move(output)),
        columns_(std::move(columns)),
        description_(std::move(description)) {}

  std::string name() const override { return name_; }
  std::string describe() const override { return description_; }
  OpKind kind() const override { return OpKind::kStateless; }
  Selectivity selectivity() const override { return Selectivity::kExactlyOne; }
  const std::shared_ptr<const Schema>& input_schema() const override { return input_; }
  const std::shared_ptr<const Schema>& output_schema() const override { return output_; }
  // The time column passes on as it is: an output column of that name that is the input's.
  bool preserves_time(const std::string& time) const override { return passes_through(time); }
  bool may_fail() const override {
    for (const OutputColumn& c : columns_) {
      if (c.expr && pao::may_fail(*c.expr)) return true;
    }
    return false;
  }
  bool passes_through(const std::string& column) const override {
    const std::optional<size_t> out = output_->find(column);
    return out && columns_[*out].input && input_->fields[*columns_[*out].input].name == column;
  }

  Batch process(const Batch& in) override {
    std::vector<Column> columns;
    columns.reserve(columns_.size());
    // The output's owner keeps every buffer its columns point into: the input's and each
    // computed column's (a passed-on column or bare reference shares the input's owner).
    auto owners = std::make_shared<std::vector<std::shared_ptr<const void>>>();
    auto keep = [&](const std::shared_ptr<const void>& owner) {
      for (const auto& o : *owners) {
        if (o == owner) return;
      }
      owners->push_back(owner);
    };
    for (const OutputColumn& c : columns_) {
      if (c.input) {
        columns.push_back(in.column(*c.input));
        keep(in.owner());
      } else {
        Value v = evaluate(*c.expr, in);
        columns.push_back(v.column);
        keep(v.owner);
      }
    }
    return Batch(output_, in.num_rows(), std::move(columns), std::move(owners));
  }

 private:
  std::string name_;
  std::shared_ptr<const Schema> input_;
  std::shared_ptr<const Schema> output_;
  std::vector<OutputColumn> columns_;
  std::string description_;
};

// The field an expression produces: a bare column reference keeps its column's nullability.
Field output_field(const std::string& name, const Expr& e, const BoundExpr& bound, const Schema& input) {
  Field f{name, bound.type(), true};
  if (e.kind == Expr::Kind::kColumn) f.nullable = input.fields[*input.find(e.text)].nullable;
  return f;
}

void check_arguments(const char* op, const std::shared_ptr<const Schema>& schema,
                     const std::vector<std::pair<std::string, ExprPtr>>& columns) {
  if (!schema) throw Error(ErrorKind::kInvalidInput, std::string(op) + ": no input schema");
  for (size_t i = 0; i < columns.size(); ++i) {
    if (!columns[i].second) {
      throw Error(ErrorKind::kInvalidInput, std::string(op) + ": column '" + columns[i].first + "' has no expression");
    }
    for (size_t j = 0; j < i; ++j) {
      if (columns[j].first == columns[i].first) {
        throw Error(ErrorKind::kInvalidInput,
                    std::string(op) + ": the column name '" + columns[i].first + "' is given twice");
      }
    }
  }
}

std::string describe_columns(const std::vector<std::pair<std::string, ExprPtr>>& columns) {
  std::string out;
  for (const auto& [name, e] : columns) out += (out.empty() ? "" : ", ") + name + " = " + to_string(*e);
  return out;
}

}  // namespace

OperatorPtr make_filter(std::shared_ptr<const Schema> input_schema, ExprPtr predicate) {
  if (!input_schema) throw Error(ErrorKind::kInvalidInput, "filter: no input schema");
  if (!predicate) throw Error(ErrorKind::kInvalidInput, "filter: no predicate");
  return std::make_shared<Filter>(std::move(input_schema), predicate);
}

OperatorPtr make_select(std::shared_ptr<const Schema> input_schema,
                        std::vector<std::pair<std::string, ExprPtr>> columns) {
  check_arguments("select", input_schema, columns);
  Schema output;
  std::vector<OutputColumn> outs;
  for (const auto& [name, e] : columns) {
    BoundExpr bound = bind(*e, *input_schema);
    output.fields.push_back(output_field(name, *e, bound, *input_schema));
    // A bare column passes on as it is (so select keeps the time column, and the keys the
    // planner routes by, when it names them).
    if (e->kind == Expr::Kind::kColumn) {
      outs.push_back({input_schema->find(e->text), std::nullopt});
    } else {
      outs.push_back({std::nullopt, std::move(bound)});
    }
  }
  return std::make_shared<Project>("select", std::move(input_schema), std::make_shared<const Schema>(std::move(output)),
                                   std::move(outs), describe_columns(columns));
}

OperatorPtr make_with_columns(std::shared_ptr<const Schema> input_schema,
                              std::vector<std::pair<std::string, ExprPtr>> columns) {
  check_arguments("with_columns", input_schema, columns);
  Schema output = *input_schema;
  std::vector<OutputColumn> outs;
  for (size_t i = 0; i < input_schema->fields.size(); ++i) outs.push_back({i, std::nullopt});
  for (const auto& [name, e] : columns) {
    BoundExpr bound = bind(*e, *input_schema);
    Field field = output_field(name, *e, bound, *input_schema);
    const std::optional<size_t> at = input_schema->find(name);
    if (at) {
      output.fields[*at] = std::move(field);
      outs[*at] = {std::nullopt, std::move(bound)};
    } else {
      output.fields.push_back(std::move(field));
      outs.push_back({std::nullopt, std::move(bound)});
    }
  }
  return std::make_shared<Project>("with_columns", std::move(input_schema),
                                   std::make_shared<const Schema>(std::move(output)), std::move(outs),
                                   describe_columns(columns));
}

}  // namespace pao::ops
