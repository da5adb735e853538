"""Priority: the cash pages pass their links, plan's order by score and its top_n, update
adding a generation's cash to known URLs once; on both engines."""

from __future__ import annotations

import datetime as dt

import pytest

from crawllib.config import replace
from crawllib.stages import update
from crawllib.stages.base import StageRun
from crawllib.store.schemas import CRAWLDB, FETCHES, FRONTIER, LINKS, TEXTS, D, I, L, S, struct_of
from crawllib.transforms.parse import next_frontier
from crawllib.transforms.plan import count_decisions, plan_decisions
from crawllib.transforms.priority import link_cash
from tests.rows import by, rel, run

GEN = 2
T0 = dt.datetime(2026, 1, 1, 12, 0, 0)


def link(src, dst, dst_host, src_host="x"):
    return {
        "gen": GEN,
        "slice": 0,
        "src_key": src,
        "src_url": f"http://{src_host}/{src}",
        "dst_key": dst,
        "dst_url": f"http://{dst_host}/{dst}",
        "dst_host": dst_host,
        "anchor": "",
    }


# (src_key, host, crawldb score, duplicate_of) -> its links (dst_key, dst_host)
SOURCES = {
    (1, "a.com", 1.0, None): [(10, "b.com"), (11, "a.com")],  # cash 2: 1 per link
    (2, "c.com", None, None): [(10, "b.com")],  # cash 1
    (3, "c.com", None, None): [(10, "b.com"), (12, "d.com")],  # cash 1: 0.5 per link
    (4, "e.com", 0.0, 1): [(12, "d.com")],  # a duplicate: cash 0.1
}


SOURCE_ROWS = struct_of(("url_key", L), ("host", S), ("score", D), ("duplicate_of", L))
DEPTHS = struct_of(("url_key", L), ("depth", I))


def sources_and_links(db):
    sources = rel(db, SOURCE_ROWS, [dict(zip(SOURCE_ROWS.names, s, strict=True)) for s in SOURCES])
    links = rel(
        db,
        LINKS,
        [link(s[0], d, h, s[1]) for s, targets in SOURCES.items() for d, h in targets],
    )
    return sources, links


def test_link_cash_splits_a_pages_cash_and_counts_each_linking_host_once(db, spark_cfg):
    sources, links = sources_and_links(db)
    cfg = replace(
        spark_cfg, generate__internal_link_weight=0.25, generate__duplicate_link_weight=0.1
    )
    cash = {r["dst_key"]: r["cash"] for r in run(db, link_cash(cfg), links=links, sources=sources)}
    assert cash == pytest.approx(
        {
            10: 1.0 + 1.0,  # a.com's 1; c.com twice (1 and 0.5): its largest share only
            11: 1.0 * 0.25,  # a link to a.com's own host
            12: 0.5 + 0.1,  # c.com's half, and the duplicate's tenth
        }
    )


def test_next_frontier_rows_carry_the_cash_of_their_links(db, spark_cfg):
    sources, links = sources_and_links(db)
    cash = db.sql(link_cash(spark_cfg), links=links, sources=sources)
    pages = rel(db, DEPTHS, [{"url_key": k, "depth": 0} for k, *_ in SOURCES])
    known = rel(db, DEPTHS, [{"url_key": 11, "depth": 0}])  # no shorter path
    rows = run(db, next_frontier(GEN, cash=True), links=links, pages=pages, known=known, cash=cash)
    assert {r["url_key"] for r in rows} == {10, 12}
    assert {r["url_key"]: r["score"] for r in rows} == pytest.approx({10: 2.0, 12: 0.6})


def frontier_row(key, host, depth, score):
    return {
        "gen": GEN,
        "url": f"http://{host}/{key}",
        "url_key": key,
        "host": host,
        "domain": host,
        "depth": depth,
        "reason": "link",
        "discovered_at": T0,
        "score": score,
    }


# a.com: deep URLs with high scores and shallow ones without; b.com: two middling URLs
CANDIDATES = [
    frontier_row(1, "a.com", 1, None),
    frontier_row(2, "a.com", 1, 0.1),
    frontier_row(3, "a.com", 3, 5.0),
    frontier_row(4, "a.com", 2, 2.0),
    frontier_row(5, "b.com", 1, 1.0),
    frontier_row(6, "b.com", 1, 3.0),
]


