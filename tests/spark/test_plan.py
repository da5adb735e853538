"""plan: each rule on tiny hand-made rows, then the stage on a crawl root (rerun-safe); every
test on both engines."""

from __future__ import annotations

import collections
import datetime as dt
import json
from pathlib import Path

import pytest

from crawllib.config import replace
from crawllib.core.urls import host_of, registered_domain, url_extension, url_key
from crawllib.runs import runner
from crawllib.stages import fetch as fetch_stage
from crawllib.stages import plan as plan_stage
from crawllib.stages.base import StageRun
from crawllib.stages.seeding import seed
from crawllib.store import generations
from crawllib.store.db import TOTALS_COMPLETE, TOTALS_PROPERTY
from crawllib.store.schemas import (
    CRAWLDB,
    FRONTIER,
    HOSTS,
    D,
    I,
    L,
    S,
    T,
    struct_of,
)
from crawllib.transforms import exclusions
from crawllib.transforms.lookup import rows_of
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
from tests.rows import by, rel, run

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)
T1 = T0 + dt.timedelta(minutes=1)


def epoch(at: dt.datetime) -> float:
    """Epoch seconds of a naive UTC time."""
    return at.replace(tzinfo=dt.UTC).timestamp()


def keyed(rows, *columns):
    """The rows as a set of tuples of ``columns`` (a comparison ignoring row order)."""
    assert rows
    return {tuple(r[c] for c in columns) for r in rows}


def frontier_rows(db, rows):
    """rows: (url_key, depth, source_url, discovered_at); the rest filled in."""
    return rel(
        db,
        FRONTIER,
        [
            {
                "gen": 0,
                "url": f"http://h.test/{k}",
                "url_key": k,
                "host": "h.test",
                "domain": "h.test",
                "depth": d,
                "source_url": src,
                "reason": "link",
                "discovered_at": at,
            }
            for k, d, src, at in rows
        ],
    )


def crawldb_rows(db, rows):
    """rows: dicts with url_key and any crawldb column that differs from a fresh seed."""
    base = {"status": "queued", "reason": "seed", "attempts": 0, "depth": 0}
    base.update(first_gen=0, next_gen=0)
    full = []
    for row in rows:
        host = row.get("host", "h.test")
        full.append({**base, "url": f"http://{host}/{row['url_key']}", "host": host, **row})
    return rel(db, CRAWLDB, full)


def test_dedup_frontier_keeps_min_depth_then_earliest_source(db):
    frontier = frontier_rows(
        db,
        [
            (1, 2, "http://a.test/", T0),
            (1, 1, "http://c.test/", T0),
            (1, 1, "http://b.test/", T1),
            (2, 3, "http://d.test/", T1),
        ],
    )
    got = run(db, dedup_frontier(), frontier=frontier)
    assert all(tuple(r) == FRONTIER.names for r in got)
    assert keyed(got, *FRONTIER.names) == keyed(
        db.collect(frontier_rows(db, [(1, 1, "http://c.test/", T0), (2, 3, "http://d.test/", T1)])),
        *FRONTIER.names,
    )
    assert len(got) == 2


def test_new_candidates_drops_urls_known_to_crawldb(db):
    frontier = frontier_rows(db, [(k, 1, None, T0) for k in (1, 2, 3)])
    crawldb = crawldb_rows(db, [{"url_key": 2, "status": "fetched"}])
    got = run(db, new_candidates(), frontier=frontier, crawldb=crawldb)
    expected = db.collect(frontier_rows(db, [(k, 1, None, T0) for k in (1, 3)]))
    assert len(got) == 2 and keyed(got, *FRONTIER.names) == keyed(expected, *FRONTIER.names)


