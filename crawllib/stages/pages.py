"""The generation's pages, for update: what the fetch did not extract (all of them when
``fetch.extract`` is off, or to re-extract: ``crawl parse --force``) and the duplicate marks.

Raw pages are kept, so extraction can be rerun from them without refetching: the re-extracted
texts and links replace the generation's rows (links first: a texts row is what tells a
rerun that a page is extracted). Duplicates are judged against texts of generations before N
only, so rerunning N never sees its own earlier output; marking reads only MARK_COLUMNS and
is checkpointed before the writes that use it.
"""

from __future__ import annotations

import logging

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from crawllib.core.vocab import Directive, DuplicateKind
from crawllib.stages.base import StageRun
from crawllib.stages.traps import TRAPS_UPDATE
from crawllib.store import tables
from crawllib.store.aliases import ALIASES_UPDATE, alias_counts, alias_hosts
from crawllib.transforms.parse import (
    MARK_COLUMNS,
    key_collisions,
    links_table,
    mark_canonical,
    mark_exact_duplicates,
    mark_near_duplicates,
    mark_soft_404,
    with_duplicate_marks,
)
from crawllib.transforms.traps import pattern_counts, trapped_patterns

log = logging.getLogger(__name__)


def write_links(run: StageRun, extracted: DataFrame, keep_stored: bool) -> None:
    """links of gen: those of the pages just extracted, and (keep_stored) those stored of the
    other pages (the fetch's)."""
    links = links_table(extracted)
    if keep_stored:
        stored = run.read("links").where(F.col("gen") == run.gen)
        sources = extracted.select(F.col("url_key").alias("src_key"))
        links = stored.join(sources, "src_key", "left_anti").unionByName(links)
    tables.replace_where(links, run.root, "links", f"gen = {run.gen}")


def unmarked(texts: DataFrame) -> DataFrame:
    return texts.withColumns(
        {"duplicate_of": F.lit(None).cast("long"), "duplicate_kind": F.lit(None).cast("string")}
    )


def duplicate_marks(run: StageRun, texts: DataFrame) -> DataFrame:
    """The duplicate marks of gen's texts (url_key, duplicate_of, duplicate_kind of the
    duplicates), judged against earlier generations only, computed once and checkpointed.

    Marked on MARK_COLUMNS only, then joined back to the rows: the text never goes through
    the duplicate joins or a cache of its own (column batches of page texts in a cache can
    run a local driver out of heap). Near-duplicate marking reads its input three times; the
    exact pass is cached so it runs once."""
    cfg = run.cfg
    prior = run.read("texts").where(F.col("gen") < run.gen)
    probes = run.read("probes").where(F.col("gen") <= run.gen)
    exact = (
        unmarked(texts)
        .transform(mark_canonical)
        .transform(mark_soft_404, probes, cfg.parse.near_dup_distance)
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
        # Computed now, from the texts table as it is, into blocks with no lineage: the texts
        # write, the frontier and the pattern counts (three threads) read them. A persisted
        # plan would not do: once the texts write commits, the other two threads' queries no
        # longer matched its cache and reran extraction and marking (51 extractions for 12
        # in the parse stage test).
        .localCheckpoint(eager=True)
    )
    exact.unpersist()
    return marks


