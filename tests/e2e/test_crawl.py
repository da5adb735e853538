"""Whole crawls of the built-in test web on 127.0.0.1, checked from the server log and the tables.

One crawl (the session fixture e2e_crawl in conftest.py) of regular and special hosts over enough generations for redirect
chains and retries to finish; each test asserts one thing a user of the crawler would check.
"""

from __future__ import annotations

import collections
import json
from urllib.parse import urlsplit

import pytest

from crawllib.core.errors import StageOrderError
from crawllib.core.urls import normalize_url, url_key
from crawllib.core.vocab import STAGES
from crawllib.runs import runner
from crawllib.store import lease, tables
from crawllib.testweb import canonical_url, is_private_host, truth
from crawllib.testweb.audit import is_page_request
from crawllib.testweb.site import PRIVATE_LINKS
from tests.conftest import open_db
from tests.e2e import reading
from tests.e2e.conftest import DELAY, GENERATIONS, MAX_DEPTH

pytestmark = [pytest.mark.e2e, pytest.mark.smoke]  # the fast tier keeps this whole crawl

BOMB = "http://gzipbomb.org/bomb.html"


@pytest.fixture(scope="module")
def crawl(e2e_crawl):
    return e2e_crawl


def sql(root, query):
    """Spark SQL over the crawl's tables, read without a JVM whichever engine crawled."""
    return reading.sql(root, query)


def page_requests(log):
    """Canonical URL -> number of page requests (robots.txt and sitemaps excluded)."""
    counts = collections.Counter()
    for r in log:
        if is_page_request(r.path_qs):
            counts[canonical_url(f"http://{r.host}{r.path_qs}")] += 1
    return counts


def test_crawl_runs_until_nothing_is_left(crawl):
    # Same-host links are followed inside a generation, but each hop of redirects.com's 3-hop
    # chain is queued by update for the next one: /chain/start (gen 0, followed from the home
    # page), /chain/2, /chain/3, /chain/end.html need at least 4 generations. The crawl stops
    # once nothing is queued or due for a retry but the URLs of robots5xx.net, which wait
    # (no attempt spent) for its robots.txt to answer.
    assert crawl["ran"] == list(range(len(crawl["ran"])))
    assert 4 <= len(crawl["ran"]) <= GENERATIONS
    left = sql(
        crawl["root"],
        "SELECT host, status, attempts FROM crawldb WHERE status IN ('queued', 'failed')",
    )
    assert {(r["host"], r["status"], r["attempts"]) for r in left} == {
        ("robots5xx.net", "queued", 0)
    }, f"{len(left)} URLs left after {len(crawl['ran'])} generations"
    held = sql(crawl["root"], "SELECT * FROM hosts WHERE slot = 'robots5xx.net'")
    assert (held[0]["not_before_reason"], held[0]["robots_state"]) == ("robots", "unavailable")


def test_the_hosts_totals_count_what_crawldb_counts(crawl):
    # plan's budgets read hosts.urls_tried instead of aggregating crawldb: the two must agree
    # for every host, whatever failed, redirected, was followed or deferred
    tried = sql(
        crawl["root"],
        "SELECT host, count(*) AS n, first(domain) AS domain FROM crawldb "
        "WHERE last_gen IS NOT NULL GROUP BY host",
    )
    hosts = {r["slot"]: r for r in sql(crawl["root"], "SELECT * FROM hosts")}
    assert {r["host"]: r["n"] for r in tried} == {
        s: r["urls_tried"] for s, r in hosts.items() if r["urls_tried"]
    }
    assert all(hosts[r["host"]]["domain"] == r["domain"] for r in tried)


def test_each_generation_records_its_stage_runs_in_three_commits(crawl):
    # A stage's done row and the next stage's running row share a commit, named in its
    # userMetadata; the rows themselves say the same. A first plan records no running row
    # (its writes are safe to repeat without one).
    from deltalake import DeltaTable

    history = DeltaTable(tables.table_path(crawl["root"], "generations")).history()
    # every commit crawllib makes says so first (crawllib.store.tables.commit_note)
    notes = [r.get("userMetadata") for r in sorted(history, key=lambda r: r["version"])]
    assert all(n == "crawllib" or n.startswith("crawllib: ") for n in notes), notes
    notes = [n.removeprefix("crawllib: ") for n in notes]
    assert [n for n in notes if n.startswith("gen 0 ")] == [
        "gen 0 plan done, gen 0 fetch running",
        "gen 0 fetch done, gen 0 update running",
        "gen 0 update done",
    ]
    rows = reading.read(crawl["root"], "generations", "gen = 0")
    by_state = collections.Counter((r["stage"], r["state"]) for r in rows)
    expected = {(s, st): 1 for s in STAGES for st in ("running", "done")}
    assert by_state == {k: v for k, v in expected.items() if k != ("plan", "running")}
    done = {r["stage"]: r for r in rows if r["state"] == "done"}
    running = {r["stage"]: r for r in rows if r["state"] == "running"}
    for stage in STAGES:
        if stage in running:
            assert done[stage]["started_at"] == running[stage]["started_at"]
        assert done[stage]["seconds"] > 0
        # what the stage cost is recorded with its counts
        assert done[stage]["counts"]["delta_commits"] >= 1 and "spark_jobs" in done[stage]["counts"]
    for before, after in zip(STAGES, STAGES[1:], strict=False):
        assert running[after]["started_at"] == done[before]["finished_at"]


