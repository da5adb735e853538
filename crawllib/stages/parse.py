"""parse(N): pages of generation N -> texts and links of N, frontier of N + 1 (reason link).

Idempotent: texts and links are replaced with ``replaceWhere gen = N`` and the frontier with
``replaceWhere gen = N + 1 AND reason = 'link'``, so a rerun (say, with better extraction)
replaces exactly what the previous run wrote; the first run appends (nothing to replace).
Duplicates are judged against texts of generations before N only, so rerunning N never sees
its own previous output.
"""

from __future__ import annotations

import logging
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from crawllib import tables
from crawllib.transforms.parse import (
    extract_pages,
    links_table,
    mark_exact_duplicates,
    mark_near_duplicates,
    next_frontier,
    texts_of,
)

log = logging.getLogger(__name__)


def run(spark: SparkSession, root: str, cfg: Any, gen: int, fresh: bool = False) -> dict[str, int]:
    """Parse generation ``gen``; return its counts.

    Counts: pages (pages of gen = rows written to texts), texts (with non-empty text),
    extract_errors, exact_duplicates, near_duplicates, links (rows written), new_frontier
    (frontier rows of gen + 1 with reason link).

    fresh: this stage run is the generation's first (`crawllib.pipeline.run_stage`): the
    three writes append, there is nothing of gen to replace.
    """
    pages = tables.read(spark, root, "pages").where(F.col("gen") == gen)
    # Extraction is the costly part and feeds both texts and links: run it once.
    extracted = extract_pages(pages, cfg).persist(StorageLevel.MEMORY_AND_DISK)
    prior = tables.read(spark, root, "texts").where(F.col("gen") < gen)
    # Near-duplicate marking reads its input three times; keep the exact pass from rerunning.
    exact = (
        texts_of(extracted)
        .transform(mark_exact_duplicates, prior)
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    try:
        texts = exact.transform(
            mark_near_duplicates, prior, cfg.parse.near_dup_distance, cfg.parse.min_text_chars
        )
        tables.replace_where(texts, root, "texts", f"gen = {gen}", fresh)
        tables.replace_where(links_table(extracted, gen), root, "links", f"gen = {gen}", fresh)
    finally:
        exact.unpersist()
        extracted.unpersist()
    links = tables.read(spark, root, "links").where(F.col("gen") == gen)
    crawldb = tables.read(spark, root, "crawldb")
    frontier = next_frontier(links, pages.select("url_key", "depth"), crawldb, gen)
    tables.replace_where(frontier, root, "frontier", f"gen = {gen + 1} AND reason = 'link'", fresh)
    counts = _counts(spark, root, gen)
    log.info("parse gen %d: %s", gen, counts)
    return counts


def _counts(spark: SparkSession, root: str, gen: int) -> dict[str, int]:
    """Counted from what was written, so a rerun reports the same numbers (one action)."""
    texts = (
        tables.read(spark, root, "texts")
        .where(F.col("gen") == gen)
        .agg(
            F.count(F.lit(1)).alias("pages"),
            F.count_if(F.col("text_chars") > 0).alias("texts"),
            F.count_if(F.col("error").isNotNull()).alias("extract_errors"),
            F.count_if(F.col("duplicate_kind") == "exact").alias("exact_duplicates"),
            F.count_if(F.col("duplicate_kind") == "near").alias("near_duplicates"),
        )
    )
    links = (
        tables.read(spark, root, "links")
        .where(F.col("gen") == gen)
        .agg(F.count(F.lit(1)).alias("links"))
    )
    frontier = (
        tables.read(spark, root, "frontier")
        .where((F.col("gen") == gen + 1) & (F.col("reason") == "link"))
        .agg(F.count(F.lit(1)).alias("new_frontier"))
    )
    row = texts.crossJoin(links).crossJoin(frontier).first()
    return {name: int(row[name] or 0) for name in row.asDict()}
