"""The test web's changing hosts: page versions as of a settable clock, validators and 304,
boilerplate-only changes, and the ground truth of crawllib.testweb.changes.

Requests go to 127.0.0.1 only, with the virtual host in the Host header.
"""

from __future__ import annotations

import asyncio
import http.client
import itertools
import math
import signal
import statistics
import subprocess
import sys
import time

import aiohttp
import pytest
import tldextract

from crawllib.config import Config
from crawllib.content.extract import extract_record
from crawllib.testweb import Site, TestWeb, WebSpec, changes, serve_in_thread
from crawllib.testweb.live import http_date, not_modified
from crawllib.testweb.truth import expect
from crawllib.testweb.web import CONTROL_NOW

SPEC = WebSpec(hosts=1, special=False, changing_hosts=2, changing_pages=24)
T = 1_790_000_000.0  # 2026-09-21, a Monday
HOUR, DAY, WEEK = changes.HOUR, changes.DAY, changes.WEEK
CFG = Config()


@pytest.fixture(scope="module")
def web():
    with serve_in_thread(SPEC) as tw:
        yield tw


@pytest.fixture
def clock(web):
    yield web
    web.set_now(None)


def get(web, host, path, headers=None):
    """(status, headers, body) of one request to the test web."""
    conn = http.client.HTTPConnection("127.0.0.1", web.port, timeout=10)
    try:
        conn.request("GET", path, headers={"Host": host, **(headers or {})})
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    finally:
        conn.close()


def served(web, url, t, headers=None):
    """(status, headers, body) of ``url`` with the web's clock at t."""
    web.set_now(t)
    host, _, path = url[len("http://") :].partition("/")
    return get(web, host, "/" + path, headers)


def body_at(web, url, t):
    status, _, body = served(web, url, t)
    assert status == 200, (url, t)
    return body


def extracted(url, body):
    """(content_hash, text) of the page's main text, as the crawler extracts it."""
    record = extract_record(body, url, "utf-8", CFG)
    assert record["error"] is None and record["text_chars"] > 500, url
    return record["content_hash"], record["text"]


def text_hash(url, body):
    return extracted(url, body)[0]


def page(n, host="live0.com"):
    return f"http://{host}/" if n < 0 else f"http://{host}/c/{n}.html"


def next_change(url, t):
    """The first whole second after t (a whole second) at which the text version changes."""
    version = changes.text_version(url, t)
    lo, step = t, 1
    while changes.text_version(url, lo + step) == version:
        lo, step = lo + step, 2 * step
    hi = lo + step
    while hi - lo > 1:  # version at lo, another at hi
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if changes.text_version(url, mid) == version else (lo, mid)
    return hi


# -- the clock ----------------------------------------------------------------------------------


def test_set_now_chooses_the_version_served_and_none_is_real_time(clock):
    url = page(0)  # hourly
    start = changes.version_start(url, T)
    clock.set_now(start + 10)
    assert clock.now() == start + 10
    first = get(clock, "live0.com", "/c/0.html")[2]
    assert body_at(clock, url, start + HOUR - 1) == first
    assert body_at(clock, url, start + HOUR) != first
    assert body_at(clock, url, start) == first  # back in time: the old version again
    clock.set_now(None)
    before, now, after = time.time(), clock.now(), time.time()
    assert before <= now <= after
    assert get(clock, "live0.com", "/c/0.html")[2] != first  # the real time is not T


def test_control_request_sets_and_resets_the_clock_and_is_not_logged(clock):
    clock.reset_log()
    status, _, body = get(clock, "anything.example", f"{CONTROL_NOW}?t={T + 0.5}")
    assert (status, body) == (204, b"")
    assert clock.now() == T + 0.5
    _, headers, _ = get(clock, "live0.com", "/")
    assert headers["ETag"] == changes.etag(page(-1), T)
    assert get(clock, "site0.net", f"{CONTROL_NOW}?t=")[0] == 204
    before, now, after = time.time(), clock.now(), time.time()
    assert before <= now <= after
    for bad in ("", "?t=abc", "?t=nan", "?t=inf"):
        assert get(clock, "live0.com", CONTROL_NOW + bad)[0] == 400, bad
    before, now, after = time.time(), clock.now(), time.time()
    assert before <= now <= after  # a bad request changes nothing
    assert [(r.host, r.path_qs) for r in clock.log] == [("live0.com", "/")]


def test_control_path_is_never_linked():
    site = Site(WebSpec(hosts=3, changing_hosts=1, changing_pages=8))
    urls = expect(site, max_depth=4).attempts
    assert len(urls) > 50 and set(changes.changing_urls(site.spec)) <= urls
    assert not [u for u in urls if "__testweb" in u]


