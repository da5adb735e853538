"""fetch stage against the built-in test web: tables written, politeness kept, reruns and a
crash repaired without fetching a committed slice again; on both engines."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from crawllib.config import replace
from crawllib.content.quality import quality_signals
from crawllib.core.urls import host_of, registered_domain, surt, url_key
from crawllib.core.vocab import Stage, StageState
from crawllib.stages import fetch
from crawllib.stages.base import StageRun
from crawllib.store import generations
from crawllib.store.schemas import FETCHES, FETCHLIST, ROBOTS, struct_of
from crawllib.testweb import WebSpec, serve_in_thread
from crawllib.testweb.site import REGULAR_ROBOTS
from crawllib.transforms.plan import with_slice, with_slot
from tests.rows import by, rel

GEN = 0
DELAY = 0.2
PATHS = ["/", "/p/0.html", "/p/1.html", "/p/2.html", "/p/99.html"]  # /p/99.html: 404
DENIED = "/cgi-bin/search?q=news"  # disallowed by every regular host's robots.txt
WRITTEN = ("pages", "texts", "links", "fetches", "robots")
# fetchlist rows before plan gives them their slot and slice
UNSLOTTED = struct_of(*[(f.name, f.type) for f in FETCHLIST if f.name not in ("slot", "slice")])


@pytest.fixture(scope="module")
def web():
    with serve_in_thread(WebSpec(hosts=4, pages_per_host=4, special=False)) as web:
        yield web


@pytest.fixture
def crawl(db, spark_cfg, web):
    """The tables of a crawl root whose fetchlist gen 0 holds PATHS on every host (+ one
    denied URL); the config; the fetchlist's URLs by slice."""
    cfg = replace(
        spark_cfg,
        network__resolve=web.resolve,
        network__resolve_only=True,
        politeness__default_delay=DELAY,
        storage__fetch_slices=2,
        fetch__follow=False,  # the fetchlist alone: following has tests of its own
    )
    urls = [f"http://{host}{path}" for host in web.hosts for path in PATHS]
    urls.append(f"http://{web.hosts[0]}{DENIED}")
    rows = [
        {
            "gen": GEN,
            "url": url,
            "url_key": url_key(url),
            "host": host_of(url),
            "domain": registered_domain(host_of(url)),
        }
        for url in urls
    ]
    slotted = db.sql(with_slot(cfg), df=rel(db, UNSLOTTED, rows, depth=0, attempts=0))
    db.replace_where(db.sql(with_slice(2), df=slotted), "fetchlist", f"gen = {GEN}")
    by_slice = defaultdict(set)
    hosts_by_slice = defaultdict(set)
    for r in db.collect(db.table("fetchlist")):
        by_slice[r["slice"]].add(r["url"])
        hosts_by_slice[r["slice"]].add(r["host"])
    # each host is dealt over both slices: its requests span a commit
    assert hosts_by_slice[0] == hosts_by_slice[1] == set(web.hosts)
    return db, cfg, by_slice


def requests(web):
    return Counter(f"http://{r.host}{r.path_qs}" for r in web.log)


def table_versions(db):
    return {name: db.version_of(name) for name in WRITTEN}


def read(db, name):
    return db.collect(db.table(name))


def forget_fetches(db, where):
    """The fetches rows matching ``where`` gone, as if their slices' commits never happened."""
    db.replace_where(rel(db, FETCHES, []), "fetches", where)


