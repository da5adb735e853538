"""Depth is the shortest path: plan lowers crawldb's depths to what the frontier offers, and
the pages whose depth drops pass it on through their links and redirects, wave after wave; a
URL filtered for depth that comes within crawl.max_depth is planned again."""

from __future__ import annotations

import pytest

from crawllib.config import replace
from crawllib.core.urls import host_of, registered_domain, url_key
from crawllib.stages import plan as plan_stage
from crawllib.stages.base import StageRun
from crawllib.store import schemas
from crawllib.store.db import DEPTH_PROPERTY, DEPTH_SHORTEST
from crawllib.store.schemas import CRAWLDB, FETCHES, FRONTIER, LINKS, struct_of
from crawllib.transforms.parse import followed_links
from tests.rows import rel, run

MAX_DEPTH = 3
A, P, Q, F_, G, R, S, N = (
    "http://a.net/",
    "http://b.net/p",  # fetched at depth 3 (found deep in its own host first)
    "http://b.net/q",  # P's link: filtered at depth 4
    "http://b.net/far",  # P's link: fetched at depth 3
    "http://d.net/g",  # F's link: filtered at depth 5
    "http://b.net/r",  # redirected at depth 3, to S
    "http://c.net/s",  # filtered at depth 4
    "http://e.net/n",  # P's link, new in the frontier at depth 4
)


def known(url, status, depth, reason=None, gen=0):
    host = host_of(url)
    return {
        "url_key": url_key(url),
        "url": url,
        "host": host,
        "domain": registered_domain(host),
        "status": status,
        "reason": reason,
        "attempts": 1 if status != "filtered" else 0,
        "depth": depth,
        "first_gen": gen,
        "last_gen": gen if status != "filtered" else None,
    }


def link(src, dst, gen=0):
    return {
        "gen": gen,
        "slice": 0,
        "src_key": url_key(src),
        "src_url": src,
        "dst_key": url_key(dst),
        "dst_url": dst,
        "dst_host": host_of(dst),
    }


def offer(url, depth, source, gen=1, reason="link"):
    host = host_of(url)
    return {
        "gen": gen,
        "url": url,
        "url_key": url_key(url),
        "host": host,
        "domain": registered_domain(host),
        "depth": depth,
        "source_url": source,
        "reason": reason,
    }


def crawl_state(db, frontier):
    """Generation 0 done: A fetched (depth 0); P and F fetched at depth 3 (the long way); Q and
    G filtered for depth; R redirected at depth 3 to S, filtered at depth 4."""
    crawldb = [
        known(A, "fetched", 0),
        known(P, "fetched", 3),
        known(F_, "fetched", 3),
        known(Q, "filtered", 4, "depth"),
        known(G, "filtered", 5, "depth"),
        known(R, "redirected", 3),
        known(S, "filtered", 4, "depth"),
    ]
    db.append(rel(db, CRAWLDB, crawldb), "crawldb")
    links = [link(A, "http://a.net/x"), link(P, Q), link(P, F_), link(P, N), link(F_, G)]
    db.append(rel(db, LINKS, links), "links")
    fetches = [
        {
            "gen": 0,
            "slice": 0,
            "url_key": url_key(R),
            "url": R,
            "host": "b.net",
            "depth": 3,
            "outcome": "redirect",
            "http_status": 301,
            "redirect_to": S,
        }
    ]
    db.append(rel(db, FETCHES, fetches), "fetches")
    db.append(rel(db, FRONTIER, frontier), "frontier")


def depths(db):
    rows = db.collect(db.table("crawldb"))
    assert rows
    return {r["url"]: (r["status"], r["depth"]) for r in rows}


def fetchlist(db, gen):
    return {r["url"]: r["depth"] for r in db.collect(db.table("fetchlist", f"gen = {gen}"))}


EXPECTED_PLAN = {Q: 2, G: 3, S: 1, N: 2}
EXPECTED_CRAWLDB = {
    A: ("fetched", 0),
    P: ("fetched", 1),  # fetched pages keep their status; their depth drops
    F_: ("fetched", 2),
    Q: ("queued", 2),  # filtered for depth, within it now: planned again
    G: ("queued", 3),  # two waves away from P
    R: ("redirected", 1),
    S: ("queued", 1),  # a redirect is no link: R's depth
    N: ("queued", 2),  # new in the frontier at depth 4, lowered through P in the same plan
}


@pytest.fixture
def cfg(spark_cfg):
    return replace(spark_cfg, crawl__max_depth=MAX_DEPTH, generate__max_per_host=20)


