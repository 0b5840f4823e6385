"""Column expressions: what ``filter``, ``select`` and ``with_columns`` compute.

Build them from :func:`col` and :func:`lit` with Python's operators. The engine binds an
expression to its input's schema before any data flows (an unknown column or a type mismatch fails
at once, naming the expression) and evaluates it column by column in C++ with Arrow's null rules.
The promotion and null rules are in ``docs/pipeline.md``, section "Expressions".

>>> from pyarrow_ops import col, lit
>>> (col("price") * 2 > 10) & ~col("code").str.starts_with("X")
(((col("price") * lit(2)) > lit(10)) & (~col("code").str.starts_with("X")))
>>> col("n").cast("float64") // lit(None, "int64")
(col("n").cast("double") // lit(None, "int64"))

Conditions combine with ``&``, ``|`` and ``~``; Python's ``and``, ``or``, ``not`` and ``if`` would
need a single truth value, which an expression does not have:

>>> bool(col("a") > 1)  # doctest: +ELLIPSIS
Traceback (most recent call last):
    ...
TypeError: an expression has no truth value: combine conditions with & | ~ (not and / or / not), ...
"""

from __future__ import annotations

from typing import Union

import pyarrow as pa

__all__ = ["Expr", "col", "lit"]

#: What a literal may hold.
LiteralValue = Union[None, bool, int, float, str]
#: A type: a pyarrow DataType or its name ("int64", "float64", "timestamp[ms, tz=UTC]", ...).
TypeLike = Union[pa.DataType, str]


def _type_name(t: TypeLike) -> str:
    """The type's name as pyarrow spells it (``str(pa_type)``), which the engine parses."""
    if isinstance(t, pa.DataType):
        return str(t)
    if isinstance(t, str):
        try:
            return str(pa.type_for_alias(t))
        except ValueError:
            return t  # e.g. "timestamp[ms, tz=UTC]": already pyarrow's spelling, or the engine says it is unknown
    raise TypeError(f"a type must be a pyarrow DataType or its name, not {type(t).__name__}")


def _quote(s: str) -> str:
    """A string in double quotes, escaped exactly as the engine renders it (core/expr.cpp quote)."""
    out = []
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


_SYMBOLS = {
    "add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%",
    "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "and": "&", "or": "|",
}


def _render(ir: tuple) -> str:
    """The IR as text, identical to the engine's rendering in error messages."""
    kind = ir[0]
    if kind == "col":
        return f"col({_quote(ir[1])})"
    if kind == "lit":
        value, type_name = ir[1], ir[2]
        text = _quote(value) if isinstance(value, str) else repr(value)
        return f"lit({text}, {_quote(type_name)})" if type_name is not None else f"lit({text})"
    if kind == "cast":
        return f"{_render(ir[1])}.cast({_quote(ir[2])})"
    if kind in ("contains", "starts_with"):
        return f"{_render(ir[1])}.str.{kind}({_quote(ir[2])})"
    op, args = ir[1], [_render(a) for a in ir[2:]]
    if op == "neg":
        return f"(-{args[0]})"
    if op == "not":
        return f"(~{args[0]})"
    if op in ("is_null", "is_not_null"):
        return f"{args[0]}.{op}()"
    return f"({args[0]} {_SYMBOLS[op]} {args[1]})"


def _expr(value: Expr | LiteralValue) -> Expr:
    return value if isinstance(value, Expr) else lit(value)


def _call(op: str, *args: Expr | LiteralValue) -> Expr:
    return Expr(("call", op, *(_expr(a)._ir for a in args)))


