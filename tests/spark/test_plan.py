"""plan: each transform on tiny hand-made DataFrames, then the stage on a crawl root (rerun-safe)."""

from __future__ import annotations

import collections
import datetime as dt

import pytest
from chispa import assert_df_equality
from delta.tables import DeltaTable
from pyspark.sql import functions as F

from crawllib.config import replace
from crawllib.core.urls import host_of, registered_domain, url_extension, url_key
from crawllib.runs import runner
from crawllib.stages import fetch as fetch_stage
from crawllib.stages import plan as plan_stage
from crawllib.stages.base import StageRun
from crawllib.stages.seeding import seed
from crawllib.store import generations, tables
from crawllib.store.spark_schemas import CRAWLDB, FRONTIER
from crawllib.transforms import exclusions
from crawllib.transforms.plan import (
    PlanInputs,
    apply_budgets,
    attempted_in_crawldb,
    attempted_in_hosts,
    cap_per_host,
    count_decisions,
    dedup_frontier,
    extension_of,
    held_slots,
    holds,
    new_candidates,
    pending_from_crawldb,
    plan_decisions,
    slice_count,
    with_filter_reason,
    with_hold,
    with_slice,
    with_slot,
)

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)
T1 = T0 + dt.timedelta(minutes=1)


def assert_same(actual, expected):
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def frontier_df(spark, rows):
    """rows: (url_key, depth, source_url, discovered_at); the rest filled in."""
    return spark.createDataFrame(
        [
            (0, f"http://h.test/{k}", k, "h.test", "h.test", d, src, "link", at, None, None)
            for k, d, src, at in rows
        ],
        FRONTIER,
    )


def crawldb_df(spark, rows):
    """rows: dicts with url_key and any crawldb column that differs from a fresh seed."""
    base = {f.name: None for f in CRAWLDB.fields}
    base.update(status="queued", reason="seed", attempts=0, depth=0, first_gen=0, next_gen=0)
    full = []
    for row in rows:
        host = row.get("host", "h.test")
        full.append({**base, "url": f"http://{host}/{row['url_key']}", "host": host, **row})
    return spark.createDataFrame([tuple(r[f.name] for f in CRAWLDB.fields) for r in full], CRAWLDB)


def test_dedup_frontier_keeps_min_depth_then_earliest_source(spark):
    frontier = frontier_df(
        spark,
        [
            (1, 2, "http://a.test/", T0),
            (1, 1, "http://c.test/", T0),
            (1, 1, "http://b.test/", T1),
            (2, 3, "http://d.test/", T1),
        ],
    )
    expected = frontier_df(spark, [(1, 1, "http://c.test/", T0), (2, 3, "http://d.test/", T1)])
    assert_same(dedup_frontier(frontier), expected)


def test_new_candidates_drops_urls_known_to_crawldb(spark):
    frontier = frontier_df(spark, [(k, 1, None, T0) for k in (1, 2, 3)])
    crawldb = crawldb_df(spark, [{"url_key": 2, "status": "fetched"}])
    expected = frontier_df(spark, [(k, 1, None, T0) for k in (1, 3)])
    assert_same(new_candidates(frontier, crawldb), expected)


def test_pending_from_crawldb_takes_due_queued_and_failed(spark):
    at = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC).timestamp()
    crawldb = crawldb_df(
        spark,
        [
            {"url_key": 1, "status": "queued", "next_gen": 2},
            {"url_key": 2, "status": "queued", "next_gen": 3},  # not due yet
            {"url_key": 3, "status": "failed", "next_gen": 1, "last_gen": 0},
            {"url_key": 4, "status": "failed", "next_gen": 2, "not_before": T1},  # backing off
            {"url_key": 8, "status": "failed", "next_gen": 2, "not_before": T0},  # its time came
            # an older crawllib's retry, put off by generations: due at once (retries are by time)
            {"url_key": 9, "status": "failed", "next_gen": 5, "last_gen": 1},
            {"url_key": 5, "status": "fetched", "next_gen": None, "last_gen": 1},
            {"url_key": 6, "status": "filtered", "next_gen": None},
            {"url_key": 7, "status": "queued", "next_gen": None},  # no next_gen: due
        ],
    )
    got = pending_from_crawldb(crawldb, 2, at).select("url_key", "status", "is_new")
    due = [(1, "queued"), (3, "failed"), (7, "queued"), (8, "failed"), (9, "failed")]
    expected = spark.createDataFrame(
        [(k, status, False) for k, status in due], "url_key long, status string, is_new boolean"
    )
    assert_same(got, expected)
    # without a clock (tests of the other steps) the time is not looked at
    assert {r["url_key"] for r in pending_from_crawldb(crawldb, 2).collect()} == {1, 3, 4, 7, 8, 9}


def test_extension_of_agrees_with_urls_module(spark):
    urls = [
        "http://a.test/x/photo.JPG",
        "http://a.test/dir.d/file",
        "http://a.test/.hidden",
        "http://a.test/a.tar.gz?name=x.jpg",
        "http://a.test/page.php;v=1.2",
        "http://a.test/a;b.css/d.png",
        "http://a.test:8080/trailing.",
        "http://a.test/",
        "http://a.test/index.html",
        "https://1.2.3.4/v1.0/",
    ]
    df = spark.createDataFrame([(u,) for u in urls], "url string")
    got = {
        r["url"]: r["ext"]
        for r in df.select("url", extension_of(F.col("url")).alias("ext")).collect()
    }
    assert got == {u: url_extension(u) for u in urls}