def test_every_expected_page_is_fetched_exactly_once(crawl):
    rows = sql(crawl["root"], "SELECT url FROM pages")
    fetched = [normalize_url(r["url"]) for r in rows]
    assert len(fetched) == len(set(fetched)), "a page stored twice"
    # The crawler refuses a decompression bomb (no body kept) where the truth counts a cut page.
    expected = {normalize_url(u) for u in crawl["expected"]} - {BOMB}
    assert set(fetched) == expected


def test_each_url_is_requested_once_per_recorded_attempt(crawl):
    """Retries (5xx, 429, dropped connections) are the only repeats, and each is an attempt."""
    attempts = {
        r["url"]: r["attempts"] for r in sql(crawl["root"], "SELECT url, attempts FROM crawldb")
    }
    requests = page_requests(crawl["log"])
    assert {u: n for u, n in requests.items() if n != attempts.get(u)} == {}
    assert requests["http://flaky.net/flaky.html"] == 3
    assert max(requests.values()) <= crawl["cfg"].fetch.max_attempts


def test_nothing_disallowed_or_private_is_requested(crawl):
    requested = set(page_requests(crawl["log"]))
    assert requested <= crawl["attempts"], requested - crawl["attempts"]
    assert not any(is_private_host(urlsplit(u).hostname or "") for u in requested)
    assert not any(urlsplit(u).hostname == "robots5xx.net" for u in requested)


def test_robots_denials_and_blocks_are_recorded(crawl):
    denied = {
        r["url"]
        for r in sql(crawl["root"], "SELECT url FROM crawldb WHERE status = 'robots_denied'")
    }
    assert "http://robotsallow.com/private/secret.html" in denied
    assert "http://robotspattern.org/index.php" in denied
    blocked = {
        urlsplit(r["url"]).hostname
        for r in sql(crawl["root"], "SELECT url FROM crawldb WHERE status = 'blocked'")
    }
    # every private, loopback, link-local and metadata link of the home pages
    assert {urlsplit(u).hostname for u in PRIVATE_LINKS} <= blocked


def test_politeness_per_host_across_the_whole_job(crawl):
    by_host = collections.defaultdict(list)
    for r in crawl["log"]:
        by_host[r.host].append(r)
    for host, records in by_host.items():
        records.sort(key=lambda r: r.start)
        for a, b in zip(records, records[1:], strict=False):
            assert b.start >= a.end - 1e-3, f"two requests in flight to {host}"
            assert b.start - a.start >= DELAY * 0.95, (
                f"{host}: gap {b.start - a.start:.3f}s < {DELAY}s"
            )


def test_crawl_delay_from_robots_wins(crawl):
    starts = sorted(r.start for r in crawl["log"] if r.host == "robotsdelay.org")
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert gaps and min(gaps) >= 2.0 * 0.95


def test_mirrors_and_near_duplicates_point_at_the_first_copy(crawl):
    rows = sql(
        crawl["root"],
        """
        SELECT t.url, t.duplicate_kind, f.url AS first_url
        FROM texts t JOIN texts f ON t.duplicate_of = f.url_key""",
    )
    kinds = collections.defaultdict(set)
    for r in rows:
        kinds[urlsplit(r["url"]).hostname].add(r["duplicate_kind"])
        assert r["url"] != r["first_url"]
    assert "near" in kinds["neardup.org"]
    # mirror.net serves site0.net's bytes: of each page fetched on both hosts, exactly one is
    # the first copy and the other its exact duplicate
    pairs = sql(
        crawl["root"],
        """
        SELECT m.url_key AS m_key, m.duplicate_of AS m_of, m.duplicate_kind AS m_kind,
               s.url_key AS s_key, s.duplicate_of AS s_of, s.duplicate_kind AS s_kind
        FROM texts m JOIN texts s
          ON m.host = 'mirror.net' AND s.host = 'site0.net'
         AND substr(m.url, length('http://mirror.net') + 1)
           = substr(s.url, length('http://site0.net') + 1)
        WHERE m.text_chars > 0""",
    )
    assert pairs
    for r in pairs:
        marks = {(r["m_of"], r["m_kind"]), (r["s_of"], r["s_kind"])}
        assert marks in (
            {(None, None), (r["s_key"], "exact")},
            {(None, None), (r["m_key"], "exact")},
        ), r


