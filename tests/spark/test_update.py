"""update: fetch outcomes -> crawldb statuses, the guarded MERGE, redirect frontier rows."""

from __future__ import annotations

import datetime as dt

from crawllib.config import replace
from crawllib.core.urls import url_key
from crawllib.stages import update
from crawllib.stages.base import StageRun
from crawllib.store.schemas import CRAWLDB, FETCHES, FRONTIER, SITEMAPS, TEXTS
from crawllib.transforms.sqltext import timestamp_of
from crawllib.transforms.update import (
    crawldb_updates,
    redirect_frontier,
)
from tests.rows import by, rel, run

GEN = 3
T0 = dt.datetime(2026, 1, 1, 12, 0, 0)
T1 = dt.datetime(2026, 1, 2, 12, 0, 0)
FETCHED_AT = dt.datetime(2026, 1, 2, 11, 0, 0)


def epoch(at: dt.datetime) -> float:
    """Epoch seconds of a naive UTC time."""
    return at.replace(tzinfo=dt.UTC).timestamp()


def full(schema, row):
    """``row`` with every column of ``schema`` (missing ones null), as collect gives it."""
    return {n: row.get(n) for n in schema.names}


def known(key, attempts=0, last_gen=None, http_status=None, content_hash=None, depth=1):
    """A crawldb row as plan leaves it: queued for GEN."""
    return {
        "url_key": key,
        "url": f"http://site.test/{key}",
        "host": "site.test",
        "domain": "site.test",
        "status": "queued",
        "reason": "link",
        "attempts": attempts,
        "depth": depth,
        "first_gen": 0,
        "last_gen": last_gen,
        "next_gen": GEN,
        "http_status": http_status,
        "content_hash": content_hash,
        "updated_at": T0,
    }


def fetch(key, outcome, http_status=None, error_kind=None, depth=1, **extra):
    return {
        "gen": GEN,
        "slice": 0,
        "url_key": key,
        "url": f"http://site.test/{key}",
        "host": "site.test",
        "depth": depth,
        "outcome": outcome,
        "fetched_at": FETCHED_AT,
        "http_status": http_status,
        "error_kind": error_kind,
        **extra,
    }


def after(key, status, reason, attempts, last_gen=GEN, next_gen=None, http_status=None, **kw):
    row = known(key)
    row.update(
        status=status,
        reason=reason,
        attempts=attempts,
        last_gen=last_gen,
        next_gen=next_gen,
        http_status=http_status,
        updated_at=T1,
        visits_changed=0,
        visits_unchanged=0,
    )
    if status in ("fetched", "duplicate"):  # a first visit: the default interval (one day)
        row.update(
            fetched_at=FETCHED_AT,
            fetch_interval=DAY,
            next_fetch_at=FETCHED_AT + dt.timedelta(days=1),
            interval_source="default",
            changed_at=FETCHED_AT,
        )
    row.update(kw)
    return row


DAY = 86400.0
HOURS_10 = 36000.0
RETRY_1 = FETCHED_AT + dt.timedelta(seconds=120)
RETRY_2 = FETCHED_AT + dt.timedelta(seconds=240)
T_OLD = dt.datetime(2026, 1, 1, 0, 0, 0)


def stored(key, status="fetched", reason=None, content_hash="old", **kw):
    """A crawldb row of a page with a stored version, due again (a revisit)."""
    row = known(key, attempts=1, last_gen=1, http_status=200, content_hash=content_hash)
    row.update(
        status=status,
        reason=reason,
        next_gen=None,
        fetched_at=T_OLD,
        fetch_interval=HOURS_10,
        next_fetch_at=T_OLD + dt.timedelta(hours=10),
        interval_source="adaptive",
        etag='"e1"',
        last_modified="Thu, 01 Jan 2026 00:00:00 GMT",
        visits_changed=2,
        visits_unchanged=3,
        changed_at=T_OLD,
    )
    row.update(kw)
    return row