def test_with_filter_reason_depth_extension_length(spark, spark_cfg):
    cfg = replace(spark_cfg, crawl__max_depth=3, crawl__max_url_length=30)
    df = spark.createDataFrame(
        [
            ("http://a.test/ok", 3),
            ("http://a.test/deep.jpg", 4),  # depth is checked first
            ("http://a.test/pic.JPG", 1),
            ("http://a.test/" + "x" * 20, 1),
            ("http://a.test/page.html", 0),
        ],
        "url string, depth int",
    )
    expected = spark.createDataFrame(
        [
            ("http://a.test/ok", 3, None),
            ("http://a.test/deep.jpg", 4, "depth"),
            ("http://a.test/pic.JPG", 1, "extension"),
            ("http://a.test/" + "x" * 20, 1, "length"),
            ("http://a.test/page.html", 0, None),
        ],
        "url string, depth int, filter_reason string",
    )
    assert_same(with_filter_reason(df, cfg), expected)


BUDGET_SCHEMA = (
    "url_key long, host string, domain string, depth int, last_gen int, filter_reason string, "
    "score double"
)


@pytest.mark.parametrize("source", ["crawldb", "hosts"])
def test_apply_budgets_per_host_then_per_domain(spark, spark_cfg, source):
    cfg = replace(spark_cfg, generate__host_budget=2, generate__domain_budget=3)
    # Key 13 was fetched once: it uses one unit of a.x.test's and x.test's budgets, counted
    # in crawldb or in the hosts table's running totals alike.
    if source == "crawldb":
        used = attempted_in_crawldb(
            crawldb_df(
                spark, [{"url_key": 13, "host": "a.x.test", "domain": "x.test", "last_gen": 0}]
            )
        )
    else:
        used = attempted_in_hosts(
            hosts_rows(spark, [("a.x.test", None, None, None)], urls_tried=1, domain="x.test")
        )
    rows = [
        (11, "a.x.test", "x.test", 0, None),  # host 1+1, domain 1+1
        (10, "a.x.test", "x.test", 1, None),  # host 1+2 > 2: budget
        (12, "a.x.test", "x.test", 1, None),  # host 1+3 > 2: budget
        (13, "a.x.test", "x.test", 0, 0),  # a retry: already counted, never cut
        (20, "b.x.test", "x.test", 0, None),  # domain 1+2
        (21, "b.x.test", "x.test", 0, None),  # domain 1+3 > 3: budget
        (30, "c.y.test", "y.test", 0, None),
    ]
    candidates = spark.createDataFrame(
        [(*r, None, None) for r in rows] + [(22, "b.x.test", "x.test", 9, None, "depth", None)],
        BUDGET_SCHEMA,
    )
    budget = {10, 12, 21}
    expected = spark.createDataFrame(
        [(*r, "budget" if r[0] in budget else None, None) for r in rows]
        + [(22, "b.x.test", "x.test", 9, None, "depth", None)],
        BUDGET_SCHEMA,
    )
    assert_same(apply_budgets(candidates, used, cfg), expected)


def test_cap_per_host_keeps_lowest_depth_then_url_key(spark):
    rows = [
        (5, "a.test", 1, None),
        (3, "a.test", 1, None),
        (9, "a.test", 0, None),
        (1, "a.test", 2, None),
        (0, "a.test", 0, "depth"),  # filtered rows are not ranked
        (7, "b.test", 3, None),
    ]
    schema = "url_key long, host string, depth int, filter_reason string"
    deferred = {5, 1}
    expected = spark.createDataFrame(
        [(*r, r[0] in deferred) for r in rows], schema + ", deferred boolean"
    )
    df = spark.createDataFrame(rows, schema)
    df = df.withColumns({"fetched_at": F.lit(None).cast("timestamp"), "next_fetch_at": F.lit(None)})
    assert_same(cap_per_host(df, 2).drop("fetched_at", "next_fetch_at"), expected)


def test_cap_per_host_shares_places_between_revisits_and_new_urls(spark):
    hour = dt.timedelta(hours=1)
    revisit = [(10 + k, "a.test", 1, T0, T0 - k * hour) for k in range(4)]  # 13 most overdue
    new = [(k, "a.test", 0, None, None) for k in range(4)]
    only_revisits = [(20 + k, "b.test", 1, T0, T0 - k * hour) for k in range(3)]
    schema = "url_key long, host string, depth int, fetched_at timestamp, next_fetch_at timestamp"
    df = spark.createDataFrame(revisit + new + only_revisits, schema).withColumn(
        "filter_reason", F.lit(None).cast("string")
    )
    # 4 places, half for revisits: a.test 2 + 2, most overdue revisits first; b.test has no
    # new URLs, so its revisits take all 4 places
    chosen = {
        r["url_key"] for r in cap_per_host(df, 4, revisit_share=0.5).collect() if not r["deferred"]
    }
    assert chosen == {13, 12, 0, 1, 20, 21, 22}
    # no share for revisits: new URLs first, revisits only in the places left
    chosen = {r["url_key"] for r in cap_per_host(df, 5, 0.0).collect() if not r["deferred"]}
    assert chosen == {0, 1, 2, 3, 13, 20, 21, 22}


def with_slot_and_slice(df, cfg, slices, addresses=None):
    return with_slice(with_slot(df, cfg, addresses), slices)


