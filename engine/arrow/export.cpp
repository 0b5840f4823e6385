#include "arrow/export.h"

#include <atomic>
#include <cerrno>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "arrow/format.h"
#include "arrow/owned.h"
#include "core/error.h"

namespace pao::arrow {
namespace {

// Relaxed is enough: this counter orders nothing; tests read it after the threads that touched
// the exports have been joined (or on the same thread).
std::atomic<int64_t> g_live_exports{0};

// Base for every private_data we hand out, so the count of live exports is kept in one place.
struct Counted {
  Counted() { g_live_exports.fetch_add(1, std::memory_order_relaxed); }
  ~Counted() { g_live_exports.fetch_sub(1, std::memory_order_relaxed); }
  Counted(const Counted&) = delete;
  Counted& operator=(const Counted&) = delete;
};

// ---- schemas ----

// Holders own their children through arrow::Owned, which has the struct's layout (checked below),
// so the array of children the parent points to is the vector's storage. A holder freed by an
// exception half-way through an export leaks nothing; a child the consumer moved out has
// release == nullptr, and Owned then has nothing to release.
static_assert(sizeof(OwnedSchema) == sizeof(ArrowSchema) && sizeof(OwnedArray) == sizeof(ArrowArray));
static_assert(std::is_standard_layout_v<OwnedSchema> && std::is_standard_layout_v<OwnedArray>);
struct SchemaHolder : Counted {
  std::string format;
  std::string name;
  std::vector<OwnedSchema> children;  // release == nullptr until filled
  std::vector<ArrowSchema*> child_ptrs;
};

void release_schema(ArrowSchema* s) {
  if (s == nullptr || s->release == nullptr) return;
  delete static_cast<SchemaHolder*>(s->private_data);
  s->release = nullptr;
}

void fill_schema(ArrowSchema* out, SchemaHolder* holder, int64_t flags) {
  out->format = holder->format.c_str();
  out->name = holder->name.c_str();
  out->metadata = nullptr;
  out->flags = flags;
  out->n_children = static_cast<int64_t>(holder->children.size());
  out->children = holder->child_ptrs.empty() ? nullptr : holder->child_ptrs.data();
  out->dictionary = nullptr;
  out->release = &release_schema;
  out->private_data = holder;
}

// ---- arrays ----

struct ColumnHolder : Counted {
  std::shared_ptr<const void> owner;  // keeps the column's memory alive
  const void* buffers[3];
};

struct BatchHolder : Counted {
  std::shared_ptr<const void> owner;
  const void* buffers[1] = {nullptr};  // a record batch has no validity bitmap of its own
  std::vector<OwnedArray> children;  // release == nullptr until filled
  std::vector<ArrowArray*> child_ptrs;
};

void release_column(ArrowArray* a) {
  if (a == nullptr || a->release == nullptr) return;
  delete static_cast<ColumnHolder*>(a->private_data);
  a->release = nullptr;
}

void release_batch(ArrowArray* a) {
  if (a == nullptr || a->release == nullptr) return;
  delete static_cast<BatchHolder*>(a->private_data);
  a->release = nullptr;
}

// ---- streams ----

struct StreamHolder : Counted {
  std::shared_ptr<const Schema> schema;
  std::unique_ptr<BatchSource> source;  // destroyed at the end, releasing what it holds then
  std::string last_error;
};

int stream_fail(ArrowArrayStream* s, int code, const char* what) {
  auto* holder = static_cast<StreamHolder*>(s->private_data);
  holder->last_error = what;
  return code;
}

int stream_get_schema(ArrowArrayStream* s, ArrowSchema* out) {
  try {
    export_schema(*static_cast<StreamHolder*>(s->private_data)->schema, out);
    return 0;
  } catch (const std::bad_alloc&) {
    return stream_fail(s, ENOMEM, "out of memory");
  } catch (const std::exception& e) {
    return stream_fail(s, EIO, e.what());
  }
}

int stream_get_next(ArrowArrayStream* s, ArrowArray* out) {
  try {
    auto* holder = static_cast<StreamHolder*>(s->private_data);
    std::optional<Batch> batch;
    if (holder->source) batch = holder->source->next();
    if (!batch) {
      holder->source.reset();  // the end: give back what the source holds now, not at release
      out->release = nullptr;  // end of stream
      return 0;
    }
    export_batch(*batch, out);
    return 0;
  } catch (const Error& e) {
    return stream_fail(s, e.kind() == ErrorKind::kInputFailed ? EIO : EINVAL, e.what());
  } catch (const std::bad_alloc&) {
    return stream_fail(s, ENOMEM, "out of memory");
  } catch (const std::exception& e) {
    return stream_fail(s, EIO, e.what());
  } catch (...) {
    return stream_fail(s, EIO, "unknown error");
  }
}

const char* stream_get_last_error(ArrowArrayStream* s) {
  auto* holder = static_cast<StreamHolder*>(s->private_data);
  return holder->last_error.empty() ? nullptr : holder->last_error.c_str();
}

void stream_release(ArrowArrayStream* s) {
  if (s == nullptr || s->release == nullptr) return;
  delete static_cast<StreamHolder*>(s->private_data);
  s->release = nullptr;
}

}  // namespace

void export_schema(const Schema& schema, ArrowSchema* out) {
  auto holder = std::make_unique<SchemaHolder>();
  holder->format = "+s";
  holder->children.resize(schema.fields.size());
  for (size_t i = 0; i < schema.fields.size(); ++i) {
    const Field& field = schema.fields[i];
    auto child = std::make_unique<SchemaHolder>();
    child->format = to_format(field.type);
    child->name = field.name;
    fill_schema(holder->children[i].get(), child.release(), field.nullable ? ARROW_FLAG_NULLABLE : 0);
    holder->child_ptrs.push_back(holder->children[i].get());
  }
  fill_schema(out, holder.release(), 0);
}

void export_batch(const Batch& batch, ArrowArray* out) {
  const Schema& schema = *batch.schema();
  auto holder = std::make_unique<BatchHolder>();
  holder->owner = batch.owner();
  holder->children.resize(schema.fields.size());
  for (size_t i = 0; i < schema.fields.size(); ++i) {
    const Column& col = batch.column(i);
    auto child = std::make_unique<ColumnHolder>();
    child->owner = batch.owner();
    child->buffers[0] = col.validity;
    child->buffers[1] = col.values;
    child->buffers[2] = col.data;
    ArrowArray& c = *holder->children[i].get();
    c.length = batch.num_rows();
    c.null_count = col.validity == nullptr ? 0 : col.null_count;
    c.offset = col.offset;
    c.n_buffers = is_string(schema.fields[i].type.id) ? 3 : 2;
    c.n_children = 0;
    c.buffers = child->buffers;
    c.children = nullptr;
    c.dictionary = nullptr;
    c.release = &release_column;
    c.private_data = child.release();
    holder->child_ptrs.push_back(&c);
  }
  out->length = batch.num_rows();
  out->null_count = 0;
  out->offset = 0;
  out->n_buffers = 1;
  out->n_children = static_cast<int64_t>(holder->children.size());
  out->buffers = holder->buffers;
  out->children = holder->child_ptrs.empty() ? nullptr : holder->child_ptrs.data();
  out->dictionary = nullptr;
  out->release = &release_batch;
  out->private_data = holder.release();
}

void export_stream(std::unique_ptr<BatchSource> source, ArrowArrayStream* out) {
  auto holder = std::make_unique<StreamHolder>();
  holder->schema = source->schema();
  holder->source = std::move(source);
  out->get_schema = &stream_get_schema;
  out->get_next = &stream_get_next;
  out->get_last_error = &stream_get_last_error;
  out->release = &stream_release;
  out->private_data = holder.release();
}

int64_t live_exports() noexcept { return g_live_exports.load(std::memory_order_relaxed); }

}  // namespace pao::arrow
