"""Small helpers to write the rules' SQL (Spark SQL, which the embedded engine translates):
literals, column lists, steps composed into one query.

A rule is a function returning the text of one SELECT. Its inputs are relation names: a
``{placeholder}`` that the engine binds (crawllib.store.db.Db.sql), or the name of an earlier
step of the same query (:func:`steps`). Values from the configuration are written into the
text as literals (:func:`lit`), never user text unquoted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from crawllib.store.dialect import sql_string
from crawllib.store.schemas import Struct


def lit(value: object) -> str:
    """An SQL literal: NULL, TRUE/FALSE, a number, or a quoted string."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):  # a double (Spark's D suffix), not a decimal
        finite = value == value and value not in (float("inf"), float("-inf"))
        return f"{value!r}D" if finite else "NULL"
    return _string(str(value))


# Where a ``{name}`` in a string value starts: just after its brace.
_PLACEHOLDER_START = re.compile(r"(?<=\{)(?=[A-Za-z_][A-Za-z0-9_]*\})")


def _string(text: str) -> str:
    """A string literal of ``text``; one holding ``{name}`` (a URL pattern's ``{n}``) is
    written as a concat of pieces cut after each such brace, so that no engine takes it for
    an input placeholder (crawllib.store.db.Db.sql binds every ``{name}`` of the text)."""
    pieces = _PLACEHOLDER_START.split(text)
    if len(pieces) == 1:
        return sql_string(text)
    return f"concat({', '.join(sql_string(p) for p in pieces)})"


def in_list(values: Iterable[object]) -> str:
    """``'a', 'b'``: literals for an ``IN (...)``; callers give a non-empty list."""
    return ", ".join(lit(v) for v in values)


def is_in(column: str, values: Sequence[object]) -> str:
    """``column IN (...)``, FALSE for no values."""
    return f"{column} IN ({in_list(values)})" if values else "FALSE"


def names(schema: Struct | Sequence[str], alias: str | None = None) -> str:
    """The columns of a schema (or names), quoted, each prefixed with ``alias.``."""
    fields = schema.names if isinstance(schema, Struct) else schema
    prefix = f"{alias}." if alias else ""
    return ", ".join(f"{prefix}`{n}`" for n in fields)


def typed_null(t: str) -> str:
    return f"CAST(NULL AS {t})"


def steps(*named: tuple[str, str], final: str) -> str:
    """One query of named steps: ``WITH a AS (...), b AS (...) final``; a step reads the
    inputs and the steps before it by name."""
    if not named:
        return final
    body = ",\n".join(f"{name} AS (\n{query}\n)" for name, query in named)
    return f"WITH {body}\n{final}"


def timestamp_of(epoch_seconds: float) -> str:
    """The timestamp of epoch seconds, as an SQL expression."""
    return f"timestamp_seconds({lit(float(epoch_seconds))})"
