"""robots.txt for the fetch engine: fetch (RFC 9309 §2.3), classify, and reuse cached rows.

Outcome of the robots.txt request -> policy for the host's pages (and the robots record):
- 2xx: parse the first ``robots.max_bytes`` bytes; kept ``robots.ttl_hours``.
- 3xx: followed up to ``robots.max_redirects`` hops, each hop checked for network safety like
  any URL; more hops, a refused hop or a bad Location: "unavailable" -> allow all (§2.3.1.2).
- 4xx, 429 included: "unavailable" -> allow all (§2.3.1.3). 429 is a 4xx in the RFC's sense
  (Google treats it like 5xx instead); its Retry-After still slows the host down.
- 5xx, timeout, dropped connection, bad response: "unreachable" -> disallow all; the pages
  come back "deferred" with error_kind "robots_unavailable" (no attempt spent) and the engine
  shortens the record's life to the slot's robots retry (``robots.retry_seconds``, doubled per
  failure in a row, kept in the hosts table): robots.txt is asked again then, and the plan
  holds the host's URLs back until it may be.
- DNS or connect failure: the host is unreachable; its pages come back "error" with the same
  error_kind (no request made; attempts are spent, so the URLs of a domain that no longer
  resolves end dead), the record expires as above. The same failure on a redirect's target
  host is recorded as "redirect_<kind>": unreachable.
- Literal host or resolved address refused by network safety: no record; pages "blocked".

A body past OFF_LOOP_BYTES is parsed in the loop's default executor (`classify_off_loop`): a
hostile 500 KB file costs tens of ms to parse, which the loop that paces every host of the
task must not wait out.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import aiohttp
from yarl import URL

from crawllib.config import Config
from crawllib.core.records import RobotsRecord
from crawllib.core.vocab import HOST_DOWN_KINDS, ErrorKind, Outcome, Record
from crawllib.engine.client import Fetched, Limits, fetch_url
from crawllib.policy.robots import MAX_WILDCARD_RULES, RobotsRules

log = logging.getLogger(__name__)

UNAVAILABLE_TTL = 3600.0
OFF_LOOP_BYTES = 64 << 10  # a robots.txt body longer than this is parsed off the event loop
# robots.txt fetch failures that count as "unavailable" (allow all), not "unreachable"
ALLOW_ALL_KINDS = frozenset(
    {ErrorKind.TOO_MANY_REDIRECTS, ErrorKind.BAD_LOCATION, ErrorKind.BLOCKED_REDIRECT}
)
# a redirect's target host is down: the robots.txt is unreachable, the host itself is not
REDIRECT_DOWN_KINDS = {
    ErrorKind.DNS: ErrorKind.REDIRECT_DNS,
    ErrorKind.CONNECT: ErrorKind.REDIRECT_CONNECT,
    ErrorKind.CONNECT_TIMEOUT: ErrorKind.REDIRECT_CONNECT_TIMEOUT,
    ErrorKind.SSL: ErrorKind.REDIRECT_SSL,
}


@dataclass
class RobotsState:
    """The policy for one host's pages during this call."""

    rules: RobotsRules
    crawl_delay: float | None = None
    deny_kind: str | None = None  # robots.txt failed: pages deferred ("robots_unavailable")
    down_kind: str | None = None  # pages are "error" rows with this error_kind
    blocked_kind: str | None = None  # pages are "blocked" rows with this error_kind


def robots_url(page_url: str) -> str:
    """``scheme://host[:port]/robots.txt`` of a page URL."""
    return str(URL(page_url, encoded=True).origin().with_path("/robots.txt"))


def classify(record: Mapping[str, Any], agent: str, max_bytes: int) -> RobotsState:
    """The policy a robots record (fresh or cached) imposes."""
    status = record.get("http_status")
    kind = record.get("error_kind")
    if status is not None and 200 <= status < 300 and kind is None:
        rules = RobotsRules.parse(record.get("body") or "", agent, max_bytes)
        if rules.too_many_wildcards:
            log.warning(
                "robots.txt of %s: more than %d wildcard rules for us, taken as disallowing "
                "every page",
                record.get("host"),
                MAX_WILDCARD_RULES,
            )
        return RobotsState(rules, rules.crawl_delay)
    if status is not None and 300 <= status < 500:
        return RobotsState(RobotsRules.allow_all())
    if status is None and kind in HOST_DOWN_KINDS:
        return RobotsState(RobotsRules.disallow_all(), down_kind=kind)
    if status is None and kind in ALLOW_ALL_KINDS:
        return RobotsState(RobotsRules.allow_all())
    return RobotsState(RobotsRules.disallow_all(), deny_kind=ErrorKind.ROBOTS_UNAVAILABLE)


async def classify_off_loop(record: Mapping[str, Any], agent: str, max_bytes: int) -> RobotsState:
    """`classify`, in the running loop's default executor when the record's body is longer
    than OFF_LOOP_BYTES."""
    if len(record.get("body") or "") <= OFF_LOOP_BYTES:
        return classify(record, agent, max_bytes)
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, classify, record, agent, max_bytes)