def write_texts(
    run: StageRun,
    texts: DataFrame,
    marks: DataFrame,
    replace: bool,
    stored: DataFrame | None = None,
) -> dict[str, int]:
    """texts of gen (``texts``: unmarked, or marked by an earlier run) with ``marks``
    (:func:`duplicate_marks`); their counts. replace: the table may hold rows of gen (the
    fetch's, an earlier run's), else they are appended. stored: given when ``texts`` are
    exactly the stored rows of gen (parse extracted nothing): if nothing is marked now and
    none of them is marked, they are already what would be written, and are not rewritten."""
    gen = run.gen
    marked = with_duplicate_marks(unmarked(texts), marks)
    # Counted before the write, which then reads the marks the count cached. Not after:
    # their plan reads the texts table, so once the write commits a new version the
    # cached plan no longer matches and the count would rerun every duplicate join.
    row = tables.one_row(
        marked.agg(
            F.count(F.lit(1)).alias("pages"),
            F.count_if(F.col("text_chars") > 0).alias("texts"),
            F.count_if(F.col("error").isNotNull()).alias("extract_errors"),
            F.count_if(F.col("duplicate_kind") == DuplicateKind.EXACT).alias("exact_duplicates"),
            F.count_if(F.col("duplicate_kind") == DuplicateKind.NEAR).alias("near_duplicates"),
            F.count_if(F.col("duplicate_kind") == DuplicateKind.CANONICAL).alias(
                "canonical_duplicates"
            ),
            F.count_if(F.col("duplicate_kind") == DuplicateKind.SOFT_404).alias("soft_404"),
            *[
                F.count_if(F.array_contains("directives", d)).alias(d)
                for d in (Directive.NOINDEX, Directive.NOFOLLOW)
            ],
            F.count_if(F.col("tdm_reserved")).alias("tdm_reserved"),
        )
    )
    duplicates = sum(
        int(row[k] or 0)
        for k in ("exact_duplicates", "near_duplicates", "canonical_duplicates", "soft_404")
    )
    as_stored = (
        stored is not None
        and not duplicates
        and stored.where(F.col("duplicate_of").isNotNull()).isEmpty()
    )
    if as_stored:
        log.info("parse gen %d: no duplicates; the fetch's texts rows stay as they are", gen)
    elif replace:
        tables.replace_where(marked, run.root, "texts", f"gen = {gen}")
    else:
        tables.append(marked, run.root, "texts")
    return {name: int(row[name] or 0) for name in row.asDict()}


def count_patterns(
    run: StageRun, pages: DataFrame, marks: DataFrame, known: DataFrame
) -> dict[str, int]:
    """Add gen's pages and duplicates per host and URL pattern to the traps table, and its
    exact duplicates per pair of hosts to the aliases table (once: a rerun adds nothing; the
    aliases MERGE only when there are any), from which plan judges patterns traps
    (crawllib.stages.traps) and hosts aliases (crawllib.store.aliases); the counts of patterns judged traps
    and of hosts judged aliases now. In: pages of gen (url_key, url, host); marks; known
    (url_key, host: the crawldb rows of every URL a mark names)."""
    owners = pages.select("url_key", "host").unionByName(known.select("url_key", "host"))
    merges = [("traps", pattern_counts(pages, marks, run.gen), ["host", "pattern"], TRAPS_UPDATE)]
    copies = alias_counts(marks, owners, run.gen).localCheckpoint()
    if not copies.isEmpty():
        merges.append(("aliases", copies, ["host", "of_host"], ALIASES_UPDATE))
    for table, counts, keys, update in merges:
        tables.merge(
            run.spark,
            counts,
            run.root,
            table,
            keys=keys,
            update=update,
            update_condition=tables.ONCE_PER_GEN,
        )
    traps = run.read("traps")
    return {
        "trap_patterns": trapped_patterns(traps, run.cfg).count(),
        "alias_hosts": alias_hosts(run.read("aliases"), traps, run.cfg).count(),
    }


def count_collisions(run: StageRun, links: DataFrame, sitemaps: DataFrame, known: DataFrame) -> int:
    """The link targets and sitemap entries of gen whose url_key a known URL has under another
    URL (transforms.parse.key_collisions), logged with a few examples."""
    listed = sitemaps.select(F.explode("entries").alias("e")).select(
        F.col("e.url_key").alias("dst_key"), F.col("e.url").alias("dst_url")
    )
    targets = links.select("dst_key", "dst_url").unionByName(listed)
    collisions = key_collisions(targets, known)
    count = collisions.count()
    if count:
        examples = [f"{r.dst_url} (known: {r.known_url})" for r in collisions.take(5)]
        log.warning(
            "parse gen %d: %d URLs share their url_key with another URL and are not crawled: %s",
            run.gen,
            count,
            "; ".join(examples),
        )
    return count
