"""The e2e tests read what a crawl wrote without a JVM, whichever engine wrote it: the tables
through delta-rs and DuckDB (the embedded engine's reads, crawllib.store.embedded), queries
through `crawl sql`'s DuckDB engine (crawllib.sql.duckdb_engine: the tables and the analysts'
views), in Spark SQL translated as the rules are (crawllib.store.dialect)."""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
from collections.abc import Iterator
from typing import Any

from crawllib.config import Config, load_config
from crawllib.core.stage_order import RunRow
from crawllib.store import generations
from crawllib.store.embedded import EmbeddedDb


@functools.cache
def _test_config() -> Config:
    from tests.conftest import test_config_overrides

    return load_config(overrides=test_config_overrides())


@contextlib.contextmanager
def reading(root: str, cfg: Config | None = None) -> Iterator[EmbeddedDb]:
    """The tables at ``root`` on the embedded engine, to read (no lease: no write)."""
    db = EmbeddedDb(root, cfg or _test_config())
    try:
        yield db
    finally:
        db.close()


def read(
    root: str, name: str, where: str | None = None, cfg: Config | None = None
) -> list[dict[str, Any]]:
    """The rows of table ``name`` (those matching ``where``, Spark SQL), as dicts."""
    with reading(root, cfg) as db:
        rel = db.table(name)
        if where:
            rel = db.sql(f"SELECT * FROM {{t}} WHERE {where}", t=rel)
        return db.collect(rel)


def count(root: str, name: str, where: str = "true", cfg: Config | None = None) -> int:
    with reading(root, cfg) as db:
        return db.count(db.sql(f"SELECT * FROM {{t}} WHERE {where}", t=db.table(name)))


def sql(root: str, query: str, cfg: Config | None = None) -> list[dict[str, Any]]:
    """The rows of a read-only Spark SQL ``query`` over the crawl's tables and views (named as
    in `crawl sql`), as dicts; timestamps naive, in UTC, as the tables' collect gives them."""
    from crawllib.sql import duckdb_engine
    from crawllib.store import dialect

    columns, rows = duckdb_engine.run_query(root, dialect.to_duckdb(query), cfg or _test_config())
    return [dict(zip(columns, map(_plain, row), strict=True)) for row in rows]


def runs(root: str, cfg: Config | None = None) -> list[RunRow]:
    """Every row of the generations table."""
    with reading(root, cfg) as db:
        return generations.read_rows(db)


def latest_runs(root: str, cfg: Config | None = None) -> dict[tuple[int, str], RunRow]:
    with reading(root, cfg) as db:
        return generations.latest_runs(db)


def stage_states(root: str, cfg: Config | None = None) -> dict[tuple[int, str], str]:
    with reading(root, cfg) as db:
        return generations.stage_states(db)


def done_counts(root: str, gen: int, stage: str) -> dict[str, int]:
    """The counts of the latest ``done`` row of a stage run."""
    done = [r for r in runs(root) if (r.gen, r.stage, r.state) == (gen, stage, "done")]
    return max(done, key=lambda r: r.at).counts


def _plain(value: Any) -> Any:
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