def test_every_copy_shares_the_cluster_of_its_first_copy(crawl):
    rows = sql(
        crawl["root"],
        """
        SELECT t.gen, t.url_key, t.cluster, t.duplicate_of, count(f.duplicate_of) AS copied
        FROM texts t LEFT JOIN texts f ON f.url_key = t.duplicate_of AND f.gen <= t.gen
        GROUP BY t.gen, t.url_key, t.cluster, t.duplicate_of""",
    )
    assert rows and all(r["cluster"] is not None for r in rows)
    assert any(r["duplicate_of"] is not None for r in rows)
    for r in rows:
        if r["duplicate_of"] is None:
            assert r["cluster"] == r["url_key"], r  # a first copy is its own cluster
        elif not r["copied"]:  # a copy of a page that never was a copy: that page
            assert r["cluster"] == r["duplicate_of"], r


def test_robots_directives_canonicals_and_tdm_opt_outs_are_recorded(crawl):
    # directives.org: the pages whose links the truth does not follow (nofollow) are never
    # requested (test_every_expected_page_is_fetched_exactly_once); here, what is recorded
    expected = truth.expect(crawl["web"].site, MAX_DEPTH)
    rows = {
        r["url"]: r
        for r in sql(
            crawl["root"],
            "SELECT t.url, t.text, t.title, t.text_chars, t.content_hash, t.directives, "
            "t.tdm_reserved, t.canonical_url, t.duplicate_of, t.duplicate_kind, c.status, "
            "c.reason FROM texts t JOIN crawldb c ON t.url_key = c.url_key "
            "WHERE t.host = 'directives.org'",
        )
    }
    on_host = {
        u: d for u, d in expected.directives.items() if urlsplit(u).hostname == "directives.org"
    }
    noindex = {u for u, d in on_host.items() if d.noindex}
    assert noindex == {u for u, r in rows.items() if r["status"] == "noindex"}
    assert len(noindex) == 3
    for url in noindex:  # no text kept, but the fingerprint that tells a change
        r = rows[url]
        assert (r["text"], r["title"], r["text_chars"]) == (None, None, 0)
        assert r["content_hash"] and "noindex" in r["directives"]
    # a TDMRep reservation, or noai (the crawler counts it as one)
    reserved = {u for u, d in on_host.items() if d.tdm_reserved or "noai" in d.rules}
    assert reserved == {u for u, r in rows.items() if r["tdm_reserved"]}
    assert {"noai", "noimageai"} <= set(rows["http://directives.org/noai.html"]["directives"])
    canonicals = {u: d.canonical for u, d in on_host.items() if d.canonical}
    assert len(canonicals) == 2
    for url, target in canonicals.items():
        r = rows[url]
        assert r["canonical_url"] == target
        assert (r["duplicate_kind"], r["duplicate_of"]) == ("canonical", url_key(target))
        assert (r["status"], r["reason"]) == ("duplicate", "canonical")
        assert rows[target]["duplicate_of"] is None  # the canonical itself is the document
    # a directive for another agent changes nothing
    other = rows["http://directives.org/other-agent.html"]
    assert (other["status"], other["directives"]) == ("fetched", [])


def test_soft_404s_are_told_by_a_probe_and_gone(crawl):
    root = crawl["root"]
    probes = {r["host"]: r for r in sql(root, "SELECT * FROM probes")}
    # one probe per host whose robots.txt was read (the hosts with a usable robots.txt)
    assert set(probes) <= set(crawl["web"].hosts)
    assert probes["notfound.org"]["http_status"] == 200
    assert probes["notfound.org"]["simhash"] is not None
    assert probes["site0.net"]["http_status"] == 404
    assert all(p["url"].startswith(f"http://{h}/crawllib-probe-") for h, p in probes.items())
    soft = sql(
        root,
        "SELECT c.url, c.status, c.reason, t.duplicate_kind FROM crawldb c JOIN texts t "
        "ON c.url_key = t.url_key WHERE t.duplicate_kind = 'soft_404'",
    )
    assert [(r["url"], r["status"], r["reason"]) for r in soft] == [
        ("http://notfound.org/soft404.html", "gone", "soft_404")
    ]


