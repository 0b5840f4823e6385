"""Turning anything Arrow-shaped into engine inputs, and engine results into pyarrow and Polars.

Nothing here copies column data, with two exceptions, both cast batch by batch as the engine
reads them:

- ``string_view`` columns (Polars' default export) become ``string``, because the engine stores
  strings with offsets; ``string`` rather than ``large_string`` so that they match what pyarrow
  and Parquet produce.
- Where inputs disagree only in the flavour of a column, ``string`` and ``large_string`` (say a
  Polars frame and a Parquet file Polars wrote), or ``binary`` and ``large_binary``, that column is
  read as ``large_string`` (``large_binary``) in every input, which holds any batch; the cast
  widens the offsets and shares the character data (:func:`unify_string_types`).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator
from typing import Any, Protocol, TypeAlias, runtime_checkable

from typing import TYPE_CHECKING

import pyarrow as pa

from pyarrow_ops import _engine

if TYPE_CHECKING:
    import polars as pl


@runtime_checkable
class ArrowStreamExportable(Protocol):
    """Anything with the Arrow PyCapsule stream protocol: pa.Table, pl.DataFrame, readers, ..."""

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...


@runtime_checkable
class ArrowArrayExportable(Protocol):
    """Anything with the Arrow PyCapsule array protocol, e.g. a pa.RecordBatch."""

    def __arrow_c_array__(self, requested_schema: object | None = None) -> tuple[object, object]: ...


Input: TypeAlias = (
    ArrowStreamExportable | ArrowArrayExportable | str | os.PathLike[str] | Iterable[Any]
)
"""One input: an Arrow stream or array object, a Parquet file path, or an iterable of batches."""

_VIEW_REPLACEMENTS = {pa.string_view(): pa.string()}
_VIEW_IDS = frozenset(t.id for t in _VIEW_REPLACEMENTS)  # a type's id is a plain int: no hashing of the type
PARQUET_BATCH_ROWS = 65536


def _without_views(schema: pa.Schema) -> pa.Schema | None:
    """The schema with view types replaced, or None if it has none."""
    if not any(f.type.id in _VIEW_IDS for f in schema):
        return None
    return pa.schema(
        [f.with_type(_VIEW_REPLACEMENTS.get(f.type, f.type)) for f in schema], metadata=schema.metadata
    )


def _known_schema(obj: object) -> pa.Schema | None:
    """The schema of a stream-like object, if it can be had without reading it."""
    if isinstance(obj, (pa.Table, pa.RecordBatch, pa.RecordBatchReader)):
        return obj.schema
    if hasattr(obj, "__arrow_c_schema__"):
        return pa.schema(obj)
    return None


def _from_c_stream(obj: ArrowStreamExportable, label: str) -> _engine.Stream:
    schema = _known_schema(obj)
    if schema is not None and _without_views(schema) is None:
        return _engine.stream_from_capsule(obj.__arrow_c_stream__(), label)
    # Schema unknown up front (e.g. pl.DataFrame) or with view types: read through pyarrow, which
    # re-exports the same buffers, and cast lazily where needed.
    reader = pa.RecordBatchReader.from_stream(obj)
    target = _without_views(reader.schema)
    if target is not None:
        reader = reader.cast(target)
    return _engine.stream_from_capsule(reader.__arrow_c_stream__(), label)


def _from_parquet(path: str | os.PathLike[str], label: str) -> _engine.Stream:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{label}: no such Parquet file: {os.fspath(path)!r}") from e
    return _engine.stream_from_batches(
        pf.schema_arrow, pf.iter_batches(batch_size=PARQUET_BATCH_ROWS), label
    )


def _batches_of(items: Iterable[Any], label: str) -> Iterator[pa.RecordBatch]:
    """Record batches from an iterable of batches and stream-like objects, views cast."""
    for index, item in enumerate(items):
        if isinstance(item, pa.RecordBatch) or hasattr(item, "__arrow_c_array__"):
            batches: Iterable[pa.RecordBatch] = [pa.record_batch(item)]
        elif hasattr(item, "__arrow_c_stream__"):
            batches = pa.RecordBatchReader.from_stream(item)
        else:
            raise TypeError(
                f"{label}, item {index}: expected a record batch (or any object with "
                f"__arrow_c_array__ / __arrow_c_stream__), got {type(item).__name__}"
            )
        for batch in batches:
            target = _without_views(batch.schema)
            yield batch if target is None else batch.cast(target)


def _from_iterable(items: Iterable[Any], label: str) -> _engine.Stream:
    batches = _batches_of(items, label)
    try:
        first = next(batches)
    except StopIteration:
        raise _engine.InvalidInputError(
            f"{label} is an empty iterable: it has no batch to take a schema from; pass an "
            "empty pyarrow.Table or RecordBatchReader to give an empty input its schema"
        ) from None
    return _engine.stream_from_batches(first.schema, itertools.chain([first], batches), label)


def as_stream(obj: Input, index: int, time: str | None = None) -> _engine.Stream:
    """Wraps input number ``index`` as an engine stream, to be read lazily, batch by batch
    (``time``: the time column, for a live input's heartbeats)."""
    label = f"input {index}"
    if hasattr(obj, "_engine_stream"):  # a LiveInput: its heartbeats travel with its batches
        return obj._engine_stream(label, time)
    if isinstance(obj, (str, os.PathLike)):
        return _from_parquet(obj, label)
    if hasattr(obj, "__arrow_c_stream__"):
        return _from_c_stream(obj, label)
    if hasattr(obj, "__arrow_c_array__"):
        return _from_iterable([obj], label)
    if isinstance(obj, Iterable) and not isinstance(obj, (bytes, bytearray, dict)):
        return _from_iterable(obj, label)
    raise TypeError(
        f"{label}: cannot read a {type(obj).__name__}; pass an Arrow table, record batch, "
        "reader, Polars DataFrame, Parquet path, or an iterable of record batches"
    )


# The flavours of one logical type the inputs may mix, and the one they are read as.
_FLAVOURS = {pa.string(): pa.large_string(), pa.large_string(): pa.large_string(),
             pa.binary(): pa.large_binary(), pa.large_binary(): pa.large_binary()}


class _Exported:
    """An engine stream seen through the Arrow stream protocol, so that pyarrow can wrap it."""

    def __init__(self, stream: _engine.Stream) -> None:
        self._stream = stream

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self._stream.export_stream()


def unify_string_types(streams: list[_engine.Stream]) -> list[_engine.Stream]:
    """The inputs, with every column whose type differs across them only between ``string`` and
    ``large_string`` (or ``binary`` and ``large_binary``) read as the large flavour in all of them.
    Other differences are left for the engine to report (SchemaMismatchError). Inputs that need no
    cast are returned as they are, so nothing changes where the inputs agree."""
    if len(streams) < 2:
        return streams
    schemas = [pa.schema(s) for s in streams]
    if all(s.equals(schemas[0]) for s in schemas[1:]):  # the usual case, checked in C++
        return streams
    widen: dict[str, pa.DataType] = {}
    for name in schemas[0].names:
        types = {sch.field(name).type for sch in schemas if name in sch.names}
        if len(types) > 1 and all(t in _FLAVOURS for t in types) and len({_FLAVOURS[t] for t in types}) == 1:
            widen[name] = _FLAVOURS[next(iter(types))]
    if not widen:
        return streams
    out = []
    for index, (stream, schema) in enumerate(zip(streams, schemas)):
        target = pa.schema([f.with_type(widen.get(f.name, f.type)) for f in schema], metadata=schema.metadata)
        if target.equals(schema):
            out.append(stream)
            continue
        reader = pa.RecordBatchReader.from_stream(_Exported(stream)).cast(target)
        out.append(_engine.stream_from_capsule(reader.__arrow_c_stream__(), f"input {index}"))
    return out


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """A pushed batch whose columns differ from a live input's ``schema`` only in string or binary
    flavour (``string_view``, ``large_string``, ...), cast to it; any other batch as it is, for the
    engine to check and report."""
    if batch.schema.equals(schema) or batch.schema.names != schema.names:
        return batch
    def flavour(t: pa.DataType) -> pa.DataType:
        return _FLAVOURS.get(_VIEW_REPLACEMENTS.get(t, t), t)
    if all(flavour(a.type) == flavour(b.type) for a, b in zip(batch.schema, schema)):
        return batch.cast(schema)
    return batch


def as_streams(items: list[Input], time: str | None = None) -> list[_engine.Stream]:
    """Every input as an engine stream (:func:`as_stream`), string flavours unified. On an error,
    the streams made so far are closed."""
    streams: list[_engine.Stream] = []
    try:
        for index, item in enumerate(items):
            streams.append(as_stream(item, index, time))
        return unify_string_types(streams)
    except BaseException:
        for stream in streams:
            stream.close()
        raise


def skip_rows(obj: Input, rows: int) -> Input:
    """Input ``obj`` less its first ``rows`` rows, read as lazily as ``obj`` itself (a restore
    from a checkpoint goes on where the run had read to): a table or batch is sliced, a Parquet
    file skips whole row groups unread, anything else is read and its first rows dropped."""
    if rows == 0:
        return obj
    if isinstance(obj, (pa.Table, pa.RecordBatch)):
        return obj.slice(rows)
    if isinstance(obj, (str, os.PathLike)):
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(obj)
        groups, skipped = [], 0
        for g in range(pf.metadata.num_row_groups):
            n = pf.metadata.row_group(g).num_rows
            if skipped + n <= rows and not groups:
                skipped += n
            else:
                groups.append(g)
        batches: Iterable[pa.RecordBatch] = pf.iter_batches(batch_size=PARQUET_BATCH_ROWS, row_groups=groups)
        schema = pf.schema_arrow
        rows -= skipped
    else:
        reader = pa.RecordBatchReader.from_stream(obj) if hasattr(obj, "__arrow_c_stream__") else None
        if reader is None:
            items = iter(_batches_of([obj] if hasattr(obj, "__arrow_c_array__") else obj, "input"))
            first = next(items)
            schema, batches = first.schema, itertools.chain([first], items)
        else:
            schema, batches = reader.schema, reader

    def rest(left: int = rows) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if left >= batch.num_rows:
                left -= batch.num_rows
                continue
            yield batch.slice(left)
            left = 0

    return pa.RecordBatchReader.from_batches(schema, rest())


def as_input_list(inputs: Input | Iterable[Input]) -> list[Input]:
    """One Arrow object or path means one input; otherwise a list (or tuple) of inputs."""
    if isinstance(inputs, (str, os.PathLike)) or hasattr(inputs, "__arrow_c_stream__") or hasattr(
        inputs, "__arrow_c_array__"
    ):
        return [inputs]
    if isinstance(inputs, (list, tuple)):
        return list(inputs)
    raise TypeError(
        f"inputs must be a list of inputs (or a single Arrow object or path), got {type(inputs).__name__}"
    )


class Result:
    """The output of an engine operation: a lazy, single-pass stream of record batches.

    Work happens as you read. Read it once, by any one of: iterating (record batches),
    :meth:`to_arrow`, :meth:`to_polars`, :meth:`to_reader`, or handing it to anything that takes
    the Arrow PyCapsule stream protocol (``pa.table(result)``, ``pl.DataFrame(result)``,
    ``pa.RecordBatchReader.from_stream(result)``). Output batches share memory with the engine
    and, where they pass through unchanged, with your inputs: nothing is copied on the way out.
    ``close()`` (or leaving a ``with`` block) stops the work and releases every input at once.

    >>> import pyarrow as pa, pyarrow_ops as po
    >>> with po.merge([pa.table({"t": [1, 3]}), pa.table({"t": [2]})], time="t") as result:
    ...     result.to_arrow()["t"].to_pylist()
    [1, 2, 3]
    """

    def __init__(self, native: _engine.Stream) -> None:
        self._native = native
        self._schema = pa.schema(native)
        self._late_logs: list[Any] = []  # pyarrow_ops.lateness.LateLog per source given lateness= or late=

    @property
    def late(self) -> pa.Table | None:
        """With ``late="side"``: the rows that came later than their input's ``lateness`` allows,
        with the input's columns, then ``input`` (its index) and ``row`` (its position in that
        input's arrival order), by input and row; complete once the result has been read to its
        end. None without ``late="side"``."""
        tables = [t for log in self._late_logs if (t := log.table()) is not None]
        if not tables:
            return None
        if len(tables) > 1 and any(not t.schema.equals(tables[0].schema) for t in tables[1:]):
            raise _engine.UsageError("the sources of this run have different columns; their late rows are in "
                                     "stats()['late'] counts only")
        return tables[0] if len(tables) == 1 else pa.concat_tables(tables)

    @property
    def late_counts(self) -> list[int]:
        """Per input (of every source, in order), how many rows came later than its ``lateness``
        allows so far, whatever ``late`` did with them; [] without ``lateness`` or ``late``."""
        return [n for log in self._late_logs for n in log.counts()]

    def _late_stats(self) -> list[dict[str, Any]]:
        return [{"source": i, "late": log.policy, "rows": log.counts()} for i, log in enumerate(self._late_logs)]

    @property
    def schema(self) -> pa.Schema:
        """The schema every output batch has."""
        return self._schema

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """Exports the (unread) result as an ``arrow_array_stream`` PyCapsule. Casting to a
        requested schema is not supported; the request is ignored, as the protocol allows."""
        return self._native.export_stream()

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        native = self._native
        while (batch := native.next_batch()) is not None:
            yield pa.record_batch(batch)
        native.close()  # read to the end: give everything back now, not when garbage collected

    def to_arrow(self) -> pa.Table:
        """Reads the whole result into a pyarrow Table (one chunk per output batch)."""
        return pa.Table.from_batches(list(self), schema=self._schema)

    def to_polars(self) -> pl.DataFrame:
        """Reads the whole result into a Polars DataFrame; numeric columns are not copied."""
        import polars as pl  # only here: importing pyarrow_ops does not load Polars

        return pl.from_arrow(self.to_arrow(), rechunk=False)  # type: ignore[return-value]

    def to_reader(self) -> pa.RecordBatchReader:
        """The result as a pyarrow RecordBatchReader (consumes this result)."""
        return pa.RecordBatchReader.from_stream(self)

    def close(self) -> None:
        """Stops the work and releases the inputs and any unread data. Idempotent."""
        self._native.close()

    @property
    def closed(self) -> bool:
        """True once the result was read out, exported or closed."""
        return self._native.closed

    def __enter__(self) -> Result:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "unread"
        return f"<pyarrow_ops.Result ({state}) {self._schema.to_string(show_schema_metadata=False)!r}>"
