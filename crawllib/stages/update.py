"""update(N): fetches gen N (+ texts gen N) -> crawldb, and redirect targets -> frontier N+1.

Idempotent: the frontier rows are replaced (replaceWhere "gen = N+1 AND reason = 'redirect'";
the first run appends them) and the crawldb MERGE is guarded
(:func:`crawllib.transforms.update.crawldb_update_guard`), so a rerun changes no row. The status mapping is documented in :mod:`crawllib.transforms.update`.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import ClassVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from crawllib import tables
from crawllib.config import Config
from crawllib.stages.base import StageResult, StageRun
from crawllib.transforms.parse import followed_links
from crawllib.transforms.priority import link_cash, sources_of
from crawllib.transforms.update import (
    SITEMAP_HINTS_GUARD,
    SITEMAP_HINTS_UPDATE,
    VISIT_COUNTS,
    crawldb_merge_clauses,
    crawldb_updates,
    followed_frontier,
    redirect_frontier,
    score_updates,
    sitemap_hints,
    visit_counts,
)
from crawllib.vocab import VISITED_OUTCOMES, ErrorKind, FrontierReason, Outcome, Status

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class UpdateResult(StageResult):
    """urls: the URLs fetched in gen; fetched .. deferred: their crawldb status after the
    merge (so a rerun reports the same numbers; ``deferred``: queued again);
    redirects_queued: the frontier rows written for gen + 1. Visits that reached their page
    (ok, not_modified): ``new`` (a first visit), ``revisited`` (the page had a stored
    version), of them ``changed`` (its text differs) and ``unchanged`` (the same text, or
    ``not_modified``: a 304); too_many_redirects, bad_location: redirects of gen whose chain
    ended there (past fetch.max_redirects hops; a Location that is no http(s) URL)."""

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
    """Merge generation ``run.gen``'s fetches into crawldb and queue its redirect targets
    (a first run writes no frontier rows when there are none)."""
    spark, root, cfg, gen = run.spark, run.root, run.cfg, run.gen
    fetches = run.read("fetches").filter(F.col("gen") == gen)
    texts = run.read("texts").filter(F.col("gen") == gen)
    crawldb = run.read("crawldb")
    if run.first and fetches.isEmpty():  # nothing fetched: an idle generation
        return UpdateResult.nothing()

    # Frontier first, from crawldb as it was: the MERGE below does not add redirect targets.
    # Once gen + 1 is planned its frontier is kept as it is (StageRun.frontier_open).
    where = f"gen = {gen + 1} AND reason = '{FrontierReason.REDIRECT}'"
    if run.frontier_open:
        frontier = redirect_frontier(fetches, crawldb, gen, cfg.fetch.max_redirects).persist()
        try:
            redirects = frontier.count()
            if redirects or not run.first:
                run.replace_own(frontier, "frontier", where)
        finally:
            frontier.unpersist()
    else:
        redirects = run.read("frontier").where(where).count()

    # URLs the fetch followed in its tasks get the frontier rows plan would have read.
    followed = followed_frontier(fetches, run.read("frontier"), gen).persist()
    try:
        if not followed.isEmpty():
            tables.append(followed, root, "frontier")
    finally:
        followed.unpersist()

    # The cash gen's pages passed their links (transforms.priority), added to the scores of
    # the URLs crawldb holds in the same MERGE as the fetches (parse gave the new ones theirs).
    links = followed_links(run.read("links").where(F.col("gen") == gen), texts, cfg)
    cash = link_cash(links, sources_of(texts, crawldb), cfg)
    updates = crawldb_updates(fetches, texts, crawldb, gen, cfg, cash=cash).unionByName(
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

    # What this generation's sitemaps say of pages with a stored version (one more MERGE, only
    # in a generation that read a sitemap listing URLs: at most once per robots.txt fetch of
    # a host).
    sitemaps = run.read("sitemaps").where((F.col("gen") == gen) & (F.size("entries") > 0))
    if not sitemaps.isEmpty():
        merge_sitemap_hints(spark, root, sitemaps, cfg)

    fetched = fetches.groupBy("url_key").agg(
        F.max(F.col("outcome").isin(*VISITED_OUTCOMES)).alias("_visited"),
        F.max(F.col("outcome") == Outcome.NOT_MODIFIED).alias("_not_modified"),
    )
    rows = run.read("crawldb").join(F.broadcast(fetched), on="url_key", how="inner")
    # one job: per status, its URLs and its visits' counts
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
    result = UpdateResult(
        urls=sum(by_status.values()),
        **{field: by_status.get(status, 0) for field, status in _COUNTED_STATUS.items()},
        redirects_queued=redirects,
        **{name: visits.get(name, 0) for name in (*VISIT_COUNTS, *CHAIN_ENDS)},
    )
    log.info("update gen %d: %s", gen, result)
    return result
