"""`crawl status` without a JVM: the generations table and crawldb's freshness read with delta-rs
and DuckDB (the ``sql`` extra, as `crawl sql --engine duckdb`), in well under a second where a
SparkSession first takes 15 to 20. Without the extra the CLI reads them with Spark; both
readings go through :func:`status_rows`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from crawllib.config import Config, parse_now
from crawllib.core.output import counts_line
from crawllib.core.stage_order import RunRow, latest_of
from crawllib.core.vocab import STAGES
from crawllib.policy.revisit import freshness_query

COLUMNS = ("gen", "stage", "state", "seconds", "items/s", "counts")
# The same columns as JSON keys: names a program can use, the counts a map of numbers.
JSON_COLUMNS = ("gen", "stage", "state", "seconds", "items_per_second", "counts")
# The count each stage's items per second are of: its result's THROUGHPUT (crawllib.stages;
# tests/unit/test_status.py keeps the two equal), here so that status needs no Spark.
THROUGHPUT = {"plan": "candidates", "fetch": "urls", "update": "urls"}


def status_rows(rows: Iterable[RunRow]) -> list[tuple]:
    """One row per (gen, stage), its latest run (crawllib.core.stage_order.latest_of): gen, stage, state,
    seconds, items per second (of the stage's throughput count), its counts (a dict, by name;
    `printable` makes them one line for the table and CSV)."""
    order = {s: i for i, s in enumerate(STAGES)}
    out = []
    latest = latest_of(list(rows))
    for (gen, stage), r in sorted(
        latest.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 9))
    ):
        items = r.counts.get(THROUGHPUT[stage]) if stage in THROUGHPUT else None
        rate = round(items / r.seconds, 1) if items is not None and r.seconds else None
        seconds = round(r.seconds, 1) if r.seconds is not None else None
        out.append((gen, stage, r.state, seconds, rate, dict(sorted(r.counts.items()))))
    return out


def printable(rows: Iterable[tuple]) -> list[tuple]:
    """`status_rows` with their counts as one line ("candidates 10, hosts 2")."""
    return [(*row[:-1], counts_line(row[-1]) if row[-1] else "") for row in rows]


def freshness_sql(cfg: Config) -> str:
    """crawllib.policy.revisit.freshness_query at the crawl's clock: crawl.now, else now."""
    now = parse_now(cfg.crawl.now)
    if now is None:
        return freshness_query()
    at = dt.datetime.fromtimestamp(now, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return freshness_query(f"TIMESTAMP '{at}'")


def read_without_spark(root: str, cfg: Config) -> tuple[list[tuple], tuple[int, int, float]]:
    """status_rows and (pages with a stored version, due, freshness) of the crawl at ``root``,
    read with delta-rs and DuckDB. FileNotFoundError for no crawl root; EngineUnavailable
    without the ``sql`` extra."""
    from crawllib.runs import orchestrator
    from crawllib.sql import duckdb_engine

    rows = status_rows(orchestrator.read_rows(root, cfg))
    _, found = duckdb_engine.run_query(root, freshness_sql(cfg), cfg)
    pages, due, fresh = next(iter(found))
    return rows, (int(pages or 0), int(due or 0), float(fresh or 0.0))


def freshness_line(pages: int, due: int, fresh: float) -> str | None:
    """The footer of the status table; None for a crawl without a stored page."""
    if not pages:
        return None
    return (
        f"pages with a stored version: {pages}, due for a revisit: {due}, estimated "
        f"freshness: {fresh:.1%} (share whose stored version is still current)"
    )
