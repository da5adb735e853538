"""The fetch engine against the built-in test web's special hosts (one crawl, many checks)."""

from __future__ import annotations

import pytest
from test_fetch_support import SLACK, config, crawl, gaps, starts

from crawllib.testweb import WebSpec, serve_in_thread
from crawllib.testweb.payloads import gzip_bomb
from crawllib.testweb.site import PRIVATE_LINKS
from crawllib.testweb.special import HIDDEN, HOSTS

MAX_BODY = 1_000_000


def special_urls() -> list[str]:
    return [
        f"http://{host}{path}"
        for host, paths in HOSTS.items()
        for path in paths
        if path not in HIDDEN and path != "/robots.txt"
    ] + ["http://robots5xx.net/"]


@pytest.fixture(scope="module")
def crawled():
    spec = WebSpec(hosts=2, slow_seconds=1.5)
    gzip_bomb(spec.bomb_bytes)  # built once per process: not inside the 1 s fetch timeout
    with serve_in_thread(spec) as web:
        urls = special_urls() + list(PRIVATE_LINKS) + [f"http://127.0.0.1:{web.port}/"]
        cfg = config(
            web.resolve,
            politeness__default_delay=0.05,
            politeness__max_crawl_delay=0.5,
            fetch__total_timeout=1.0,
            fetch__max_body_bytes=MAX_BODY,
            fetch__max_decompressed_bytes=2_000_000,
        )
        fetches, robots = crawl(urls, cfg)
        yield fetches, {r["host"]: r for r in robots}, web.log, cfg
    assert len(fetches) == len(urls)


def outcome(fetches, url):
    r = fetches[url]
    return r["outcome"], r["http_status"], r["error_kind"]


def paths_requested(log, host):
    return [r.path_qs for r in sorted(log, key=lambda r: r.start) if r.host == host]


def test_every_request_identifies_the_crawler(crawled):
    _, _, log, cfg = crawled
    assert {r.user_agent for r in log} == {cfg.fetch.user_agent}


def test_robots_404_allows_all(crawled):
    fetches, robots, _, _ = crawled
    assert robots["robots404.net"]["http_status"] == 404
    assert outcome(fetches, "http://robots404.net/private/b.html") == ("ok", 200, None)


def test_robots_allow_overrides_disallow(crawled):
    fetches, _, _, _ = crawled
    assert fetches["http://robotsallow.com/private/secret.html"]["outcome"] == "robots_denied"
    assert fetches["http://robotsallow.com/private/open/info.html"]["outcome"] == "ok"


def test_robots_5xx_defers_all_without_requests(crawled):
    fetches, robots, log, _ = crawled
    for url in ("http://robots5xx.net/", "http://robots5xx.net/a.html"):
        assert outcome(fetches, url) == ("deferred", None, "robots_unavailable")
    record = robots["robots5xx.net"]
    assert record["http_status"] == 503
    assert record["expires_at"] - record["fetched_at"] == pytest.approx(60)  # retry_seconds
    assert paths_requested(log, "robots5xx.net") == ["/robots.txt"]


def test_robots_redirect_is_followed(crawled):
    fetches, robots, log, _ = crawled
    assert paths_requested(log, "robotsredirect.com")[:2] == ["/robots.txt", "/rules/robots.txt"]
    assert robots["robotsredirect.com"]["http_status"] == 200
    assert fetches["http://robotsredirect.com/open.html"]["outcome"] == "ok"
    assert fetches["http://robotsredirect.com/blocked/x.html"]["outcome"] == "robots_denied"


def test_robots_patterns_star_and_dollar(crawled):
    fetches, _, _, _ = crawled
    got = {p: fetches[f"http://robotspattern.org{p}"]["outcome"] for p in HOSTS["robotspattern.org"]
           if p != "/robots.txt"}  # fmt: skip
    assert got == {
        "/index.php": "robots_denied",
        "/index.php.html": "ok",
        "/blog/drafts/1.html": "robots_denied",
        "/drafts/1.html": "ok",
        "/blog/post.html": "ok",
    }


def test_robots_agent_group_wins_over_star(crawled):
    fetches, _, _, _ = crawled
    assert fetches["http://robotsagent.net/members/1.html"]["outcome"] == "ok"
    assert fetches["http://robotsagent.net/nocrawllib/1.html"]["outcome"] == "robots_denied"


def test_robots_beyond_500_kib_is_ignored(crawled):
    fetches, robots, _, cfg = crawled
    assert fetches["http://robotsbig.org/early/1.html"]["outcome"] == "robots_denied"
    assert fetches["http://robotsbig.org/late/1.html"]["outcome"] == "ok"
    assert len(robots["robotsbig.org"]["body"].encode()) <= cfg.robots.max_bytes


def test_a_crawl_delay_above_the_maximum_defers_the_host(crawled):
    fetches, robots, log, _ = crawled
    assert robots["robotsdelay.org"]["crawl_delay"] == 2  # above max_crawl_delay (0.5)
    assert [r.path_qs for r in log if r.host == "robotsdelay.org"] == ["/robots.txt"]
    pages = [r for url, r in fetches.items() if "robotsdelay.org" in url]
    assert pages and {(r["outcome"], r["error_kind"]) for r in pages} == {
        ("deferred", "crawl_delay_too_long")
    }