@pytest.mark.slow  # a two-slice fetch, its rerun and a crash repair
def test_fetch_writes_tables_politely_and_reruns_fetch_nothing_twice(web, crawl):
    db, cfg, by_slice = crawl
    hosts = web.hosts
    web.reset_log()
    counts = fetch.run(StageRun(db, cfg, GEN)).as_counts()
    pages_expected = len(hosts) * (len(PATHS) - 1)
    # slice 0 holds robots.txt and 3 pages of every host, DELAY apart: 0.6 s at least
    assert counts["seconds_fetching"] >= 1
    assert {k: v for k, v in counts.items() if k != "seconds_fetching"} == {
        "urls": len(hosts) * len(PATHS) + 1,
        "slices": 2,
        "slices_skipped": 0,
        "ok": pages_expected,
        "redirect": 0,
        "http_error": len(hosts),
        "robots_denied": 1,
        "blocked": 0,
        "error": 0,
        "deferred": 0,
        "not_modified": 0,
        "pages": pages_expected,
        "extracted": pages_expected,  # in the fetch task
        "followed": 0,
        "followed_planned_hosts": 0,
        "followed_new_hosts": 0,
        "robots_fetched": len(hosts),
        "refetched_after_retry": 0,  # no task attempt was lost
    }
    # the tasks' journals (crawllib.store.journal) go once their slice is committed
    assert not list(Path(db.root).glob("_fetch_journal/gen=*/slice=*"))

    # every URL requested once (the denied one never), robots.txt and (as robots.txt lists
    # no sitemap) /sitemap.xml once per host, after its pages of the first slice
    log = web.log
    expected = {f"http://{h}{p}": 1 for h in hosts for p in PATHS}
    expected.update({f"http://{h}/robots.txt": 1 for h in hosts})
    expected.update({f"http://{h}/sitemap.xml": 1 for h in hosts})
    assert requests(web) == expected
    sitemaps = read(db, "sitemaps")
    assert sorted((r["host"], r["gen"], r["http_status"], r["error_kind"]) for r in sitemaps) == [
        (h, GEN, 404, "http_404") for h in sorted(hosts)
    ]
    for host in hosts:
        hits = sorted((r for r in log if r.host == host), key=lambda r: r.start)
        for before, after in zip(hits, hits[1:], strict=False):
            assert after.start >= before.end, f"two requests in flight to {host}"
            # (the server logs a request when its handler starts, which the driver's threads
            # can delay by tens of ms: the slack of tests/unit/test_fetch_support.SLACK)
            assert after.start - before.start >= DELAY - 0.05, f"{host} fetched too fast"

    pages = read(db, "pages")
    assert len(pages) == pages_expected
    for page in pages:
        assert page["content_hash"] == hashlib.sha256(page["body"]).hexdigest()
        assert page["gen"] == GEN and page["http_status"] == 200
        assert page["url"] in by_slice[page["slice"]]
    # every page extracted by the fetch task, its texts row (not yet marked) and links rows in
    # the page's slice
    texts = by(read(db, "texts"), "url")
    assert {u: r["slice"] for u, r in texts.items()} == {p["url"]: p["slice"] for p in pages}
    assert all(r["text_chars"] > 0 and r["duplicate_of"] is None for r in texts.values())
    assert all(r["quality"] == quality_signals(r["text"]) for r in texts.values())
    assert all(r["quality"]["gopher_words"] > 0 for r in texts.values())
    assert all(r["non_document"] is None for r in texts.values())  # articles, every one
    links = read(db, "links")
    assert {r["src_url"] for r in links} == set(texts)
    assert all(r["slice"] == texts[r["src_url"]]["slice"] for r in links)
    fetches = by(read(db, "fetches"), "url")
    assert len(fetches) == len(hosts) * len(PATHS) + 1
    assert fetches[f"http://{hosts[1]}/p/99.html"]["outcome"] == "http_error"
    assert fetches[f"http://{hosts[1]}/p/99.html"]["http_status"] == 404
    assert fetches[f"http://{hosts[0]}{DENIED}"]["outcome"] == "robots_denied"
    assert all(r["fetched_at"] is not None for r in fetches.values())
    # what analysts look a URL up by in Common Crawl's index: registered domain and SURT key,
    # on every fetches row (failures too), pages and texts; and the text's detected language
    missing = fetches[f"http://{hosts[1]}/p/99.html"]
    assert missing["domain"] == registered_domain(hosts[1])
    assert missing["surt"] == ",".join(reversed(hosts[1].split("."))) + ")/p/99.html"
    assert fetches[f"http://{hosts[0]}{DENIED}"]["surt"] == surt(f"http://{hosts[0]}{DENIED}")
    for row in [*pages, *texts.values(), *fetches.values()]:
        assert (row["domain"], row["surt"]) == (registered_domain(row["host"]), surt(row["url"]))
    assert {r["language_detected"] for r in texts.values()} == {"en"}
    robots = by(read(db, "robots"), "host")
    assert set(robots) == set(hosts)
    assert all(r["body"] == REGULAR_ROBOTS and r["http_status"] == 200 for r in robots.values())
    assert all(r["expires_at"] > r["fetched_at"] for r in robots.values())

    # rerun: every slice is committed, nothing is requested or written
    web.reset_log()
    versions = table_versions(db)
    again = fetch.run(StageRun(db, cfg, GEN)).as_counts()
    assert web.log == []
    assert table_versions(db) == versions
    assert again == {
        **counts,
        "slices_skipped": 2,
        "robots_fetched": 0,
        "seconds_fetching": 0,
    }

    # a crash after the pages of slice 1 but before its fetches: only slice 1 is fetched again,
    # with the robots.txt already stored
    crashed = 1
    forget_fetches(db, f"gen = {GEN} AND slice = {crashed}")
    web.reset_log()
    repaired = fetch.run(StageRun(db, cfg, GEN)).as_counts()
    refetched = {url for url in by_slice[crashed] if not url.endswith(DENIED)}
    assert requests(web) == {url: 1 for url in refetched}
    assert repaired == {
        **counts,
        "slices_skipped": 1,
        "robots_fetched": 0,
        "seconds_fetching": repaired["seconds_fetching"],
    }
    assert db.count(db.table("fetches")) == len(fetches)
    assert db.count(db.table("pages")) == pages_expected
    # the crashed slice's texts and links rows were replaced, not added to
    assert db.count(db.table("texts")) == pages_expected
    assert db.count(db.table("links")) == len(links)


