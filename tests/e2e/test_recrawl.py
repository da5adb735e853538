"""Revisits end to end: a changing host of the test web crawled at a fixed clock, then again a
day later. Its pages change on known schedules (crawllib.testweb.changes), so every count,
interval and stored version is checked against the ground truth."""

from __future__ import annotations

import contextlib
import datetime as dt

import pytest

from crawllib import config as config_mod
from crawllib.runs import runner
from crawllib.store import lease
from crawllib.store.embedded import EmbeddedDb
from crawllib.testweb import WebSpec, changes, serve_in_thread
from tests.e2e import reading

pytestmark = pytest.mark.e2e

T0 = changes.ORIGIN + 20 * changes.DAY + 1800  # the first visit
T1 = T0 + 25 * changes.HOUR  # everything fetched at T0 is due again (one day)
HOST = "live0.com"


def iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def at(t: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(t, dt.UTC).replace(tzinfo=None)


@pytest.fixture(scope="module")
def recrawl(spark_cfg, tmp_path_factory):
    spec = WebSpec(hosts=0, changing_hosts=1, changing_pages=9, changing_sitemap=True)
    root = str(tmp_path_factory.mktemp("recrawl") / "crawl")
    seeds = tmp_path_factory.mktemp("seeds") / "seeds.txt"
    urls = changes.changing_urls(spec)
    seeds.write_text("\n".join(urls) + "\n")
    with serve_in_thread(spec) as web:
        base = config_mod.replace(
            spark_cfg,
            network__resolve=web.resolve,
            politeness__default_delay=0.05,
            storage__fetch_slices=1,
        )
        web.set_now(T0)
        with lease.hold(root, "pytest", base), contextlib.closing(EmbeddedDb(root, base)) as db:
            runner.run_crawl(db, config_mod.replace(base, crawl__now=iso(T0)), str(seeds), 1)
            web.set_now(T1)
            cfg = config_mod.replace(base, crawl__now=iso(T1))
            assert runner.plan.has_work(db, cfg, 1)
            runner.run_generation(db, cfg, 1)
        log = list(web.log)
    return {"root": root, "urls": urls, "log": log, "spec": spec}


DAY = 24 * 3600.0
RECRAWL = config_mod.RecrawlConfig()  # the defaults
HINTS = {"hourly": 3600.0, "daily": DAY, "weekly": 7 * DAY}  # the sitemap's changefreq


def first_interval(url: str) -> float:
    """The interval after the first visit: the default day, or the sitemap's changefreq
    (read in generation 0, after the pages: it replaces the default)."""
    return HINTS.get(changes.change_kind(url), DAY) if "/c/" in url else DAY


def due(urls: list[str]) -> list[str]:
    return [u for u in urls if T0 + first_interval(u) <= T1]


def counts(root, gen, stage):
    return reading.done_counts(root, gen, stage)


def test_a_revisit_judges_change_by_text_and_adapts_each_interval(recrawl):
    root, urls = recrawl["root"], recrawl["urls"]
    revisited = due(urls)
    weekly = [u for u in urls if changes.change_kind(u) == "weekly"]
    assert weekly and not set(weekly) & set(revisited)  # its changefreq put it off a week
    changed = {u for u in revisited if changes.text_version(u, T1) != changes.text_version(u, T0)}
    # a 304: validators honoured and the bytes unchanged
    same_bytes = {
        u for u in revisited if changes.page_version(u, T1) == changes.page_version(u, T0)
    }
    not_modified = {u for u in same_bytes if changes.validators(u) == "full"}
    assert changed and not_modified and set(revisited) - changed - not_modified  # every case
    update = counts(root, 1, "update")
    assert (update["revisited"], update["changed"], update["not_modified"]) == (
        len(revisited),
        len(changed),
        len(not_modified),
    )
    assert (update["unchanged"], update["new"]) == (len(revisited) - len(changed), 1)
    assert counts(root, 1, "plan")["revisits"] == len(revisited)

    crawldb = {r["url"]: r for r in reading.read(root, "crawldb")}
    for url in revisited:
        row = crawldb[url]
        rate = (1 - RECRAWL.dec_rate) if url in changed else (1 + RECRAWL.inc_rate)
        low, high = RECRAWL.min_interval_hours * 3600, RECRAWL.max_interval_hours * 3600
        interval = min(max(first_interval(url) * rate, low), high)
        assert (row["status"], row["fetched_at"], row["interval_source"]) == (
            "fetched",
            at(T1),
            "adaptive",
        ), url
        assert row["fetch_interval"] == pytest.approx(interval), url
        assert row["next_fetch_at"] == at(T1 + interval), url
        assert row["changed_at"] == at(T1 if url in changed else T0), url
        assert (row["visits_changed"], row["visits_unchanged"]) == (
            (1, 0) if url in changed else (0, 1)
        ), url
        if changes.validators(url) == "none":
            assert row["etag"] is None
        else:
            assert row["etag"] == changes.etag(url, T1), url
    for url in weekly:
        row = crawldb[url]
        assert (row["fetched_at"], row["interval_source"]) == (at(T0), "sitemap")
        assert row["next_fetch_at"] == at(T0 + 7 * DAY)


def test_a_304_sends_the_stored_validators_and_stores_no_new_version(recrawl):
    root, urls = recrawl["root"], due(recrawl["urls"])
    fetches = reading.read(root, "fetches", "gen = 1")
    outcomes = {r["url"]: r["outcome"] for r in fetches}
    answered_304 = {u for u, o in outcomes.items() if o == "not_modified"}
    pages = {r["url"] for r in reading.read(root, "pages", "gen = 1")}
    assert answered_304 and not answered_304 & pages
    assert pages == set(urls) - answered_304 | {f"http://{HOST}/archive.html"}
    # the server saw one 304 per not-modified page, in generation 1
    paths_304 = {f"http://{r.host}{r.path_qs}" for r in recrawl["log"] if r.status == 304}
    assert paths_304 == answered_304


def test_the_versions_views_give_the_latest_text_and_the_change_history(recrawl):
    root, urls = recrawl["root"], due(recrawl["urls"])
    changed = {u for u in urls if changes.text_version(u, T1) != changes.text_version(u, T0)}
    latest = reading.sql(root, "SELECT url, gen FROM latest_texts")
    by_url = {r["url"]: r["gen"] for r in latest}
    assert len(latest) == len(by_url)  # one row per URL
    versions = reading.sql(root, "SELECT url, gen, changed FROM text_history ORDER BY url, gen")
    history = {(r["url"], r["gen"]): r["changed"] for r in versions}
    for url in urls:
        if changes.validators(url) == "full" and url not in changed:
            assert by_url[url] == 0 and (url, 1) not in history  # a 304: no new version
        else:
            assert by_url[url] == 1
            assert history[(url, 1)] == (url in changed), url


def test_the_sitemap_lists_an_unlinked_page_and_its_lastmod_reaches_the_schedule(recrawl):
    root = recrawl["root"]
    sitemaps = reading.read(root, "sitemaps")
    assert [(r["url"], r["gen"], r["error_kind"]) for r in sitemaps] == [
        (f"http://{HOST}/sitemap.xml", 0, None)
    ]
    frontier = reading.read(root, "frontier", "reason = 'sitemap'")
    assert [(r["url"], r["gen"], r["depth"]) for r in frontier] == [
        (f"http://{HOST}/archive.html", 1, 1)
    ]
    fetched = {r["url"] for r in reading.read(root, "fetches", "gen = 1")}
    assert f"http://{HOST}/archive.html" in fetched


def test_status_estimates_freshness_by_the_crawls_clock(recrawl, capsys):
    from crawllib.cli import main
    from tests.conftest import test_config_overrides

    root = recrawl["root"]
    later = T1 + 2 * changes.HOUR
    crawldb = reading.read(root, "crawldb")
    stored = [r for r in crawldb if r["fetched_at"] is not None]
    due = [r for r in stored if r["next_fetch_at"] <= at(later)]
    assert due  # the hourly pages
    sets = [a for o in test_config_overrides() for a in ("--set", o)]
    capsys.readouterr()
    assert main(["status", root, "--now", iso(later), *sets]) == 0
    footer = capsys.readouterr().out.strip().splitlines()[-1]
    assert footer.startswith(
        f"pages with a stored version: {len(stored)}, due for a revisit: {len(due)}, "
    )
    freshness = float(footer.split("estimated freshness: ")[1].split("%")[0]) / 100
    assert 0.5 < freshness < 1.0