def test_slot_by_host_or_domain_and_slices_deal_each_slot_round_robin(spark, spark_cfg):
    # a.x.test and b.x.test share a registered domain; h0.test has 5 URLs, h1.test one.
    rows = [("a.x.test", "x.test", 0, 4), ("b.x.test", "x.test", 1, 3)]
    rows += [("h0.test", "h0.test", 1, k) for k in (50, 10, 40, 20, 30)]
    rows += [("h1.test", "h1.test", 2, 99)]
    schema = "host string, domain string, depth int, url_key long"
    df = spark.createDataFrame(rows, schema)
    by_host = replace(spark_cfg, politeness__key="host")
    by_domain = replace(spark_cfg, politeness__key="domain")

    slots = with_slot_and_slice(df, by_host, 3).select("host", "slot")
    assert_same(slots, df.select("host", F.col("host").alias("slot")))
    slots = with_slot_and_slice(df, by_domain, 3).select("host", "slot")
    assert_same(slots, df.select("host", F.col("domain").alias("slot")))
    # by server address: the dns table's answer; a name without one keeps its own slot
    by_ip = replace(spark_cfg, politeness__key="ip")
    dns = spark.createDataFrame(
        [("a.x.test", "127.0.0.2"), ("b.x.test", "127.0.0.2"), ("h0.test", "127.0.0.3")]
        + [("h1.test", None)],
        "host string, address string",
    )
    slots = {r["host"]: r["slot"] for r in with_slot_and_slice(df, by_ip, 3, dns).collect()}
    assert slots == {
        "a.x.test": "127.0.0.2",
        "b.x.test": "127.0.0.2",
        "h0.test": "127.0.0.3",
        "h1.test": "h1.test",
    }

    def slices(frame, cfg):
        return {
            (r["slot"], r["url_key"]): r["slice"]
            for r in with_slot_and_slice(frame, cfg, 3).collect()
        }

    # (depth, url_key) order within the slot, dealt over 3 slices: every slot starts in slice 0
    # and a slot's URLs spread evenly, so all slots are in flight in every slice.
    assert slices(df, by_domain) == {
        ("x.test", 4): 0,  # depth 0 first
        ("x.test", 3): 1,
        ("h0.test", 10): 0,
        ("h0.test", 20): 1,
        ("h0.test", 30): 2,
        ("h0.test", 40): 0,
        ("h0.test", 50): 1,
        ("h1.test", 99): 0,
    }
    again = spark.createDataFrame(list(reversed(rows)), schema)
    assert slices(again, by_host) == slices(df, by_host)


def test_slice_count_keeps_slices_long_and_full_enough(spark_cfg):
    cfg = replace(
        spark_cfg,
        storage__fetch_slices=8,
        storage__min_slice_urls=500,
        storage__min_slice_seconds=60.0,
        politeness__default_delay=0.2,
    )
    # 100 hosts x 300 URLs: 60 s per host, one slice of at least 60 s
    assert slice_count(30_000, 300, cfg) == 1
    # 100 hosts x 3000 URLs: 600 s per host, at most 8 slices
    assert slice_count(300_000, 3000, cfg) == 8
    assert slice_count(300_000, 1500, cfg) == 5  # 300 s: five slices of 60 s
    assert slice_count(1000, 3000, cfg) == 2  # few URLs: 500 per slice at least
    assert slice_count(0, 0, cfg) == 1
    no_time_floor = replace(cfg, storage__min_slice_seconds=0.0, storage__min_slice_urls=1)
    assert slice_count(10, 2, no_time_floor) == 8


# --- the stage on a crawl root ------------------------------------------------------------------


def add_frontier(spark, root, gen, rows):
    """rows: (url, depth, source_url) or (url, depth, source_url, score)."""
    data = [
        (gen, u, url_key(u), host_of(u), registered_domain(host_of(u)), d, s, "link", T0, *score)
        for u, d, s, *score in rows
    ]
    data = [(*row, None, None)[: len(FRONTIER.fields)] for row in data]
    tables.append(spark.createDataFrame(data, FRONTIER), root, "frontier")


def snapshot(spark, root, name):
    return sorted(tuple(r) for r in tables.read(spark, root, name).collect())


def planned_rows(spark, root, gen):
    """crawldb's rows of the URLs plan put in the fetchlist of ``gen``."""
    keys = tables.read(spark, root, "fetchlist").where(F.col("gen") == gen).select("url_key")
    return tables.read(spark, root, "crawldb").join(keys, "url_key", "left_semi")


def by_url(spark, root):
    cols = ["status", "reason", "depth", "first_gen", "next_gen"]
    return {
        r["url"]: tuple(r[c] for c in cols) for r in tables.read(spark, root, "crawldb").collect()
    }


@pytest.fixture
def planned_root(spark, spark_cfg, tmp_path, new_root):
    root = new_root
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.test/\nhttp://b.test/\n")
    cfg = replace(
        spark_cfg,
        crawl__max_depth=3,
        crawl__max_url_length=40,
        generate__max_per_host=2,
        generate__host_budget=3,
        storage__fetch_slices=4,
    )
    assert seed(spark, root, str(seeds), cfg, 0).added == 2
    p = ["http://a.test/p1", "http://a.test/p2"]
    c = [f"http://c.test/c{i}" for i in range(4)]
    add_frontier(
        spark,
        root,
        0,
        [(u, 1, "http://a.test/") for u in p]
        + [
            ("http://a.test/p1", 2, "http://a.test/p2"),  # a longer way to p1
            ("http://a.test/", 1, "http://b.test/"),  # a seed: already in crawldb
            ("http://b.test/logo.png", 1, "http://b.test/"),
            ("http://b.test/deep", 4, "http://b.test/"),
            ("http://b.test/" + "x" * 30, 1, "http://b.test/"),
        ]
        + [(u, 1, "http://b.test/") for u in c],
    )
    return root, cfg, sorted(p, key=url_key), sorted(c, key=url_key)