@pytest.mark.slow
def test_robots_of_new_hosts_are_appended_and_an_expired_row_is_refreshed_by_merge(web, crawl):
    db, cfg, _ = crawl

    def last_operation():
        version = db.version_of("robots")
        return db.commits("robots", version - 1)[version][0]

    fetch.run(StageRun(db, cfg, GEN))
    assert last_operation() == "WRITE"  # an append: no host had a row
    before = by(read(db, "robots"), "host")
    assert set(before) == set(web.hosts)

    # One host's row expires; the generation is fetched again (its fetches forgotten).
    stale = web.hosts[2]
    expired = {**before[stale], "expires_at": dt.datetime(2000, 1, 1)}
    db.merge(
        rel(db, ROBOTS, [expired]), "robots", keys=["host"], update={"expires_at": "s.expires_at"}
    )
    assert by(read(db, "robots"), "host")[stale]["expires_at"] == dt.datetime(2000, 1, 1)
    forget_fetches(db, f"gen = {GEN}")
    web.reset_log()
    again = fetch.run(StageRun(db, cfg, GEN))

    assert again.robots_fetched == 1
    assert [url for url in requests(web) if url.endswith("/robots.txt")] == [
        f"http://{stale}/robots.txt"
    ]
    assert last_operation() == "MERGE"
    after = by(read(db, "robots"), "host")  # one row per host
    assert set(after) == set(web.hosts)
    assert after[stale]["fetched_at"] > before[stale]["fetched_at"]
    assert after[stale]["expires_at"] > after[stale]["fetched_at"]
    assert after[stale]["body"] == REGULAR_ROBOTS
    assert {h: r["fetched_at"] for h, r in after.items() if h != stale} == {
        h: r["fetched_at"] for h, r in before.items() if h != stale
    }


def test_the_deadline_counts_from_the_generations_first_fetch_over_every_slice(web, crawl):
    # an earlier run started the fetch of GEN two hours ago and crashed: a rerun has what
    # is left of fetch.deadline_seconds (an hour: nothing), so every URL waits, and no
    # request is made, robots.txt included (a robots.txt fetched then let a URL through)
    db, cfg, by_slice = crawl
    began = dt.datetime.now(dt.UTC).replace(tzinfo=None) - dt.timedelta(hours=2)
    generations.record(db, GEN, Stage.FETCH, StageState.RUNNING, began)
    before = len(web.log)
    result = fetch.run(StageRun(db, replace(cfg, fetch__deadline_seconds=3600.0), GEN))
    assert web.log[before:] == []
    assert result.robots_fetched == 0
    assert result.deferred == sum(len(urls) for urls in by_slice.values())
    kinds = {r["error_kind"] for r in read(db, "fetches")}
    assert kinds == {"deadline"}
