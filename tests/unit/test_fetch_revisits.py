"""Revisits in the fetch engine: conditional GET against the test web's changing pages."""

from __future__ import annotations

from test_fetch_support import config, row

from crawllib.core.vocab import Outcome
from crawllib.engine import fetch_rows
from crawllib.engine.client import conditional_headers
from crawllib.testweb import WebSpec, changes, serve_in_thread

T = changes.ORIGIN + 10 * changes.DAY + 1800  # the test web's clock during the crawl
FULL, IGNORE, NONE = (f"http://live0.com/c/{n}.html" for n in (3, 7, 11))  # never changing


def crawl(rows: list[dict], cfg) -> dict[str, dict]:
    records = fetch_rows(rows, cfg)
    return {r["url"]: r for r in records if r["record"] == "fetch"}


def test_conditional_headers_carry_the_stored_validators_only_when_usable():
    assert conditional_headers('"v1"', "Tue, 01 Dec 2026 00:00:00 GMT") == {
        "If-None-Match": '"v1"',
        "If-Modified-Since": "Tue, 01 Dec 2026 00:00:00 GMT",
    }
    assert conditional_headers(None, "") == {}
    assert conditional_headers('"a"\r\nX-Evil: 1', None) == {}  # no header injection


def test_a_revisit_with_current_validators_is_not_modified_and_fetches_no_body():
    assert [changes.validators(u) for u in (FULL, IGNORE, NONE)] == ["full", "ignore", "none"]
    with serve_in_thread(WebSpec(hosts=0, changing_hosts=1)) as web:
        web.set_now(T)
        cfg = config(web.resolve, politeness__default_delay=0.01)
        first = crawl([row(u) for u in (FULL, IGNORE, NONE)], cfg)
        assert {u: r["outcome"] for u, r in first.items()} == dict.fromkeys(
            [FULL, IGNORE, NONE], Outcome.OK
        )
        tag = changes.etag(FULL, T)
        assert first[FULL]["etag"] == tag and first[FULL]["last_modified"]
        assert first[NONE]["etag"] is None and first[NONE]["last_modified"] is None

        def revisit(url: str) -> dict:
            r = first[url]
            return row(url, attempts=1, etag=r["etag"], last_modified=r["last_modified"])

        again = crawl([revisit(u) for u in first], cfg)
        full = again[FULL]
        assert (full["outcome"], full["http_status"], full["body"]) == (
            Outcome.NOT_MODIFIED,
            304,
            None,
        )
        assert full["extracted"] is None and full["etag"] == tag
        # a server that ignores validators answers in full; one without them is asked plainly
        assert again[IGNORE]["outcome"] == Outcome.OK and again[IGNORE]["body"]
        assert again[NONE]["outcome"] == Outcome.OK
        sent = [r for r in web.log if r.path_qs == "/c/3.html"]
        assert [r.status for r in sent] == [200, 304]

        # conditional GET off: the stored validators are not sent
        plain = config(web.resolve, politeness__default_delay=0.01, recrawl__conditional_get=False)
        off = crawl([revisit(FULL)], plain)
        assert off[FULL]["outcome"] == Outcome.OK