def test_plan_stage_writes_fetchlist_and_crawldb_and_reruns_identically(spark, planned_root):
    root, cfg, p, c = planned_root
    counts = plan_stage.run(StageRun(spark, root, cfg, 0))
    assert counts.as_counts() == {
        "candidates": 11,  # 2 seeds from crawldb + 9 new URLs (p1 once)
        "planned": 5,
        "filtered_depth": 1,
        "filtered_extension": 1,
        "filtered_length": 1,
        "filtered_budget": 1,
        "filtered_excluded": 0,
        "filtered_trap_pattern": 0,
        "filtered_alias": 0,
        "deferred_cap": 2,
        "deferred_held": 0,
        "deferred_time": 0,
        "deferred_top_n": 0,
        "hosts": 3,
        "revisits": 0,
        "slices": counts.slices,
        "depth_lowered": 0,
        "follow_slots": 1,  # b.test: 1 planned, under the cap of 2
    }
    # a.test: the seed (depth 0) and the lowest url_key at depth 1; c.test: budget 3, cap 2.
    chosen = {"http://a.test/", p[0], "http://b.test/", c[0], c[1]}
    # b.test's keys travel with the fetchlist: crawldb's once plan's writes commit (its seed
    # and the 3 new URLs filtered), on one of its rows
    carried = [r for r in tables.read(spark, root, "fetchlist").collect() if r["known"] is not None]
    b_keys = tables.read(spark, root, "crawldb").where(F.col("host") == "b.test")
    assert [(r["slot"], sorted(r["known"])) for r in carried] == [
        ("b.test", sorted(r["url_key"] for r in b_keys.collect()))
    ]
    assert len(carried[0]["known"]) == 4
    fetchlist = tables.read(spark, root, "fetchlist").collect()
    assert {r["url"] for r in fetchlist} == chosen
    assert {(r["gen"], r["slot"] == r["host"], 0 <= r["slice"] < 4) for r in fetchlist} == {
        (0, True, True)
    }
    assert counts.slices == len({r["slice"] for r in fetchlist})
    long_url = "http://b.test/" + "x" * 30
    assert by_url(spark, root) == {
        "http://a.test/": ("queued", "seed", 0, 0, 0),
        "http://b.test/": ("queued", "seed", 0, 0, 0),
        p[0]: ("queued", "link", 1, 0, 0),
        p[1]: ("queued", "link", 1, 0, 0),  # deferred: still due, the next plan ranks it again
        "http://b.test/logo.png": ("filtered", "extension", 1, 0, None),
        "http://b.test/deep": ("filtered", "depth", 4, 0, None),
        long_url: ("filtered", "length", 1, 0, None),
        c[0]: ("queued", "link", 1, 0, 0),
        c[1]: ("queued", "link", 1, 0, 0),
        c[2]: ("queued", "link", 1, 0, 0),
        c[3]: ("filtered", "budget", 1, 0, None),
    }

    before = snapshot(spark, root, "fetchlist"), snapshot(spark, root, "crawldb")
    again = plan_stage.run(StageRun(spark, root, cfg, 0))
    assert (snapshot(spark, root, "fetchlist"), snapshot(spark, root, "crawldb")) == before
    assert (again.planned, again.candidates, again.deferred_cap) == (5, 7, 2)

    # Gen 1, after gen 0's URLs were fetched: the deferred ones come up, c.test within budget.
    fetched = planned_rows(spark, root, 0)
    update = {"status": "'fetched'", "last_gen": "0", "next_gen": "NULL"}
    tables.merge(spark, fetched, root, "crawldb", keys=["url_key"], update=update, insert=False)
    counts = plan_stage.run(StageRun(spark, root, cfg, 1))
    assert (counts.candidates, counts.planned, counts.filtered_budget) == (2, 2, 0)
    gen1 = tables.read(spark, root, "fetchlist").where("gen = 1").collect()
    assert {r["url"] for r in gen1} == {p[1], c[2]}