def planned(db, cfg):
    frontier = rel(db, FRONTIER, CANDIDATES)
    crawldb = rel(db, CRAWLDB, [])
    decided = db.keep(db.sql(plan_decisions(cfg, GEN), frontier=frontier, crawldb=crawldb))
    rows = db.collect(decided)
    assert len(rows) == len(CANDIDATES)
    chosen = {r["url_key"] for r in rows if not r["deferred"]}
    counts = db.one_row(db.sql(count_decisions(cfg.generate.max_per_host), decided=decided))
    return chosen, counts


def test_plan_fills_each_hosts_quota_highest_score_first_or_breadth_first(db, spark_cfg):
    cfg = replace(spark_cfg, generate__max_per_host=2, crawl__max_depth=5)
    chosen, counts = planned(db, cfg)
    assert chosen == {3, 4, 5, 6}
    assert counts["deferred_cap"] == 2 and counts["deferred_top_n"] == 0
    chosen, _ = planned(db, replace(cfg, generate__order="depth"))
    assert chosen == {1, 2, 5, 6}


def test_plan_top_n_keeps_the_generations_highest_scores(db, spark_cfg):
    cfg = replace(spark_cfg, generate__max_per_host=2, generate__top_n=3, crawl__max_depth=5)
    chosen, counts = planned(db, cfg)
    assert chosen == {3, 6, 4}  # 5.0, 3.0, 2.0; 5 (1.0) waits for the next generation
    assert counts["planned"] == 3
    assert counts["deferred_top_n"] == 1 and counts["deferred_cap"] == 2


def crawldb_row(key, status="fetched", score=None, score_gen=None, last_gen=None):
    return {
        "url_key": key,
        "url": f"http://a.com/{key}",
        "host": "a.com",
        "domain": "a.com",
        "status": status,
        "attempts": 0,
        "depth": 1,
        "first_gen": 0,
        "last_gen": last_gen,
        "next_gen": GEN,
        "score": score,
        "score_gen": score_gen,
    }


def fetch_row(key):
    return {
        "gen": GEN,
        "slice": 0,
        "url_key": key,
        "url": f"http://a.com/{key}",
        "host": "a.com",
        "depth": 1,
        "outcome": "ok",
        "fetched_at": T0,
        "http_status": 200,
    }


def scores(db):
    rows = db.collect(db.table("crawldb"))
    assert rows
    return {r["url_key"]: (r["score"], r["score_gen"]) for r in rows}


def test_update_adds_a_generations_cash_to_known_urls_once(db, spark_cfg):
    before = [
        crawldb_row(1, status="queued", score=1.0),  # fetched in GEN: links to 2, 3 and 4
        crawldb_row(2, status="queued", score=0.5),  # known, not fetched: cash added
        crawldb_row(3, score=2.0, score_gen=GEN),  # had GEN's cash already: unchanged
    ]
    db.append(rel(db, CRAWLDB, before), "crawldb")
    # 5: fetched in GEN too, by following a link (not in crawldb): links back to 1
    db.append(rel(db, FETCHES, [fetch_row(1), fetch_row(5)]), "fetches")
    texts = [
        {"gen": GEN, "slice": 0, "url_key": k, "url": f"http://a.com/{k}", "host": "a.com"}
        for k in (1, 5)
    ]
    db.append(rel(db, TEXTS, texts), "texts")
    links = [link(1, 2, "b.com", "a.com"), link(1, 3, "c.com", "a.com"), link(1, 4, "d.com")]
    links.append(link(5, 1, "a.com", "a.com"))
    db.append(rel(db, LINKS, links), "links")

    update.run(StageRun(db, spark_cfg, GEN))
    first = scores(db)
    internal = spark_cfg.generate.internal_link_weight
    assert first[1] == pytest.approx((1.0 + 1.0 * internal, GEN))  # 5's cash (1), own host
    assert first[2] == pytest.approx((0.5 + 2.0 / 3, GEN))  # 1's cash (1 + 1.0) over 3 links
    assert first[3] == (2.0, GEN)
    assert first[5] == (None, None)  # nothing links to it in GEN
    assert 4 not in first  # a new URL: its cash goes with its frontier row
    queued = by(db.collect(db.table("frontier", f"gen = {GEN + 1}")))
    assert queued[4]["score"] == pytest.approx(2.0 / 3)

    update.run(StageRun(db, spark_cfg, GEN))
    assert scores(db) == first
