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
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from crawllib import tables
from crawllib.transforms.parse import (
    MARK_COLUMNS,
    extract_pages,
    links_table,
    mark_exact_duplicates,
    mark_near_duplicates,
    next_frontier,
    texts_of,
    with_duplicate_marks,
)

log = logging.getLogger(__name__)


def run(spark: SparkSession, root: str, cfg: Any, gen: int, fresh: bool = False) -> dict[str, int]:
    """Parse generation ``gen``; return its counts.

    Counts: pages (pages of gen = rows written to texts), texts (with non-empty text),
    extract_errors, exact_duplicates, near_duplicates, links (rows written), new_frontier
    (frontier rows of gen + 1 with reason link).

    fresh: this stage run is the generation's first (`crawllib.pipeline.run_stage`): the
    three writes append, there is nothing of gen to replace.

    Extraction runs once, cached; then texts (duplicates marked) and links with the frontier
    built from them are written at once, from two driver threads: neither reads what the other
    writes, and the jobs after extraction are short, so their commits and scheduling overlap
    instead of queueing (about 4 s a generation). Counts come from the cached rows written.
    """
    pages = tables.read(spark, root, "pages").where(F.col("gen") == gen)
    # Extraction is the costly part and feeds both texts and links: run it once.
    extracted = extract_pages(pages, cfg).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        extracted.count()  # fills the cache before two threads read it
        texts_counts, links_counts = tables.in_parallel(
            spark,
            lambda: _write_texts(spark, root, cfg, gen, fresh, extracted),
            lambda: _write_links_and_frontier(spark, root, gen, fresh, extracted),
        )
    finally:
        extracted.unpersist()
    counts = {**texts_counts, **links_counts}
    log.info("parse gen %d: %s", gen, counts)
    return counts


def _write_texts(
    spark: SparkSession, root: str, cfg: Any, gen: int, fresh: bool, extracted: DataFrame
) -> dict[str, int]:
    """texts of gen, duplicates marked against earlier generations only; their counts."""
    prior = tables.read(spark, root, "texts").where(F.col("gen") < gen)
    # Marked on MARK_COLUMNS only, then joined back to the extracted rows: the text never
    # goes through the duplicate joins or a cache of its own (a cache of 10,000-row column
    # batches of page texts ran a 1 GiB driver out of heap at 60,000 pages).
    # Near-duplicate marking reads its input three times; keep the exact pass from rerunning.
    exact = (
        texts_of(extracted)
        .select(*MARK_COLUMNS)
        .transform(mark_exact_duplicates, prior)
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    marks = (
        exact.transform(
            mark_near_duplicates, prior, cfg.parse.near_dup_distance, cfg.parse.min_text_chars
        )
        .where(F.col("duplicate_of").isNotNull())
        .select("url_key", "duplicate_of", "duplicate_kind")
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    texts = with_duplicate_marks(texts_of(extracted), marks)
    try:
        # Counted before the write, which then reads the marks the count cached. Not after:
        # their plan reads the texts table (prior), so once the write commits a new version
        # the cached plan no longer matches and the count reran every duplicate join (~30
        # stages, 3-4 s).
        row = texts.agg(
            F.count(F.lit(1)).alias("pages"),
            F.count_if(F.col("text_chars") > 0).alias("texts"),
            F.count_if(F.col("error").isNotNull()).alias("extract_errors"),
            F.count_if(F.col("duplicate_kind") == "exact").alias("exact_duplicates"),
            F.count_if(F.col("duplicate_kind") == "near").alias("near_duplicates"),
        ).first()
        tables.replace_where(texts, root, "texts", f"gen = {gen}", fresh)
    finally:
        marks.unpersist()
        exact.unpersist()
    return {name: int(row[name] or 0) for name in row.asDict()}


def _write_links_and_frontier(
    spark: SparkSession, root: str, gen: int, fresh: bool, extracted: DataFrame
) -> dict[str, int]:
    """links of gen, and the frontier of gen + 1 from those same rows; their counts."""
    links = links_table(extracted, gen).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        tables.replace_where(links, root, "links", f"gen = {gen}", fresh)
        crawldb = tables.read(spark, root, "crawldb")
        frontier = next_frontier(links, extracted.select("url_key", "depth"), crawldb, gen)
        frontier = frontier.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            where = f"gen = {gen + 1} AND reason = 'link'"
            tables.replace_where(frontier, root, "frontier", where, fresh)
            new_frontier = frontier.count()
        finally:
            frontier.unpersist()
        return {"links": links.count(), "new_frontier": new_frontier}
    finally:
        links.unpersist()