def test_traps_are_stopped_by_depth(crawl):
    rows = sql(
        crawl["root"],
        "SELECT host, max(depth) AS d, count(*) AS n FROM fetches GROUP BY host",
    )
    for r in rows:
        assert r["d"] <= MAX_DEPTH
    trap = {r["host"]: r["n"] for r in rows}
    assert trap.get("trapcalendar.com", 0) <= 2 ** (MAX_DEPTH + 1)
    filtered = sql(
        crawl["root"],
        "SELECT count(*) AS n FROM crawldb WHERE status = 'filtered' AND reason = 'depth'",
    )
    assert filtered[0]["n"] > 0


def test_flaky_is_retried_and_permanent_failures_are_dead(crawl):
    state = {
        r["url"]: (r["status"], r["attempts"])
        for r in sql(crawl["root"], "SELECT url, status, attempts FROM crawldb")
    }
    assert state["http://flaky.net/flaky.html"] == ("fetched", 3)
    assert state["http://err500.com/broken.html"] == ("dead", 3)
    assert state["http://notfound.org/missing.html"][0] == "gone"


def test_big_body_and_gzip_bomb_are_cut(crawl):
    rows = sql(
        crawl["root"],
        "SELECT url, body_bytes, is_truncated, outcome, error_kind FROM fetches WHERE host IN ('bigbody.net', 'gzipbomb.org') AND url LIKE '%.html'",
    )
    assert rows
    for r in rows:
        assert r["body_bytes"] <= 1_000_000 + 65536


def test_stage_reruns_change_nothing(request, crawl):
    root, cfg = crawl["root"], crawl["cfg"]
    names = ("fetches", "pages", "texts", "links", "crawldb", "frontier", "fetchlist")

    def snapshot(names):
        return {
            n: sorted(
                repr(
                    sorted((k, v) for k, v in r.items() if k not in ("updated_at", "discovered_at"))
                )
                for r in reading.read(root, n)
            )
            for n in names
        }

    with lease.hold(root, "pytest", cfg):
        db = open_db(request, crawl["engine"], root, cfg)  # the engine that crawled
        try:
            before = snapshot(names)
            assert all(before[n] for n in names)
            for stage in STAGES:
                assert runner.run_stage(db, cfg, 1, stage) is None  # done: skipped
            assert snapshot(names) == before
            # Forced reruns replace their own output with the same rows (fetch skips committed
            # slices; the frontier of generation 2, already planned, is kept as it is).
            requests = len(crawl["web"].log)
            for stage in ("fetch", "update"):
                assert runner.run_stage(db, cfg, 1, stage, force=True) is not None
            kept = ("fetches", "pages", "texts", "links", "crawldb", "frontier", "fetchlist")
            assert snapshot(kept) == {n: before[n] for n in kept}
            # a plan rerun after its fetch started is refused: the fetchlist is what was fetched
            with pytest.raises(StageOrderError, match="its fetch has started"):
                runner.run_stage(db, cfg, 1, "plan", force=True)
            assert len(crawl["web"].log) == requests
            assert runner.run_crawl(db, cfg, None, GENERATIONS) == []
        finally:
            db.close()


def test_status_and_run_on_a_finished_crawl_from_the_cli(crawl, capsys):
    from crawllib.cli import main
    from tests.conftest import test_config_overrides

    sets = [a for o in test_config_overrides() for a in ("--set", o)]
    capsys.readouterr()
    assert main(["status", crawl["root"], *sets]) == 0
    out = capsys.readouterr().out
    assert "| gen | stage" in out and "items/s" in out
    assert out.count("| done ") >= 3 * len(crawl["ran"])  # plan, fetch, update
    assert main(["status", crawl["root"], "--format", "json", *sets]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {(r["gen"], r["stage"], r["state"]) for r in rows} >= {(0, "plan", "done")}
    # the crawl ended before GENERATIONS: no generation runs while nothing is due, and the
    # one line says what waits (the pages' revisits, a robots.txt that failed) and until when
    for more in (["--generations", str(GENERATIONS)], []):
        assert main(["run", crawl["root"], "--engine", crawl["engine"], *more, *sets]) == 0
        out = capsys.readouterr().out
        assert out.startswith("nothing due now: ") and "ran generation" not in out, out
        assert "wait for their revisit" in out and "`crawl run --wait` waits for it" in out
