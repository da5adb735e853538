"""Scrapy, set up like our crawler, crawls the test web correctly and politely."""

from __future__ import annotations

import json
from collections import defaultdict
from urllib.parse import urlsplit

import pytest

from benchmarks.scrapy_crawl import run_scrapy
from crawllib.testweb import WebSpec, serve_in_thread
from crawllib.testweb.truth import canonical_url, expect

pytest.importorskip("scrapy")

DELAY = 0.2
# Scrapy spaces requests to a host when it releases them from the host's slot; each reaches the
# wire after what its one thread is busy with then (callbacks: links, trafilatura; connecting),
# so the starts the test web sees can be closer than DELAY; REACTOR_LAG allows for it.
REACTOR_LAG = 0.1


@pytest.mark.e2e
def test_scrapy_fetches_every_expected_page_politely(tmp_path):
    with serve_in_thread(WebSpec(hosts=4, pages_per_host=20, special=False)) as web:
        figures = run_scrapy(web.port, web.seeds(), web.hosts, 2, DELAY, str(tmp_path))
        log = web.log
        truth = expect(web.site, max_depth=2, agent="scrapy-bench")
    assert truth.fetches == web.expected_fetches(max_depth=2)
    pages = [json.loads(line) for line in (tmp_path / "pages.jsonl").read_text().splitlines()]
    # expected_fetches holds canonical URLs (no utm_*, :80 or fragment, sorted query); Scrapy
    # keeps utm_* and :80, so it fetches some pages under two or three URLs.
    depths = defaultdict(list)
    for page in pages:
        depths[canonical_url(page["url"])].append(page["depth"])
    assert set(depths) == truth.fetches
    assert {url: min(d) for url, d in depths.items()} == {u: truth.depth[u] for u in depths}
    assert all(page["status"] == 200 and page["text_len"] > 0 for page in pages)
    assert figures["pages"] == len(pages) and figures["depth_max"] == 2
    # Scrapy asks robots.txt once per host and once more per host:80 it meets.
    assert len(web.hosts) <= figures["robots_requests"] <= 2 * len(web.hosts)
    assert figures["requests"] == len(pages) + figures["robots_requests"] == len(log)
    assert figures["statuses"] == {200: len(log)}

    # Through the proxy the test web logs the absolute-form target: http://host/path?query.
    targets = [urlsplit(record.path_qs) for record in log]
    assert {t.hostname for t in targets} <= set(web.hosts)
    assert {record.host for record in log} == set(web.hosts)
    assert not [t for t in targets if t.path.startswith("/cgi-bin/")]
    assert {record.user_agent for record in log} == {"scrapy-bench"}
    by_host = defaultdict(list)
    for record in log:
        by_host[record.host].append(record)
    for records in by_host.values():
        records.sort(key=lambda r: r.start)
        pairs = list(zip(records, records[1:], strict=False))
        assert all(b.start >= a.end for a, b in pairs)  # one request at a time
        assert all(b.start - a.start >= DELAY - REACTOR_LAG for a, b in pairs)
        assert records[-1].start - records[0].start >= len(pairs) * DELAY - REACTOR_LAG