def test_command_line_serves_changing_hosts_as_of_now_and_obeys_the_control_url():
    cmd = [sys.executable, "-m", "crawllib.testweb", "--hosts", "1", "--no-special", "--port"]
    cmd += ["0", "--changing-hosts", "1", "--changing-pages", "4", "--now", str(T)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline().split("127.0.0.1:")[1].split(":")[0])

        def request(host, path):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", path, headers={"Host": host})
            resp = conn.getresponse()
            resp.read()
            conn.close()
            return resp.status, resp.headers

        assert request("live0.com", "/")[1]["ETag"] == changes.etag(page(-1), T)
        assert request("live0.com", "/c/4.html")[0] == 404  # --changing-pages 4
        assert request("live0.com", f"{CONTROL_NOW}?t={T + HOUR}")[0] == 204
        assert request("live0.com", "/")[1]["ETag"] == changes.etag(page(-1), T + HOUR)
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0


def test_async_web_clock_and_conditional_get():
    url = page(3)  # never, full validators

    async def scenario():
        async with TestWeb(SPEC) as tw, aiohttp.ClientSession() as session:
            tw.set_now(T)
            target = f"{tw.base_url}/c/3.html"
            async with session.get(target, headers={"Host": "live0.com"}) as resp:
                tag, first = resp.headers["ETag"], (resp.status, await resp.read())
            headers = {"Host": "live0.com", "If-None-Match": tag}
            async with session.get(target, headers=headers) as resp:
                second = (resp.status, await resp.read())
            return tag, first, second

    tag, (status, body), again = asyncio.run(scenario())
    assert status == 200 and body == Site(SPEC).route("live0.com", "/c/3.html", now=T).render()
    assert tag == changes.etag(url, T)
    assert again == (304, b"")


# -- schedules as served ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "kind", "period"),
    [(-1, "hourly", HOUR), (0, "hourly", HOUR), (1, "daily", DAY), (2, "weekly", WEEK)]
    + [(5, "boilerplate", HOUR)],
)
def test_periodic_pages_change_once_per_period_at_their_phase(clock, n, kind, period):
    url = page(n)
    assert changes.change_kind(url) == kind
    start = changes.page_version_start(url, T)
    assert T - period < start <= T and start % 1 == 0
    if n < 0:
        assert start % HOUR == 0  # the front page changes on the hour
    bodies = [body_at(clock, url, t) for t in (start - 1, start, start + period - 1)]
    assert bodies[0] != bodies[1] == bodies[2] != body_at(clock, url, start + period)
    assert changes.page_version(url, start + period) == changes.page_version(url, start) + 1


def test_phases_differ_between_pages_and_hosts():
    starts = {
        changes.version_start(page(n, host), T) % DAY
        for host in ("live0.com", "live1.com")
        for n in (1, 9, 17)
    }
    assert len(starts) == 6


def test_never_pages_serve_the_same_bytes_for_ever(clock):
    url = page(3)
    assert changes.change_kind(url) == changes.change_kind(page(7)) == "never"
    bodies = {body_at(clock, url, t) for t in (T - 30 * DAY, T, T + 90 * DAY)}
    assert len(bodies) == 1
    assert changes.expected_changes(url, T - 300 * DAY, T + 300 * DAY) == 0


def test_random_pages_change_at_their_event_times(clock):
    for n, mean in ((4, 6 * HOUR), (6, 2 * DAY)):
        url = page(n)
        assert changes.change_kind(url) == "random" and changes.mean_interval(url) == mean
        start, nxt = changes.version_start(url, T), next_change(url, T)
        assert start <= T < nxt and changes.version_start(url, nxt) == nxt
        bodies = [body_at(clock, url, t) for t in (start - 1, start, nxt - 1, nxt)]
        assert bodies[0] != bodies[1] == bodies[2] != bodies[3]


def test_random_pages_are_poisson_with_their_mean():
    for n, mean in ((4, 6 * HOUR), (6, 2 * DAY)):
        gaps = []
        for i in range(100):
            url = page(n, changes.changing_host_name(i))
            t = T + 10 * WEEK
            for _ in range(10):
                start = changes.version_start(url, t)
                gaps.append(start - changes.version_start(url, start - 1))
                t = start - 1
        assert 0.9 < statistics.mean(gaps) / mean < 1.1, n
        assert 0.85 < statistics.stdev(gaps) / statistics.mean(gaps) < 1.15, n  # exponential