def test_shorter_paths_lower_depths_through_links_and_redirects_and_replan_what_comes_within(
    db, cfg
):
    frontier = [offer(P, 1, A), offer(R, 1, A), offer(N, 4, P), offer(Q, 4, P)]
    crawl_state(db, frontier)
    assert plan_stage.has_work(db, cfg, 1)

    result = plan_stage.run(StageRun(db, cfg, 1, first=True))

    assert fetchlist(db, 1) == EXPECTED_PLAN
    assert depths(db) == EXPECTED_CRAWLDB
    assert result.planned == 4 and result.depth_lowered == 7  # six known URLs and N
    assert result.filtered_depth == 0

    # a rerun (after a crash) finds the depths lowered and plans the same URLs
    again = plan_stage.run(StageRun(db, cfg, 1))
    assert fetchlist(db, 1) == EXPECTED_PLAN
    assert depths(db) == EXPECTED_CRAWLDB
    assert again.planned == 4 and again.depth_lowered == 0


def test_an_offer_that_changes_nothing_plan_does_is_no_work(db, cfg):
    """A frontier offering only depths no better than crawldb's (or a fetched page's depth at
    the cap, whose links would be past it) leaves nothing to plan."""
    crawl_state(db, [offer(P, 3, A), offer(Q, 4, A), offer(F_, MAX_DEPTH, A)])
    assert not plan_stage.has_work(db, cfg, 1)
    # an offer that brings Q, filtered for depth, within the cap is work
    db.append(rel(db, FRONTIER, [offer(Q, MAX_DEPTH, A)]), "frontier")
    assert plan_stage.has_work(db, cfg, 1)


def test_a_root_from_before_shortest_paths_is_relaxed_from_all_its_pages_once(db, cfg):
    """No frontier offers at all, but crawldb lacks its shortest-paths property: plan relaxes
    every page's links (A links P) and sets the property once the depths are written."""
    crawl_state(db, [])
    db.append(rel(db, LINKS, [link(A, P), link(A, R)]), "links")
    db.set_property("crawldb", DEPTH_PROPERTY, None)
    assert plan_stage.has_work(db, cfg, 1)

    result = plan_stage.run(StageRun(db, cfg, 1, first=True))

    assert fetchlist(db, 1) == {Q: 2, G: 3, S: 1}
    assert depths(db) == {k: v for k, v in EXPECTED_CRAWLDB.items() if k != N}
    assert result.depth_lowered == 6
    assert db.property_of("crawldb", DEPTH_PROPERTY) == DEPTH_SHORTEST


LINK_KEYS = struct_of(("src_key", schemas.L), ("dst_key", schemas.L))
MARKS = struct_of(
    ("url_key", schemas.L), ("duplicate_of", schemas.L), ("duplicate_kind", schemas.S)
)
DEPTHS = struct_of(("url_key", schemas.L), ("depth", schemas.I))


def test_an_exact_duplicate_nearer_a_seed_than_its_copy_passes_its_links_on(db, cfg):
    """An exact duplicate's links are its first copy's, so they are dropped (the copy queues
    them), unless the duplicate is fewer links from a seed: then its links are the shortest
    way to their targets (p/5.html at depth 2 copies p/5.html?a=1 at depth 3)."""
    links = rel(
        db,
        LINK_KEYS,
        [{"src_key": s, "dst_key": d} for s, d in [(1, 10), (2, 20), (3, 30), (4, 40)]],
    )
    marks = rel(
        db,
        MARKS,
        [
            {"url_key": 1, "duplicate_of": 11, "duplicate_kind": "exact"},
            {"url_key": 2, "duplicate_of": 12, "duplicate_kind": "exact"},
            {"url_key": 3, "duplicate_of": None, "duplicate_kind": "soft_404"},
        ],
    )
    # 1 (depth 2) copies 11 (depth 3); 2 (depth 3) copies 12 (depth 1); 4 is no duplicate
    depth_rows = rel(
        db,
        DEPTHS,
        [
            {"url_key": k, "depth": d}
            for k, d in [(1, 2), (11, 3), (11, 4), (2, 3), (12, 1), (3, 1), (4, 5)]
        ],
    )

    def kept(with_depths=True, follow=False):
        c = replace(cfg, parse__follow_duplicate_links=follow)
        inputs = {"links": links, "marks": marks}
        if with_depths:
            inputs["depths"] = depth_rows
        return sorted(r["src_key"] for r in run(db, followed_links(c, with_depths), **inputs))

    assert kept() == [1, 4]
    assert kept(with_depths=False) == [4]  # no depths: every exact duplicate's links are dropped
    assert kept(follow=True) == [1, 2, 4]  # a soft 404 never passes its links on
