"""Rows in and out of the rules' SQL, on either engine (the ``db`` fixture of conftest.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from crawllib.store.db import Db, Rel
from crawllib.store.schemas import Struct


def rel(db: Db, schema: Struct, rows: Iterable[Mapping[str, Any]], **defaults: Any) -> Rel:
    """Rows (dicts; a missing column is ``defaults``' value, else null) as a relation of
    ``schema``."""
    return db.rows([{**defaults, **r} for r in rows], schema)


def run(db: Db, query: str, **inputs: Rel) -> list[dict[str, Any]]:
    """The rows of a rule's query over ``inputs``, as dicts."""
    return db.collect(db.sql(query, **inputs))


def by(rows: Iterable[Mapping[str, Any]], key: str = "url_key") -> dict[Any, dict[str, Any]]:
    """Rows by one column's value (asserting it is unique)."""
    out: dict[Any, dict[str, Any]] = {}
    for r in rows:
        assert r[key] not in out, f"{key} {r[key]!r} twice"
        out[r[key]] = dict(r)
    return out