def revisited(before, interval, changed, **kw):
    """``before`` after a revisit that reached the page: the schedule moves on."""
    row = {
        **before,
        "attempts": 1,
        "last_gen": GEN,
        "updated_at": T1,
        "fetched_at": FETCHED_AT,
        "fetch_interval": interval,
        "next_fetch_at": FETCHED_AT + dt.timedelta(seconds=interval),
        "interval_source": "adaptive",
        "visits_changed": before["visits_changed"] + int(changed),
        "visits_unchanged": before["visits_unchanged"] + int(not changed),
        "changed_at": FETCHED_AT if changed else before["changed_at"],
    }
    row.update(kw)
    return row


# (crawldb row before, fetch row, crawldb row after) with retry_backoff_seconds 120,
# max_attempts 3
CASES = [
    (
        known(1),
        fetch(1, "ok", 200),
        after(1, "fetched", None, 1, http_status=200, content_hash="h1"),
    ),
    (
        known(2),
        fetch(2, "ok", 200),
        after(2, "duplicate", "exact", 1, http_status=200, content_hash="h1"),
    ),
    (known(3), fetch(3, "redirect", 301), after(3, "redirected", None, 1, http_status=301)),
    (known(4), fetch(4, "http_error", 404), after(4, "gone", "http_404", 1, http_status=404)),
    (known(5), fetch(5, "http_error", 403), after(5, "gone", "http_403", 1, http_status=403)),
    # backoff by time: not_before = the visit + base * 2 ** (attempts - 1), then the first
    # generation after it
    (
        known(6),
        fetch(6, "http_error", 429),
        after(6, "failed", "http_429", 1, next_gen=GEN + 1, not_before=RETRY_1, http_status=429),
    ),
    (
        known(7, attempts=1, last_gen=1),
        fetch(7, "http_error", 503),
        after(7, "failed", "http_503", 2, next_gen=GEN + 1, not_before=RETRY_2, http_status=503),
    ),
    (
        known(8, attempts=2, last_gen=2),
        fetch(8, "error", error_kind="timeout"),
        after(8, "dead", "timeout", 3),
    ),
    (known(9), fetch(9, "robots_denied"), after(9, "robots_denied", "robots_denied", 1)),
    (
        known(10),
        fetch(10, "robots_denied", error_kind="robots_unavailable"),
        after(10, "failed", "robots_unavailable", 1, next_gen=GEN + 1, not_before=RETRY_1),
    ),
    (
        known(11),
        fetch(11, "blocked", error_kind="private_address"),
        after(11, "blocked", "private_address", 1),
    ),
    # a decompression bomb is dead at once: another attempt would only repeat it
    (
        known(14),
        fetch(14, "error", 200, error_kind="decompressed_too_large"),
        after(14, "dead", "decompressed_too_large", 1, http_status=200),
    ),
    # deferred: queued for the next generation, attempts and last fetch kept
    (
        known(12, attempts=1, last_gen=1, http_status=503, content_hash="old"),
        fetch(12, "deferred", error_kind="deadline"),
        after(
            12,
            "queued",
            "deadline",
            1,
            last_gen=1,
            next_gen=GEN + 1,
            http_status=503,
            content_hash="old",
        ),
    ),
    # revisits (adaptive: a change shortens the interval by dec_rate 0.2, no change
    # lengthens it by inc_rate 0.4); attempts count from 0 again
    (
        stored(30),
        fetch(30, "ok", 200, etag='"e2"'),
        revisited(
            stored(30), HOURS_10 * 0.8, True, content_hash="h30", etag='"e2"', last_modified=None
        ),
    ),
    (
        stored(31, content_hash="h31"),
        fetch(31, "ok", 200),  # the server ignores validators: the same text decides
        revisited(
            stored(31, content_hash="h31"), HOURS_10 * 1.4, False, etag=None, last_modified=None
        ),
    ),
    # a 304 keeps the stored version: its status, reason, hash, HTTP status and validators
    (
        stored(32, status="duplicate", reason="exact"),
        fetch(32, "not_modified", 304),
        revisited(stored(32, status="duplicate", reason="exact"), HOURS_10 * 1.4, False),
    ),
    # a failed revisit is retried like any failure; the stored version and schedule stay
    (
        stored(33),
        fetch(33, "http_error", 503),
        {
            **stored(33),
            "status": "failed",
            "reason": "http_503",
            "attempts": 1,
            "last_gen": GEN,
            "next_gen": GEN + 1,
            "not_before": RETRY_1,
            "http_status": 503,
            "updated_at": T1,
        },
    ),
    # a deferred revisit keeps its status and waits for the next generation
    (
        stored(34),
        fetch(34, "deferred", error_kind="deadline"),
        {**stored(34), "reason": None, "next_gen": GEN + 1, "updated_at": T1},
    ),
    # not in crawldb (never expected, but handled): a fresh row
    (
        None,
        {**fetch(13, "ok", 200, depth=2), "url": "http://a.example.com/", "host": "a.example.com"},
        {
            **after(13, "fetched", None, 1, http_status=200, content_hash="h13", depth=2),
            "url": "http://a.example.com/",
            "host": "a.example.com",
            "domain": "example.com",
            "first_gen": GEN,
        },
    ),
]
TEXT_ROWS = [
    {"gen": GEN, "url_key": 1, "content_hash": "h1", "text_chars": 500},
    {"gen": GEN, "url_key": 2, "content_hash": "h1", "text_chars": 500},  # a copy of 1
    {"gen": GEN, "url_key": 13, "content_hash": "h13", "text_chars": 500},
    {"gen": GEN, "url_key": 30, "content_hash": "h30", "text_chars": 500},
    {"gen": GEN, "url_key": 31, "content_hash": "h31", "text_chars": 500},
]
# what update marks them as (crawldb_updates takes the marked rows)
MARKED_TEXT_ROWS = [
    {**r, "duplicate_of": 1, "duplicate_kind": "exact"} if r["url_key"] == 2 else r
    for r in TEXT_ROWS
]


