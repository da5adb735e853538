"""parse(N): pages of generation N -> texts and links of N, frontier of N + 1 (reason link).

Idempotent: texts and links are replaced with ``replaceWhere gen = N`` and the frontier with
``replaceWhere gen = N + 1 AND reason = 'link'``, so a rerun (say, with better extraction)
replaces exactly what the previous run wrote; the first run appends (nothing to replace).
Duplicates are judged against texts of generations before N only, so rerunning N never sees
its own previous output.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import ClassVar

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from crawllib import tables
from crawllib.stages.base import StageResult, StageRun
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
from crawllib.vocab import DuplicateKind, FrontierReason

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ParseResult(StageResult):
    """pages: pages of gen (= rows written to texts); texts: with non-empty text;
    extract_errors; exact_duplicates, near_duplicates; links: rows written; new_frontier:
    frontier rows of gen + 1 with reason link."""

    THROUGHPUT: ClassVar[str] = "pages"

    pages: int
    texts: int
    extract_errors: int
    exact_duplicates: int
    near_duplicates: int
    links: int
    new_frontier: int


def run(run: StageRun) -> ParseResult:
    """Parse generation ``run.gen``: texts and links of gen, the frontier of gen + 1.

    Extraction runs once, cached; then texts (duplicates marked) and links with the frontier
    built from them are written at once, from two driver threads: neither reads what the other
    writes, and the jobs after extraction are short, so their commits and scheduling overlap
    instead of queueing. Counts come from the cached rows written.
    """
    pages = run.read("pages").where(F.col("gen") == run.gen)
    # Extraction is the costly part and feeds both texts and links: run it once.
    extracted = extract_pages(pages, run.cfg).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        extracted.count()  # fills the cache before two threads read it
        texts_counts, links_counts = tables.in_parallel(
            run.spark,
            lambda: _write_texts(run, extracted),
            lambda: _write_links_and_frontier(run, extracted),
        )
    finally:
        extracted.unpersist()
    result = ParseResult(**texts_counts, **links_counts)
    log.info("parse gen %d: %s", run.gen, result)
    return result


def _write_texts(run: StageRun, extracted: DataFrame) -> dict[str, int]:
    """texts of gen, duplicates marked against earlier generations only; their counts."""
    gen, cfg = run.gen, run.cfg
    prior = run.read("texts").where(F.col("gen") < gen)
    # Marked on MARK_COLUMNS only, then joined back to the extracted rows: the text never
    # goes through the duplicate joins or a cache of its own (column batches of page texts
    # in a cache can run a local driver out of heap).
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
        # the cached plan no longer matches and the count would rerun every duplicate join.
        row = tables.one_row(
            texts.agg(
                F.count(F.lit(1)).alias("pages"),
                F.count_if(F.col("text_chars") > 0).alias("texts"),
                F.count_if(F.col("error").isNotNull()).alias("extract_errors"),
                F.count_if(F.col("duplicate_kind") == DuplicateKind.EXACT).alias(
                    "exact_duplicates"
                ),
                F.count_if(F.col("duplicate_kind") == DuplicateKind.NEAR).alias("near_duplicates"),
            )
        )
        run.replace_own(texts, "texts", f"gen = {gen}")
    finally:
        marks.unpersist()
        exact.unpersist()
    return {name: int(row[name] or 0) for name in row.asDict()}


def _write_links_and_frontier(run: StageRun, extracted: DataFrame) -> dict[str, int]:
    """links of gen, and the frontier of gen + 1 from those same rows; their counts."""
    gen = run.gen
    links = links_table(extracted, gen).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        run.replace_own(links, "links", f"gen = {gen}")
        crawldb = run.read("crawldb")
        where = f"gen = {gen + 1} AND reason = '{FrontierReason.LINK}'"
        if not run.frontier_open:  # gen + 1 was planned from it: kept as it is
            new_frontier = run.read("frontier").where(where).count()
            return {"links": links.count(), "new_frontier": new_frontier}
        frontier = next_frontier(links, extracted.select("url_key", "depth"), crawldb, gen)
        frontier = frontier.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            run.replace_own(frontier, "frontier", where)
            new_frontier = frontier.count()
        finally:
            frontier.unpersist()
        return {"links": links.count(), "new_frontier": new_frontier}
    finally:
        links.unpersist()
