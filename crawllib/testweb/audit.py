"""A crawl of the test web judged from the server's request log: which pages the rules allow
were fetched, and whether any request broke robots.txt or politeness.

The crawler's own tables are not consulted: the log is what the servers saw. Used by the
benchmarks to check both crawlers (ours and Scrapy) of one run with the same rules.
"""

from __future__ import annotations

import collections
import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from crawllib.core.vocab import is_probe_path
from crawllib.testweb.site import Site
from crawllib.testweb.truth import RobotsRules, canonical_url, expected_fetches, robots_rules
from crawllib.testweb.web import LogRecord

GAP_TOLERANCE = 0.95  # a gap below delay × this is a violation (timer and clock granularity)


@dataclass(frozen=True)
class Audit:
    """expected: pages a correct crawl fetches (HTML 200); fetched: those of them the log shows
        answered 200; missing = expected - fetched; requests: every request of the agent, robots.txt,
        sitemaps and soft-404 probes included; twice: URLs requested again after an answer that was
    not a failure (a retry after a 5xx, a 429 or no answer is the crawler's duty, not a refetch);
        robots_violations: requests of pages and probes that robots.txt disallows; overlaps: a
        request to a host while another to it was in flight; short_gaps: consecutive request starts
        to one host less than delay apart (× GAP_TOLERANCE)."""

    expected: int
    fetched: int
    missing: int
    requests: int
    twice: int
    robots_violations: int
    overlaps: int
    short_gaps: int

    @property
    def politeness_violations(self) -> int:
        return self.overlaps + self.short_gaps


def write_log(path: str, log: Iterable[LogRecord]) -> None:
    """A request log as JSON lines, one :class:`LogRecord` per line."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(dataclasses.asdict(r)) + "\n" for r in log)


def read_log(path: str) -> list[LogRecord]:
    """The log :func:`write_log` (``python -m crawllib.testweb --log PATH``) wrote."""
    with open(path, encoding="utf-8") as fh:
        return [LogRecord(**json.loads(line)) for line in fh if line.strip()]


def origin_form(target: str) -> str:
    """A request target as path and query: a client talking to the test web as to a proxy
    (Scrapy in the benchmark) sends the absolute URL."""
    if target.startswith(("http://", "https://")):
        parts = urlsplit(target)
        return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return target


def is_page_request(path_qs: str) -> bool:
    """Whether a request the crawler made was for a page: not robots.txt (nor the target of
    robots.redirect.com's redirect, /rules/...), not the /sitemap.xml a host's slot asks
    for after a robots.txt that lists no sitemap, and not a soft-404 probe (a path no page
    links to, ``crawllib.core.vocab.PROBE_PREFIX``: /<agent>-probe-<hex>.html)."""
    target = origin_form(path_qs)
    if target in ("/robots.txt", "/sitemap.xml") or target.startswith("/rules/"):
        return False
    return not is_probe_path(target.partition("?")[0])


def failed(status: int) -> bool:
    """Whether an answer asks for a retry: none (status 0: the connection closed before any
    status line), a 5xx or a 429."""
    return not status or status >= 500 or status == 429


def audit(
    site: Site,
    log: Iterable[LogRecord],
    agent: str,
    max_depth: int,
    delay: float,
    seeds: list[str] | None = None,
) -> Audit:
    """Judge the requests whose User-Agent starts with ``agent`` (see :class:`Audit`)."""
    mine = sorted((r for r in log if r.user_agent.startswith(agent)), key=lambda r: r.start)
    expected = expected_fetches(site, max_depth, seeds=seeds)
    rules: dict[str, RobotsRules] = {}
    by_host: dict[str, list[LogRecord]] = collections.defaultdict(list)
    answered: set[str] = set()  # URLs that got an answer that was not a failure
    twice: set[str] = set()
    fetched, denied = set(), 0
    for r in mine:
        by_host[r.host].append(r)
        target = origin_form(r.path_qs)
        key = f"{r.host}{target}"
        if key in answered:
            twice.add(key)
        if not failed(r.status):
            answered.add(key)
        probe = is_probe_path(target.partition("?")[0])
        if not (probe or is_page_request(target)):
            continue
        if r.host not in rules:
            rules[r.host] = robots_rules(site, r.host, "crawllib")
        denied += not rules[r.host].allowed(target)
        if r.status == 200 and not probe:
            fetched.add(canonical_url(f"http://{r.host}{target}"))
    overlaps = short_gaps = 0
    for records in by_host.values():
        for a, b in zip(records, records[1:], strict=False):
            overlaps += b.start < a.end - 1e-3
            short_gaps += b.start - a.start < delay * GAP_TOLERANCE
    return Audit(
        expected=len(expected),
        fetched=len(expected & fetched),
        missing=len(expected - fetched),
        requests=len(mine),
        twice=len(twice),
        robots_violations=denied,
        overlaps=overlaps,
        short_gaps=short_gaps,
    )