def test_pending_from_crawldb_takes_due_queued_and_failed(db):
    at = epoch(dt.datetime(2026, 1, 1, 12, 0, 0))
    crawldb = crawldb_rows(
        db,
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
    got = run(db, pending_from_crawldb(2, at), crawldb=crawldb)
    due = [(1, "queued"), (3, "failed"), (7, "queued"), (8, "failed"), (9, "failed")]
    assert len(got) == len(due)
    assert keyed(got, "url_key", "status", "is_new", "lowered") == {
        (k, status, False, False) for k, status in due
    }
    # without a clock (tests of the other steps) the time is not looked at
    untimed = run(db, pending_from_crawldb(2), crawldb=crawldb)
    assert {r["url_key"] for r in untimed} == {1, 3, 4, 7, 8, 9}


def test_extension_of_agrees_with_urls_module(db):
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
    df = rel(db, struct_of(("url", S)), [{"url": u} for u in urls])
    got = run(db, f"SELECT url, {extension_of('url')} AS ext FROM {{df}}", df=df)
    assert {r["url"]: r["ext"] for r in got} == {u: url_extension(u) for u in urls}


URL_DEPTH = struct_of(("url", S), ("depth", I))


def test_with_filter_reason_depth_extension_length(db, spark_cfg):
    cfg = replace(spark_cfg, crawl__max_depth=3, crawl__max_url_length=30)
    rows = [
        ("http://a.test/ok", 3, None),
        ("http://a.test/deep.jpg", 4, "depth"),  # depth is checked first
        ("http://a.test/pic.JPG", 1, "extension"),
        ("http://a.test/" + "x" * 20, 1, "length"),
        ("http://a.test/page.html", 0, None),
    ]
    df = rel(db, URL_DEPTH, [{"url": u, "depth": d} for u, d, _ in rows])
    got = run(db, with_filter_reason(cfg), df=df)
    assert len(got) == len(rows)
    assert keyed(got, "url", "depth", "filter_reason") == set(rows)


BUDGET = struct_of(
    ("url_key", L),
    ("host", S),
    ("domain", S),
    ("depth", I),
    ("last_gen", I),
    ("filter_reason", S),
    ("score", D),
)


def hosts_rows(db, rows, **same):
    """hosts rows: (slot, not_before, not_before_reason, crawl_delay) and the columns ``same``
    gives every row, the rest empty."""
    full = [
        {"slot": slot, "not_before": nb, "not_before_reason": why, "crawl_delay": cd, **same}
        for slot, nb, why, cd in rows
    ]
    return rel(db, HOSTS, full)


@pytest.mark.parametrize("source", ["crawldb", "hosts"])
def test_apply_budgets_per_host_then_per_domain(db, spark_cfg, source):
    cfg = replace(spark_cfg, generate__host_budget=2, generate__domain_budget=3)
    # Key 13 was fetched once: it uses one unit of a.x.test's and x.test's budgets, counted
    # in crawldb or in the hosts table's running totals alike.
    if source == "crawldb":
        host_q, domain_q = attempted_in_crawldb()
        crawldb = crawldb_rows(
            db, [{"url_key": 13, "host": "a.x.test", "domain": "x.test", "last_gen": 0}]
        )
        used = {"crawldb": crawldb}
    else:
        host_q, domain_q = attempted_in_hosts()
        hosts = hosts_rows(db, [("a.x.test", None, None, None)], urls_tried=1, domain="x.test")
        used = {"hosts": hosts}
    rows = [
        (11, "a.x.test", "x.test", 0, None),  # host 1+1, domain 1+1
        (10, "a.x.test", "x.test", 1, None),  # host 1+2 > 2: budget
        (12, "a.x.test", "x.test", 1, None),  # host 1+3 > 2: budget
        (13, "a.x.test", "x.test", 0, 0),  # a retry: already counted, never cut
        (20, "b.x.test", "x.test", 0, None),  # domain 1+2
        (21, "b.x.test", "x.test", 0, None),  # domain 1+3 > 3: budget
        (30, "c.y.test", "y.test", 0, None),
    ]
    given = [dict(zip(BUDGET.names, r, strict=False)) for r in rows]
    given.append(
        {
            **dict(zip(BUDGET.names, (22, "b.x.test", "x.test", 9, None), strict=False)),
            "filter_reason": "depth",
        }
    )
    candidates = rel(db, BUDGET, given)
    got = run(
        db,
        apply_budgets(BUDGET.names, cfg),
        df=candidates,
        host_used=db.sql(host_q, **used),
        domain_used=db.sql(domain_q, **used),
    )
    assert all(tuple(r) == BUDGET.names for r in got)
    budget = {10, 12, 21}
    expected = {(*r, "budget" if r[0] in budget else None, None) for r in rows}
    expected.add((22, "b.x.test", "x.test", 9, None, "depth", None))
    assert len(got) == len(expected) and keyed(got, *BUDGET.names) == expected


CAPPED = struct_of(
    ("url_key", L),
    ("host", S),
    ("depth", I),
    ("filter_reason", S),
    ("fetched_at", T),
    ("next_fetch_at", T),
)


def test_cap_per_host_keeps_lowest_depth_then_url_key(db, spark_cfg):
    rows = [
        (5, "a.test", 1, None),
        (3, "a.test", 1, None),
        (9, "a.test", 0, None),
        (1, "a.test", 2, None),
        (0, "a.test", 0, "depth"),  # filtered rows are not ranked
        (7, "b.test", 3, None),
    ]
    df = rel(db, CAPPED, [dict(zip(CAPPED.names, r, strict=False)) for r in rows])
    cfg = replace(spark_cfg, generate__revisit_share=0.0)
    got = run(db, cap_per_host(cfg, max_per_host=2), df=df)
    deferred = {5, 1}
    assert len(got) == len(rows)
    assert keyed(got, "url_key", "host", "depth", "filter_reason", "deferred") == {
        (*r, r[0] in deferred) for r in rows
    }


def test_cap_per_host_shares_places_between_revisits_and_new_urls(db, spark_cfg):
    hour = dt.timedelta(hours=1)
    revisit = [(10 + k, "a.test", 1, None, T0, T0 - k * hour) for k in range(4)]  # 13 most overdue
    new = [(k, "a.test", 0, None, None, None) for k in range(4)]
    only_revisits = [(20 + k, "b.test", 1, None, T0, T0 - k * hour) for k in range(3)]
    df = rel(
        db, CAPPED, [dict(zip(CAPPED.names, r, strict=True)) for r in revisit + new + only_revisits]
    )

    def chosen(max_per_host, share):
        cfg = replace(spark_cfg, generate__revisit_share=share)
        got = run(db, cap_per_host(cfg, max_per_host=max_per_host), df=df)
        assert len(got) == 11
        return {r["url_key"] for r in got if not r["deferred"]}

    # 4 places, half for revisits: a.test 2 + 2, most overdue revisits first; b.test has no
    # new URLs, so its revisits take all 4 places
    assert chosen(4, 0.5) == {13, 12, 0, 1, 20, 21, 22}
    # no share for revisits: new URLs first, revisits only in the places left
    assert chosen(5, 0.0) == {0, 1, 2, 3, 13, 20, 21, 22}


SLOTTED = struct_of(("host", S), ("domain", S), ("depth", I), ("url_key", L))
DNS_ROWS = struct_of(("host", S), ("address", S))


def with_slot_and_slice(db, df, cfg, slices, addresses=None):
    inputs = {"df": df}
    if addresses is not None:
        inputs["addresses"] = addresses
    slotted = db.sql(
        with_slot(cfg, "{df}", "{addresses}" if addresses is not None else None), **inputs
    )
    return run(db, with_slice(slices), df=slotted)


def test_slot_by_host_or_domain_and_slices_deal_each_slot_round_robin(db, spark_cfg):
    # a.x.test and b.x.test share a registered domain; h0.test has 5 URLs, h1.test one.
    rows = [("a.x.test", "x.test", 0, 4), ("b.x.test", "x.test", 1, 3)]
    rows += [("h0.test", "h0.test", 1, k) for k in (50, 10, 40, 20, 30)]
    rows += [("h1.test", "h1.test", 2, 99)]

    def frame(given):
        return rel(db, SLOTTED, [dict(zip(SLOTTED.names, r, strict=True)) for r in given])

    df = frame(rows)
    by_host = replace(spark_cfg, politeness__key="host")
    by_domain = replace(spark_cfg, politeness__key="domain")

    got = with_slot_and_slice(db, df, by_host, 3)
    assert len(got) == len(rows) and keyed(got, "host", "slot") == {(r[0], r[0]) for r in rows}
    got = with_slot_and_slice(db, df, by_domain, 3)
    assert len(got) == len(rows) and keyed(got, "host", "slot") == {(r[0], r[1]) for r in rows}
    # by server address: the dns table's answer; a name without one keeps its own slot
    by_ip = replace(spark_cfg, politeness__key="ip")
    dns = rel(
        db,
        DNS_ROWS,
        [
            {"host": h, "address": a}
            for h, a in [
                ("a.x.test", "127.0.0.2"),
                ("b.x.test", "127.0.0.2"),
                ("h0.test", "127.0.0.3"),
                ("h1.test", None),
            ]
        ],
    )
    got = with_slot_and_slice(db, df, by_ip, 3, dns)
    assert len(got) == len(rows)
    assert {r["host"]: r["slot"] for r in got} == {
        "a.x.test": "127.0.0.2",
        "b.x.test": "127.0.0.2",
        "h0.test": "127.0.0.3",
        "h1.test": "h1.test",
    }

    def slices(frame_, cfg):
        got = with_slot_and_slice(db, frame_, cfg, 3)
        assert len(got) == len(rows)
        return {(r["slot"], r["url_key"]): r["slice"] for r in got}

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
    again = frame(list(reversed(rows)))
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


def add_frontier(db, gen, rows):
    """rows: (url, depth, source_url) or (url, depth, source_url, score)."""
    data = []
    for u, d, s, *score in rows:
        host = host_of(u)
        data.append(
            {
                "gen": gen,
                "url": u,
                "url_key": url_key(u),
                "host": host,
                "domain": registered_domain(host),
                "depth": d,
                "source_url": s,
                "reason": "link",
                "discovered_at": T0,
                "score": score[0] if score else None,
            }
        )
    db.append(rel(db, FRONTIER, data), "frontier")


def snapshot(db, name):
    """A table's rows, comparable and in a stable order (the known keys' lists sorted)."""
    return sorted(
        tuple(sorted(v) if isinstance(v, list) else v for v in r.values())
        for r in db.collect(db.table(name))
    )


def planned_rows(db, gen):
    """crawldb's rows of the URLs plan put in the fetchlist of ``gen``."""
    return db.sql(
        rows_of("{crawldb}", "{fetchlist}"),
        crawldb=db.table("crawldb"),
        fetchlist=db.table("fetchlist", f"gen = {gen}"),
    )


def set_in_crawldb(db, rows, update):
    """MERGE ``update`` (column -> SQL) into the crawldb rows of ``rows`` (kept first: the
    MERGE rewrites what they are read from)."""
    db.merge(db.keep(rows), "crawldb", keys=["url_key"], update=update, insert=False)


def by_url(db):
    cols = ["status", "reason", "depth", "first_gen", "next_gen"]
    rows = db.collect(db.table("crawldb"))
    assert rows
    return {r["url"]: tuple(r[c] for c in cols) for r in rows}


def last_write(root, name):
    """(operation, mode) of table ``name``'s latest commit, as its Delta log records it (both
    engines write one)."""
    log = Path(root) / name / "_delta_log"
    latest = max(log.glob("*.json"), key=lambda p: int(p.stem))
    for line in latest.read_text().splitlines():
        info = json.loads(line).get("commitInfo")
        if info is not None:
            return info["operation"], (info.get("operationParameters") or {}).get("mode")
    raise AssertionError(f"no commitInfo in {latest}")


@pytest.fixture
def planned_root(db, spark_cfg, tmp_path):
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
    assert seed(db, str(seeds), cfg, 0).added == 2
    p = ["http://a.test/p1", "http://a.test/p2"]
    c = [f"http://c.test/c{i}" for i in range(4)]
    add_frontier(
        db,
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
    return db, cfg, sorted(p, key=url_key), sorted(c, key=url_key)


def test_plan_stage_writes_fetchlist_and_crawldb_and_reruns_identically(planned_root):
    db, cfg, p, c = planned_root
    counts = plan_stage.run(StageRun(db, cfg, 0))
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
    fetchlist = db.collect(db.table("fetchlist"))
    carried = [r for r in fetchlist if r["known"] is not None]
    b_keys = db.collect(db.table("crawldb", "host = 'b.test'"))
    assert [(r["slot"], sorted(r["known"])) for r in carried] == [
        ("b.test", sorted(r["url_key"] for r in b_keys))
    ]
    assert len(carried[0]["known"]) == 4
    assert {r["url"] for r in fetchlist} == chosen
    assert {(r["gen"], r["slot"] == r["host"], 0 <= r["slice"] < 4) for r in fetchlist} == {
        (0, True, True)
    }
    assert counts.slices == len({r["slice"] for r in fetchlist})
    long_url = "http://b.test/" + "x" * 30
    assert by_url(db) == {
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

    before = snapshot(db, "fetchlist"), snapshot(db, "crawldb")
    again = plan_stage.run(StageRun(db, cfg, 0))
    assert (snapshot(db, "fetchlist"), snapshot(db, "crawldb")) == before
    assert (again.planned, again.candidates, again.deferred_cap) == (5, 7, 2)

    # Gen 1, after gen 0's URLs were fetched: the deferred ones come up, c.test within budget.
    set_in_crawldb(
        db, planned_rows(db, 0), {"status": "'fetched'", "last_gen": "0", "next_gen": "NULL"}
    )
    counts = plan_stage.run(StageRun(db, cfg, 1))
    assert (counts.candidates, counts.planned, counts.filtered_budget) == (2, 2, 0)
    gen1 = db.collect(db.table("fetchlist", "gen = 1"))
    assert {r["url"] for r in gen1} == {p[1], c[2]}


def test_plan_takes_due_revisits_most_overdue_first_and_reruns_identically(planned_root):
    db, cfg, p, c = planned_root
    plan_stage.run(StageRun(db, cfg, 0))
    now = dt.datetime(2026, 3, 1)
    # Gen 0's URLs were fetched: a.test/ is due since 2 h, p[0] since 1 h, c[0] in an hour
    due = {"http://a.test/": -2, p[0]: -1, c[0]: 1, "http://b.test/": 5, c[1]: 5}
    fetched = db.collect(planned_rows(db, 0))
    assert {r["url"] for r in fetched} == set(due)
    rows = rel(
        db,
        CRAWLDB,
        [{**r, "next_fetch_at": now + dt.timedelta(hours=due[r["url"]])} for r in fetched],
    )
    update = {
        "status": "'fetched'",
        "last_gen": "0",
        "next_gen": "NULL",
        "attempts": "1",
        "fetched_at": "TIMESTAMP '2026-02-01 00:00:00'",
        "next_fetch_at": "s.next_fetch_at",
        "etag": "'\"v1\"'",
    }
    set_in_crawldb(db, rows, update)
    cfg = replace(cfg, crawl__now="2026-03-01T00:00:00Z", generate__revisit_share=0.5)
    counts = plan_stage.run(StageRun(db, cfg, 1))
    # a.test: 2 places, 1 for revisits (the most overdue: a.test/) and 1 for p[1], the new URL;
    # c.test: c[2] (queued) and no revisit due
    assert (counts.planned, counts.revisits, counts.deferred_cap) == (3, 1, 1)
    gen1 = by(db.collect(db.table("fetchlist", "gen = 1")), "url")
    assert set(gen1) == {"http://a.test/", p[1], c[2]}
    assert gen1["http://a.test/"]["etag"] == '"v1"' and gen1[p[1]]["etag"] is None
    # the revisit left for later keeps its status and stored version
    assert by_url(db)[p[0]] == ("fetched", "link", 1, 0, None)

    before = snapshot(db, "fetchlist"), snapshot(db, "crawldb")
    plan_stage.run(StageRun(db, cfg, 1))
    assert (snapshot(db, "fetchlist"), snapshot(db, "crawldb")) == before


def test_has_work_ignores_frontier_urls_plan_would_only_filter(db, spark_cfg, tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.test/\n")
    cfg = replace(spark_cfg, crawl__max_depth=3)
    seed(db, str(seeds), cfg, 0)
    assert plan_stage.has_work(db, cfg, 0)  # the queued seed
    done = {"status": "'fetched'", "last_gen": "0", "next_gen": "NULL"}
    set_in_crawldb(db, db.table("crawldb"), done)
    add_frontier(
        db,
        1,
        [
            ("http://a.test/", 1, "http://a.test/"),  # known
            ("http://a.test/deep", 4, "http://a.test/"),  # past max_depth
            ("http://a.test/logo.png", 1, "http://a.test/"),  # skipped extension
        ],
    )
    # Only URLs plan would mark filtered: running generation 1 would fetch nothing.
    assert not plan_stage.has_work(db, cfg, 1)
    assert plan_stage.has_work(db, replace(cfg, crawl__max_depth=4), 1)
    add_frontier(db, 1, [("http://a.test/next", 1, "http://a.test/")])
    assert plan_stage.has_work(db, cfg, 1)


@pytest.mark.slow  # two plans and has_work; tests/e2e/test_hosts.py shows it in a crawl
def test_slots_the_hosts_table_holds_back_wait_without_an_attempt(db, spark_cfg, tmp_path):
    hosts = ["free.net", "busy.net", "down.net", "slow.net", "over.net"]
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(f"http://{h}/\n" for h in hosts))
    cfg = replace(spark_cfg, politeness__max_crawl_delay=30.0)
    seed(db, str(seeds), cfg, 0)
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    rows = [
        ("busy.net", now + dt.timedelta(hours=1), "retry_after", None),
        ("down.net", now + dt.timedelta(minutes=10), "down", None),
        ("slow.net", None, None, 60.0),  # Crawl-delay above the maximum
        ("over.net", now - dt.timedelta(minutes=1), "retry_after", 2.0),  # over already
    ]
    db.append(hosts_rows(db, rows), "hosts")
    counts = plan_stage.run(StageRun(db, cfg, 0))
    assert (counts.planned, counts.deferred_held, counts.deferred_cap) == (2, 3, 0)
    fetchlist = {r["host"] for r in db.collect(db.table("fetchlist"))}
    assert fetchlist == {"free.net", "over.net"}
    crawldb = by(db.collect(db.table("crawldb")), "host")
    for host in ("busy.net", "down.net", "slow.net"):  # still queued and due: they wait
        assert (crawldb[host]["status"], crawldb[host]["next_gen"]) == ("queued", 0)
        assert crawldb[host]["attempts"] == 0
    # what they wait for, and until when (the Crawl-delay has no end)
    waiting = {(w.reason, w.urls, w.due is not None) for w in plan_stage.waits(db, cfg, 1)}
    assert waiting == {("retry_after", 1, True), ("down", 1, True), ("crawl_delay", 1, False)}
    # Once the others are fetched, only held URLs are pending: the crawl has no work now
    done = {"status": "'fetched'", "last_gen": "0", "next_gen": "NULL"}
    set_in_crawldb(db, db.table("crawldb", "host IN ('free.net', 'over.net')"), done)
    assert not plan_stage.has_work(db, cfg, 1)
    honour = replace(cfg, politeness__honor_long_crawl_delay=True)  # slow.net is fetchable now
    assert plan_stage.has_work(db, honour, 1)


def test_a_stage_appends_on_its_first_run_and_replaces_on_a_rerun(planned_root, new_root):
    db, cfg, _p, _c = planned_root

    def fetchlist():
        return snapshot(db, "fetchlist")

    runner.run_stage(db, cfg, 0, "plan")
    assert last_write(new_root, "fetchlist") == ("WRITE", "Append")  # nothing of gen 0 to replace
    planned = fetchlist()
    assert planned
    # A rerun that failed after writing the fetchlist once more: its rows are there twice.
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    generations.record(db, 0, "plan", "failed", now)
    db.append(db.keep(db.table("fetchlist")), "fetchlist")
    assert len(fetchlist()) == 2 * len(planned)
    runner.run_stage(db, cfg, 0, "plan")
    assert last_write(new_root, "fetchlist") == ("WRITE", "Overwrite")
    assert fetchlist() == planned


@pytest.mark.slow
def test_plan_appends_new_urls_to_crawldb_and_merges_when_a_known_url_changes(
    planned_root, new_root
):
    db, cfg, p, c = planned_root
    plan_stage.run(StageRun(db, cfg, 0))
    # gen 0 inserts, filters and defers new URLs only: one append
    assert last_write(new_root, "crawldb") == ("WRITE", "Append")
    assert by_url(db)[p[1]] == ("queued", "link", 1, 0, 0)
    update = {"status": "'fetched'", "last_gen": "0", "next_gen": "NULL"}
    set_in_crawldb(db, planned_rows(db, 0), update)
    # a fetch made up in crawldb alone: plan is to count it from there (an older root's case)
    db.set_property("hosts", TOTALS_PROPERTY, None)
    # gen 1: a new URL of a.test ranks first (depth 0), so the known p[1] is past a.test's
    # budget of 3 (2 attempted): a known row changes, which takes the MERGE
    add_frontier(db, 1, [("http://a.test/q", 0, "http://a.test/")])
    counts = plan_stage.run(StageRun(db, cfg, 1))
    assert (counts.planned, counts.filtered_budget) == (2, 1)
    assert last_write(new_root, "crawldb")[0] == "MERGE"
    rows = by_url(db)
    assert rows[p[1]] == ("filtered", "budget", 1, 0, None)
    assert rows["http://a.test/q"] == ("queued", "link", 0, 1, 1)
    assert len(rows) == 12 and db.count(db.table("crawldb")) == 12


@pytest.mark.slow
def test_plan_rerun_is_right_whichever_of_its_two_writes_a_crash_left_out(planned_root, new_root):
    """plan writes fetchlist and crawldb at once: a crash may leave either one out."""
    from deltalake import DeltaTable

    db, cfg, _p, _c = planned_root
    before = db.version_of("crawldb")
    plan_stage.run(StageRun(db, cfg, 0, first=True))
    planned, decided = snapshot(db, "fetchlist"), by_url(db)
    assert planned and len(decided) == 11
    # a first plan records no running row: killed after its writes, it runs as a first plan
    # again; its fetchlist append is committed (its transaction id), so it replaces the rows
    # (a later clock may choose other URLs: fetch must read what this run decided)
    plan_stage.run(StageRun(db, cfg, 0, first=True))
    assert snapshot(db, "fetchlist") == planned
    assert last_write(new_root, "fetchlist") == ("WRITE", "Overwrite")
    # crawldb committed, the fetchlist not
    db.replace_where(
        db.sql("SELECT * FROM {f} WHERE FALSE", f=db.table("fetchlist")), "fetchlist", "gen = 0"
    )
    assert snapshot(db, "fetchlist") == []
    plan_stage.run(StageRun(db, cfg, 0))
    assert snapshot(db, "fetchlist") == planned
    assert by_url(db) == decided
    # the fetchlist committed, crawldb not (its version before plan, restored)
    DeltaTable(str(Path(new_root) / "crawldb")).restore(before)
    assert len(by_url(db)) == 2  # the seeds
    plan_stage.run(StageRun(db, cfg, 0))
    assert snapshot(db, "fetchlist") == planned
    assert by_url(db) == decided


@pytest.mark.parametrize(("fetch_slices", "expected"), [(3, 3), (8, 7)])
def test_plan_counts_list_the_slices_fetch_would_query(db, spark_cfg, fetch_slices, expected):
    """A chained fetch takes its slices from plan's result instead of querying the fetchlist:
    both must name the same slices and URLs (8 slices asked, 7 made: the busiest host has 7)."""
    cfg = replace(
        spark_cfg,
        storage__fetch_slices=fetch_slices,
        storage__min_slice_urls=1,
        storage__min_slice_seconds=0.0,
    )
    urls = [f"http://a.test/{i}" for i in range(7)] + [f"http://b.test/{i}" for i in range(3)]
    add_frontier(db, 0, [(u, 1, "http://a.test/") for u in [*urls, "http://c.test/"]])
    counts = plan_stage.run(StageRun(db, cfg, 0, first=True))
    fetchlist = db.table("fetchlist", "gen = 0")
    queried = fetch_stage.stored_slices(db, 0, fetchlist, nothing_stored=True)
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
    db, spark_cfg, tmp_path
):
    cfg = replace(spark_cfg, generate__host_budget=3, crawl__max_depth=3)
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(f"http://a.net/{i}\n" for i in range(3)) + "http://b.net/\n")
    seed(db, str(seeds), cfg, 0)
    # two URLs of a.net were tried in an earlier generation, by a crawllib whose hosts table
    # had no totals: the property is unset, no hosts row counts them
    tried = {"status": "'fetched'", "last_gen": "0", "next_gen": "NULL", "attempts": "1"}
    two = db.table("crawldb", "url IN ('http://a.net/0', 'http://a.net/1')")
    set_in_crawldb(db, two, tried)
    db.set_property("hosts", TOTALS_PROPERTY, None)
    add_frontier(db, 1, [(f"http://a.net/n{i}", 1, "http://a.net/0") for i in range(2)])

    counts = plan_stage.run(StageRun(db, cfg, 1))
    hosts = by(db.collect(db.table("hosts")), "slot")
    assert {s: (r["urls_tried"], r["domain"]) for s, r in hosts.items()} == {"a.net": (2, "a.net")}
    assert db.property_of("hosts", TOTALS_PROPERTY) == TOTALS_COMPLETE
    # a.net: 2 used, so one of a.net/2 and the two new URLs fits the budget of 3
    assert (counts.planned, counts.filtered_budget) == (2, 2)  # and b.net/
    # plans by another key have slots that are not hosts: the totals are marked incomplete
    plan_stage.run(StageRun(db, replace(cfg, politeness__key="domain"), 2))
    assert db.property_of("hosts", TOTALS_PROPERTY) is None


def decide(db, cfg, gen, inputs, **rels):
    """plan_decisions over ``rels`` (frontier, crawldb and the inputs' names), kept."""
    return db.keep(db.sql(plan_decisions(cfg, gen, inputs), **rels))


def counted(db, cfg, decided):
    return db.one_row(db.sql(count_decisions(cfg.generate.max_per_host), decided=decided))


def test_exclusions_filter_new_pending_and_revisited_urls(db, spark_cfg, tmp_path):
    rules = tmp_path / "exclude.txt"
    rules.write_text("# the operator's list\nhost:b.test\nregex:/private/\n")
    cfg = replace(
        spark_cfg, crawl__exclude=("prefix:http://h.test/2",), crawl__exclude_file=str(rules)
    )
    frontier = frontier_rows(db, [(k, 1, None, T0) for k in (1, 2, 3)])  # http://h.test/<k>
    crawldb = crawldb_rows(
        db,
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
    inputs = PlanInputs(as_of=epoch(T1), excluded=exclusions.load(cfg, db.read_file))
    decided = decide(db, cfg, 0, inputs, frontier=frontier, crawldb=crawldb)
    reasons = {r["url_key"]: r["filter_reason"] for r in db.collect(decided)}
    assert reasons == {
        1: None,
        2: "excluded",
        3: None,
        10: "excluded",
        11: "excluded",
        12: "excluded",
    }
    assert counted(db, cfg, decided)["filtered_excluded"] == 4


def frontier_of(db, rows):
    """rows: (url_key, host, depth, source_url, discovered_at)."""
    return rel(
        db,
        FRONTIER,
        [
            {
                "gen": 0,
                "url": f"http://{h}/{k}",
                "url_key": k,
                "host": h,
                "domain": h,
                "depth": d,
                "source_url": s,
                "reason": "link",
                "discovered_at": t,
            }
            for k, h, d, s, t in rows
        ],
    )


DELAYS = struct_of(("slot", S), ("delay", D))


def test_a_time_budget_gives_each_slot_what_its_delay_allows(db, spark_cfg):
    # 20 s of fetching: a slot at the default delay (1 s) takes 21 URLs, one whose delay is
    # 10 s (a Crawl-delay) takes 3; without a budget both take all 30 (max_per_host 100)
    rows = [(k, "fast.test", 1, None, T0) for k in range(30)]
    rows += [(100 + k, "slow.test", 1, None, T0) for k in range(30)]
    frontier = frontier_of(db, rows)
    delays = rel(db, DELAYS, [{"slot": "slow.test", "delay": 10.0}])
    cfg = replace(
        spark_cfg,
        generate__max_per_host=100,
        generate__fetch_seconds=20.0,
        politeness__default_delay=1.0,
    )
    rels = {"frontier": frontier, "crawldb": crawldb_rows(db, []), "delays": delays}
    decided = decide(db, cfg, 0, PlanInputs(delays=True), **rels)
    got = db.collect(decided)
    assert len(got) == 60
    chosen = collections.Counter(r["host"] for r in got if not r["deferred"])
    assert chosen == {"fast.test": 21, "slow.test": 3}
    assert counted(db, cfg, decided)["deferred_time"] == 9 + 27
    unlimited = replace(cfg, generate__fetch_seconds=0.0)
    got = db.collect(decide(db, unlimited, 0, PlanInputs(delays=True), **rels))
    assert len(got) == 60 and not any(r["deferred"] for r in got)


def test_with_key_ip_a_held_host_waits_alone_and_an_address_holds_all_of_its_hosts(db, spark_cfg):
    # a.test and b.test share 10.0.0.1, c.test is on 10.0.0.2. a.test's own Retry-After (its
    # hosts row) holds a.test only; the cool-down of 10.0.0.2 (its address row) holds c.test.
    hosts = ["a.test", "b.test", "c.test"]
    rows = [
        (k, h, 0, None, T0)
        for h in hosts
        for k in range(hosts.index(h) * 10, hosts.index(h) * 10 + 2)
    ]
    frontier = frontier_of(db, rows)
    addresses = rel(
        db,
        DNS_ROWS,
        [
            {"host": h, "address": a}
            for h, a in [("a.test", "10.0.0.1"), ("b.test", "10.0.0.1"), ("c.test", "10.0.0.2")]
        ],
    )
    later = dt.datetime.now(dt.UTC).replace(tzinfo=None) + dt.timedelta(hours=1)
    stored = rel(
        db,
        HOSTS,
        db.collect(
            hosts_rows(
                db,
                [("a.test", later, "retry_after", None), ("10.0.0.1", None, None, None)],
                kind="host",
            )
        )
        + db.collect(hosts_rows(db, [("10.0.0.2", later, "down", None)], kind="address")),
    )
    cfg = replace(spark_cfg, politeness__key="ip")
    held = db.sql(held_slots(cfg), hosts=stored)
    crawldb = crawldb_rows(db, [])
    inputs = PlanInputs(held=True, addresses=True)
    decided = db.collect(
        decide(
            db, cfg, 0, inputs, frontier=frontier, crawldb=crawldb, held=held, addresses=addresses
        )
    )
    assert len(decided) == 6
    planned = {(r["host"], r["slot"]) for r in decided if not r["deferred"]}
    assert planned == {("b.test", "10.0.0.1")}
    assert {r["host"] for r in decided if r["held"]} == {"a.test", "c.test"}
    # with key = host, the address row holds nothing: its hosts are slots of their own
    by_host = db.collect(
        decide(
            db, spark_cfg, 0, PlanInputs(held=True), frontier=frontier, crawldb=crawldb, held=held
        )
    )
    assert len(by_host) == 6 and {r["host"] for r in by_host if r["held"]} == {"a.test"}
    # what each waits for: its host's hold, else its address's
    slotted = db.sql(
        with_slot(cfg, "{df}", "{addresses}"),
        df=db.sql("SELECT host, domain FROM {f}", f=frontier),
        addresses=addresses,
    )
    waits = run(
        db,
        with_hold(("hold", "until"), True),
        df=slotted,
        held=db.sql(holds(cfg), hosts=stored),
    )
    assert keyed(waits, "host", "hold") == {
        ("a.test", "retry_after"),
        ("b.test", None),
        ("c.test", "down"),
    }


def test_a_time_budget_with_key_ip_caps_each_host_then_its_address(db, spark_cfg):
    # 20 s of fetching. On 10.0.0.1: fast.test at the default delay (1 s: 21 URLs) and
    # crawl.test with a Crawl-delay of 10 s in its row (3 URLs); the address row's delay is
    # 0.5 s (41 URLs for the address: all 24 fit). On 10.0.0.2, slow.test and slow2.test at
    # 1 s each, but their address adapted to a slow server: 10 s, 3 URLs for both together
    # (in generate.order: slow.test's keys are the smaller).
    hosts = {"fast.test": "10.0.0.1", "crawl.test": "10.0.0.1"}
    hosts |= {"slow.test": "10.0.0.2", "slow2.test": "10.0.0.2"}
    rows = [(i * 100 + k, h, 1, None, T0) for i, h in enumerate(hosts) for k in range(30)]
    frontier = frontier_of(db, rows)
    addresses = rel(db, DNS_ROWS, [{"host": h, "address": a} for h, a in hosts.items()])
    delays = rel(
        db,
        DELAYS,
        [
            {"slot": s, "delay": d}
            for s, d in [("crawl.test", 10.0), ("10.0.0.1", 0.5), ("10.0.0.2", 10.0)]
        ],
    )
    cfg = replace(
        spark_cfg,
        politeness__key="ip",
        generate__max_per_host=100,
        generate__fetch_seconds=20.0,
        politeness__default_delay=1.0,
    )
    inputs = PlanInputs(addresses=True, delays=True)
    decided = db.collect(
        decide(
            db,
            cfg,
            0,
            inputs,
            frontier=frontier,
            crawldb=crawldb_rows(db, []),
            addresses=addresses,
            delays=delays,
        )
    )
    assert len(decided) == 120
    chosen = collections.Counter(r["host"] for r in decided if not r["deferred"])
    assert chosen == {"fast.test": 21, "crawl.test": 3, "slow.test": 3}
