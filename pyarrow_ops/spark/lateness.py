"""``lateness=`` and ``late=`` of a pipeline's inputs on Spark (docs/spark.md, "Out-of-order inputs").

In-process, each input passes a buffer that judges every row against its watermark and puts the
rows that are not late back in (time, arrival) order (engine/gate/lateness.h). Spark holds the
whole input, so the rule of docs/time.md is applied to it in two steps instead:

- **Which rows are late.** The watermark before a row is the latest time of the rows before it
  that were not late, less the bound. A late row's time is below that latest time, so leaving late
  rows out of the maximum changes nothing: the watermark before a row is the latest time of *all*
  the rows before it, less the bound. One running maximum per input, in arrival order (a window
  over the input's positions), marks the late rows; no row depends on what the policy did before it.
- **The order.** The rows that are not late of each input are renumbered in (time, arrival)
  order, the order the in-process buffer restores: their new positions make each input sorted by
  time, so everything after (the stages of ``run``, the partitions of ``aggregate``) reads them
  as it reads sorted inputs, and ties in the merged order (time, input, position) still fall in
  arrival order.

A row's arrival position is its Spark row order (``monotonically_increasing_id``, or ``order_by``),
as for sorted inputs. The running maximum takes each input's rows in one Spark partition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pyarrow_ops import _engine
from pyarrow_ops.lateness import Lateness, bounds

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

_LATEST = "__pao_latest"  # the latest time before the row, in its input's arrival order


def _as_long(df: DataFrame, time: str) -> Column:
    """The time column as the engine's integers (Spark's timestamps: microseconds; dates: days)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    kind = df.schema[time].dataType
    if isinstance(kind, (T.TimestampType, T.TimestampNTZType)):
        return F.unix_micros(F.col(time).cast("timestamp"))
    if isinstance(kind, T.DateType):
        return F.unix_date(F.col(time))
    if isinstance(kind, (T.IntegerType, T.LongType, T.ShortType, T.ByteType)):
        return F.col(time).cast("long")
    raise _engine.InvalidInputError(f"time column '{time}' is {kind.simpleString()} on Spark; lateness= takes "
                                    "a timestamp, date or integer time column")


def _flagged(df: DataFrame, time: str, index: Column, position_column: str, limits: list[int]) -> tuple[
        DataFrame, Column]:
    """``df`` with the latest time before each row in its input (``_LATEST``, null for an input's
    first row), and the condition that a row is late. ``index``: each row's input index."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    before = Window.partitionBy(index).orderBy(position_column).rowsBetween(Window.unboundedPreceding, -1)
    t = _as_long(df, time)
    df = df.withColumn(_LATEST, F.max(t).over(before))
    bound = F.element_at(F.array(*[F.lit(b) for b in limits]), index.cast("int") + 1)
    return df, F.col(_LATEST).isNotNull() & (_as_long(df, time) < F.col(_LATEST) - bound)


def _refuse_first_late(df: DataFrame, late: Column, time: str, index: Column, position_column: str,
                       limits: list[int]) -> None:
    """late="error": an UnsortedInputError naming the first late row's input, row and times (one
    Spark job; a second one counts the rows before it only when there is one)."""
    from pyspark.sql import functions as F

    first = (df.filter(late).orderBy(index, position_column)
             .select(index.alias("__pao_i"), position_column, time, _LATEST).limit(1).collect())
    if not first:
        return
    i, position, value, latest = first[0]
    row = df.filter((index == i) & (F.col(position_column) < position)).count()
    raise _engine.UnsortedInputError(
        f"input {i} is not sorted by '{time}' within its lateness: row {row} has {value}, earlier than its latest "
        f"time before it, {latest} (as the engine's integer), less the lateness of {limits[i]} (raise lateness=, "
        "or pass late=\"drop\")")


def in_time_order(df: DataFrame, time: str, inputs: int, time_order: tuple[Lateness, str], time_type: pa.DataType,
                  *, packed_shift: int | None = None) -> DataFrame:
    """The tagged inputs ``df`` less their late rows (``late="drop"``; ``"error"`` raises for the
    first), each input's rows renumbered in (time, arrival) order. ``packed_shift``: the positions
    are packed (``_with_packed_position``: the input index above that many bits), else the index is
    ``__pao_input``. ``"side"`` is refused: :func:`late_rows` gives the late rows."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from pyarrow_ops.spark import INPUT_COLUMN, POSITION_COLUMN

    lateness, late = time_order
    if late == "side":
        raise _engine.UsageError("late=\"side\" is not supported on Spark: pass late=\"drop\" and take the late "
                                 "rows from pyarrow_ops.spark.late_rows(...)")
    limits = bounds(lateness, late, inputs, time_type)
    assert limits is not None
    index = F.col(INPUT_COLUMN) if packed_shift is None else F.shiftright(F.col(POSITION_COLUMN), packed_shift)
    flagged, is_late = _flagged(df, time, index, POSITION_COLUMN, limits)
    if late == "error":
        _refuse_first_late(flagged, is_late, time, index, POSITION_COLUMN, limits)
    kept = flagged.filter(~is_late).drop(_LATEST)
    rank = F.row_number().over(Window.partitionBy(index).orderBy(_as_long(df, time), F.col(POSITION_COLUMN))) - 1
    renumbered = rank.cast("long") if packed_shift is None else F.shiftleft(index, packed_shift) + rank
    return kept.withColumn(POSITION_COLUMN, renumbered)


def late_rows(inputs: Any, *, time: str, lateness: Lateness = None, input_column: str | None = None,
              order_by: str | None = None) -> DataFrame:
    """The rows of ``inputs`` (as for :func:`pyarrow_ops.spark.run`) that are late under
    ``lateness=`` (docs/time.md's rule, per input in arrival order), as ``result.late`` holds them
    in-process: the input's columns, then ``input`` (int) and ``row`` (long, the row's position in
    its input's arrival order), by input and row. Nothing runs until your action.

    >>> late_rows(clicks, time="t", lateness=10).count()  # doctest: +SKIP
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema

    from pyarrow_ops.spark import INPUT_COLUMN, POSITION_COLUMN, _tagged

    tagged, n, _ = _tagged(inputs, input_column, order_by)
    if time not in tagged.columns:
        raise _engine.InvalidInputError(f"time column '{time}' not found; the inputs' columns are: "
                                        f"{', '.join(c for c in tagged.columns if not c.startswith('__pao_'))}")
    time_type = to_arrow_schema(tagged.select(time).schema, timezone="UTC").field(time).type
    limits = bounds(lateness, "drop", n, time_type)
    assert limits is not None
    flagged, is_late = _flagged(tagged, time, F.col(INPUT_COLUMN), POSITION_COLUMN, limits)
    numbered = flagged.withColumn(
        "__pao_row", F.row_number().over(Window.partitionBy(INPUT_COLUMN).orderBy(POSITION_COLUMN)) - 1)
    data = [c for c in tagged.columns if not c.startswith("__pao_")]
    for clash in ("input", "row"):
        if clash in data:
            raise _engine.InvalidInputError(f"late_rows adds the columns 'input' and 'row', and the inputs already "
                                            f"have '{clash}'; rename it first")
    return (numbered.filter(is_late).orderBy(INPUT_COLUMN, "__pao_row")
            .select(*data, F.col(INPUT_COLUMN).cast("int").alias("input"), F.col("__pao_row").cast("long").alias("row")))
