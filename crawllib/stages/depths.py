"""Plan's depth step: which known URLs a generation's frontier reaches in fewer links than
crawldb says, and, wave after wave, what the pages among them pass on to the URLs they link
and redirect to (crawllib.transforms.depth).

Each wave reads the links (and redirects) of the pages whose depth dropped in the wave before,
from the generations they were fetched in (``first_gen`` to ``last_gen``: the links partitions
of their visits), one link deeper each time, and stops when no depth within crawl.max_depth
drops. In a generation whose frontier lowers no known depth (the usual case: breadth first,
one generation per link) it costs one small job.

A crawl root made before depths were shortest paths (crawldb without the table property
``crawllib.depth = shortest``) is relaxed once from all its pages, sitemaps and seeds: its
wrongly filtered URLs are planned again in its next generation, and the property is set once
the lowered depths are committed.
"""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from crawllib.core.vocab import FrontierReason
from crawllib.stages.base import StageRun
from crawllib.store import tables
from crawllib.transforms.depth import (
    Lowered,
    below,
    expands,
    least,
    outlink_offers,
    redirect_edges,
    shallowest,
)
from crawllib.transforms.lookup import rows_of
from crawllib.transforms.update import redirect_target_key

log = logging.getLogger(__name__)


def lowered_depths(run: StageRun, frontier: DataFrame, new: DataFrame) -> Lowered | None:
    """The known URLs whose depth this plan lowers, and by how much; None when none.

    In: frontier (url_key, depth: the generation's deduplicated offers); new (url_key, depth:
    its URLs crawldb does not hold, which the waves may lower too)."""
    crawldb = run.read("crawldb")
    state = crawldb.select("url_key", "depth", "status", "reason", "first_gen", "last_gen")
    upgrade = (
        tables.property_of(run.spark, run.root, "crawldb", tables.DEPTH_PROPERTY)
        != tables.DEPTH_SHORTEST
    )
    offers = frontier.select("url_key", "depth")
    if upgrade:
        log.info(
            "plan gen %d: relaxing the depths of a crawl root from before shortest paths", run.gen
        )
        offers = offers.unionByName(_root_offers(run))
        first = below(offers, crawldb.select("url_key", "depth"))
        # every page, at its depth after the offers
        sources = least(crawldb.where(expands(run.cfg)).select("url_key", "depth"), first)
    else:
        sources = None
        first = below(offers, rows_of(crawldb.select("url_key", "depth"), offers))
    return _relax(run, first, state, new, sources, upgrade)


def _root_offers(run: StageRun) -> DataFrame:
    """Every way in a crawl root that is no link of a page: seeds (depth 0) and the URLs its
    sitemaps list (depth 1)."""
    seeds = (
        run.read("frontier")
        .where(F.col("reason") == FrontierReason.SEED)
        .select("url_key", F.lit(0).alias("depth"))
    )
    listed = (
        run.read("sitemaps")
        .select(F.explode("entries").alias("e"))
        .select(F.col("e.url_key").alias("url_key"), F.lit(1).alias("depth"))
    )
    return seeds.unionByName(listed)


def _relax(
    run: StageRun,
    first: DataFrame,
    state: DataFrame,
    new: DataFrame,
    sources: DataFrame | None,
    upgrade: bool,
) -> Lowered | None:
    """The waves: ``first`` (url_key, depth) lowered by the frontier; each wave takes the
    pages among the URLs lowered last (or ``sources``, all pages of an upgraded root) and
    lowers what their links and redirects reach, crawldb's URLs (``state``) and the new ones
    (``new``) alike."""
    max_depth = run.cfg.crawl.max_depth
    recorded = state.select("url_key", "depth").unionByName(new.select("url_key", "depth"))
    pages = state.where(expands(run.cfg)).select("url_key", "first_gen", "last_gen")
    lowered = first.localCheckpoint()
    if sources is None and lowered.isEmpty():
        return None  # the usual case: no known URL reached by a shorter path
    total = lowered
    waves = 0
    while waves <= max_depth:
        if sources is None:  # the pages among the URLs lowered last, at their new depth
            sources = pages.join(F.broadcast(lowered), "url_key")
        else:
            sources = sources.join(pages, "url_key")
        sources = sources.localCheckpoint()
        row = tables.one_row(
            sources.agg(
                F.count(F.lit(1)).alias("n"),
                F.min("first_gen").alias("low"),
                F.max("last_gen").alias("high"),
            )
        )
        if not row["n"] or row["low"] is None:
            break
        waves += 1
        gens = (F.col("gen") >= row["low"]) & (F.col("gen") <= row["high"])
        keys = sources.select("url_key")
        links = rows_of(
            run.read("links").where(gens).select("src_key", "dst_key"), keys, "src_key", "url_key"
        )
        redirects = redirect_edges(
            rows_of(run.read("fetches").where(gens), keys),
            redirect_target_key(F.col("redirect_to")),
        )
        offers = outlink_offers(sources, links, redirects).where(F.col("depth") <= max_depth)
        now = least(rows_of(recorded, offers), rows_of(total, offers))
        lowered = below(offers, now).localCheckpoint()
        total = least(total, lowered).localCheckpoint()
        sources = None
    urls = total.count()
    if not urls:
        return None
    log.info("plan gen %d: %d URLs reached by a shorter path (%d waves)", run.gen, urls, waves)
    return Lowered(shallowest(total), urls, waves, upgrade)


def mark_shortest(run: StageRun) -> None:
    """Record on crawldb that its depths are shortest paths (after an upgrade's write)."""
    tables.set_property(
        run.spark, run.root, "crawldb", tables.DEPTH_PROPERTY, tables.DEPTH_SHORTEST
    )
