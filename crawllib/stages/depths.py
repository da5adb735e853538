"""Plan's depth step: which known URLs a generation's frontier reaches in fewer links than
crawldb says, and, wave after wave, what the pages among them pass on to the URLs they link
and redirect to (crawllib.transforms.depth).

Each wave reads the links (and redirects) of the pages whose depth dropped in the wave before,
from the generations they were fetched in (``first_gen`` to ``last_gen``: the links partitions
of their visits), one link deeper each time, and stops when no depth within crawl.max_depth
drops. In a generation whose frontier lowers no known depth (the usual case: breadth first,
one generation per link) it costs one small query.

A crawl root made before depths were shortest paths (crawldb without the table property
``crawllib.depth = shortest``) is relaxed once from all its pages, sitemaps and seeds: its
wrongly filtered URLs are planned again in its next generation, and the property is set once
the lowered depths are committed.
"""

from __future__ import annotations

import dataclasses
import logging

from crawllib.core.vocab import FrontierReason, Outcome
from crawllib.stages.base import StageRun
from crawllib.store.db import DEPTH_PROPERTY, DEPTH_SHORTEST, Rel
from crawllib.transforms.depth import (
    below,
    expands,
    least,
    outlink_offers,
    redirect_edges,
    shallowest,
)
from crawllib.transforms.lookup import rows_of
from crawllib.transforms.sqltext import lit

log = logging.getLogger(__name__)

# A lowered set this small is broadcast to the joins that apply it (a generation's worth).
BROADCAST_KEYS = 2_000_000


@dataclasses.dataclass(frozen=True)
class Lowered:
    """The depths a plan lowers: ``depths`` (url_key, depth, kept), ``urls`` of them, found
    in ``waves`` waves after the frontier's own offers; ``upgrade``: the crawl root was
    relaxed from all its pages."""

    depths: Rel
    urls: int
    waves: int
    upgrade: bool = False

    @property
    def small(self) -> bool:
        return self.urls <= BROADCAST_KEYS


def lowered_depths(run: StageRun, frontier: Rel, new: Rel) -> Lowered | None:
    """The known URLs whose depth this plan lowers, and by how much; None when none.

    In: frontier (url_key, depth: the generation's deduplicated offers); new (url_key, depth:
    its URLs crawldb does not hold, which the waves may lower too)."""
    db = run.db
    crawldb = db.table("crawldb")
    upgrade = db.property_of("crawldb", DEPTH_PROPERTY) != DEPTH_SHORTEST
    if upgrade:
        log.info(
            "plan gen %d: relaxing the depths of a crawl root from before shortest paths", run.gen
        )
        offers = db.sql(
            "SELECT url_key, depth FROM {frontier} UNION ALL SELECT url_key, 0 AS depth FROM "
            f"{{all_frontier}} WHERE reason = {lit(FrontierReason.SEED)} UNION ALL SELECT "
            "e.url_key AS url_key, 1 AS depth FROM (SELECT explode(entries) AS e FROM "
            "{sitemaps})",
            frontier=frontier,
            all_frontier=db.table("frontier"),
            sitemaps=db.table("sitemaps"),
        )
        first = db.sql(below(), offers=offers, depths=crawldb)
        # every page, at its depth after the offers
        sources = db.sql(
            least(f"(SELECT url_key, depth FROM {{crawldb}} WHERE {expands(run.cfg)})", "{first}"),
            crawldb=crawldb,
            first=first,
        )
    else:
        sources = None
        first = db.sql(
            below(
                "{frontier}", f"({rows_of('(SELECT url_key, depth FROM {crawldb})', '{frontier}')})"
            ),
            frontier=frontier,
            crawldb=crawldb,
        )
    return _relax(run, first, crawldb, new, sources, upgrade)


def _relax(
    run: StageRun,
    first: Rel,
    crawldb: Rel,
    new: Rel,
    sources: Rel | None,
    upgrade: bool,
) -> Lowered | None:
    """The waves: ``first`` (url_key, depth) lowered by the frontier; each wave takes the
    pages among the URLs lowered last (or ``sources``, all pages of an upgraded root) and
    lowers what their links and redirects reach, crawldb's URLs and the new ones alike."""
    db, cfg = run.db, run.cfg
    max_depth = cfg.crawl.max_depth
    recorded = db.sql(
        "SELECT url_key, depth FROM {crawldb} UNION ALL SELECT url_key, depth FROM {new}",
        crawldb=crawldb,
        new=new,
    )
    pages = db.sql(
        f"SELECT url_key, first_gen, last_gen FROM {{crawldb}} WHERE {expands(cfg)}",
        crawldb=crawldb,
    )
    lowered = db.keep(first)
    if sources is None and db.is_empty(lowered):
        db.drop(lowered)
        return None  # the usual case: no known URL reached by a shorter path
    total = lowered
    waves = 0
    while waves <= max_depth:
        if sources is None:  # the pages among the URLs lowered last, at their new depth
            sources = db.sql(
                "SELECT p.*, l.depth FROM {pages} p JOIN {lowered} l ON p.url_key = l.url_key",
                pages=pages,
                lowered=lowered,
            )
        else:
            sources = db.sql(
                "SELECT s.url_key, s.depth, p.first_gen, p.last_gen FROM {sources} s JOIN "
                "{pages} p ON s.url_key = p.url_key",
                sources=sources,
                pages=pages,
            )
        sources = db.keep(sources)
        row = db.one_row(
            db.sql(
                "SELECT count(*) AS n, min(first_gen) AS low, max(last_gen) AS high FROM {s}",
                s=sources,
            )
        )
        if not row["n"] or row["low"] is None:
            break
        waves += 1
        gens = f"gen >= {int(row['low'])} AND gen <= {int(row['high'])}"
        links = db.sql(
            rows_of("{links}", "{sources}", "src_key", "url_key"),
            links=db.table("links", gens, columns=["src_key", "dst_key"]),
            sources=sources,
        )
        fetched = db.sql(
            rows_of("{fetches}", "{sources}"),
            fetches=db.table("fetches", f"{gens} AND outcome = '{Outcome.REDIRECT}'"),
            sources=sources,
        )
        redirects = db.sql(redirect_edges(), fetches=fetched)
        offers = db.sql(
            f"SELECT * FROM ({outlink_offers()}) WHERE depth <= {max_depth}",
            sources=sources,
            links=links,
            redirects=redirects,
        )
        now = db.sql(
            least(f"({rows_of('{recorded}', '{offers}')})", f"({rows_of('{total}', '{offers}')})"),
            recorded=recorded,
            offers=offers,
            total=total,
        )
        lowered = db.keep(db.sql(below(), offers=offers, depths=now))
        total = db.keep(db.sql(least("{a}", "{b}"), a=total, b=lowered))
        sources = None
    depths = db.keep(db.sql(shallowest("{total}"), total=total))
    urls = db.count(depths)
    if not urls:
        return None
    log.info("plan gen %d: %d URLs reached by a shorter path (%d waves)", run.gen, urls, waves)
    return Lowered(depths, urls, waves, upgrade)


def mark_shortest(run: StageRun) -> None:
    """Record on crawldb that its depths are shortest paths (after an upgrade's write)."""
    run.db.set_property("crawldb", DEPTH_PROPERTY, DEPTH_SHORTEST)
