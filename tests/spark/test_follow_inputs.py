"""What each slot of a fetch receives to follow links: its room, the keys it knows and its hosts'
trapped URL patterns."""

from __future__ import annotations

import datetime as dt

from crawllib.config import replace
from crawllib.core.vocab import Stage, StageState
from crawllib.stages.base import StageRun
from crawllib.stages.fetch import keys_carried
from crawllib.stages.plan import PlanResult
from crawllib.store import generations
from crawllib.store.spark_schemas import FETCHLIST
from crawllib.transforms.fetch_inputs import follow_inputs, with_known_keys


def test_each_slot_with_room_gets_its_known_keys_and_trapped_patterns(spark, spark_cfg):
    cfg = replace(spark_cfg, generate__max_per_host=3)
    fetchlist = spark.createDataFrame(
        [("a.net", "a.net"), ("b.net", "b.net"), ("b.net", "b.net"), ("b.net", "b.net")],
        "slot string, host string",
    )
    fetches = spark.createDataFrame(
        [(1, "a.net", None), (2, "a.net", "http://a.net/")],
        "url_key long, host string, source_url string",
    )
    crawldb = spark.createDataFrame(
        [(1, "a.net", "a.net"), (5, "a.net", "a.net"), (7, "b.net", "b.net")],
        "url_key long, host string, domain string",
    )
    trapped = spark.createDataFrame(
        [("a.net", "/cal/{n}"), ("a.net", "/shop?page"), ("b.net", "/x/{n}")],
        "host string, pattern string",
    )
    rows = {
        r["slot"]: r for r in follow_inputs(fetchlist, fetches, crawldb, cfg, trapped).collect()
    }
    # a.net: 3 - 1 planned - 1 followed = 1; b.net planned its 3: no room, no row
    assert set(rows) == {"a.net"}
    a = rows["a.net"]
    assert a["room"] == 1 and sorted(a["known"]) == [1, 2, 5]
    assert sorted(a["trapped"]) == ["a.net /cal/{n}", "a.net /shop?page"]
    untrapped = follow_inputs(fetchlist, fetches, crawldb, cfg).collect()
    assert [r["trapped"] for r in untrapped] == [[]]


def _fetchlist(spark, rows):
    """FETCHLIST rows from (slice, url_key, host) triples: slot = host, gen 3."""
    return spark.createDataFrame(
        [
            (3, slice_, f"http://{host}/{key}", key, host, host, 1, host, 0, None, None, None)
            for slice_, key, host in rows
        ],
        FETCHLIST,
    )


def test_plan_carries_each_roomy_slots_known_keys_on_one_fetchlist_row(spark, spark_cfg):
    cfg = replace(spark_cfg, generate__max_per_host=3)
    # a.net planned 2 URLs over two slices (room 1); b.net its 3 (no room)
    fetchlist = _fetchlist(
        spark, [(0, 1, "a.net"), (1, 4, "a.net"), (0, 7, "b.net"), (1, 8, "b.net"), (1, 6, "b.net")]
    )
    crawldb = spark.createDataFrame(
        [(k, h, h) for k, h in [(1, "a.net"), (4, "a.net"), (5, "a.net"), (7, "b.net"),
                                (8, "b.net"), (6, "b.net"), (9, "c.net")]],
        "url_key long, host string, domain string",
    )  # fmt: skip
    new = spark.createDataFrame([(11, "a.net", "a.net"), (12, "b.net", "b.net")],
                                "url_key long, host string, slot string")  # fmt: skip
    carried = with_known_keys(fetchlist, crawldb, new, cfg)
    assert carried.schema == FETCHLIST
    rows = carried.collect()
    assert len(rows) == 5
    known = [(r["slot"], r["url_key"], sorted(r["known"])) for r in rows if r["known"] is not None]
    assert known == [("a.net", 1, [1, 4, 5, 11])]  # slice 0's row; crawldb's and plan's new keys

    # The fetch reads them from the fetchlist: crawldb is not an input any more.
    fetches = spark.createDataFrame(
        [(1, "a.net", None), (2, "a.net", "http://a.net/1")],
        "url_key long, host string, source_url string",
    )
    assert follow_inputs(carried, fetches, None, cfg).collect() == []  # a.net: 3 - 2 - 1
    more_room = replace(cfg, generate__max_per_host=5)
    rows = follow_inputs(carried, fetches, None, more_room).collect()
    # b.net has room at the fetch's cap, but plan gave it no keys: it follows nothing
    assert [(r["slot"], r["room"], sorted(r["known"])) for r in rows] == [
        ("a.net", 5 - 2 - 1, [1, 2, 4, 5, 11])
    ]


def test_the_fetch_reads_crawldbs_keys_only_after_an_older_plan(spark, spark_cfg, new_root):
    at = dt.datetime(2026, 1, 1)
    run = StageRun(spark, new_root, spark_cfg, gen=4)
    assert not keys_carried(run)  # no plan of gen 4 recorded
    older = {"planned": 3, "slices": 1}  # an older crawllib's plan counts no follow_slots
    generations.record(spark, new_root, 4, Stage.PLAN, StageState.DONE, at, older)
    assert not keys_carried(run)
    generations.record(
        spark, new_root, 4, Stage.PLAN, StageState.DONE, at, {**older, "follow_slots": 0}
    )
    assert keys_carried(run)
    generations.record(spark, new_root, 5, Stage.PLAN, StageState.DONE, at, older)
    assert keys_carried(run)  # gen 5's plan does not speak for gen 4
    assert keys_carried(StageRun(spark, new_root, spark_cfg, gen=5, previous=PlanResult.nothing()))