class Expr:
    """An expression over the columns of a record batch; build one with :func:`col` and :func:`lit`.

    Operators: ``+ - * / // %`` and unary ``-``; ``== != < <= > >=``; ``&``, ``|``, ``~`` for
    and, or, not with Kleene logic (``False & null`` is false, ``True | null`` is true). Python
    values on either side become literals: ``col("a") + 1`` is ``col("a") + lit(1)``.

    >>> from pyarrow_ops import col
    >>> 1 - col("a") % 3 != col("b")
    ((lit(1) - (col("a") % lit(3))) != col("b"))
    """

    __slots__ = ("_ir",)

    def __init__(self, ir: tuple) -> None:
        self._ir = ir

    def _to_ir(self) -> tuple:
        """The expression as nested tuples for the engine (python/expr_binding.h lists the forms)."""
        return self._ir

    def __repr__(self) -> str:
        return _render(self._ir)

    def __bool__(self) -> bool:
        raise TypeError(
            "an expression has no truth value: combine conditions with & | ~ (not and / or / not), "
            'and parenthesize comparisons, e.g. (col("a") > 1) & (col("b") < 2)'
        )

    # arithmetic
    def __add__(self, other: Expr | LiteralValue) -> Expr:
        return _call("add", self, other)

    def __radd__(self, other: Expr | LiteralValue) -> Expr:
        return _call("add", other, self)

    def __sub__(self, other: Expr | LiteralValue) -> Expr:
        return _call("sub", self, other)

    def __rsub__(self, other: Expr | LiteralValue) -> Expr:
        return _call("sub", other, self)

    def __mul__(self, other: Expr | LiteralValue) -> Expr:
        return _call("mul", self, other)

    def __rmul__(self, other: Expr | LiteralValue) -> Expr:
        return _call("mul", other, self)

    def __truediv__(self, other: Expr | LiteralValue) -> Expr:
        return _call("div", self, other)

    def __rtruediv__(self, other: Expr | LiteralValue) -> Expr:
        return _call("div", other, self)

    def __floordiv__(self, other: Expr | LiteralValue) -> Expr:
        return _call("floordiv", self, other)

    def __rfloordiv__(self, other: Expr | LiteralValue) -> Expr:
        return _call("floordiv", other, self)

    def __mod__(self, other: Expr | LiteralValue) -> Expr:
        return _call("mod", self, other)

    def __rmod__(self, other: Expr | LiteralValue) -> Expr:
        return _call("mod", other, self)

    def __neg__(self) -> Expr:
        return _call("neg", self)

    # comparisons (Python calls the reflected one, e.g. 1 < col("a") is col("a") > 1)
    def __eq__(self, other: Expr | LiteralValue) -> Expr:  # type: ignore[override]
        return _call("eq", self, other)

    def __ne__(self, other: Expr | LiteralValue) -> Expr:  # type: ignore[override]
        return _call("ne", self, other)

    def __lt__(self, other: Expr | LiteralValue) -> Expr:
        return _call("lt", self, other)

    def __le__(self, other: Expr | LiteralValue) -> Expr:
        return _call("le", self, other)

    def __gt__(self, other: Expr | LiteralValue) -> Expr:
        return _call("gt", self, other)

    def __ge__(self, other: Expr | LiteralValue) -> Expr:
        return _call("ge", self, other)

    __hash__ = None  # type: ignore[assignment]  # == builds an expression, so no hashing

    # Kleene logic
    def __and__(self, other: Expr | LiteralValue) -> Expr:
        return _call("and", self, other)

    def __rand__(self, other: Expr | LiteralValue) -> Expr:
        return _call("and", other, self)

    def __or__(self, other: Expr | LiteralValue) -> Expr:
        return _call("or", self, other)

    def __ror__(self, other: Expr | LiteralValue) -> Expr:
        return _call("or", other, self)

    def __invert__(self) -> Expr:
        return _call("not", self)

    def is_null(self) -> Expr:
        """True where the value is null (never null itself; NaN is not null)."""
        return _call("is_null", self)

    def is_not_null(self) -> Expr:
        """True where the value is not null (never null itself)."""
        return _call("is_not_null", self)

    def cast(self, type: TypeLike) -> Expr:  # noqa: A002 (pyarrow's name)
        """The value converted to ``type``: numbers, bools, temporal <-> integer, strings.

        Integers wrap, floats truncate toward zero; a NaN or out-of-range float fails.

        >>> from pyarrow_ops import col
        >>> import pyarrow as pa
        >>> col("a").cast(pa.int32())
        col("a").cast("int32")
        """
        return Expr(("cast", self._ir, _type_name(type)))

    @property
    def str(self) -> _StringOps:
        """String predicates: ``.str.contains(s)``, ``.str.starts_with(s)``."""
        return _StringOps(self)


class _StringOps:
    """The ``.str`` namespace of an :class:`Expr` (utf8 and large_utf8 values)."""

    __slots__ = ("_expr",)

    def __init__(self, expr: Expr) -> None:
        self._expr = expr

    def contains(self, pattern: str) -> Expr:
        """True where the string contains ``pattern`` (a literal substring, not a regex)."""
        if not isinstance(pattern, str):
            raise TypeError(f"str.contains takes a str, not {type(pattern).__name__}")
        return Expr(("contains", self._expr._ir, pattern))

    def starts_with(self, prefix: str) -> Expr:
        """True where the string starts with ``prefix``."""
        if not isinstance(prefix, str):
            raise TypeError(f"str.starts_with takes a str, not {type(prefix).__name__}")
        return Expr(("starts_with", self._expr._ir, prefix))


def col(name: str) -> Expr:
    """A reference to the column ``name``.

    >>> col("price")
    col("price")
    """
    if not isinstance(name, str):
        raise TypeError(f"a column name must be a str, not {type(name).__name__}")
    return Expr(("col", name))


def lit(value: LiteralValue, type: TypeLike | None = None) -> Expr:  # noqa: A002 (pyarrow's name)
    """A literal: None, bool, int, float or str, optionally of a given type.

    Without ``type``, ints are int64 (uint64 above its range), floats double, strings string,
    and ``None`` takes the type of what it meets (``col("a") + lit(None)`` has a's type).

    >>> lit(1.5), lit(7, "int8"), lit(None)
    (lit(1.5), lit(7, "int8"), lit(None))
    """
    if value is not None and not isinstance(value, (bool, int, float, str)):
        raise TypeError(f"a literal must be None, bool, int, float or str, not {value.__class__.__name__}")
    return Expr(("lit", value, None if type is None else _type_name(type)))
