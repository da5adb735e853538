"""The rules' SQL on DuckDB: Spark SQL transpiled by SQLGlot, plus the few Spark functions
DuckDB lacks as macros.

The crawl's rules are written once, in Spark SQL (crawllib.transforms); Spark runs them as they
are and the embedded engine runs this module's translation. Each text is translated once
(cached). What neither side can express the same way is kept out of the rules: ``inline``
(the rules list a struct's fields instead), Spark's ``slice`` beyond its first elements.
"""

from __future__ import annotations

import functools
import logging
import re
from typing import Any

# Spark functions DuckDB lacks, as DuckDB macros (the session's time zone is UTC, as Spark's).
MACROS = (
    "CREATE OR REPLACE MACRO timestamp_seconds(s) AS to_timestamp(s)",
    "CREATE OR REPLACE MACRO pmod(a, b) AS ((a % b) + b) % b",
    "CREATE OR REPLACE MACRO shiftright(x, n) AS x >> n",
    "CREATE OR REPLACE MACRO unix_micros(ts) AS epoch_us(ts)",
)

# SQLGlot warns of every Spark hint (BROADCAST) it drops: DuckDB has none.
logging.getLogger("sqlglot").setLevel(logging.ERROR)

# {name} placeholders of the rules' inputs (crawllib.store.db.Db.sql)
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def placeholders(query: str) -> list[str]:
    """The input names a rule's text refers to, in order of first use."""
    return list(dict.fromkeys(_PLACEHOLDER.findall(query)))


def bind(query: str, names: dict[str, str]) -> str:
    """``query`` with each ``{name}`` replaced by the relation name ``names[name]``."""
    missing = [n for n in placeholders(query) if n not in names]
    if missing:
        raise KeyError(f"the query needs inputs {missing}")
    return _PLACEHOLDER.sub(lambda m: names[m.group(1)], query)


# A string literal (Spark: backslash escapes), a backquoted name, or a number standing alone
# (not part of a name): the tokens :func:`to_duckdb` tells apart.
_TOKENS = re.compile(
    r"'(?:[^'\\]|\\.)*'|`[^`]*`|(?<![\w.])(\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)(D|L)?(?![\w.])"
)
_NUMBER_MARK = re.compile(r'"?__number_(\d+)__"?')


def to_duckdb(query: str) -> str:
    """Spark SQL -> DuckDB SQL. Input placeholders ``{name}`` are kept as they are (they are
    bound to view names afterwards, :func:`bind`).

    A generation's rules differ from the last one's in their numbers (the generation, the
    clock): the numbers are taken out before the translation, which is cached, and put back
    after, so a translation is made once per rule shape, not per generation."""
    numbers: list[str] = []

    def take(m: re.Match[str]) -> str:
        # a string, a backquoted name, or an array index (SQLGlot shifts literal indexes to
        # DuckDB's 1-based ones): as it is
        if m.group(1) is None or query[: m.start()].rstrip().endswith("["):
            return m.group(0)
        value = m.group(1)
        numbers.append(f"CAST({value} AS DOUBLE)" if m.group(2) == "D" else value)
        return f"__number_{len(numbers) - 1}__"

    shape = _TOKENS.sub(take, query)
    return _NUMBER_MARK.sub(lambda m: numbers[int(m.group(1))], _translate(shape))


@functools.lru_cache(maxsize=4096)
def _translate(query: str) -> str:
    import sqlglot

    marked = _PLACEHOLDER.sub(lambda m: f"__input_{m.group(1)}__", query)
    trees = sqlglot.parse(marked, read="spark")
    if len(trees) != 1 or trees[0] is None:
        raise ValueError(f"one statement expected, got {len(trees)}")
    tree = trees[0].transform(_spark_semantics)
    out = tree.sql(dialect="duckdb")
    return re.sub(r'"?__input_([A-Za-z_][A-Za-z0-9_]*?)__"?', r"{\1}", out)


def _spark_semantics(node: Any) -> Any:
    """Where DuckDB's function of the same name means otherwise: count_if counts 0 (not null)
    when every condition is null; array_distinct keeps each value's first occurrence, in
    order, a null included (DuckDB's list_distinct keeps neither the order nor a null)."""
    from sqlglot import exp

    if isinstance(node, exp.CountIf):
        return exp.CountIf(this=exp.func("coalesce", node.this.copy(), exp.false()))
    if isinstance(node, exp.ArrayDistinct):
        values = node.this.transform(_spark_semantics)  # a replaced node's children are not visited
        x, i = exp.to_identifier("_distinct_x"), exp.to_identifier("_distinct_i")
        position = exp.Anonymous(this="list_position", expressions=[values.copy(), exp.column(x)])
        first = exp.Lambda(this=exp.EQ(this=position, expression=exp.column(i)), expressions=[x, i])
        return exp.Anonymous(this="list_filter", expressions=[values, first])
    return node


def sql_string(value: str) -> str:
    """A Spark SQL string literal of ``value`` (backslash escapes, as Spark reads them)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