def test_plan_takes_due_revisits_most_overdue_first_and_reruns_identically(spark, planned_root):
    root, cfg, p, c = planned_root
    plan_stage.run(StageRun(spark, root, cfg, 0))
    now = dt.datetime(2026, 3, 1)
    # Gen 0's URLs were fetched: a.test/ is due since 2 h, p[0] since 1 h, c[0] in an hour
    due = {"http://a.test/": -2, p[0]: -1, c[0]: 1, "http://b.test/": 5, c[1]: 5}
    fetched = planned_rows(spark, root, 0)
    rows = fetched.withColumn(
        "next_fetch_at",
        F.create_map(*[x for u, h in due.items() for x in (F.lit(u), F.lit(h))])[F.col("url")],
    ).withColumn("next_fetch_at", F.lit(now) + F.expr("make_interval(0,0,0,0,next_fetch_at)"))
    update = {
        "status": "'fetched'",
        "last_gen": "0",
        "next_gen": "NULL",
        "attempts": "1",
        "fetched_at": "TIMESTAMP '2026-02-01 00:00:00'",
        "next_fetch_at": "s.next_fetch_at",
        "etag": "'\"v1\"'",
    }
    tables.merge(spark, rows, root, "crawldb", keys=["url_key"], update=update, insert=False)
    cfg = replace(cfg, crawl__now="2026-03-01T00:00:00Z", generate__revisit_share=0.5)
    counts = plan_stage.run(StageRun(spark, root, cfg, 1))
    # a.test: 2 places, 1 for revisits (the most overdue: a.test/) and 1 for p[1], the new URL;
    # c.test: c[2] (queued) and no revisit due
    assert (counts.planned, counts.revisits, counts.deferred_cap) == (3, 1, 1)
    gen1 = {r["url"]: r for r in tables.read(spark, root, "fetchlist").where("gen = 1").collect()}
    assert set(gen1) == {"http://a.test/", p[1], c[2]}
    assert gen1["http://a.test/"]["etag"] == '"v1"' and gen1[p[1]]["etag"] is None
    # the revisit left for later keeps its status and stored version
    assert by_url(spark, root)[p[0]] == ("fetched", "link", 1, 0, None)

    before = snapshot(spark, root, "fetchlist"), snapshot(spark, root, "crawldb")
    plan_stage.run(StageRun(spark, root, cfg, 1))
    assert (snapshot(spark, root, "fetchlist"), snapshot(spark, root, "crawldb")) == before


def test_has_work_ignores_frontier_urls_plan_would_only_filter(
    spark, spark_cfg, tmp_path, new_root
):
    root = new_root
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.test/\n")
    cfg = replace(spark_cfg, crawl__max_depth=3)
    seed(spark, root, str(seeds), cfg, 0)
    assert plan_stage.has_work(spark, root, cfg, 0)  # the queued seed
    done = {"status": "'fetched'", "last_gen": "0", "next_gen": "NULL"}
    crawldb = tables.read(spark, root, "crawldb")
    tables.merge(spark, crawldb, root, "crawldb", keys=["url_key"], update=done, insert=False)
    add_frontier(
        spark,
        root,
        1,
        [
            ("http://a.test/", 1, "http://a.test/"),  # known
            ("http://a.test/deep", 4, "http://a.test/"),  # past max_depth
            ("http://a.test/logo.png", 1, "http://a.test/"),  # skipped extension
        ],
    )
    # Only URLs plan would mark filtered: running generation 1 would fetch nothing.
    assert not plan_stage.has_work(spark, root, cfg, 1)
    assert plan_stage.has_work(spark, root, replace(cfg, crawl__max_depth=4), 1)
    add_frontier(spark, root, 1, [("http://a.test/next", 1, "http://a.test/")])
    assert plan_stage.has_work(spark, root, cfg, 1)


def hosts_rows(spark, rows, **same):
    """hosts rows: (slot, not_before, not_before_reason, crawl_delay) and the columns ``same``
    gives every row, the rest empty."""
    from crawllib.store.spark_schemas import HOSTS

    full = [
        {**{f.name: None for f in HOSTS.fields}, "slot": slot, "not_before": nb,
         "not_before_reason": why, "crawl_delay": cd, **same}
        for slot, nb, why, cd in rows
    ]  # fmt: skip
    return spark.createDataFrame(full, HOSTS)


@pytest.mark.slow  # two plans and has_work; tests/e2e/test_hosts.py shows it in a crawl
def test_slots_the_hosts_table_holds_back_wait_without_an_attempt(
    spark, spark_cfg, tmp_path, new_root
):
    root = new_root
    hosts = ["free.net", "busy.net", "down.net", "slow.net", "over.net"]
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(f"http://{h}/\n" for h in hosts))
    cfg = replace(spark_cfg, politeness__max_crawl_delay=30.0)
    seed(spark, root, str(seeds), cfg, 0)
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    rows = [
        ("busy.net", now + dt.timedelta(hours=1), "retry_after", None),
        ("down.net", now + dt.timedelta(minutes=10), "down", None),
        ("slow.net", None, None, 60.0),  # Crawl-delay above the maximum
        ("over.net", now - dt.timedelta(minutes=1), "retry_after", 2.0),  # over already
    ]
    tables.append(hosts_rows(spark, rows), root, "hosts")
    counts = plan_stage.run(StageRun(spark, root, cfg, 0))
    assert (counts.planned, counts.deferred_held, counts.deferred_cap) == (2, 3, 0)
    fetchlist = {r["host"] for r in tables.read(spark, root, "fetchlist").collect()}
    assert fetchlist == {"free.net", "over.net"}
    crawldb = {r["host"]: r for r in tables.read(spark, root, "crawldb").collect()}
    for host in ("busy.net", "down.net", "slow.net"):  # still queued and due: they wait
        assert (crawldb[host]["status"], crawldb[host]["next_gen"]) == ("queued", 0)
        assert crawldb[host]["attempts"] == 0
    # what they wait for, and until when (the Crawl-delay has no end)
    waiting = {(w.reason, w.urls, w.due is not None) for w in plan_stage.waits(spark, root, cfg, 1)}
    assert waiting == {("retry_after", 1, True), ("down", 1, True), ("crawl_delay", 1, False)}
    # Once the others are fetched, only held URLs are pending: the crawl has no work now
    done = {"status": "'fetched'", "last_gen": "0", "next_gen": "NULL"}
    fetched = tables.read(spark, root, "crawldb").where(F.col("host").isin("free.net", "over.net"))
    tables.merge(spark, fetched, root, "crawldb", keys=["url_key"], update=done, insert=False)
    assert not plan_stage.has_work(spark, root, cfg, 1)
    honour = replace(cfg, politeness__honor_long_crawl_delay=True)  # slow.net is fetchable now
    assert plan_stage.has_work(spark, root, honour, 1)


