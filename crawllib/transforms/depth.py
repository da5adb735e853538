"""Depth is the shortest path: a URL's depth is the fewest links from a seed over every way it
was found (links, redirects, sitemaps, seeds), in this generation and in every earlier one.

A way to a URL is found where the page that carries it is read (the fetch, parse, update),
while the URL's depth lives in crawldb. So every place that finds a way *offers* a depth: a
frontier row, for a new URL and for a known URL that the way reaches in fewer links than
crawldb says. Plan lowers crawldb's depths to the offers (:func:`below`), and a page whose depth
drops passes its new depth on to the URLs it links to (depth + 1) and redirects to (the same
depth), :func:`outlink_offers`, a wave at a time, each wave one link deeper, until no depth
within ``crawl.max_depth`` drops (``crawllib.stages.depths``). A URL filtered for depth that
comes within the cap is queued again (:func:`with_lowered_depths`); a URL already fetched
keeps its status, and its depth drops.
"""

from __future__ import annotations

import dataclasses

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from crawllib.config import Config
from crawllib.core.vocab import DuplicateKind, FilterReason, Outcome, Status
from crawllib.transforms.lookup import rows_of

# A lowered set this small is broadcast to the joins that apply it (a generation's worth).
BROADCAST_KEYS = 2_000_000


@dataclasses.dataclass(frozen=True)
class Lowered:
    """The depths a plan lowers: ``depths`` (url_key, depth), ``urls`` of them, found in
    ``waves`` waves after the frontier's own offers; ``upgrade``: the crawl root was relaxed
    from all its pages (crawllib.stages.depths)."""

    depths: DataFrame
    urls: int
    waves: int
    upgrade: bool = False

    @property
    def small(self) -> bool:
        return self.urls <= BROADCAST_KEYS


# A known URL without a depth (rows written by hand) is never lowered: nothing compares.
_NO_DEPTH = -1


def shallowest(offers: DataFrame) -> DataFrame:
    """One row per url_key, its smallest offered depth. In/out: url_key, depth."""
    return offers.groupBy("url_key").agg(F.min("depth").alias("depth"))


def below(offers: DataFrame, depths: DataFrame) -> DataFrame:
    """The offers that lower a URL's depth: per url_key of ``depths`` (url_key, depth: what is
    recorded), its smallest offer (url_key, depth) when that is less. Offers to URLs
    ``depths`` does not hold are dropped. Out: url_key, depth."""
    offered = shallowest(offers).withColumnRenamed("depth", "_offer")
    return (
        depths.select("url_key", F.col("depth").alias("_known"))
        .join(offered, "url_key", "inner")
        .where(F.col("_offer") < F.coalesce(F.col("_known"), F.lit(_NO_DEPTH)))
        .select("url_key", F.col("_offer").alias("depth"))
    )


def least(a: DataFrame, b: DataFrame) -> DataFrame:
    """Two sets of (url_key, depth) as one, the smaller depth of a key in both."""
    return shallowest(a.select("url_key", "depth").unionByName(b.select("url_key", "depth")))


def unknown_or_shallower(
    targets: DataFrame, known: DataFrame, key: str, depth: Column
) -> DataFrame:
    """The rows of ``targets`` (one per ``key``) whose URL ``known`` (url_key, depth) does not
    hold, or holds at a depth greater than ``depth`` (a shorter path: an offer). ``known`` is
    looked up by the targets' keys (crawllib.transforms.lookup.rows_of). Out: targets'
    columns."""
    held = (
        rows_of(known.select(F.col("url_key").alias(key), "depth"), targets, key)
        .groupBy(key)
        .agg(F.min(F.coalesce(F.col("depth"), F.lit(_NO_DEPTH))).alias("_known_depth"))
    )
    return (
        targets.join(held, key, "left")
        .where(F.col("_known_depth").isNull() | (depth < F.col("_known_depth")))
        .drop("_known_depth")
    )


def expands(cfg: Config) -> Column:
    """crawldb rows whose outlinks the next frontier took (parse's ``followed_links``): pages
    fetched (noindex ones included: noindex is not nofollow), and duplicates but exact ones
    unless parse.follow_duplicate_links (a soft 404 is ``gone``, never expanded); and
    redirects, whose target is one step of no link."""
    status, reason = F.col("status"), F.col("reason")
    copies = status == Status.DUPLICATE
    if not cfg.parse.follow_duplicate_links:
        copies = copies & ~reason.eqNullSafe(F.lit(DuplicateKind.EXACT))
    return status.isin(Status.FETCHED, Status.NOINDEX, Status.REDIRECTED) | copies


def outlink_offers(sources: DataFrame, links: DataFrame, redirects: DataFrame) -> DataFrame:
    """What pages whose depth dropped offer the URLs they lead to: each link target its
    source's depth + 1, each redirect target its source's depth.

    In: sources (url_key, depth); links (src_key, dst_key); redirects (url_key, target_key).
    Out: url_key, depth, the smallest offer per url_key."""
    depth = sources.select("url_key", "depth")
    linked = links.join(depth.withColumnRenamed("url_key", "src_key"), "src_key", "inner").select(
        F.col("dst_key").alias("url_key"), (F.col("depth") + 1).alias("depth")
    )
    redirected = redirects.join(depth, "url_key", "inner").select(
        F.col("target_key").alias("url_key"), "depth"
    )
    return shallowest(linked.unionByName(redirected))


def redirect_edges(fetches: DataFrame, target_key: Column) -> DataFrame:
    """Redirects as edges: url_key, target_key (``target_key``: the key of the normalised
    redirect_to, null for a target that is no URL). In: fetches rows."""
    return (
        fetches.where((F.col("outcome") == Outcome.REDIRECT) & F.col("redirect_to").isNotNull())
        .select("url_key", target_key.alias("target_key"))
        .where(F.col("target_key").isNotNull())
    )


def with_lowered_depths(
    crawldb: DataFrame, lowered: DataFrame, cfg: Config, gen: int, broadcast: bool = True
) -> DataFrame:
    """crawldb rows with the depths ``lowered`` (url_key, depth) gives: ``depth`` the smaller,
    ``lowered`` true where it dropped; a URL filtered for depth that is now within
    crawl.max_depth is queued for ``gen`` again (status queued, reason null, next_gen gen),
    as a new URL would be. ``broadcast``: ``lowered`` is one generation's worth of keys.

    In: crawldb columns. Out: the same columns + lowered."""
    new_depth = F.col("_new_depth")
    dropped = new_depth.isNotNull() & (new_depth < F.coalesce(F.col("depth"), F.lit(_NO_DEPTH)))
    revived = (
        dropped
        & (F.col("status") == Status.FILTERED)
        & (F.col("reason") == FilterReason.DEPTH)
        & (new_depth <= cfg.crawl.max_depth)
    )
    marks = lowered.select("url_key", F.col("depth").alias("_new_depth"))
    return (
        crawldb.join(F.broadcast(marks) if broadcast else marks, "url_key", "left")
        .withColumns(
            {
                "status": F.when(revived, F.lit(Status.QUEUED)).otherwise(F.col("status")),
                "reason": F.when(revived, F.lit(None)).otherwise(F.col("reason")),
                "next_gen": F.when(revived, F.lit(gen)).otherwise(F.col("next_gen")),
                "depth": F.when(dropped, new_depth).otherwise(F.col("depth")),
                "lowered": dropped,
            }
        )
        .select(*crawldb.columns, "lowered")
    )
