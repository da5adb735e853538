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


@functools.lru_cache(maxsize=4096)
def to_duckdb(query: str) -> str:
    """Spark SQL -> DuckDB SQL. Input placeholders ``{name}`` are kept as they are (they are
    bound to view names afterwards, :func:`bind`)."""
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
    when every condition is null."""
    from sqlglot import exp

    if isinstance(node, exp.CountIf):
        return exp.CountIf(this=exp.func("coalesce", node.this.copy(), exp.false()))
    return node


def sql_string(value: str) -> str:
    """A Spark SQL string literal of ``value`` (backslash escapes, as Spark reads them)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