def test_each_fetch_outcome_maps_to_its_crawldb_status(db, spark_cfg):
    cfg = replace(
        spark_cfg,
        fetch__max_attempts=3,
        fetch__retry_backoff_seconds=120.0,
        recrawl__dec_rate=0.2,  # Nutch's rates: the figures in CASES
        recrawl__inc_rate=0.4,
    )
    actual = by(
        run(
            db,
            crawldb_updates(cfg, GEN, updated_at=timestamp_of(epoch(T1))),
            fetches=rel(db, FETCHES, [f for _, f, _ in CASES]),
            texts=rel(db, TEXTS, MARKED_TEXT_ROWS),
            crawldb=rel(db, CRAWLDB, [before for before, _, _ in CASES if before]),
        )
    )
    expected = by(full(CRAWLDB, a) for _, _, a in CASES)
    assert sorted(actual) == sorted(expected)
    for key, row in expected.items():
        assert actual[key] == row, f"url_key {key}"


REDIRECTS = [
    fetch(20, "redirect", 301, depth=1, redirect_to="http://site.test/new"),
    fetch(21, "redirect", 302, depth=2, redirect_to="http://site.test/new"),
    fetch(22, "redirect", 301, redirect_to="http://site.test/1"),  # already known
    fetch(23, "redirect", 301, depth=2, redirect_to="HTTP://Other.Example.COM:80/x#top"),
    fetch(24, "redirect", 301, error_kind="bad_location"),  # no usable target
    fetch(25, "ok", 200),
]


def redirect_row(url, host, domain, depth, source_key):
    return {
        "gen": GEN + 1,
        "url": url,
        "url_key": url_key(url),
        "host": host,
        "domain": domain,
        "depth": depth,
        "source_url": f"http://site.test/{source_key}",
        "reason": "redirect",
        "discovered_at": FETCHED_AT,
        "redirects": 1,
    }


EXPECTED_REDIRECTS = [
    redirect_row("http://site.test/new", "site.test", "site.test", 1, 20),
    redirect_row("http://other.example.com/x", "other.example.com", "example.com", 2, 23),
]


def test_redirect_targets_not_in_crawldb_go_to_the_next_frontier(db):
    actual = run(
        db,
        redirect_frontier(GEN),
        fetches=rel(db, FETCHES, REDIRECTS),
        crawldb=rel(db, CRAWLDB, [known(url_key("http://site.test/1"))]),
    )
    assert by(actual) == by(full(FRONTIER, r) for r in EXPECTED_REDIRECTS)