def test_a_stage_appends_on_its_first_run_and_replaces_on_a_rerun(spark, planned_root):
    root, cfg, _p, _c = planned_root

    def fetchlist():
        return sorted(map(tuple, tables.read(spark, root, "fetchlist").collect()))

    def last_write():
        h = DeltaTable.forPath(spark, tables.table_path(root, "fetchlist")).history(1).first()
        return h["operation"], h["operationParameters"]["mode"]

    runner.run_stage(spark, root, cfg, 0, "plan")
    assert last_write() == ("WRITE", "Append")  # never started: nothing of gen 0 to replace
    planned = fetchlist()
    assert planned
    # A rerun that failed after writing the fetchlist once more: its rows are there twice.
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    generations.record(spark, root, 0, "plan", "failed", now)
    tables.append(tables.read(spark, root, "fetchlist"), root, "fetchlist")
    assert len(fetchlist()) == 2 * len(planned)
    runner.run_stage(spark, root, cfg, 0, "plan")
    assert last_write() == ("WRITE", "Overwrite")
    assert fetchlist() == planned


@pytest.mark.slow
def test_plan_appends_new_urls_to_crawldb_and_merges_when_a_known_url_changes(spark, planned_root):
    root, cfg, p, c = planned_root

    def last_crawldb_write():
        h = DeltaTable.forPath(spark, tables.table_path(root, "crawldb")).history(1).first()
        return h["operation"], h["operationParameters"].get("mode")

    plan_stage.run(StageRun(spark, root, cfg, 0))
    # gen 0 inserts, filters and defers new URLs only: one append
    assert last_crawldb_write() == ("WRITE", "Append")
    assert by_url(spark, root)[p[1]] == ("queued", "link", 1, 0, 0)
    fetched = planned_rows(spark, root, 0)
    update = {"status": "'fetched'", "last_gen": "0", "next_gen": "NULL"}
    tables.merge(spark, fetched, root, "crawldb", keys=["url_key"], update=update, insert=False)
    # a fetch made up in crawldb alone: plan is to count it from there (an older root's case)
    tables.set_property(spark, root, "hosts", tables.TOTALS_PROPERTY, None)
    # gen 1: a new URL of a.test ranks first (depth 0), so the known p[1] is past a.test's
    # budget of 3 (2 attempted): a known row changes, which takes the MERGE
    add_frontier(spark, root, 1, [("http://a.test/q", 0, "http://a.test/")])
    counts = plan_stage.run(StageRun(spark, root, cfg, 1))
    assert (counts.planned, counts.filtered_budget) == (2, 1)
    assert last_crawldb_write() == ("MERGE", None)
    rows = by_url(spark, root)
    assert rows[p[1]] == ("filtered", "budget", 1, 0, None)
    assert rows["http://a.test/q"] == ("queued", "link", 0, 1, 1)
    assert len(rows) == 12 and tables.read(spark, root, "crawldb").count() == 12


@pytest.mark.slow
def test_plan_rerun_is_right_whichever_of_its_two_writes_a_crash_left_out(spark, planned_root):
    """plan writes fetchlist and crawldb at once: a crash may leave either one out."""
    root, cfg, _p, _c = planned_root
    crawldb = DeltaTable.forPath(spark, tables.table_path(root, "crawldb"))
    before = crawldb.history(1).first()["version"]
    plan_stage.run(StageRun(spark, root, cfg, 0, first=True))
    planned, decided = snapshot(spark, root, "fetchlist"), by_url(spark, root)
    assert planned and len(decided) == 11
    # a first plan records no running row: killed after its writes, it runs as a first plan
    # again; its fetchlist append is committed (its transaction id), so it replaces the rows
    # (a later clock may choose other URLs: fetch must read what this run decided)
    plan_stage.run(StageRun(spark, root, cfg, 0, first=True))
    assert snapshot(spark, root, "fetchlist") == planned
    last = DeltaTable.forPath(spark, tables.table_path(root, "fetchlist")).history(1).first()
    assert (last["operation"], last["operationParameters"]["mode"]) == ("WRITE", "Overwrite")
    # crawldb committed, the fetchlist not
    empty = tables.read(spark, root, "fetchlist").limit(0)
    tables.replace_where(empty, root, "fetchlist", "gen = 0")
    assert snapshot(spark, root, "fetchlist") == []
    plan_stage.run(StageRun(spark, root, cfg, 0))
    assert snapshot(spark, root, "fetchlist") == planned
    assert by_url(spark, root) == decided
    # the fetchlist committed, crawldb not
    crawldb.restoreToVersion(before)
    assert len(by_url(spark, root)) == 2  # the seeds
    plan_stage.run(StageRun(spark, root, cfg, 0))
    assert snapshot(spark, root, "fetchlist") == planned
    assert by_url(spark, root) == decided


