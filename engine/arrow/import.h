#pragma once
// Arrow C Data Interface -> engine batches, without copying.
#include <memory>
#include <string>
#include <string_view>

#include "arrow/c_abi.h"
#include "core/batch.h"

namespace pao::arrow {

// Reads a record batch schema (format "+s" with one child per column). Borrows `schema`: the
// caller still owns and releases it. Throws Error(kUnsupportedType) naming the column for any type
// pyarrow-ops does not handle, and Error(kInvalidInput) for a schema that is not a struct.
Schema import_schema(const ArrowSchema& schema);

// Takes ownership of *array (sets array->release = nullptr), even when it throws. The batch's
// columns point into the producer's buffers; the producer's release callback runs exactly once,
// when the last Batch, slice or exported array that refers to them is gone. `where` names the
// input in errors. Throws Error(kInvalidInput) for an array that does not fit `schema`.
Batch import_batch(ArrowArray* array, std::shared_ptr<const Schema> schema, std::string_view where);

// Takes ownership of *stream (sets stream->release = nullptr). The source pulls batches lazily,
// one get_next per next(), and releases the stream when it is destroyed: callers destroy a source
// as soon as it has reported its end, off any path that waits on them (the release can take
// milliseconds). `label` ("input 2") prefixes every error message.
std::unique_ptr<BatchSource> import_stream(ArrowArrayStream* stream, std::string label);

}  // namespace pao::arrow
