"""What each slot of a fetch receives to follow links: its room, the keys it knows and its hosts'
trapped URL patterns; on both engines."""

from __future__ import annotations

import datetime as dt

from crawllib.config import replace
from crawllib.core.vocab import Stage, StageState
from crawllib.stages.base import StageRun
from crawllib.stages.fetch import keys_carried
from crawllib.stages.plan import PlanResult
from crawllib.store import generations
from crawllib.store.schemas import FETCHLIST, L, S, struct_of
from crawllib.transforms.fetch_inputs import follow_inputs, with_known_keys
from tests.rows import by, rel, run

SLOT_HOST = struct_of(("slot", S), ("host", S))
FETCHED = struct_of(("url_key", L), ("host", S), ("source_url", S))
KEYS = struct_of(("url_key", L), ("host", S), ("domain", S))
TRAPPED = struct_of(("host", S), ("pattern", S))


def keys(rows):
    """KEYS rows from (url_key, host) pairs: domain = host."""
    return [{"url_key": k, "host": h, "domain": h} for k, h in rows]


def test_each_slot_with_room_gets_its_known_keys_and_trapped_patterns(db, spark_cfg):
    cfg = replace(spark_cfg, generate__max_per_host=3)
    inputs = {
        "fetchlist": rel(
            db,
            SLOT_HOST,
            [{"slot": h, "host": h} for h in ("a.net", "b.net", "b.net", "b.net")],
        ),
        "fetches": rel(
            db,
            FETCHED,
            [
                {"url_key": 1, "host": "a.net"},
                {"url_key": 2, "host": "a.net", "source_url": "http://a.net/"},
            ],
        ),
        "crawldb": rel(db, KEYS, keys([(1, "a.net"), (5, "a.net"), (7, "b.net")])),
    }
    trapped = rel(
        db,
        TRAPPED,
        [
            {"host": "a.net", "pattern": "/cal/{n}"},
            {"host": "a.net", "pattern": "/shop?page"},
            {"host": "b.net", "pattern": "/x/{n}"},
        ],
    )
    rows = by(run(db, follow_inputs(cfg, False, True), trapped=trapped, **inputs), "slot")
    # a.net: 3 - 1 planned - 1 followed = 1; b.net planned its 3: no room, no row
    assert set(rows) == {"a.net"}
    a = rows["a.net"]
    assert a["room"] == 1 and sorted(a["known"]) == [1, 2, 5]
    assert sorted(a["trapped"]) == ["a.net /cal/{n}", "a.net /shop?page"]
    untrapped = run(db, follow_inputs(cfg, False), **inputs)
    assert [r["trapped"] for r in untrapped] == [[]]


def _fetchlist(db, rows):
    """FETCHLIST rows from (slice, url_key, host) triples: slot = host, gen 3."""
    return rel(
        db,
        FETCHLIST,
        [
            {
                "gen": 3,
                "slice": slice_,
                "url": f"http://{host}/{key}",
                "url_key": key,
                "host": host,
                "domain": host,
                "depth": 1,
                "slot": host,
                "attempts": 0,
            }
            for slice_, key, host in rows
        ],
    )


def test_plan_carries_each_roomy_slots_known_keys_on_one_fetchlist_row(db, spark_cfg):
    cfg = replace(spark_cfg, generate__max_per_host=3)
    # a.net planned 2 URLs over two slices (room 1); b.net its 3 (no room)
    fetchlist = _fetchlist(
        db, [(0, 1, "a.net"), (1, 4, "a.net"), (0, 7, "b.net"), (1, 8, "b.net"), (1, 6, "b.net")]
    )
    crawldb = rel(db, KEYS, keys([(1, "a.net"), (4, "a.net"), (5, "a.net"), (7, "b.net"),
                                  (8, "b.net"), (6, "b.net"), (9, "c.net")]))  # fmt: skip
    new = rel(db, KEYS, keys([(11, "a.net"), (12, "b.net")]))
    carried = db.keep(
        db.sql(with_known_keys(cfg), fetchlist=fetchlist, crawldb=crawldb, new_keys=new)
    )
    assert db.columns(carried) == list(FETCHLIST.names)
    rows = db.collect(carried)
    assert len(rows) == 5
    known = [(r["slot"], r["url_key"], sorted(r["known"])) for r in rows if r["known"] is not None]
    assert known == [("a.net", 1, [1, 4, 5, 11])]  # slice 0's row; crawldb's and plan's new keys

    # The fetch reads them from the fetchlist: crawldb is not an input any more.
    fetches = rel(
        db,
        FETCHED,
        [
            {"url_key": 1, "host": "a.net"},
            {"url_key": 2, "host": "a.net", "source_url": "http://a.net/1"},
        ],
    )
    assert run(db, follow_inputs(cfg, True), fetchlist=carried, fetches=fetches) == []  # 3 - 2 - 1
    more_room = replace(cfg, generate__max_per_host=5)
    rows = run(db, follow_inputs(more_room, True), fetchlist=carried, fetches=fetches)
    # b.net has room at the fetch's cap, but plan gave it no keys: it follows nothing
    assert [(r["slot"], r["room"], sorted(r["known"])) for r in rows] == [
        ("a.net", 5 - 2 - 1, [1, 2, 4, 5, 11])
    ]
    db.drop(carried)


def test_the_fetch_reads_crawldbs_keys_only_after_an_older_plan(db, spark_cfg):
    at = dt.datetime(2026, 1, 1)
    run = StageRun(db, spark_cfg, gen=4)
    assert not keys_carried(run)  # no plan of gen 4 recorded
    older = {"planned": 3, "slices": 1}  # an older crawllib's plan counts no follow_slots
    generations.record(db, 4, Stage.PLAN, StageState.DONE, at, older)
    assert not keys_carried(run)
    generations.record(db, 4, Stage.PLAN, StageState.DONE, at, {**older, "follow_slots": 0})
    assert keys_carried(run)
    generations.record(db, 5, Stage.PLAN, StageState.DONE, at, older)
    assert keys_carried(run)  # gen 5's plan does not speak for gen 4
    assert keys_carried(StageRun(db, spark_cfg, gen=5, previous=PlanResult.nothing()))


def test_with_key_domain_a_slot_counts_the_urls_of_all_its_hosts(db, spark_cfg):
    """politeness.key = domain: a registered domain's room and known keys take the URLs of
    every host under it, crawldb's by their domain, the fetches' by their host's."""
    cfg = replace(spark_cfg, politeness__key="domain", generate__max_per_host=5)
    rows = run(
        db,
        follow_inputs(cfg, False),
        fetchlist=rel(db, SLOT_HOST, [{"slot": "a.net", "host": "www.a.net"}]),
        fetches=rel(
            db,
            FETCHED,
            [
                {"url_key": 2, "host": "x.a.net", "source_url": "http://www.a.net/"},
                {"url_key": 3, "host": "www.a.net"},
                {"url_key": 4, "host": "b.org", "source_url": "http://b.org/"},
            ],
        ),
        crawldb=rel(
            db,
            KEYS,
            [
                {"url_key": 1, "host": "www.a.net", "domain": "a.net"},
                {"url_key": 9, "host": "b.org", "domain": "b.org"},
            ],
        ),
    )
    # 5 - 1 planned - 1 followed (b.org planned nothing: no slot of the slice)
    assert [(r["slot"], r["room"], sorted(r["known"])) for r in rows] == [("a.net", 3, [1, 2, 3])]