def expires_at(record: Mapping[str, Any], fetched_at: float, ttl_hours: float) -> float:
    ttl = ttl_hours * 3600.0
    status = record.get("http_status")
    if status is None or status >= 500:
        if record.get("error_kind") not in ALLOW_ALL_KINDS:
            ttl = min(ttl, UNAVAILABLE_TTL)
    return fetched_at + ttl


def epoch(value: Any) -> float | None:
    """A timestamp from a robots row as epoch seconds (rows read back from Delta hold datetimes)."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.timestamp()
    return float(value)


def fresh_rows(robots_rows: Any, now: float) -> dict[str, Mapping[str, Any]]:
    """host -> the newest cached robots row that has not expired at `now`."""
    out: dict[str, Mapping[str, Any]] = {}
    for row in robots_rows:
        row = row.asDict() if hasattr(row, "asDict") else row
        exp = epoch(row.get("expires_at"))
        host = row.get("host")
        if not host or exp is None or exp <= now:
            continue
        old = out.get(host)
        if old is None or (epoch(row.get("fetched_at")) or 0) > (epoch(old.get("fetched_at")) or 0):
            out[host] = row
    return out


async def fetch_robots(
    session: aiohttp.ClientSession,
    page_url: str,
    host: str,
    cfg: Config,
    before_request: Callable[[str], Awaitable[Fetched | None]],
    after_response: Callable[[Fetched], None],
    on_sent: Callable[[], None] | None,
    now: Callable[[], float],
    gate: Callable[[], AbstractAsyncContextManager[None]] = contextlib.nullcontext,
) -> tuple[RobotsState, RobotsRecord | None] | None:
    """Fetch and classify `host`'s robots.txt. Returns (state, robots record or None), or None
    if the deadline came first.

    ``before_request(url)`` waits for the slot's turn; it returns None when the request may go,
    a Fetched ("blocked", or "deferred" at the deadline) when it may not. Each request runs
    inside ``gate()`` (the engine's room per server address).
    """
    robots = cfg.robots
    limits = Limits(
        max_raw=max(robots.max_bytes, cfg.fetch.max_body_bytes),
        max_decoded=robots.max_bytes,
        keep_types=None,
        overflow_is_error=False,
    )
    url = robots_url(page_url)
    fetched_at = now()
    record: dict[str, Any] = {"http_status": None, "error_kind": None, "body": ""}
    for hop in range(robots.max_redirects + 1):
        refused = await before_request(url)
        if refused is not None:
            if refused.outcome == Outcome.DEFERRED:
                return None  # the deadline: no record, the pages are deferred
            if hop == 0:
                return _blocked(refused.error_kind), None
            record["error_kind"] = ErrorKind.BLOCKED_REDIRECT
            break
        if hop == 0:
            fetched_at = now()
        async with gate():
            got = await fetch_url(session, url, limits, on_sent)
        after_response(got)
        if got.outcome == Outcome.BLOCKED:
            if hop == 0:
                return _blocked(got.error_kind), None
            record["error_kind"] = ErrorKind.BLOCKED_REDIRECT
            break
        record["http_status"] = got.http_status
        record["error_kind"] = got.error_kind
        if hop and got.error_kind in REDIRECT_DOWN_KINDS:  # the target is down, not this host
            record["error_kind"] = REDIRECT_DOWN_KINDS[got.error_kind]
        if got.outcome == Outcome.REDIRECT and got.redirect_to:
            url = got.redirect_to
            record["error_kind"] = ErrorKind.TOO_MANY_REDIRECTS  # unless a later hop answers
            continue
        if got.outcome == Outcome.OK:
            record["body"] = _text(got.body or b"", robots.max_bytes)
        break
    if record["error_kind"] in ALLOW_ALL_KINDS:
        record["http_status"] = None
    state = await classify_off_loop(record, robots.agent, robots.max_bytes)
    out: RobotsRecord = {
        "record": Record.ROBOTS,
        "host": host,
        "fetched_at": fetched_at,
        "http_status": record["http_status"],
        "body": record["body"],
        "crawl_delay": state.rules.crawl_delay,
        "sitemaps": list(state.rules.sitemaps),
        "expires_at": expires_at(record, fetched_at, robots.ttl_hours),
        "error_kind": record["error_kind"],
    }
    log.debug("robots %s: status=%s kind=%s", host, out["http_status"], out["error_kind"])
    return state, out


def _blocked(kind: str | None) -> RobotsState:
    return RobotsState(RobotsRules.disallow_all(), blocked_kind=kind)


def _text(body: bytes, max_bytes: int) -> str:
    """The first `max_bytes` bytes as text whose UTF-8 form is at most `max_bytes` long."""
    text = body[:max_bytes].decode("utf-8", errors="replace")
    while len(text.encode("utf-8")) > max_bytes:  # U+FFFD replacements take 3 bytes
        text = text[: -max(1, len(text) // 100)]
    return text
