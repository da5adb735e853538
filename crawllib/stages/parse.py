"""parse(N): texts of N marked as duplicates, frontier of N + 1 (reason link) from links of N.

The fetch stage extracts its pages while it waits on politeness (``fetch.extract``) and writes
their texts and links rows, per slice. Parse extracts, from the stored raw pages, only what the
fetch did not (every page when ``fetch.extract`` is off; every page when forced: ``crawl parse
--force`` re-extracts without refetching), then does what needs the whole generation:
canonical, exact and near-duplicate marks, the next frontier (link targets not in crawldb,
with the cash their links passed: crawllib.transforms.priority) and the pages and duplicates
of each URL pattern (the traps table: crawllib.traps).

Idempotent: texts are replaced with ``replaceWhere gen = N`` (marks included), links likewise
when parse extracted anything, and the frontier with ``replaceWhere gen = N + 1 AND reason =
'link'`` (kept as it is once N + 1 is planned: StageRun.frontier_open). When parse extracts,
links are written before texts: texts rows are what tells a rerun that a page is extracted.
Duplicates are judged against texts of generations before N only, so rerunning N never sees
its own previous output. The traps MERGE adds gen N's counts to a pattern only while its row
has not counted N (``gen < N``).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import ClassVar

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from crawllib import tables
from crawllib.aliases import ALIASES_UPDATE, alias_counts, alias_hosts
from crawllib.schemas import TEXTS
from crawllib.stages.base import StageResult, StageRun
from crawllib.transforms.parse import (
    MARK_COLUMNS,
    extract_pages,
    followed_links,
    key_collisions,
    links_table,
    mark_canonical,
    mark_exact_duplicates,
    mark_near_duplicates,
    mark_soft_404,
    next_frontier,
    sitemap_frontier,
    texts_of,
    with_duplicate_marks,
)
from crawllib.transforms.priority import link_cash, sources_of
from crawllib.traps import TRAPS_UPDATE, pattern_counts, trapped_patterns
from crawllib.vocab import Directive, DuplicateKind, FrontierReason, sql_list

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ParseResult(StageResult):
    """pages: pages of gen (= rows written to texts); extracted: the pages this run extracted
    (the rest the fetch did); texts: with non-empty text; extract_errors; exact_duplicates,
    near_duplicates, canonical_duplicates (pages naming another URL canonical); soft_404
    (pages whose text is their host's answer to a missing page: a probe's); noindex,
    nofollow: pages with that robots directive; tdm_reserved: pages reserving text and data
    mining rights; links: rows of gen; new_frontier: frontier rows of gen + 1, reason link or
    sitemap; trap_patterns: URL patterns judged traps, alias_hosts: hosts judged aliases of
    another, after this generation's pages are counted (crawllib.traps, crawllib.aliases);
    key_collisions: link targets and sitemap entries left out because a known URL has their
    url_key (transforms.parse.key_collisions)."""

    THROUGHPUT: ClassVar[str] = "pages"

    pages: int
    extracted: int
    texts: int
    extract_errors: int
    exact_duplicates: int
    near_duplicates: int
    canonical_duplicates: int
    soft_404: int
    noindex: int
    nofollow: int
    tdm_reserved: int
    links: int
    new_frontier: int
    trap_patterns: int
    alias_hosts: int
    key_collisions: int


def run(run: StageRun) -> ParseResult:
    """Parse generation ``run.gen``: extract what the fetch did not, mark duplicates, build the
    frontier of gen + 1."""
    gen = run.gen
    pages = run.read("pages").where(F.col("gen") == gen)
    stored = run.read("texts").where(F.col("gen") == gen)
    todo = pages if run.force else pages.join(stored.select("url_key"), "url_key", "left_anti")
    # Only a first run of parse over a fetch that extracted nothing finds no texts of gen.
    replace = not run.first or not stored.isEmpty()
    sitemaps = run.read("sitemaps").where(F.col("gen") == gen)
    extracted = extract_pages(todo, run.cfg).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        # The costly part, run once: feeds the links and the texts written below.
        new = extracted.count()
        if run.first and not new and not replace and sitemaps.isEmpty():
            return ParseResult.nothing()  # no pages and no sitemaps: an idle generation
        if new:
            _write_links(run, extracted, keep_stored=not run.force)
        kept = stored.join(extracted.select("url_key"), "url_key", "left_anti")
        texts = kept.select(*TEXTS.fieldNames()).unionByName(texts_of(extracted))
        marks = _duplicate_marks(run, texts)
        texts_counts, links_counts, trap_counts = tables.in_parallel(
            run.spark,
            lambda: _write_texts(run, texts, marks, replace, None if new else stored),
            lambda: _write_frontier(run, pages, marks, sitemaps),
            lambda: _count_patterns(run, pages, marks),
        )
    finally:
        extracted.unpersist()
    result = ParseResult(**texts_counts, extracted=new, **links_counts, **trap_counts)
    log.info("parse gen %d: %s", run.gen, result)
    return result


def _write_links(run: StageRun, extracted: DataFrame, keep_stored: bool) -> None:
    """links of gen: those of the pages just extracted, and (keep_stored) those stored of the
    other pages (the fetch's)."""
    links = links_table(extracted)
    if keep_stored:
        stored = run.read("links").where(F.col("gen") == run.gen)
        sources = extracted.select(F.col("url_key").alias("src_key"))
        links = stored.join(sources, "src_key", "left_anti").unionByName(links)
    tables.replace_where(links, run.root, "links", f"gen = {run.gen}")


def _unmarked(texts: DataFrame) -> DataFrame:
    return texts.withColumns(
        {"duplicate_of": F.lit(None).cast("long"), "duplicate_kind": F.lit(None).cast("string")}
    )


def _duplicate_marks(run: StageRun, texts: DataFrame) -> DataFrame:
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
        _unmarked(texts)
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


def _write_texts(
    run: StageRun,
    texts: DataFrame,
    marks: DataFrame,
    replace: bool,
    stored: DataFrame | None = None,
) -> dict[str, int]:
    """texts of gen (``texts``: unmarked, or marked by an earlier run) with ``marks``
    (:func:`_duplicate_marks`); their counts. replace: the table may hold rows of gen (the
    fetch's, an earlier run's), else they are appended. stored: given when ``texts`` are
    exactly the stored rows of gen (parse extracted nothing): if nothing is marked now and
    none of them is marked, they are already what would be written, and are not rewritten."""
    gen = run.gen
    marked = with_duplicate_marks(_unmarked(texts), marks)
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


def _count_patterns(run: StageRun, pages: DataFrame, marks: DataFrame) -> dict[str, int]:
    """Add gen's pages and duplicates per host and URL pattern to the traps table, and its
    exact duplicates per pair of hosts to the aliases table (once: a rerun adds nothing), from
    which plan judges patterns traps (crawllib.traps) and hosts aliases (crawllib.aliases);
    the counts of patterns judged traps and of hosts judged aliases now."""
    owners = pages.select("url_key", "host").unionByName(
        run.read("crawldb").select("url_key", "host")
    )
    merges = {
        "traps": (pattern_counts(pages, marks, run.gen), ["host", "pattern"], TRAPS_UPDATE),
        "aliases": (alias_counts(marks, owners, run.gen), ["host", "of_host"], ALIASES_UPDATE),
    }
    for table, (counts, keys, update) in merges.items():
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


def _count_collisions(
    run: StageRun, links: DataFrame, sitemaps: DataFrame, known: DataFrame
) -> int:
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


def _write_frontier(
    run: StageRun, pages: DataFrame, marks: DataFrame, sitemaps: DataFrame
) -> dict[str, int]:
    """The frontier of gen + 1 from the links of gen (``pages``: its pages rows; ``marks``:
    its duplicates, which pass less cash) and the URLs its sitemaps list; the counts of links
    and frontier rows."""
    gen = run.gen
    links = run.read("links").where(F.col("gen") == gen)
    reasons = sql_list([FrontierReason.LINK, FrontierReason.SITEMAP])
    where = f"gen = {gen + 1} AND reason IN ({reasons})"
    fetched = run.read("fetches").where(F.col("gen") == gen).select("url_key", "url")
    crawldb = run.read("crawldb")
    known = crawldb.select("url_key", "url").unionByName(fetched)
    collisions = _count_collisions(run, links, sitemaps, known)
    if not run.frontier_open:  # gen + 1 was planned from it: kept as it is
        return {
            "links": links.count(),
            "new_frontier": run.read("frontier").where(where).count(),
            "key_collisions": collisions,
        }
    links = links.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        cfg = run.cfg
        sources = pages.select("url_key", "host").join(marks, "url_key", "left")
        followed = followed_links(links, marks, cfg)
        cash = link_cash(followed, sources_of(sources, crawldb), cfg)
        depths = pages.select("url_key", "depth")
        linked = next_frontier(followed, depths, known, gen, cash).persist(
            StorageLevel.MEMORY_AND_DISK
        )
        also_known = known.select("url_key").unionByName(linked.select("url_key"))
        weight = cfg.generate.internal_link_weight
        listed = sitemap_frontier(sitemaps, also_known, gen, weight)
        frontier = linked.unionByName(listed).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            run.replace_own(frontier, "frontier", where)
            return {
                "links": links.count(),
                "new_frontier": frontier.count(),
                "key_collisions": collisions,
            }
        finally:
            frontier.unpersist()
            linked.unpersist()
    finally:
        links.unpersist()