# update's counts of the fetched URLs (the rest count the generation's pages)
UPDATE_COUNTS = (
    "urls",
    "fetched",
    "duplicate",
    "noindex",
    "redirected",
    "gone",
    "failed",
    "dead",
    "robots_denied",
    "blocked",
    "deferred",
    "redirects_queued",
    "new",
    "revisited",
    "changed",
    "unchanged",
    "not_modified",
    "too_many_redirects",
    "bad_location",
)


def crawldb_rows(db):
    return sorted(db.collect(db.table("crawldb")), key=lambda r: r["url_key"])


def next_frontier(db):
    return db.collect(db.table("frontier", f"gen = {GEN + 1}"))


def test_update_stage_merges_once_and_queues_redirects(db, spark_cfg):
    cfg = replace(
        spark_cfg,
        fetch__max_attempts=3,
        fetch__retry_backoff_seconds=120.0,
        recrawl__dec_rate=0.2,
        recrawl__inc_rate=0.4,
    )
    before = [b for b, _, _ in CASES if b] + [known(url_key("http://site.test/1"))]
    db.append(rel(db, CRAWLDB, before), "crawldb")
    db.append(rel(db, FETCHES, [f for _, f, _ in CASES] + REDIRECTS[:4]), "fetches")
    db.append(rel(db, TEXTS, TEXT_ROWS), "texts")

    counts = update.run(StageRun(db, cfg, GEN))
    statuses_counted = {k: v for k, v in counts.as_counts().items() if k in UPDATE_COUNTS}
    assert statuses_counted == {
        "urls": 23,
        "fetched": 5,  # a deferred revisit (34) stays fetched
        "duplicate": 2,
        "noindex": 0,
        "redirected": 5,
        "gone": 2,
        "failed": 4,
        "dead": 2,  # the timeout at max attempts and the decompression bomb
        "robots_denied": 1,
        "blocked": 1,
        "deferred": 1,
        "redirects_queued": 2,
        "new": 3,  # first visits: 1, 2, 13
        "revisited": 3,  # 30 changed; 31 (the same text) and 32 (a 304) unchanged
        "changed": 1,
        "unchanged": 2,
        "not_modified": 1,
        "too_many_redirects": 0,  # redirect chains ending: e2e test_limits.py
        "bad_location": 0,
    }
    statuses = {r["url_key"]: r["status"] for r in crawldb_rows(db)}
    assert statuses[7] == "failed" and statuses[12] == "queued" and statuses[13] == "fetched"
    assert sorted((r["url"], r["reason"], r["depth"]) for r in next_frontier(db)) == [
        ("http://other.example.com/x", "redirect", 2),
        ("http://site.test/new", "redirect", 1),
    ]

    first = crawldb_rows(db)
    version = db.version_of("crawldb")
    assert update.run(StageRun(db, cfg, GEN)) == counts
    assert crawldb_rows(db) == first
    # the rerun's MERGE changes no row: no engine commits a version for it
    assert db.version_of("crawldb") == version
    assert len(next_frontier(db)) == 2


def test_sitemap_hints_make_changed_pages_due_and_replace_a_default_interval(db, spark_cfg):
    week = 7 * DAY
    default = {"fetch_interval": DAY, "interval_source": "default"}
    default["next_fetch_at"] = T_OLD + dt.timedelta(days=1)
    before = [
        stored(40, **default),  # lastmod after the visit: due at once
        stored(41),  # adapted already: its changefreq is ignored, its lastmod is old
        stored(42, **default),  # changefreq weekly replaces the default day
        {**known(43), "status": "queued"},  # never fetched: no hint applies
    ]
    db.append(rel(db, CRAWLDB, before), "crawldb")
    changed_at = T_OLD + dt.timedelta(hours=3)

    def entry(key, lastmod=None, changefreq=None):
        return {
            "url": f"http://site.test/{key}",
            "url_key": key,
            "host": "site.test",
            "lastmod": epoch(lastmod) if lastmod else None,
            "changefreq": changefreq,
            "priority": None,
        }

    sitemap = {
        "gen": GEN,
        "slice": 0,
        "host": "site.test",
        "url": "http://site.test/sitemap.xml",
        "entries": [
            entry(40, lastmod=changed_at),
            entry(41, lastmod=T_OLD - dt.timedelta(days=1), changefreq="hourly"),
            entry(42, changefreq="weekly"),
            entry(43, lastmod=changed_at, changefreq="daily"),
        ],
    }
    sitemaps = rel(db, SITEMAPS, [sitemap])
    for _ in range(2):  # a rerun changes nothing
        update.merge_sitemap_hints(db, sitemaps, spark_cfg)
        rows = by(crawldb_rows(db))
        assert rows[40]["next_fetch_at"] == changed_at
        assert rows[40]["interval_source"] == "default"
        assert rows[41]["next_fetch_at"] == stored(41)["next_fetch_at"]
        assert (rows[41]["fetch_interval"], rows[41]["interval_source"]) == (HOURS_10, "adaptive")
        assert (rows[42]["fetch_interval"], rows[42]["interval_source"]) == (week, "sitemap")
        assert rows[42]["next_fetch_at"] == T_OLD + dt.timedelta(days=7)
        assert rows[43]["next_fetch_at"] is None and rows[43]["fetch_interval"] is None


