"""The crawl audit judges a request log against the test web's rules: pages missed, requests
robots.txt forbids, requests to one host too close together or overlapping."""

from __future__ import annotations

from crawllib.testweb import WebSpec
from crawllib.testweb.audit import audit, is_page_request, read_log, write_log
from crawllib.testweb.site import Site
from crawllib.testweb.truth import canonical_url, expected_fetches
from crawllib.testweb.web import LogRecord

SPEC = WebSpec(hosts=1, pages_per_host=4, fanout=3, special=False)
AGENT = "crawllib/0.1"


def request(start: float, path: str, status: int = 200, agent: str = AGENT) -> LogRecord:
    return LogRecord(start, start + 0.01, "site0.net", path, status, agent)


def polite_crawl() -> list[LogRecord]:
    """robots.txt, home and pages 0..3 of site0.net, one second apart: what a correct crawl of
    depth 1 sends (home links to /p/0.html../p/3.html with fanout 3)."""
    paths = ["/robots.txt", "/", *(f"/p/{n}.html" for n in range(4))]
    return [request(float(t), p) for t, p in enumerate(paths)]


def test_a_correct_crawl_fetches_everything_and_breaks_nothing():
    found = audit(Site(SPEC), polite_crawl(), "crawllib/", max_depth=1, delay=1.0)
    assert (found.expected, found.fetched, found.missing) == (5, 5, 0)
    assert (found.requests, found.twice, found.robots_violations) == (6, 0, 0)
    assert found.politeness_violations == 0


def test_missed_pages_forbidden_paths_short_gaps_and_overlaps_are_counted():
    log = polite_crawl()[:-1]  # /p/3.html never requested
    log += [
        request(4.5, "/cgi-bin/search?q=news"),  # robots.txt disallows /cgi-bin/; 0.5 s gap
        LogRecord(4.9, 5.5, "site0.net", "/p/0.html", 200, AGENT),  # twice, 0.4 s gap
        request(5.2, "/p/1.html"),  # twice, 0.3 s gap, while the previous one was in flight
        request(9.0, "/p/3.html", agent="other-bot"),  # not ours: ignored
    ]
    log += [request(7.0, "http://site0.net/p/2.html")]  # as to a proxy: twice, in time
    # a retry after a 503 is not a refetch: once, in time
    log += [request(8.0, "/flaky.html", status=503), request(9.5, "/flaky.html")]
    found = audit(Site(SPEC), log, "crawllib/", max_depth=1, delay=1.0)
    assert (found.fetched, found.missing) == (4, 1)
    assert (found.twice, found.robots_violations) == (3, 1)
    assert (found.overlaps, found.short_gaps) == (1, 3)
    assert found.politeness_violations == 4


def test_fanout_sets_the_site_tree():
    site = Site(SPEC)
    home = {
        canonical_url(href, "http://site0.net/") for href in site.route("site0.net", "/", "").links
    }
    assert {f"http://site0.net/p/{n}.html" for n in range(4)} <= home
    deep = Site(WebSpec(hosts=1, pages_per_host=95, fanout=5, special=False))
    pages = {u.split("?")[0] for u in expected_fetches(deep, max_depth=3)}  # query variants too
    assert pages == {"http://site0.net/", *(f"http://site0.net/p/{n}.html" for n in range(95))}


def test_a_log_survives_a_round_trip_through_a_file(tmp_path):
    path = str(tmp_path / "log.jsonl")
    write_log(path, polite_crawl())
    assert read_log(path) == polite_crawl()


def test_a_soft404_probe_is_a_request_but_no_page():
    probe = "/crawllib-probe-0123456789abcdef.html"
    assert not is_page_request(probe) and not is_page_request(f"http://site0.net{probe}")
    assert not is_page_request("/robots.txt") and not is_page_request("/sitemap.xml")
    assert is_page_request("/p/0.html") and is_page_request("/crawllib-probe-x.html")
    log = [*polite_crawl(), request(6.0, probe)]  # 200: a soft 404, yet no page fetched
    found = audit(Site(SPEC), log, "crawllib/", max_depth=1, delay=1.0)
    assert (found.expected, found.fetched, found.missing) == (5, 5, 0)
    assert (found.requests, found.robots_violations) == (7, 0)
    # and it is held to the host's politeness like any request
    early = audit(
        Site(SPEC), [*polite_crawl(), request(5.5, probe)], "crawllib/", max_depth=1, delay=1.0
    )
    assert early.short_gaps == 1
