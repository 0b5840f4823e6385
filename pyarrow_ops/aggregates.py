"""Aggregate functions for :func:`pyarrow_ops.aggregate` (semantics: docs/semantics.md)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Agg:
    """One aggregate function over a column (or over tuples, for ``count()``)."""

    function: str
    column: str | None = None

    @property
    def order_sensitive(self) -> bool:
        """True for functions whose result depends on the merged order (first, last)."""
        return self.function in ("first", "last")


def _column(function: str, column: str) -> Agg:
    if not isinstance(column, str):
        raise TypeError(f"{function}() takes a column name (str), got {type(column).__name__}")
    return Agg(function, column)


def count(column: str | None = None) -> Agg:
    """Tuples in the window and key; with a column, its non-null values. int64."""
    return Agg("count") if column is None else _column("count", column)


def sum(column: str) -> Agg:  # noqa: A001 (mirrors the SQL name, like polars.sum)
    """Sum of the non-null values (null if none): int64, uint64 or double."""
    return _column("sum", column)


def mean(column: str) -> Agg:
    """Mean of the non-null values (null if none), double."""
    return _column("mean", column)


def min(column: str) -> Agg:  # noqa: A001
    """Least non-null value (NaN above every number), in the column's type."""
    return _column("min", column)


def max(column: str) -> Agg:  # noqa: A001
    """Greatest non-null value (NaN above every number), in the column's type."""
    return _column("max", column)


def first(column: str) -> Agg:
    """The value (null included) of the window's first tuple in the merged order."""
    return _column("first", column)


def last(column: str) -> Agg:
    """The value (null included) of the window's last tuple in the merged order."""
    return _column("last", column)
