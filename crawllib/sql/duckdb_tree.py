"""What a DuckDB query reads, from its syntax tree (``json_serialize_sql``: parsed, not bound,
so no table need exist yet): the crawl's tables and views it names, and the columns it may use.
The DuckDB engine (crawllib.sql.duckdb_engine) opens only those tables, and reads only those columns.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from crawllib.core.errors import QueryRefused
from crawllib.core.vocab import TABLE_NAMES
from crawllib.sql.views import VIEWS, not_a_table

if TYPE_CHECKING:
    import duckdb


def syntax_tree(con: duckdb.DuckDBPyConnection, select: str) -> dict[str, Any]:
    """DuckDB's syntax tree of a SELECT (parsed, not bound: no table need exist)."""
    rows = con.execute("SELECT json_serialize_sql(?)", [select]).fetchall()
    tree = json.loads(rows[0][0])
    if tree.get("error"):
        raise QueryRefused(f"cannot parse the query: {tree.get('error_message')}")
    return dict(tree)


def relations_read(con: duckdb.DuckDBPyConnection, tree: dict[str, Any]) -> tuple[set[str], bool]:
    """The tables and views a query names, and the tables its views read; and whether it is
    SHOW TABLES (which names none but shows them all). QueryRefused for a name that is none
    of the crawl's tables, views or the query's CTEs, and for time travel (Spark's)."""
    named, ctes = _relations(tree)
    for name in sorted(named - ctes):
        if name not in TABLE_NAMES and name not in VIEWS:
            raise QueryRefused(not_a_table(name, spark=False))
    named &= {*TABLE_NAMES, *VIEWS}
    for view in named & set(VIEWS):
        named |= _relations(syntax_tree(con, VIEWS[view]))[0]
    shows = any(
        node.get("type") == "SHOW_REF" and node.get("show_type") == "SHOW_SPECIAL"
        for node in _nodes(tree)
    )
    return named, shows


def _relations(tree: dict[str, Any]) -> tuple[set[str], set[str]]:
    """The relations a syntax tree names (lower case; ``schema.table`` when qualified), and
    the names of its CTEs."""
    named: set[str] = set()
    ctes: set[str] = set()
    for node in _nodes(tree):
        for cte in (node.get("cte_map") or {}).get("map", []):
            ctes.add(str(cte["key"]).lower())
        if node.get("type") != "BASE_TABLE":
            continue
        parts = [node.get("catalog_name"), node.get("schema_name"), node["table_name"]]
        name = ".".join(str(p) for p in parts if p).lower()
        if node.get("at_clause"):
            raise QueryRefused(f"{name} AT (...): time travel runs with --engine spark")
        named.add(name)
    return named, ctes


def columns_used(
    con: duckdb.DuckDBPyConnection, tree: dict[str, Any], names: list[str]
) -> frozenset[str] | None:
    """The column names (lower case) a query, and the views it names, may read; None when it
    may read every column: a ``*`` or COLUMNS(...), a NATURAL join, a positional reference,
    or a whole row (``SELECT t FROM texts t``).

    Every word of the query counts as a column name it may use, its literals included: reading
    a column too many costs time, one too few would change the answer. A view's own ``*``
    passes through what the query reads of it."""
    nodes = list(_nodes(tree))
    relations = set(names) | {
        str(name).lower()
        for node in nodes
        if node.get("type") == "BASE_TABLE"
        for name in (node.get("alias"), node.get("table_name"))
        if name
    }
    for node in nodes:
        if node.get("class") in ("STAR", "POSITIONAL_REFERENCE"):
            return None
        if node.get("ref_type") == "NATURAL":
            return None
        if node.get("class") == "COLUMN_REF" and len(node["column_names"]) == 1:
            if str(node["column_names"][0]).lower() in relations:
                return None
    words = {w.lower() for w in _strings(tree)}
    for name in names:
        if name in VIEWS:
            words |= {w.lower() for w in _strings(syntax_tree(con, VIEWS[name]))}
    return frozenset(words)


def _nodes(tree: Any) -> Iterator[dict[str, Any]]:
    if isinstance(tree, dict):
        yield tree
        for value in tree.values():
            yield from _nodes(value)
    elif isinstance(tree, list):
        for value in tree:
            yield from _nodes(value)


def _strings(tree: Any) -> Iterator[str]:
    for node in _nodes(tree):
        for value in node.values():
            if isinstance(value, str):
                yield value
            elif isinstance(value, list):
                yield from (v for v in value if isinstance(v, str))