def test_http_errors(crawled):
    fetches, _, _, _ = crawled
    assert outcome(fetches, "http://err500.com/broken.html") == ("http_error", 500, None)
    assert outcome(fetches, "http://flaky.net/flaky.html") == ("http_error", 503, None)
    assert outcome(fetches, "http://notfound.org/missing.html") == ("http_error", 404, None)
    assert fetches["http://notfound.org/missing.html"]["body"] is None
    assert outcome(fetches, "http://notfound.org/soft404.html") == ("ok", 200, None)


def test_rate_limit_retry_after_delays_the_host(crawled):
    fetches, robots, log, _ = crawled
    for path in ("/limited.html", "/always429.html"):
        r = fetches[f"http://ratelimit.com{path}"]
        assert (r["outcome"], r["http_status"], r["retry_after"]) == ("http_error", 429, 1.0)
    hits = sorted((r for r in log if r.host == "ratelimit.com"), key=lambda r: r.start)
    assert [h.path_qs for h in hits] == ["/robots.txt", "/limited.html", "/always429.html"]
    assert hits[2].start - hits[1].start >= 1.0 - SLACK
    assert gaps(starts(fetches, list(robots.values()), "ratelimit.com"))[-1] >= 1.0 - 0.001


def test_slow_responses_time_out(crawled):
    fetches, _, _, cfg = crawled
    took = []
    for path in ("/slow.html", "/trickle.html"):
        r = fetches[f"http://slow.net{path}"]
        assert (r["outcome"], r["error_kind"], r["body"]) == ("error", "timeout", None)
        assert r["fetch_ms"] >= 900 * cfg.fetch.total_timeout  # waited for the timeout
        took.append(r["fetch_ms"])
    # A silent server and a trickling one are cut alike, at the one timeout
    assert max(took) < 1.5 * min(took)


def test_dropped_connections(crawled):
    fetches, _, _, _ = crawled
    for path in ("/drop.html", "/drop-early.html"):
        assert outcome(fetches, f"http://dropped.org{path}")[::2] == ("error", "disconnected")


def test_redirect_is_recorded_not_followed(crawled):
    fetches, _, log, _ = crawled
    r = fetches["http://redirects.com/chain/start"]
    assert (r["outcome"], r["http_status"]) == ("redirect", 301)
    assert r["redirect_to"] == "http://redirects.com/chain/2"
    assert fetches["http://redirects.com/loop/a"]["redirect_to"] == "http://redirects.com/loop/b"
    assert "/chain/2" not in paths_requested(log, "redirects.com")


def test_big_body_is_truncated(crawled):
    fetches, _, _, _ = crawled
    r = fetches["http://bigbody.net/big.html"]
    assert (r["outcome"], r["is_truncated"], r["body_bytes"]) == ("ok", True, MAX_BODY)
    assert len(r["body"]) == MAX_BODY
    assert r["headers"]["content-length"] == str(40 * 1024 * 1024)


def test_gzip_bomb_is_refused(crawled):
    fetches, _, _, _ = crawled
    r = fetches["http://gzipbomb.org/bomb.html"]
    assert (r["outcome"], r["error_kind"], r["body"]) == ("error", "decompressed_too_large", None)
    assert r["is_truncated"] and r["body_bytes"] < MAX_BODY


def test_non_html_is_ok_without_body(crawled):
    fetches, _, _, _ = crawled
    types = {}
    for path in ("/img/logo", "/files/report.pdf", "/api/data.json"):
        r = fetches[f"http://filetypes.com{path}"]
        assert (r["outcome"], r["body"], r["body_bytes"]) == ("ok", None, 0)
        types[path] = (r["content_type"], r["mime_detected"])  # said, and shown by its bytes
    assert types == {
        "/img/logo": ("image/png", "image/png"),
        "/files/report.pdf": ("application/pdf", "application/pdf"),
        "/api/data.json": ("application/json", "application/json"),
    }
    page = fetches["http://charsets.net/latin1.html"]
    assert page["mime_detected"] == "text/html"
    assert page["private_domain"] == page["domain"] == "charsets.net"


def test_charsets_are_reported_not_transcoded(crawled):
    fetches, _, _, _ = crawled
    latin = fetches["http://charsets.net/latin1.html"]
    assert (latin["outcome"], latin["charset"]) == ("ok", "utf-8")  # the label, even if wrong
    assert b"\xe9" in latin["body"]  # the Latin-1 bytes are kept as sent
    assert fetches["http://charsets.net/nocharset.html"]["charset"] is None


def test_private_addresses_are_never_contacted(crawled):
    fetches, _, log, _ = crawled
    kinds = {url: fetches[url]["error_kind"] for url in PRIVATE_LINKS}
    assert kinds == {
        "http://10.0.0.1/": "private_address",
        "http://192.168.1.1/admin": "private_address",
        "http://169.254.169.254/latest/meta-data/": "metadata_address",
        "http://127.0.0.1/x": "loopback_address",
        "http://[::1]/": "loopback_address",
        "http://localhost/": "loopback_address",
    }
    loopback = [u for u in fetches if u.startswith("http://127.0.0.1:")]
    assert [fetches[u]["error_kind"] for u in loopback] == ["loopback_address"]
    assert all(fetches[u]["outcome"] == "blocked" for u in [*PRIVATE_LINKS, *loopback])
    assert not {r.host for r in log} - set(HOSTS)  # only the named test hosts were reached
