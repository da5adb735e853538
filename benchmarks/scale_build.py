"""Build the scale benchmark's crawl root: ``generations`` generations of history whose
crawldb holds ScaleSpec.rows URLs, and a frontier for the measured generation
(benchmarks.scale_data says what the rows look like, benchmarks.scale_history how
the other tables follow from crawldb).

Every table is created by ``tables.init_tables`` and written with ``tables.append`` (rows
conformed to crawllib.store.schemas), so the root is what the crawler reads. crawldb comes first,
from ``spark.range``; each other table is derived from crawldb as written, in one append.

Built roots are cached under ``WORK/roots/<spec name>`` and copied for each run
(:func:`clone_root`): data files as hard links (Delta never changes one), logs as copies.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import time

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from benchmarks import scale_history as history
from benchmarks.scale_data import (
    DAY,
    STATUS_MIX,
    STORED,
    ScaleSpec,
    at_day,
    bucket,
    by_status,
    day_seconds,
    etag_of,
    host_of,
    text_of,
    url_of,
)
from benchmarks.scale_keys import session_conf, with_url_key, wrapping
from crawllib.config import make_config
from crawllib.core.vocab import Status
from crawllib.store import integrity, lease, tables
from crawllib.store.spark_db import SparkDb
from crawllib.store.spark_schemas import CRAWLDB, columns_of

log = logging.getLogger(__name__)

BUILT = "_scale_built"  # marks a finished root in the cache; holds its build seconds
ROWS_PER_TASK = 500_000


def cached_root(spark: SparkSession, spec: ScaleSpec, work: str) -> str:
    """The root built from ``spec`` under ``work/roots``, built now if missing."""
    root = os.path.join(os.path.abspath(work), "roots", spec.name)
    if os.path.exists(os.path.join(root, BUILT)):
        return root
    partial = root + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    t0 = time.perf_counter()
    build_root(spark, spec, partial)
    with open(os.path.join(partial, BUILT), "w") as fh:
        fh.write(f"{time.perf_counter() - t0:.1f}\n")
    os.replace(partial, root)
    return root


def build_seconds(root: str) -> float:
    """How long building a cached root took."""
    with open(os.path.join(root, BUILT)) as fh:
        return float(fh.read())


def clone_root(source: str, target: str) -> None:
    """Copy a crawl root: data files as hard links, the root's own files and everything under
    ``_delta_log`` as copies (Delta overwrites ``_last_checkpoint``)."""
    for folder, _, files in os.walk(source):
        rel = os.path.relpath(folder, source)
        os.makedirs(os.path.join(target, rel), exist_ok=True)
        copy = rel == "." or "_delta_log" in rel.split(os.sep)
        for name in files:
            src, dst = os.path.join(folder, name), os.path.join(target, rel, name)
            if copy:
                shutil.copy2(src, dst)
            else:
                os.link(src, dst)


def build_root(spark: SparkSession, spec: ScaleSpec, root: str) -> None:
    """Create every table under ``root`` and fill them from ``spec``."""
    cfg = make_config()
    with lease.hold(root, "bench scale build", cfg):
        _build_root(SparkDb(spark, root, cfg), spec)


def _build_root(db: SparkDb, spec: ScaleSpec) -> None:
    spark, root = db.spark, db.root
    db.init_tables()
    partitions = max(2, spec.rows // ROWS_PER_TASK)
    settings = {"spark.sql.shuffle.partitions": str(max(8, partitions))}
    with wrapping(spark), session_conf(spark, settings):
        _append(spec, root, "crawldb", crawldb_rows(spark, spec, partitions))
        known = tables.read(spark, root, "crawldb")
        derived = {
            "fetchlist": history.fetchlist_rows(known),
            "fetches": history.fetches_rows(known),
            "pages": history.pages_rows(known),
            "texts": history.texts_rows(known),
            "links": history.links_rows(known, spec.links_per_text),
            "robots": history.robots_rows(known, spec.gen - 1),
            "hosts": history.hosts_rows(known, spec.gen - 1),
            "frontier": history.frontier_rows(known).unionByName(
                history.next_frontier(spark, spec, known)
            ),
        }
        # From parallel driver threads: the small tables' commits overlap the big ones' work.
        tables.in_parallel(
            spark,
            *[functools.partial(_append, spec, root, name, rows) for name, rows in derived.items()],
        )
        traps = history.traps_rows(db, tables.read(spark, root, "texts"), spec.gen - 1)
        _append(spec, root, "traps", traps)
    versions = integrity.current_versions(db)
    tables.append(history.generations_rows(spark, spec, versions), root, "generations")


def _append(spec: ScaleSpec, root: str, name: str, rows: DataFrame) -> None:
    t0 = time.perf_counter()
    tables.append(rows, root, name)
    log.info("scale root %s: %s written in %.1fs", spec.name, name, time.perf_counter() - t0)


def crawldb_rows(spark: SparkSession, spec: ScaleSpec, partitions: int) -> DataFrame:
    """crawldb rows of URLs 0 .. rows - 1 (the module docstring of scale_data)."""
    n, gens = spec.rows, spec.generations
    a, b = spec.permutation()
    i = F.col("id")
    j = F.pmod(i * a + b, F.lit(n))
    status, offset, lo = None, None, 0
    for name, count in spec.counts.items():
        hit = j < lo + count
        status = F.when(hit, F.lit(name)) if status is None else status.when(hit, F.lit(name))
        offset = F.when(hit, j - lo) if offset is None else offset.when(hit, j - lo)
        lo += count
    assert status is not None and offset is not None
    urls = (
        spark.range(n, numPartitions=partitions)
        .withColumns({"host": host_of(i, spec.host_count), "status": status, "offset": offset})
        .withColumns(
            {"url": url_of(i, F.col("host")), "first_gen": F.floor(i * gens / n).cast("int")}
        )
        .transform(lambda df: with_url_key(df, "url", "url_key", spec.max_url_bytes))
    )
    attempted = F.col("status").isin(*[m.status for m in STATUS_MIX if m.outcome])
    last_gen = F.when(
        attempted,
        F.col("first_gen") + F.pmod(F.xxhash64(F.lit("last"), i), gens - F.col("first_gen")),
    )
    urls = urls.withColumn("last_gen", last_gen.cast("int"))
    stored = F.col("status").isin(*STORED)
    due_count = by_status({s: F.lit(c) for s, c in spec.due.items() if s != "new"}, F.lit(0))
    due = F.col("offset") < due_count
    fetched_s = day_seconds(F.col("last_gen")) + bucket(i, "second", DAY - 3600)
    next_s = F.when(
        (F.col("status") == Status.FETCHED) & due, day_seconds(spec.gen) - 3600
    ).otherwise(fetched_s + 30 * DAY + bucket(i, "interval", 30 * DAY))
    seed = F.when(F.col("status") == Status.DUPLICATE, F.col("host")).otherwise(
        F.col("url_key").cast("string")
    )
    pending = F.col("status").isin(Status.QUEUED, Status.FAILED)
    waiting = F.lit(spec.gen + 1) + F.pmod(F.col("offset"), F.lit(5))
    given = {
        "domain": F.col("host"),
        "reason": by_status({m.status: F.lit(m.reason) for m in STATUS_MIX if m.reason}),
        "attempts": F.when(F.col("status") == Status.FAILED, 1 + F.pmod(F.col("offset"), F.lit(3)))
        .when(attempted, 1)
        .otherwise(0),
        "depth": F.col("first_gen"),
        "next_gen": F.when(pending, F.when(due, F.lit(spec.gen)).otherwise(waiting)),
        "http_status": by_status(
            {m.status: F.lit(m.http_status) for m in STATUS_MIX if m.http_status}
        ),
        "content_hash": F.when(stored, F.sha2(text_of(seed), 256)),
        "updated_at": at_day(F.coalesce(F.col("last_gen"), F.col("first_gen"))),
        "fetched_at": F.when(stored, F.timestamp_seconds(fetched_s)),
        "fetch_interval": F.when(stored, (next_s - fetched_s).cast("double")),
        "next_fetch_at": F.when(stored, F.timestamp_seconds(next_s)),
        "interval_source": F.when(stored, F.lit("adaptive")),
        "etag": F.when(stored, etag_of(F.col("url_key"), F.col("last_gen"))),
        "last_modified": F.lit(None),
        "visits_changed": F.when(stored, F.lit(0)),
        "visits_unchanged": F.when(stored, F.col("last_gen") - F.col("first_gen")),
        "changed_at": F.when(stored, F.timestamp_seconds(fetched_s)),
        "score": 1.0 / (1 + F.col("first_gen")),
        "score_gen": F.col("last_gen"),
        "redirects": F.lit(None),
        # a failed URL's retry: due an hour ago, or up to five hours ahead
        "not_before": F.when(
            F.col("status") == Status.FAILED,
            F.timestamp_seconds(
                F.when(due, day_seconds(spec.gen) - 3600).otherwise(
                    day_seconds(spec.gen) + 3600 * (1 + F.pmod(F.col("offset"), F.lit(5)))
                )
            ),
        ),
    }
    return urls.select(*columns_of(CRAWLDB, **given))