def test_expected_changes_over_two_weeks():
    t1 = T + 2 * WEEK
    want = {0: 14 * 24, 1: 14, 2: 2, 3: 0, 5: 0, 7: 0}
    for n, count in want.items():
        assert changes.expected_changes(page(n), T, t1) == count, n
    assert changes.expected_changes(page(-1), T, t1) == 14 * 24
    for n in (4, 6):
        url = page(n)
        count = changes.expected_changes(url, T, t1)
        assert count == changes.text_version(url, t1) - changes.text_version(url, T) > 0
        assert changes.expected_changes(url, t1, T) == 0


def test_truth_agrees_with_the_server_version_by_version(clock):
    """Over two days, every page of a host serves one body per page version, changes at each
    version start the truth names, and sends the validators of that version."""
    t0, t1 = T, T + 2 * DAY
    for url in changes.changing_urls(SPEC)[: SPEC.changing_pages + 1]:
        end, changes_seen = t1, 0
        last = body_at(clock, url, end)
        while True:
            start = max(changes.page_version_start(url, end), t0)
            _, headers, first = served(clock, url, start)
            assert first == last, (url, start, end)
            if changes.validators(url) == "none":
                assert "ETag" not in headers and "Last-Modified" not in headers
            else:
                assert headers["ETag"] == changes.etag(url, start)
                assert headers["Last-Modified"] == http_date(changes.page_version_start(url, start))
            if start <= t0:
                break
            last = body_at(clock, url, start - 1)
            assert last != first, (url, start)
            changes_seen += 1
            end = start - 1
        if changes.change_kind(url) != "boilerplate":
            assert changes_seen == changes.expected_changes(url, t0, t1), url


# -- validators ---------------------------------------------------------------------------------


def test_full_validators_answer_304_to_either_validator(clock):
    url = page(0)  # hourly, full
    assert changes.validators(url) == "full"
    status, headers, body = served(clock, url, T)
    tag, modified = headers["ETag"], headers["Last-Modified"]
    assert status == 200 and body and tag.startswith('"') and tag.endswith('"')
    assert modified == http_date(changes.version_start(url, T))
    for ask in (
        {"If-None-Match": tag},
        {"If-None-Match": f'"x", W/{tag}'},
        {"If-None-Match": "*"},
        {"If-Modified-Since": modified},
        {"If-Modified-Since": http_date(T + DAY)},
    ):
        status, headers, body = served(clock, url, T, ask)
        assert (status, body) == (304, b""), ask
        assert (headers["ETag"], headers["Last-Modified"]) == (tag, modified)
    for ask in (
        {"If-None-Match": '"other"'},
        {"If-None-Match": '"other"', "If-Modified-Since": modified},  # the ETag decides
        {"If-Modified-Since": http_date(changes.version_start(url, T) - 1)},
        {"If-Modified-Since": "yesterday"},
    ):
        assert served(clock, url, T, ask)[0] == 200, ask
    later = T + HOUR
    status, headers, body = served(clock, url, later, {"If-None-Match": tag})
    assert status == 200 and body and headers["ETag"] == changes.etag(url, later) != tag
    assert served(clock, url, later, {"If-Modified-Since": modified})[0] == 200


def test_ignore_and_none_validators_always_answer_200(clock):
    for n, mode in ((1, "ignore"), (2, "none"), (4, "ignore"), (5, "none")):
        url = page(n)
        assert changes.validators(url) == mode
        _, headers, full = served(clock, url, T)
        assert ("ETag" in headers, "Last-Modified" in headers) == (mode == "ignore",) * 2
        ask = {"If-None-Match": headers.get("ETag", "*"), "If-Modified-Since": http_date(T)}
        status, _, body = served(clock, url, T, ask)
        assert (status, body) == (200, full), url
        assert served(clock, url, T, {"If-Modified-Since": http_date(T)})[0] == 200


def test_validator_and_kind_mix_on_every_host():
    for host in ("live0.com", "live1.com"):
        pairs = {
            (changes.change_kind(page(n, host)), changes.validators(page(n, host)))
            for n in range(24)
        }
        assert pairs == set(itertools.product(changes.KINDS, changes.VALIDATORS))
        assert changes.schedule(page(-1, host)).kind == "hourly"
        assert changes.validators(page(-1, host)) == "full"
    for url in ("http://site0.net/", "http://live0.com/p/1.html", "http://live0.org/"):
        with pytest.raises(ValueError):
            changes.change_kind(url)


def test_not_modified_reads_http_dates_in_utc():
    own = (("ETag", '"a"'), ("Last-Modified", "Wed, 02 Dec 2026 06:00:00 GMT"))
    assert not_modified(own, {"If-Modified-Since": "Wed, 02 Dec 2026 06:00:00 -0000"})
    assert not not_modified(own, {"If-Modified-Since": "Wed, 02 Dec 2026 05:59:59 GMT"})
    assert not not_modified(own, {})
    assert not not_modified((), {"If-Modified-Since": "Wed, 02 Dec 2026 06:00:00 GMT"})


