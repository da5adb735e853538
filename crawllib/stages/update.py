"""update(N): fetches gen N (+ texts gen N) -> crawldb, and redirect targets -> frontier N+1.

Idempotent: the frontier rows are replaced (replaceWhere "gen = N+1 AND reason = 'redirect'";
the first run appends them) and the crawldb MERGE is guarded
(:func:`crawllib.transforms.update.crawldb_update_guard`), so a rerun changes no row. The status mapping is documented in :mod:`crawllib.transforms.update`.
"""

from __future__ import annotations

import logging
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from crawllib import tables
from crawllib.schemas import CRAWLDB
from crawllib.transforms.update import crawldb_update_guard, crawldb_updates, redirect_frontier

log = logging.getLogger(__name__)

# counts key -> crawldb status
STATUS_COUNTS = {
    "fetched": "fetched",
    "duplicate": "duplicate",
    "redirected": "redirected",
    "gone": "gone",
    "failed": "failed",
    "dead": "dead",
    "robots_denied": "robots_denied",
    "blocked": "blocked",
    "deferred": "queued",
}


def run(spark: SparkSession, root: str, cfg: Any, gen: int, fresh: bool = False) -> dict[str, int]:
    """Merge generation ``gen``'s fetches into crawldb and queue its redirect targets.

    Counts: the crawldb status, after the merge, of the URLs fetched in gen (so a rerun
    reports the same numbers) and redirects_queued, the frontier rows written for gen + 1.

    fresh: this stage run is the generation's first (`crawllib.pipeline.run_stage`): redirect
    targets are appended (not written at all when there are none).
    """
    fetches = tables.read(spark, root, "fetches").filter(F.col("gen") == gen)
    texts = tables.read(spark, root, "texts").filter(F.col("gen") == gen)
    crawldb = tables.read(spark, root, "crawldb")

    # Frontier first, from crawldb as it was: the MERGE below does not add redirect targets.
    frontier = redirect_frontier(fetches, crawldb, gen).persist()
    try:
        redirects = frontier.count()
        if redirects or not fresh:
            tables.replace_where(
                frontier, root, "frontier", f"gen = {gen + 1} AND reason = 'redirect'", fresh
            )
    finally:
        frontier.unpersist()

    updates = crawldb_updates(
        fetches,
        texts,
        crawldb,
        gen,
        max_attempts=cfg.fetch.max_attempts,
        backoff_base=cfg.fetch.retry_backoff_base,
    )
    tables.merge(
        spark,
        updates,
        root,
        "crawldb",
        keys=["url_key"],
        update={f.name: f"s.{f.name}" for f in CRAWLDB.fields if f.name != "url_key"},
        update_condition=crawldb_update_guard(gen),
    )

    fetched_keys = fetches.select("url_key").distinct()
    by_status = {
        r["status"]: r["count"]
        for r in tables.read(spark, root, "crawldb")
        .join(fetched_keys, on="url_key", how="left_semi")
        .groupBy("status")
        .count()
        .collect()
    }
    counts = {key: by_status.get(status, 0) for key, status in STATUS_COUNTS.items()}
    counts["redirects_queued"] = redirects
    log.info("update gen %d: %s", gen, counts)
    return counts
