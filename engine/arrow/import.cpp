#include "arrow/import.h"

#include <cstring>
#include <exception>

#include "arrow/format.h"
#include "arrow/owned.h"
#include "core/error.h"

namespace pao::arrow {

Schema import_schema(const ArrowSchema& schema) {
  if (schema.format == nullptr || std::strcmp(schema.format, "+s") != 0) {
    throw Error(ErrorKind::kInvalidInput,
                std::string("expected a record batch (struct) schema, got Arrow format '") +
                    (schema.format ? schema.format : "") + "'");
  }
  Schema out;
  out.fields.reserve(static_cast<size_t>(schema.n_children));
  for (int64_t i = 0; i < schema.n_children; ++i) {
    const ArrowSchema& child = *schema.children[i];
    Field field;
    field.name = child.name ? child.name : "";
    if (child.dictionary != nullptr) {
      throw Error(ErrorKind::kUnsupportedType,
                  "column '" + field.name +
                      "' is dictionary-encoded, which pyarrow-ops does not support; decode it "
                      "first (e.g. pyarrow.compute.cast to its value type)");
    }
    field.type = parse_format(child.format ? child.format : "", field.name);
    field.nullable = (child.flags & ARROW_FLAG_NULLABLE) != 0;
    out.fields.push_back(std::move(field));
  }
  return out;
}

Batch import_batch(ArrowArray* raw, std::shared_ptr<const Schema> schema, std::string_view where) {
  // Own the array first, so every error path below still releases it exactly once.
  auto owned = std::make_shared<OwnedArray>(raw);
  const ArrowArray& a = *owned->get();
  auto fail = [&](const std::string& what) -> Error {
    return Error(ErrorKind::kInvalidInput, std::string(where) + ": malformed Arrow array: " + what);
  };
  const size_t ncols = schema->fields.size();
  if (a.n_children != static_cast<int64_t>(ncols)) {
    throw fail("it has " + std::to_string(a.n_children) + " columns, its schema " +
               std::to_string(ncols));
  }
  if (a.null_count != 0 && a.n_buffers > 0 && a.buffers[0] != nullptr) {
    throw fail("the record batch itself has null rows (a struct array with nulls)");
  }
  std::vector<Column> columns(ncols);
  for (size_t i = 0; i < ncols; ++i) {
    const ArrowArray& c = *a.children[i];
    const Field& field = schema->fields[i];
    const int64_t want_buffers = is_string(field.type.id) ? 3 : 2;
    if (c.n_buffers != want_buffers) {
      throw fail("column '" + field.name + "' has " + std::to_string(c.n_buffers) +
                 " buffers; type " + field.type.to_string() + " has " +
                 std::to_string(want_buffers));
    }
    if (c.length < a.offset + a.length) {
      throw fail("column '" + field.name + "' is shorter than the batch");
    }
    if (a.length > 0 && c.buffers[1] == nullptr) {
      throw fail("column '" + field.name + "' has no value buffer");
    }
    Column& col = columns[i];
    col.validity = c.null_count == 0 ? nullptr : static_cast<const uint8_t*>(c.buffers[0]);
    col.values = c.buffers[1];
    col.data = want_buffers == 3 ? static_cast<const uint8_t*>(c.buffers[2]) : nullptr;
    col.offset = c.offset + a.offset;
    const bool covers_child = a.offset == 0 && c.length == a.length;
    col.null_count = c.null_count == 0 ? 0 : (covers_child ? c.null_count : -1);
    if (col.validity == nullptr) col.null_count = 0;
  }
  return Batch(std::move(schema), a.length, std::move(columns), std::move(owned));
}

namespace {

class StreamSource final : public BatchSource {
 public:
  StreamSource(ArrowArrayStream* raw, std::string label) : stream_(raw), label_(std::move(label)) {
    OwnedSchema schema;
    if (int rc = stream_->get_schema(stream_.get(), schema.get()); rc != 0) {
      throw Error(ErrorKind::kInputFailed, label_ + ": could not read its schema: " + last_error(rc));
    }
    try {
      schema_ = std::make_shared<const Schema>(import_schema(*schema.get()));
    } catch (const Error& e) {
      throw Error(e.kind(), label_ + ": " + e.what());
    }
  }

  const std::shared_ptr<const Schema>& schema() const noexcept override { return schema_; }

  std::optional<Batch> next() override {
    if (failure_) std::rethrow_exception(failure_);
    if (ended_) return std::nullopt;
    try {
      ArrowArray raw;
      std::memset(&raw, 0, sizeof raw);
      if (int rc = stream_->get_next(stream_.get(), &raw); rc != 0) {
        throw Error(ErrorKind::kInputFailed, label_ + " failed: " + last_error(rc));
      }
      if (raw.release == nullptr) {
        // The end. The stream is released with this source, which every engine caller destroys
        // once the end is published: releasing can take milliseconds (a reader over thousands of
        // batches), and here it would hold back whatever the caller does next.
        ended_ = true;
        return std::nullopt;
      }
      return import_batch(&raw, schema_, label_);
    } catch (...) {
      failure_ = std::current_exception();
      throw;
    }
  }

 private:
  std::string last_error(int rc) {
    const char* msg = stream_->get_last_error ? stream_->get_last_error(stream_.get()) : nullptr;
    return msg != nullptr ? std::string(msg) : std::string(std::strerror(rc));
  }

  OwnedStream stream_;
  std::string label_;
  std::shared_ptr<const Schema> schema_;
  std::exception_ptr failure_;
  bool ended_ = false;
};

}  // namespace

std::unique_ptr<BatchSource> import_stream(ArrowArrayStream* stream, std::string label) {
  return std::make_unique<StreamSource>(stream, std::move(label));
}

}  // namespace pao::arrow