def test_redirect_chains_end_past_max_redirects_and_bad_locations_say_why(db, spark_cfg):
    cfg = replace(spark_cfg, fetch__max_redirects=2)
    crawldb = rel(
        db, CRAWLDB, [{**known(1), "redirects": 1}, {**known(2), "redirects": 2}, known(3)]
    )
    fetches = rel(
        db,
        FETCHES,
        [
            fetch(1, "redirect", 301, redirect_to="http://site.test/t1"),  # hop 2 of 2
            fetch(2, "redirect", 301, redirect_to="http://site.test/t2"),  # would be hop 3
            fetch(3, "redirect", 302, error_kind="bad_location"),  # Location: ftp://...
        ],
    )
    queued = run(
        db, redirect_frontier(GEN, cfg.fetch.max_redirects), fetches=fetches, crawldb=crawldb
    )
    assert [(r["url"], r["redirects"]) for r in queued] == [("http://site.test/t1", 2)]
    rows = run(
        db,
        crawldb_updates(cfg, GEN),
        fetches=fetches,
        texts=rel(db, TEXTS, []),
        crawldb=crawldb,
    )
    assert {r["url_key"]: (r["status"], r["reason"]) for r in rows} == {
        1: ("redirected", None),
        2: ("redirected", "too_many_redirects"),
        3: ("redirected", "bad_location"),
    }


def test_a_fetched_urls_depth_is_the_shortest_way_found(db, spark_cfg):
    """A URL the fetch followed at depth 3 that crawldb knows at depth 1 stays at 1; one the
    task reached in fewer links than planned (depth 1, crawldb 3) drops to 1; a URL new to
    crawldb takes its fetch's depth."""
    rows = run(
        db,
        crawldb_updates(spark_cfg, GEN),
        fetches=rel(
            db,
            FETCHES,
            [
                fetch(40, "ok", 200, depth=3),
                fetch(41, "ok", 200, depth=1),
                fetch(42, "ok", 200, depth=2),
            ],
        ),
        texts=rel(db, TEXTS, [{"url_key": k, "content_hash": "h"} for k in (40, 41, 42)], gen=GEN),
        crawldb=rel(db, CRAWLDB, [known(40, depth=1), known(41, depth=3)]),
    )
    assert sorted((r["url_key"], r["depth"]) for r in rows) == [(40, 1), (41, 1), (42, 2)]


def test_a_redirect_to_a_known_url_offers_it_a_shorter_path(db):
    """Redirect targets crawldb holds deeper than the redirecting URL are offered its depth
    (plan lowers crawldb's); those held as shallow or shallower are not."""
    deep, close = "http://site.test/deep", "http://site.test/close"
    rows = run(
        db,
        redirect_frontier(GEN),
        fetches=rel(
            db,
            FETCHES,
            [
                fetch(50, "redirect", 301, depth=1, redirect_to=deep),
                fetch(51, "redirect", 301, depth=2, redirect_to=close),
            ],
        ),
        crawldb=rel(
            db,
            CRAWLDB,
            [
                {**known(url_key(deep), depth=4), "url": deep},
                {**known(url_key(close), depth=1), "url": close},
            ],
        ),
    )
    assert [(r["url"], r["depth"], r["source_url"]) for r in rows] == [
        (deep, 1, "http://site.test/50")
    ]
