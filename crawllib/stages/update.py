"""update(N): everything a generation's fetch leads to, from its rows read once each.

- texts of N: what the fetch did not extract is extracted from the raw pages
  (crawllib.stages.pages), duplicates are marked against earlier generations (exact, near,
  canonical, soft 404), the rows rewritten only when a mark changes them;
- frontier: rows of N + 1 for link targets, sitemap entries and redirect targets that crawldb
  does not hold, or holds deeper (offers: crawllib.transforms.depth), and rows of N for the
  URLs the fetch followed in its tasks;
- crawldb: one MERGE of every URL fetched in N (the status mapping of
  crawllib.transforms.update) and of the cash N's links passed known URLs (priority), then,
  in a generation that read sitemaps, their hints;
- traps and aliases: N's pages and duplicates per URL pattern and pair of hosts.

crawldb is looked up once, for every key these need (the fetched URLs, the link and
redirect targets, sitemap entries, the first copies duplicates name): the rows are
checkpointed and every step joins those.

Idempotent: texts and the frontier rows of N + 1 are replaced on a rerun (a first run
appends; the followed rows of N are appended only where the frontier lacks them), the MERGEs
are guarded (:func:`crawllib.transforms.update.crawldb_update_guard`; traps and aliases
count a generation once), so a rerun writes the same rows and changes no crawldb row. Once
N + 1 is planned its frontier is kept as it is (StageRun.frontier_open).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import ClassVar

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from crawllib.config import Config
from crawllib.core.vocab import (
    VISITED_OUTCOMES,
    ErrorKind,
    FrontierReason,
    Outcome,
    Stage,
    StageState,
    Status,
    sql_list,
)
from crawllib.stages import pages as pages_mod
from crawllib.stages.base import StageResult, StageRun
from crawllib.stages.fetch import FetchResult
from crawllib.store import generations, tables
from crawllib.store.schemas import TEXTS
from crawllib.transforms.depth import redirect_edges
from crawllib.transforms.lookup import rows_of
from crawllib.transforms.parse import (
    extract_pages,
    followed_links,
    next_frontier,
    sitemap_frontier,
    texts_of,
)
from crawllib.transforms.priority import link_cash, sources_of
from crawllib.transforms.update import (
    SITEMAP_HINTS_GUARD,
    SITEMAP_HINTS_UPDATE,
    VISIT_COUNTS,
    crawldb_merge_clauses,
    crawldb_updates,
    followed_frontier,
    redirect_frontier,
    redirect_target_key,
    score_updates,
    sitemap_hints,
    visit_counts,
)

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class UpdateResult(StageResult):
    """urls: the URLs fetched in gen; fetched .. deferred: their crawldb status after the
    merge (so a rerun reports the same numbers; ``deferred``: queued again);
    redirects_queued: the frontier rows of gen + 1 for redirect targets. Visits that reached
    their page (ok, not_modified): ``new`` (a first visit), ``revisited`` (the page had a
    stored version), of them ``changed`` (its text differs) and ``unchanged`` (the same text,
    or ``not_modified``: a 304); too_many_redirects, bad_location: redirects of gen whose
    chain ended there (past fetch.max_redirects hops; a Location that is no http(s) URL).

    The generation's pages: pages (texts rows of gen), extracted (pages this run extracted:
    the rest the fetch did), texts (with non-empty text), extract_errors, exact_duplicates,
    near_duplicates, canonical_duplicates (pages naming another URL canonical), soft_404
    (pages whose text is their host's answer to a missing page: a probe's), nofollow (pages
    with that robots directive), tdm_reserved (pages reserving text and data mining rights);
    links: links rows of gen; new_frontier: frontier rows of gen + 1 (links, sitemaps,
    redirects); trap_patterns, alias_hosts: URL patterns judged traps and hosts judged aliases
    after this generation is counted; key_collisions: link targets and sitemap entries left
    out because a known URL has their url_key (transforms.parse.key_collisions)."""

    THROUGHPUT: ClassVar[str] = "urls"

    urls: int
    fetched: int
    duplicate: int
    noindex: int
    redirected: int
    gone: int
    failed: int
    dead: int
    robots_denied: int
    blocked: int
    deferred: int
    redirects_queued: int
    new: int
    revisited: int
    changed: int
    unchanged: int
    not_modified: int
    too_many_redirects: int
    bad_location: int
    pages: int = 0
    extracted: int = 0
    texts: int = 0
    extract_errors: int = 0
    exact_duplicates: int = 0
    near_duplicates: int = 0
    canonical_duplicates: int = 0
    soft_404: int = 0
    nofollow: int = 0
    tdm_reserved: int = 0
    links: int = 0
    new_frontier: int = 0
    trap_patterns: int = 0
    alias_hosts: int = 0
    key_collisions: int = 0


# The reasons a redirect chain ends with, counted (UpdateResult fields of the same names)
CHAIN_ENDS = (ErrorKind.TOO_MANY_REDIRECTS, ErrorKind.BAD_LOCATION)

# UpdateResult field -> the crawldb status it counts
_COUNTED_STATUS = {
    "fetched": Status.FETCHED,
    "duplicate": Status.DUPLICATE,
    "noindex": Status.NOINDEX,
    "redirected": Status.REDIRECTED,
    "gone": Status.GONE,
    "failed": Status.FAILED,
    "dead": Status.DEAD,
    "robots_denied": Status.ROBOTS_DENIED,
    "blocked": Status.BLOCKED,
    "deferred": Status.QUEUED,
}


def merge_sitemap_hints(spark: SparkSession, root: str, sitemaps: DataFrame, cfg: Config) -> None:
    """MERGE what ``sitemaps`` rows say (transforms.update.sitemap_hints) into crawldb's pages
    with a stored version, guarded so that a rerun changes nothing."""
    tables.merge(
        spark,
        sitemap_hints(sitemaps, cfg),
        root,
        "crawldb",
        keys=["url_key"],
        update=SITEMAP_HINTS_UPDATE,
        insert=False,
        update_condition=SITEMAP_HINTS_GUARD,
        broadcast=True,
    )


def run(run: StageRun) -> UpdateResult:
    """Update crawldb, texts, the frontier, traps and aliases from generation ``run.gen``."""
    spark, gen = run.spark, run.gen
    fetches = run.read("fetches").where(F.col("gen") == gen).persist(StorageLevel.MEMORY_AND_DISK)
    sitemaps = run.read("sitemaps").where(F.col("gen") == gen).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        if run.first and fetches.isEmpty() and sitemaps.isEmpty():
            return UpdateResult.nothing()  # nothing fetched: an idle generation
        texts, extracted, marks = _texts_and_marks(run)
        links = run.read("links").where(F.col("gen") == gen).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            known = _known(run, fetches, links, sitemaps, marks)
            seen = fetches.select("url_key", "url", "depth")
            crawled = known.select("url_key", "url", "depth").unionByName(seen)
            outlinks = followed_links(links, marks, run.cfg, crawled.select("url_key", "depth"))
            cash = link_cash(outlinks, sources_of(texts.narrow, known), run.cfg)
            pages = fetches.where(F.col("outcome") == Outcome.OK).select(
                "url_key", "url", "host", "depth"
            )
            counts: dict[str, int] = {"extracted": extracted}
            for part in tables.in_parallel(
                spark,
                lambda: pages_mod.write_texts(run, texts.full, marks, texts.replace, texts.stored),
                lambda: _write_frontier(run, fetches, sitemaps, known, crawled, outlinks, cash),
                lambda: _merge_crawldb(run, fetches, sitemaps, texts.narrow, known, cash),
                lambda: pages_mod.count_patterns(run, pages, marks, known),
            ):
                counts.update(part)
            counts["links"] = links.count()
            counts["key_collisions"] = pages_mod.count_collisions(run, links, sitemaps, known)
        finally:
            links.unpersist()
        counts.update(_status_counts(run, fetches))
    finally:
        fetches.unpersist()
        sitemaps.unpersist()
    fields = {f.name for f in dataclasses.fields(UpdateResult)}
    result = UpdateResult(**{k: v for k, v in counts.items() if k in fields})
    log.info("update gen %d: %s", gen, result)
    return result


@dataclasses.dataclass(frozen=True)
class _Texts:
    """The generation's texts rows: ``full`` (every column, for the write), ``narrow`` (what
    the MERGE and the cash need), whether the table may hold rows of gen (``replace``), and
    ``stored``: the stored rows, when nothing was extracted now (write_texts then rewrites
    them only when a mark changes)."""

    full: DataFrame
    narrow: DataFrame
    replace: bool
    stored: DataFrame | None


def _texts_and_marks(run: StageRun) -> tuple[_Texts, int, DataFrame]:
    """The generation's texts (extracting what the fetch did not: every page when forced to
    re-extract, ``crawl parse --force``), how many pages were extracted now, and the
    duplicate marks (checkpointed)."""
    gen, cfg = run.gen, run.cfg
    stored = run.read("texts").where(F.col("gen") == gen)
    pages = run.read("pages").where(F.col("gen") == gen)
    fetched = run.previous if isinstance(run.previous, FetchResult) else None
    all_extracted = fetched is not None and fetched.extracted >= fetched.pages
    extracted_now = 0
    texts = stored
    replace = not run.first
    if run.reextract or not all_extracted:
        todo = (
            pages if run.reextract else pages.join(stored.select("url_key"), "url_key", "left_anti")
        )
        extracted = extract_pages(todo, cfg).persist(StorageLevel.MEMORY_AND_DISK)
        extracted_now = extracted.count()
        if extracted_now:
            pages_mod.write_links(run, extracted, keep_stored=not run.reextract)
            kept = stored.join(extracted.select("url_key"), "url_key", "left_anti")
            texts = kept.select(*TEXTS.fieldNames()).unionByName(texts_of(extracted))
            replace = True  # the fetch's rows of gen, if any, are rewritten with the new ones
        else:
            extracted.unpersist()
    marks = pages_mod.duplicate_marks(run, texts)
    narrow = (
        texts.select(*NARROW_TEXTS)
        .join(marks.select("url_key", "duplicate_of", "duplicate_kind"), "url_key", "left")
        .localCheckpoint()
    )
    replace = replace or not stored.isEmpty() if not extracted_now else replace
    return _Texts(texts, narrow, replace, None if extracted_now else stored), extracted_now, marks


# What the MERGE and the cash read of the generation's texts (no page text)
NARROW_TEXTS = ("url_key", "host", "content_hash", "directives")


def _known(
    run: StageRun,
    fetches: DataFrame,
    links: DataFrame,
    sitemaps: DataFrame,
    marks: DataFrame,
) -> DataFrame:
    """crawldb's rows of every URL the update needs (fetched, linked, listed, redirected to,
    named as a first copy), looked up once and checkpointed."""
    listed = sitemaps.select(F.explode("entries").alias("e")).select(
        F.col("e.url_key").alias("url_key")
    )
    redirected = redirect_edges(fetches, redirect_target_key(F.col("redirect_to"))).select(
        F.col("target_key").alias("url_key")
    )
    keys = (
        fetches.select("url_key")
        .unionByName(links.select(F.col("dst_key").alias("url_key")))
        .unionByName(listed)
        .unionByName(redirected)
        .unionByName(marks.select(F.col("duplicate_of").alias("url_key")))
    )
    return rows_of(crawldb_as_fetched(run), keys).localCheckpoint()


def crawldb_as_fetched(run: StageRun) -> DataFrame:
    """crawldb as the first run of this update read it. Nothing writes crawldb between fetch N
    and update N but update N itself, so a rerun reads the version fetch N's done row recorded:
    the scores and depths the first run's MERGE raised or lowered would otherwise change the
    cash and the frontier it writes again. The latest version on a first run, or when no
    version is recorded (an older root)."""
    if run.first:
        return run.read("crawldb")
    done = [
        r
        for r in generations.read_rows(run.spark, run.root)
        if (r.gen, r.stage, r.state) == (run.gen, Stage.FETCH, StageState.DONE) and r.versions
    ]
    version = max(done, key=lambda r: r.at).versions.get("crawldb") if done else None
    if version is None:
        return run.read("crawldb")
    return tables.read_version(run.spark, run.root, "crawldb", version)


def _write_frontier(
    run: StageRun,
    fetches: DataFrame,
    sitemaps: DataFrame,
    known: DataFrame,
    crawled: DataFrame,
    outlinks: DataFrame,
    cash: DataFrame,
) -> dict[str, int]:
    """Frontier rows of gen + 1 (links, sitemaps, redirects: new URLs and shorter paths) and
    of gen (the URLs the fetch followed, as if plan had taken them); one append on a first
    run. ``crawled``: the known and fetched URLs (url_key, url, depth); ``outlinks``: the
    links followed (parse.followed_links); ``cash``: what they pass. Counts: new_frontier
    (rows of gen + 1), redirects_queued."""
    gen, cfg = run.gen, run.cfg
    reasons = sql_list([FrontierReason.LINK, FrontierReason.SITEMAP, FrontierReason.REDIRECT])
    where = f"gen = {gen + 1} AND reason IN ({reasons})"
    held = run.read("frontier").where(F.col("gen") == gen).select("url_key")
    followed = followed_frontier(fetches, held, gen)
    if not run.frontier_open:  # gen + 1 was planned from it: kept as it is
        nexts = run.read("frontier").where(where)
        tables.append(followed, run.root, "frontier")
        return _frontier_counts(nexts)
    depths = fetches.where(F.col("outcome") == Outcome.OK).select("url_key", "depth")
    linked = next_frontier(outlinks, depths, crawled, gen, cash)
    also_known = crawled.select("url_key", "depth").unionByName(linked.select("url_key", "depth"))
    listed = sitemap_frontier(sitemaps, also_known, gen, cfg.generate.internal_link_weight)
    redirected = redirect_frontier(fetches, known, gen, cfg.fetch.max_redirects)
    nexts = linked.unionByName(listed).unionByName(redirected).localCheckpoint()
    if run.first:
        tables.append(nexts.unionByName(followed), run.root, "frontier")
    else:
        tables.replace_where(nexts, run.root, "frontier", where)
        tables.append(followed, run.root, "frontier")
    return _frontier_counts(nexts)


def _frontier_counts(nexts: DataFrame) -> dict[str, int]:
    row = tables.one_row(
        nexts.agg(
            F.count(F.lit(1)).alias("new_frontier"),
            F.count_if(F.col("reason") == FrontierReason.REDIRECT).alias("redirects_queued"),
        )
    )
    return {
        "new_frontier": int(row["new_frontier"]),
        "redirects_queued": int(row["redirects_queued"]),
    }


def _merge_crawldb(
    run: StageRun,
    fetches: DataFrame,
    sitemaps: DataFrame,
    texts: DataFrame,
    known: DataFrame,
    cash: DataFrame,
) -> dict[str, int]:
    """The crawldb MERGE of the fetched URLs and of the cash gen's links passed known URLs
    (transforms.priority), then, in a generation whose sitemaps listed URLs, their hints."""
    spark, root, cfg, gen = run.spark, run.root, run.cfg, run.gen
    updates = crawldb_updates(fetches, texts, known, gen, cfg, cash=cash).unionByName(
        score_updates(cash, fetches, gen)
    )
    tables.merge(
        spark,
        updates,
        root,
        "crawldb",
        keys=["url_key"],
        broadcast=True,
        **crawldb_merge_clauses(gen),
    )
    listing = sitemaps.where(F.size("entries") > 0)
    if not listing.isEmpty():
        merge_sitemap_hints(spark, root, listing, cfg)
    return {}


def _status_counts(run: StageRun, fetches: DataFrame) -> dict[str, int]:
    """The URLs fetched in gen by their crawldb status after the MERGE (a rerun reports the
    same), their visits' counts and the redirect chains that ended."""
    gen = run.gen
    fetched = fetches.groupBy("url_key").agg(
        F.max(F.col("outcome").isin(*VISITED_OUTCOMES)).alias("_visited"),
        F.max(F.col("outcome") == Outcome.NOT_MODIFIED).alias("_not_modified"),
    )
    rows = run.read("crawldb").join(F.broadcast(fetched), on="url_key", how="inner")
    chains_ended = [
        F.count_if((F.col("status") == Status.REDIRECTED) & (F.col("reason") == kind)).alias(kind)
        for kind in CHAIN_ENDS
    ]
    per_status = rows.groupBy("status").agg(
        F.count("*").alias("_urls"), *visit_counts(gen), *chains_ended
    )
    by_status: dict[str, int] = {}
    visits: dict[str, int] = {}
    for r in per_status.collect():
        counts = r.asDict()
        by_status[counts.pop("status")] = counts.pop("_urls")
        for name, n in counts.items():
            visits[name] = visits.get(name, 0) + int(n)
    return {
        "urls": sum(by_status.values()),
        **{field: by_status.get(status, 0) for field, status in _COUNTED_STATUS.items()},
        **{name: visits.get(name, 0) for name in (*VISIT_COUNTS, *CHAIN_ENDS)},
    }