@pytest.mark.parametrize(("fetch_slices", "expected"), [(3, 3), (8, 7)])
def test_plan_counts_list_the_slices_fetch_would_query(
    spark, spark_cfg, new_root, fetch_slices, expected
):
    """A chained fetch takes its slices from plan's result instead of querying the fetchlist:
    both must name the same slices and URLs (8 slices asked, 7 made: the busiest host has 7)."""
    root = new_root
    cfg = replace(
        spark_cfg,
        storage__fetch_slices=fetch_slices,
        storage__min_slice_urls=1,
        storage__min_slice_seconds=0.0,
    )
    urls = [f"http://a.test/{i}" for i in range(7)] + [f"http://b.test/{i}" for i in range(3)]
    add_frontier(spark, root, 0, [(u, 1, "http://a.test/") for u in [*urls, "http://c.test/"]])
    counts = plan_stage.run(StageRun(spark, root, cfg, 0, first=True))
    fetchlist = tables.read(spark, root, "fetchlist").where(F.col("gen") == 0)
    queried = fetch_stage.stored_slices(spark, root, 0, fetchlist, nothing_stored=True)
    planned = fetch_stage.planned_slices(counts)
    assert planned.slices == queried.slices == expected
    assert planned.urls == planned.urls_todo == queried.urls == queried.urls_todo == 11
    assert (
        [s.slice for s in planned.todo] == [s.slice for s in queried.todo] == list(range(expected))
    )
    # planned slots: the planned hosts, an upper bound of each slice's slots
    assert all(
        p.slots >= q.slots and not p.dirty for p, q in zip(planned.todo, queried.todo, strict=True)
    )
    assert queried.todo[0].slots == 3


def test_budgets_read_the_hosts_totals_filled_once_from_crawldb_on_an_older_root(
    spark, spark_cfg, tmp_path, new_root
):
    root = new_root
    cfg = replace(spark_cfg, generate__host_budget=3, crawl__max_depth=3)
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(f"http://a.net/{i}\n" for i in range(3)) + "http://b.net/\n")
    seed(spark, root, str(seeds), cfg, 0)
    # two URLs of a.net were tried in an earlier generation, by a crawllib whose hosts table
    # had no totals: the property is unset, no hosts row counts them
    tried = {"status": "'fetched'", "last_gen": "0", "next_gen": "NULL", "attempts": "1"}
    two = tables.read(spark, root, "crawldb").where(
        F.col("url").isin("http://a.net/0", "http://a.net/1")
    )
    tables.merge(spark, two, root, "crawldb", keys=["url_key"], update=tried, insert=False)
    tables.set_property(spark, root, "hosts", tables.TOTALS_PROPERTY, None)
    add_frontier(spark, root, 1, [(f"http://a.net/n{i}", 1, "http://a.net/0") for i in range(2)])

    counts = plan_stage.run(StageRun(spark, root, cfg, 1))
    hosts = {r["slot"]: r for r in tables.read(spark, root, "hosts").collect()}
    assert {s: (r["urls_tried"], r["domain"]) for s, r in hosts.items()} == {"a.net": (2, "a.net")}
    assert tables.property_of(spark, root, "hosts", tables.TOTALS_PROPERTY) == "complete"
    # a.net: 2 used, so one of a.net/2 and the two new URLs fits the budget of 3
    assert (counts.planned, counts.filtered_budget) == (2, 2)  # and b.net/
    # plans by another key have slots that are not hosts: the totals are marked incomplete
    plan_stage.run(StageRun(spark, root, replace(cfg, politeness__key="domain"), 2))
    assert tables.property_of(spark, root, "hosts", tables.TOTALS_PROPERTY) is None


def test_exclusions_filter_new_pending_and_revisited_urls(spark, spark_cfg, tmp_path):
    rules = tmp_path / "exclude.txt"
    rules.write_text("# the operator's list\nhost:b.test\nregex:/private/\n")
    cfg = replace(
        spark_cfg, crawl__exclude=("prefix:http://h.test/2",), crawl__exclude_file=str(rules)
    )
    frontier = frontier_df(spark, [(k, 1, None, T0) for k in (1, 2, 3)])  # http://h.test/<k>
    crawldb = crawldb_df(
        spark,
        [
            {"url_key": 10, "host": "b.test"},  # queued: excluded now
            {"url_key": 11, "url": "http://c.test/private/x", "host": "c.test"},
            {  # a revisit, due: excluded too (the other rules spare revisits)
                "url_key": 12,
                "host": "b.test",
                "status": "fetched",
                "depth": 9,
                "fetched_at": T0,
                "next_fetch_at": T0,
            },
        ],
    )
    inputs = PlanInputs(as_of=T1.timestamp(), excluded=exclusions.load(cfg, spark))
    decided = plan_decisions(frontier, crawldb, cfg, 0, inputs)
    reasons = {r["url_key"]: r["filter_reason"] for r in decided.collect()}
    assert reasons == {
        1: None,
        2: "excluded",
        3: None,
        10: "excluded",
        11: "excluded",
        12: "excluded",
    }
    assert count_decisions(decided).first()["filtered_excluded"] == 4


