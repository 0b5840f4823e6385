#pragma once
// Engine batches -> Arrow C Data Interface, without copying.
//
// Every exported struct owns what it points to through private_data and frees it in its release
// callback. Children are released independently of their parent, as the specification allows a
// consumer to move a child out and release it later.
#include <cstdint>
#include <memory>

#include "arrow/c_abi.h"
#include "core/batch.h"

namespace pao::arrow {

// Fills *out (which the caller then owns and must release once) with a struct schema.
void export_schema(const Schema& schema, ArrowSchema* out);

// Fills *out (which the caller then owns and must release once) with a struct array whose
// children point at the batch's buffers. The batch's owner stays alive until *out and every
// child moved out of it are released.
void export_batch(const Batch& batch, ArrowArray* out);

// Takes ownership of `source` and fills *out (which the caller then owns) with a stream that pulls
// it: each get_next calls source->next() once. pao::Error and other exceptions become error codes
// (EINVAL for bad input, ENOMEM, EIO otherwise) with the message in get_last_error.
void export_stream(std::unique_ptr<BatchSource> source, ArrowArrayStream* out);

// Exported structs whose release callback has not run yet; for leak and ownership tests.
int64_t live_exports() noexcept;

}  // namespace pao::arrow