# -- main text and boilerplate -------------------------------------------------------------------


def test_boilerplate_pages_change_bytes_hourly_but_not_their_extracted_text(clock):
    for n in (5, 21):  # validators none and full
        url = page(n)
        assert changes.change_kind(url) == "boilerplate"
        times = [T + k * HOUR for k in range(3)] + [T + WEEK]
        bodies = [body_at(clock, url, t) for t in times]
        assert len(set(bodies)) == len(bodies)
        assert len({text_hash(url, b) for b in bodies}) == 1
        assert {changes.text_version(url, t) for t in times} == {0}
        assert len({changes.page_version(url, t) for t in times}) == len(times)
    assert served(clock, page(21), T + HOUR, {"If-None-Match": changes.etag(page(21), T)})[0] == 200


def test_text_changes_change_the_extracted_hash_and_only_they_do(clock):
    for n in (-1, 0, 1, 2, 4, 6):
        url = page(n)
        start, nxt = changes.version_start(url, T), next_change(url, T)
        within = [extracted(url, body_at(clock, url, t)) for t in (start, nxt - 1)]
        after = extracted(url, body_at(clock, url, nxt))
        assert within[0] == within[1] and within[1][0] != after[0], url
        old, new = (set(text.splitlines()) for _, text in (within[0], after))
        assert len(old & new) < len(old) / 2, url  # most paragraphs are new, not a date line
    never = page(3)
    assert len({text_hash(never, body_at(clock, never, t)) for t in (T, T + 9 * WEEK)}) == 1


# -- hosts and link graph -----------------------------------------------------------------------


def test_default_web_serves_no_changing_host():
    spec = WebSpec()
    assert spec.changing_hosts == 0 and changes.changing_urls(spec) == []
    site = Site(spec)
    assert not [h for h in site.hosts if h.startswith("live")]
    assert site.route("live0.com", "/").status == 404
    home = site.route("site0.net", "/")
    assert home.render() == site.route("site0.net", "/", now=0.0).render()
    with serve_in_thread(WebSpec(hosts=1, special=False)) as tw:
        tw.set_now(T)
        assert get(tw, "live0.com", "/")[0] == 404
        assert get(tw, "site0.net", "/")[2] == Site(tw.spec).route("site0.net", "/").render()


def test_changing_hosts_have_own_registered_domains_and_a_connected_graph():
    spec = WebSpec(hosts=30, changing_hosts=30, changing_pages=10)
    site = Site(spec)
    assert site.hosts[-30:] == [changes.changing_host_name(i) for i in range(30)]
    assert len(set(site.hosts)) == len(site.hosts)
    extract = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)  # bundled list, offline
    domains = [extract(h) for h in site.changing]
    assert all(d.suffix == "com" and d.subdomain == "" for d in domains)
    others = {extract(h).top_domain_under_public_suffix for h in site.regular + site.special}
    assert not others & {d.top_domain_under_public_suffix for d in domains}
    urls = changes.changing_urls(spec)
    assert len(urls) == 30 * 11 and urls[:2] == ["http://live0.com/", "http://live0.com/c/0.html"]
    found = expect(site, max_depth=2, seeds=["http://live3.com/"]).fetches
    assert found == {u for u in urls if u.startswith("http://live3.com/")}
    assert site.route("live3.com", "/robots.txt").render() == b"User-agent: *\nDisallow:\n"
    for n in range(10):
        links = site.route("live3.com", f"/c/{n}.html", now=T).links
        assert links[0] == "/" and len(links) == 3 and f"/c/{n}.html" not in links
        assert all(href.startswith("/c/") for href in links[1:])
    home = site.route("live3.com", "/", now=T).links
    assert home == ("/", *(f"/c/{n}.html" for n in range(10)))


def test_links_do_not_depend_on_the_clock():
    site = Site(SPEC)
    for url in changes.changing_urls(SPEC):
        host, _, path = url[len("http://") :].partition("/")
        links = {site.route(host, "/" + path, now=t).links for t in (T, T + 5 * HOUR, T + WEEK)}
        assert len(links) == 1, url


def test_version_start_is_the_last_change_at_or_before_t():
    for n in (-1, 0, 1, 2, 4, 5, 6):
        url = page(n)
        for k in range(50):
            t = T + k * 3217.5
            start = changes.page_version_start(url, t)
            assert start <= t and start == math.floor(start)
            assert changes.page_version(url, start) == changes.page_version(url, t)
            assert changes.page_version(url, start - 1) == changes.page_version(url, t) - 1