def test_a_time_budget_gives_each_slot_what_its_delay_allows(spark, spark_cfg):
    # 20 s of fetching: a slot at the default delay (1 s) takes 21 URLs, one whose delay is
    # 10 s (a Crawl-delay) takes 3; without a budget both take all 30 (max_per_host 100)
    rows = [(k, "fast.test", 1, None, T0) for k in range(30)]
    rows += [(100 + k, "slow.test", 1, None, T0) for k in range(30)]
    frontier = spark.createDataFrame(
        [(0, f"http://{h}/{k}", k, h, h, d, s, "link", t, None, None) for k, h, d, s, t in rows],
        FRONTIER,
    )
    delays = spark.createDataFrame([("slow.test", 10.0)], "slot string, delay double")
    cfg = replace(
        spark_cfg,
        generate__max_per_host=100,
        generate__fetch_seconds=20.0,
        politeness__default_delay=1.0,
    )
    decided = plan_decisions(frontier, crawldb_df(spark, []), cfg, 0, PlanInputs(delays=delays))
    decided = decided.cache()
    chosen = collections.Counter(r["host"] for r in decided.where(~F.col("deferred")).collect())
    assert chosen == {"fast.test": 21, "slow.test": 3}
    assert count_decisions(decided).first()["deferred_time"] == 9 + 27
    unlimited = replace(cfg, generate__fetch_seconds=0.0)
    decided = plan_decisions(
        frontier, crawldb_df(spark, []), unlimited, 0, PlanInputs(delays=delays)
    )
    assert decided.where(F.col("deferred")).isEmpty()


def test_with_key_ip_a_held_host_waits_alone_and_an_address_holds_all_of_its_hosts(
    spark, spark_cfg
):
    # a.test and b.test share 10.0.0.1, c.test is on 10.0.0.2. a.test's own Retry-After (its
    # hosts row) holds a.test only; the cool-down of 10.0.0.2 (its address row) holds c.test.
    hosts = ["a.test", "b.test", "c.test"]
    rows = [
        (k, h, 0, None, T0)
        for h in hosts
        for k in range(hosts.index(h) * 10, hosts.index(h) * 10 + 2)
    ]
    frontier = spark.createDataFrame(
        [(0, f"http://{h}/{k}", k, h, h, d, s, "link", t, None, None) for k, h, d, s, t in rows],
        FRONTIER,
    )
    addresses = spark.createDataFrame(
        [("a.test", "10.0.0.1"), ("b.test", "10.0.0.1"), ("c.test", "10.0.0.2")],
        "host string, address string",
    )
    later = dt.datetime.now(dt.UTC).replace(tzinfo=None) + dt.timedelta(hours=1)
    stored = hosts_rows(
        spark,
        [("a.test", later, "retry_after", None), ("10.0.0.1", None, None, None)],
        kind="host",
    ).unionByName(hosts_rows(spark, [("10.0.0.2", later, "down", None)], kind="address"))
    cfg = replace(spark_cfg, politeness__key="ip")
    held = held_slots(stored, cfg)
    inputs = PlanInputs(held=held, addresses=addresses)
    decided = plan_decisions(frontier, crawldb_df(spark, []), cfg, 0, inputs)
    planned = {(r["host"], r["slot"]) for r in decided.where(~F.col("deferred")).collect()}
    assert planned == {("b.test", "10.0.0.1")}
    held_hosts = {r["host"] for r in decided.where(F.col("held")).collect()}
    assert held_hosts == {"a.test", "c.test"}
    # with key = host, the address row holds nothing: its hosts are slots of their own
    by_host = plan_decisions(frontier, crawldb_df(spark, []), spark_cfg, 0, PlanInputs(held=held))
    assert {r["host"] for r in by_host.where(F.col("held")).collect()} == {"a.test"}
    # what each waits for: its host's hold, else its address's
    waits = with_hold(
        with_slot(frontier.select("host", "domain"), cfg, addresses), holds(stored, cfg), True
    )
    assert {(r["host"], r["hold"]) for r in waits.distinct().collect()} == {
        ("a.test", "retry_after"),
        ("b.test", None),
        ("c.test", "down"),
    }


def test_a_time_budget_with_key_ip_caps_each_host_then_its_address(spark, spark_cfg):
    # 20 s of fetching. On 10.0.0.1: fast.test at the default delay (1 s: 21 URLs) and
    # crawl.test with a Crawl-delay of 10 s in its row (3 URLs); the address row's delay is
    # 0.5 s (41 URLs for the address: all 24 fit). On 10.0.0.2, slow.test and slow2.test at
    # 1 s each, but their address adapted to a slow server: 10 s, 3 URLs for both together
    # (in generate.order: slow.test's keys are the smaller).
    hosts = {"fast.test": "10.0.0.1", "crawl.test": "10.0.0.1"}
    hosts |= {"slow.test": "10.0.0.2", "slow2.test": "10.0.0.2"}
    rows = [(i * 100 + k, h, 1, None, T0) for i, h in enumerate(hosts) for k in range(30)]
    frontier = spark.createDataFrame(
        [(0, f"http://{h}/{k}", k, h, h, d, s, "link", t, None, None) for k, h, d, s, t in rows],
        FRONTIER,
    )
    addresses = spark.createDataFrame(list(hosts.items()), "host string, address string")
    delays = spark.createDataFrame(
        [("crawl.test", 10.0), ("10.0.0.1", 0.5), ("10.0.0.2", 10.0)], "slot string, delay double"
    )
    cfg = replace(
        spark_cfg,
        politeness__key="ip",
        generate__max_per_host=100,
        generate__fetch_seconds=20.0,
        politeness__default_delay=1.0,
    )
    inputs = PlanInputs(addresses=addresses, delays=delays)
    decided = plan_decisions(frontier, crawldb_df(spark, []), cfg, 0, inputs).cache()
    chosen = collections.Counter(r["host"] for r in decided.where(~F.col("deferred")).collect())
    assert chosen == {"fast.test": 21, "crawl.test": 3, "slow.test": 3}
