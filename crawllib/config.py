"""Typed configuration: defaults < ``--config FILE`` (TOML) < ``--set section.key=value``.

Every setting is declared once, below, as a field of its section's frozen dataclass: its type
(the annotation), its default and one line of documentation (the Scrapy habit), and what its
value must mean (a check). ``conf/default.toml`` is generated from these declarations
(``python -m crawllib.config``) and a test keeps the two identical.

A :class:`Config` is a frozen tree of plain dataclasses: it pickles, so Spark executors receive
it as a value and never read files or globals; a type checker follows ``cfg.section.key``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import ipaddress
import math
import re
import sys
import time
import tomllib
import typing
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from crawllib.core.errors import ConfigError

V = TypeVar("V")
Check = Callable[[Any], "str | None"]  # the value -> what is expected, or None when it is fine


def setting(default: V, doc: str, check: Check | None = None) -> V:
    """Declare one setting: a dataclass field with its default, doc and check.

    Typed as the default so that ``max_depth: int = setting(3, ...)`` reads as what it is; a
    table default (dict) is copied for each instance.
    """
    metadata = {"doc": doc, "check": check}
    if isinstance(default, dict):
        table = dict(default)
        return cast(V, dataclasses.field(default_factory=lambda: dict(table), metadata=metadata))
    return dataclasses.field(default=default, metadata=metadata)


def at_least(lo: float) -> Check:
    return lambda v: None if v >= lo else f"a number >= {lo}"


MAX_INT = 2**63 - 2  # an int setting and that plus one fit a 64-bit integer
MAX_DEPTH = 2**31 - 2  # a depth and that plus one fit crawldb's depth column (an int)


def between(lo: int, hi: int) -> Check:
    return lambda v: None if lo <= v <= hi else f"an integer from {lo} to {hi}"


def positive(v: float) -> str | None:
    return None if v > 0 else "a number > 0"


def _check_resolve(v: Mapping[str, str]) -> str | None:
    for host, target in v.items():
        if not isinstance(target, str):
            return f'a table host = "IP" or "IP:port" (entry {host!r} = {target!r} is not a string)'
        ip_text, _, port = target.rpartition(":") if _has_port(target) else (target, "", "")
        try:
            ipaddress.ip_address(ip_text.strip("[]"))
        except ValueError:
            return f'a table host = "IP" or "IP:port" (entry {host!r} = {target!r} is not an IP)'
        if port and not (port.isdigit() and 0 < int(port) < 65536):
            return f'a table host = "IP" or "IP:port" (entry {host!r} has bad port {port!r})'
    return None


def _has_port(target: str) -> bool:
    if target.startswith("["):
        return "]:" in target
    return target.count(":") == 1


def _check_ips(v: Iterable[str]) -> str | None:
    for text in v:
        try:
            ipaddress.ip_address(text)
        except ValueError:
            return f"a list of IP addresses ({text!r} is not one)"
    return None


def _check_header(v: str) -> str | None:
    # A control character in a header value makes every request fail before it is sent.
    if not v.strip() or any(ord(c) < 32 or ord(c) == 127 for c in v):
        return "a non-empty header value without control characters"
    return None


def _check_token(v: str) -> str | None:
    # RFC 9309 2.2.1: the product token matched against user-agent lines.
    return None if re.fullmatch(r"[A-Za-z_-]+", v) else "a product token of letters, '_' and '-'"


def _check_media_types(v: Iterable[str]) -> str | None:
    for text in v:
        if not re.fullmatch(r"[\w.+-]+/[\w.+-]+", text):
            return f"a list of media types such as text/html ({text!r} is not one)"
    return None


def _check_conf(v: Mapping[str, Any]) -> str | None:
    for key, value in v.items():
        if isinstance(value, dict | list):
            return (
                f"a table of Spark keys and plain values ({key!r} holds a {type(value).__name__})"
            )
        if key == "spark.speculation" and str(value).strip().lower() != "false":
            return (
                "Spark settings without spark.speculation on: a speculative copy of a fetch "
                "task is a second fetcher of the same hosts (the crawler keeps it off)"
            )
    return None


def _check_journal(v: float) -> str | None:
    # the refetch bound after an executor loss (docs/operations.md: what an executor loss costs)
    return None if 0 <= v <= 60 else "seconds from 0 to 60"


def _check_now(v: str) -> str | None:
    if not v:
        return None
    try:
        parse_now(v)
    except ValueError:
        return "an ISO 8601 time such as 2026-12-01T00:00:00Z, or empty for the real clock"
    return None


def _check_exclude(v: Iterable[str]) -> str | None:
    from crawllib.policy.exclusions import parse

    try:
        parse(v, "crawl.exclude")
    except ValueError as exc:
        return f"exclusion rules such as domain:example.com ({exc})"
    return None


def parse_now(text: str) -> float | None:
    """``crawl.now`` as epoch seconds (a time without an offset is UTC); None when empty."""
    if not text:
        return None
    when = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def hold_now(text: str) -> float | None:
    """The time a host's hold (hosts.not_before: a Retry-After, a cool-down) is judged by:
    the real clock, or ``crawl.now`` when later. The engine writes holds on the real clock
    (politeness runs on it), so a crawl.now in the past (a simulated crawl) must not stretch
    them, while one ahead (a later run's clock) releases them. None: the real clock."""
    fixed = parse_now(text)
    return None if fixed is None else max(fixed, time.time())


@dataclasses.dataclass(frozen=True)
class CrawlConfig:
    now: str = setting(
        "",
        "the crawl's clock for scheduling revisits (ISO 8601, e.g. 2026-12-01T00:00:00Z): "
        "what is due and when a visit happened; empty: the real clock (politeness always "
        "uses the real clock). Tests and simulations set it per generation (--now)",
        _check_now,
    )
    max_depth: int = setting(
        3, "links followed from a seed; deeper URLs are filtered", between(0, MAX_DEPTH)
    )
    max_url_length: int = setting(2048, "longer URLs are filtered", at_least(16))
    skip_extensions: tuple[str, ...] = setting(
        (
            "jpg",
            "jpeg",
            "png",
            "gif",
            "webp",
            "svg",
            "ico",
            "css",
            "js",
            "mp3",
            "mp4",
            "avi",
            "mov",
            "zip",
            "gz",
            "tar",
            "exe",
            "dmg",
            "iso",
            "woff",
            "woff2",
        ),  # fmt: skip
        "URL path extensions never fetched (not HTML)",
    )
    exclude: tuple[str, ...] = setting(
        (),
        "URLs never fetched, one rule each: domain:example.com (the registered domain and its "
        "hosts), host:www.example.com (that host), prefix:https://example.com/private/ (URLs "
        "starting so), regex:PATTERN (searched in the normalised URL; syntax Python and Java "
        "share). See crawllib.transforms.exclusions",
        _check_exclude,
    )
    exclude_file: str = setting(
        "",
        "more crawl.exclude rules, one per line ('#' comments): a local path, or any URI Spark "
        "reads (s3a://bucket/key); empty: none",
    )


@dataclasses.dataclass(frozen=True)
class GenerateConfig:
    max_per_host: int = setting(
        100, "URLs fetched per host in one generation; the rest wait", at_least(1)
    )
    host_budget: int = setting(
        5000, "URLs fetched per host over the whole crawl (trap guard)", at_least(1)
    )
    domain_budget: int = setting(
        20000, "URLs fetched per registered domain over the whole crawl", at_least(1)
    )
    revisit_share: float = setting(
        0.5,
        "share of each host's max_per_host reserved for due revisits (the rest for new URLs); "
        "a kind that needs less leaves its room to the other",
        lambda v: None if 0 <= v <= 1 else "a number from 0 to 1",
    )
    order: Literal["score", "depth"] = setting(
        "score",
        "which URLs of a host fill its quota first: score (highest crawldb.score, then "
        "shallowest) or depth (breadth first)",
    )
    top_n: int = setting(
        0,
        "URLs planned per generation over all hosts, highest score first (0: no cap); "
        "the rest wait for the next generation",
        at_least(0),
    )
    fetch_seconds: float = setting(
        0.0,
        "how long a generation should fetch (0: no limit): each slot gets the URLs its delay "
        "allows in that time (1 + fetch_seconds / delay; a Crawl-delay of 10 s gets a tenth of "
        "a delay of 1 s), within max_per_host",
        at_least(0),
    )
    seed_score: float = setting(1.0, "score of a seed URL", at_least(0))
    internal_link_weight: float = setting(
        0.25,
        "share of a page's cash a link to its own host passes (a link to another host "
        "passes all of it): in-links from other hosts count most",
        lambda v: None if 0 <= v <= 1 else "a number from 0 to 1",
    )
    duplicate_link_weight: float = setting(
        0.1,
        "share of its cash a duplicate page passes to its links",
        lambda v: None if 0 <= v <= 1 else "a number from 0 to 1",
    )


def _check_allow(v: Iterable[str]) -> str | None:
    from crawllib.policy.traps import allowed_patterns

    try:
        allowed_patterns(tuple(v))
    except ValueError as exc:
        return f"'host pattern' lines as the traps table shows them ({exc})"
    return None


@dataclasses.dataclass(frozen=True)
class TrapsConfig:
    max_segment_repeats: int = setting(
        2, "URLs whose path repeats one segment more often are filtered (trap_pattern)", at_least(1)
    )
    min_pages: int = setting(
        20, "pages of one host's URL pattern fetched before plan may judge it a trap", at_least(1)
    )
    duplicate_share: float = setting(
        0.8,
        "a URL pattern whose pages are duplicates at least this often is a trap: its new URLs "
        "are filtered (trap_pattern)",
        lambda v: None if 0 < v <= 1 else "a number above 0, at most 1",
    )
    allow: tuple[str, ...] = setting(
        (), "'host pattern' lines (as the traps table shows them) never judged traps", _check_allow
    )


def _check_hosts(v: Iterable[str]) -> str | None:
    bad = [h for h in v if not isinstance(h, str) or not h or any(c.isspace() for c in h)]
    return f"host names, without spaces (got {bad[0]!r})" if bad else None


@dataclasses.dataclass(frozen=True)
class AliasesConfig:
    min_pages: int = setting(
        20, "pages of a host fetched before plan may judge it an alias of another", at_least(1)
    )
    duplicate_share: float = setting(
        0.8,
        "a host sharing at least this share of its pages, exactly, with another host, of which "
        "it is the copy, is an alias: its URLs are filtered (alias)",
        lambda v: None if 0 < v <= 1 else "a number above 0, at most 1",
    )
    allow: tuple[str, ...] = setting((), "hosts never judged aliases", _check_hosts)


@dataclasses.dataclass(frozen=True)
class RecrawlConfig:
    policy: Literal["adaptive", "fixed", "never"] = setting(
        "adaptive",
        "when a fetched page is due again: adaptive (its interval shrinks when its text "
        "changed, grows when not), fixed (default_interval_hours), never (no revisits)",
    )
    default_interval_hours: float = setting(
        24.0, "revisit interval after a first visit (and always, with policy fixed)", positive
    )
    min_interval_hours: float = setting(1.0, "shortest adaptive revisit interval", positive)
    max_interval_hours: float = setting(720.0, "longest adaptive revisit interval", positive)
    inc_rate: float = setting(
        0.1,
        "an unchanged visit multiplies the interval by 1 + inc_rate (Nutch: 0.4; see "
        "docs/benchmarks.md, measure 9)",
        at_least(0),
    )
    dec_rate: float = setting(
        0.3,
        "a changed visit multiplies the interval by 1 - dec_rate (Nutch: 0.2)",
        lambda v: None if 0 <= v < 1 else "a number from 0 to below 1",
    )
    conditional_get: bool = setting(
        True,
        "revisit with If-None-Match / If-Modified-Since from the stored validators; a 304 "
        "keeps the stored version (outcome not_modified)",
    )

    def __post_init__(self) -> None:
        if self.min_interval_hours > self.max_interval_hours:
            raise ConfigError(
                f"config keys 'recrawl.min_interval_hours' ({self.min_interval_hours}) and "
                f"'recrawl.max_interval_hours' ({self.max_interval_hours}): the minimum must "
                "not exceed the maximum"
            )


@dataclasses.dataclass(frozen=True)
class PolitenessConfig:
    key: Literal["host", "domain", "ip"] = setting(
        "host",
        "what one politeness slot (and one Spark task) holds: a host, a registered domain, or "
        "a server address (ip: plan resolves the hosts; a slot per address, each of its hosts "
        "keeping its own rules inside it)",
    )
    default_delay: float = setting(
        1.0, "seconds from the end of one answer to the next request to one host", at_least(0)
    )
    max_crawl_delay: float = setting(
        30.0,
        "a robots.txt Crawl-delay above this many seconds defers the host's URLs (never "
        "shortened; see honor_long_crawl_delay)",
        at_least(0),
    )
    honor_long_crawl_delay: bool = setting(
        False,
        "fetch hosts whose Crawl-delay is above max_crawl_delay, one request per Crawl-delay "
        "across slices and generations, instead of deferring their URLs",
    )
    down_cooldown_seconds: float = setting(
        600.0,
        "a host down (3 DNS/connect failures in a row) gets no request for this long, doubled "
        "at each further failure, up to a day",
        at_least(0),
    )
    jitter: float = setting(0.1, "extra random delay, as a fraction of the delay", at_least(0))
    max_hosts_in_flight: int = setting(256, "hosts fetched at once in one task", at_least(1))
    max_hosts_per_address: int = setting(
        8,
        "requests one fetch task has in flight to one server address at once, whatever the "
        "slots (shared hosting); 0: no cap",
        at_least(0),
    )
    max_address_task_urls: int = setting(
        5000,
        "with key = host or domain, the slots of one server address (as the hosts table last "
        "saw it) are fetched by one task while the address has at most this many URLs in the "
        "slice, so that max_hosts_per_address holds for the whole job; 0: never grouped",
        at_least(0),
    )
    address_delay: float = setting(
        0.0,
        "with key = ip, seconds between two requests to one server address; 0: the rule, "
        "default_delay / the address's hosts with URLs queued, at least min_address_delay",
        at_least(0),
    )
    min_address_delay: float = setting(
        0.25,
        "with key = ip and address_delay 0, the least seconds between two requests to one "
        "server address, however many of its hosts are queued",
        at_least(0),
    )
    address_failure_share: float = setting(
        0.5,
        "with key = ip, an address backs off (its delay doubled per failure) while more than "
        "this share of its hosts (and at least 2) last answered 5xx or 429",
        lambda v: None if 0 <= v < 1 else "a number from 0 to below 1",
    )
    adaptive: bool = setting(
        True,
        "a host's (and with key = ip, an address's) delay is at least response_factor times "
        "the moving average of its response times (robots.txt included), up to max_delay",
    )
    response_factor: float = setting(
        4.0,
        "with adaptive, the delay is at least this many times the recent response time: a "
        "server answering in t seconds gets at most one request per factor * t",
        at_least(1),
    )
    max_delay: float = setting(
        30.0,
        "with adaptive, the most seconds the response time alone stretches a delay to (a "
        "Crawl-delay, a Retry-After or a backoff may ask more)",
        at_least(0),
    )
    address_ttl_seconds: float = setting(
        3600.0,
        "with key = ip, a host's address resolved by plan is reused this long (the dns table)",
        at_least(0),
    )


@dataclasses.dataclass(frozen=True)
class RobotsConfig:
    agent: str = setting(
        "crawllib", "product token matched against robots.txt user-agent lines", _check_token
    )
    ttl_hours: float = setting(24.0, "a cached robots.txt is reused for this long", at_least(0))
    max_bytes: int = setting(
        512000, "only this many bytes of robots.txt are parsed (RFC 9309: >= 500 KiB)", at_least(1)
    )
    max_redirects: int = setting(5, "redirects followed when fetching robots.txt", at_least(0))
    retry_seconds: float = setting(
        60.0,
        "a robots.txt that failed (5xx, timeout, unreachable) is asked again after this many "
        "seconds, doubled per failure in a row up to a day; its host's URLs wait meanwhile",
        at_least(0),
    )


@dataclasses.dataclass(frozen=True)
class SitemapsConfig:
    enabled: bool = setting(
        True,
        "after a host's robots.txt is fetched (at most once per robots.ttl_hours), fetch the "
        "sitemaps it lists (else /sitemap.xml) on the host's own slot; their URLs join the "
        "next frontier (reason sitemap) and their lastmod/changefreq hint the revisit schedule",
    )
    max_documents: int = setting(
        5, "sitemap documents (index children included) fetched per host per robots.txt fetch",
        at_least(1),
    )  # fmt: skip
    max_urls: int = setting(
        50000, "URLs read from one sitemap document (the protocol's limit)", at_least(1)
    )
    max_bytes: int = setting(
        52_428_800,
        "uncompressed bytes read from one sitemap document (the protocol's 50 MB)",
        at_least(1024),
    )


@dataclasses.dataclass(frozen=True)
class FetchConfig:
    user_agent: str = setting(
        "crawllib/0.1 (+https://github.com/crawllib/crawllib; crawler@crawllib.invalid)",
        "User-Agent header: product token, version and a contact URL",
        _check_header,
    )
    connect_timeout: float = setting(10.0, "seconds to open a connection", positive)
    total_timeout: float = setting(30.0, "seconds for a whole request, body included", positive)
    max_body_bytes: int = setting(
        5_000_000, "body bytes read; the rest is cut and the fetch marked truncated", at_least(1)
    )
    max_decompressed_bytes: int = setting(
        20_000_000, "decoded bytes kept from a compressed body", at_least(1)
    )
    content_types: tuple[str, ...] = setting(
        ("text/html", "application/xhtml+xml"),
        "content types whose body is kept",
        _check_media_types,
    )
    max_urls_per_host: int = setting(
        1000, "URLs fetched per host in one call of the engine", at_least(1)
    )
    max_redirects: int = setting(
        5,
        "redirect hops a page's chain is followed, one per generation (a longer chain ends: "
        "reason too_many_redirects)",
        at_least(0),
    )
    deadline_seconds: float = setting(
        3600.0,
        "a generation's fetch stops starting requests this long after it began (all slices "
        "together); the rest is deferred (0: nothing is fetched, every URL is deferred)",
        at_least(0),
    )
    retry_after_cap: float = setting(
        120.0,
        "a Retry-After longer than this many seconds defers the host's URLs at once (it is "
        "honoured in full: the hosts table keeps it); shorter ones are waited in the slice",
        at_least(0),
    )
    slice_grace_seconds: float = setting(
        30.0,
        "a host whose next allowed request (Retry-After, backoff, Crawl-delay) lies more than "
        "this past the slice's planned end has its remaining URLs deferred",
        at_least(0),
    )
    max_attempts: int = setting(5, "attempts before a failing URL is dead", at_least(1))
    extract: bool = setting(
        True,
        "extract each page's text and links in the fetch task while it waits on politeness "
        "(off: the update stage extracts)",
    )
    follow: bool = setting(
        True,
        "fetch a page's links to the slots its task holds (host; registered domain with "
        "politeness.key = domain) and to new hosts it owns in this generation, within "
        "crawl.max_depth and generate.max_per_host (needs fetch.extract; off: they wait for "
        "the next generation)",
    )
    follow_other_hosts: bool = setting(
        True,
        "with follow, also fetch a page's links to the other slots of its task and to new hosts "
        "the task owns (off: links stay within their page's slot; which page's link comes "
        "first across hosts is a matter of timing, so two crawls may record other sources)",
    )
    partitions: int = setting(
        0,
        "fetch tasks per slice, the same for every slice of a generation: a slot's task is "
        "the hash of its key modulo this, and a task follows links to the new hosts it owns "
        "(0: one on one machine, the embedded engine or a local master, which owns every host "
        "and extracts on every core; on a cluster as many as the engine runs at once)",
        at_least(0),
    )
    new_host_urls: int = setting(
        10000,
        "URLs a generation fetches from hosts crawldb does not know, followed from links "
        "(each task gets this / partitions; at most generate.max_per_host per host); 0: such "
        "links wait for the next generation",
        at_least(0),
    )
    retry_backoff_seconds: float = setting(
        600.0,
        "a URL failed n times is due again 2**(n-1) * this many seconds after its last "
        "attempt (by the crawl's clock; the first generation after that takes it)",
        at_least(0),
    )
    max_bytes_in_flight: int = setting(
        268_435_456,
        "body bytes one fetch task holds at once over all its hosts (downloading, waiting for "
        "extraction or to be stored); a request waits for room, one page may pass it by its own "
        "size (sitemaps included)",
        at_least(1_048_576),
    )
    soft404_probe: bool = setting(
        True,
        "after a host's robots.txt is fetched afresh, request one random never-linked URL of "
        "it, a polite request like any other, to learn how it answers a missing page "
        "(soft-404 detection)",
    )
    journal_seconds: float = setting(
        10.0,
        "a fetch task writes what it fetched to its journal under the crawl root this often: "
        "run again after its executor is lost, it refetches at most the pages of its last "
        "interval (0: no journal; such a task fetches its whole share again)",
        _check_journal,
    )


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    resolve: dict[str, str] = setting(
        {},
        'host -> "IP" or "IP:port": connect there, keep the Host header (trusted)',
        _check_resolve,
    )
    allow_private: bool = setting(False, "allow private, loopback and link-local addresses")
    resolve_only: bool = setting(
        False, "reach only hosts in network.resolve; never query DNS (tests, demo)"
    )
    dns_cache_ttl: float = setting(300.0, "seconds a DNS answer is reused", at_least(0))
    nameservers: tuple[str, ...] = setting(
        (), "DNS servers for aiodns (empty: the system's)", _check_ips
    )


@dataclasses.dataclass(frozen=True)
class ParseConfig:
    max_html_bytes: int = setting(2_000_000, "HTML bytes handed to the extractor", at_least(1))
    near_dup_distance: int = setting(
        4, "SimHash Hamming distance at or below which pages are near-duplicates", between(0, 63)
    )
    min_text_chars: int = setting(
        200, "shorter texts are not used for near-duplicate detection", at_least(0)
    )
    follow_rel_nofollow: bool = setting(
        True, 'follow <a rel="nofollow"> links: nofollow asks search engines not to pass ranking'
    )
    follow_duplicate_links: bool = setting(
        False,
        "queue the links of exact duplicates (off: their links are another page's, already "
        "queued from it)",
    )
    max_links_per_page: int = setting(
        1000, "links kept of one page (one per target, in page order); the rest are dropped",
        at_least(0),
    )  # fmt: skip


@dataclasses.dataclass(frozen=True)
class ExtractConfig:
    max_seconds: float = setting(
        30.0,
        "extraction of one page (in the fetch task, and in update for pages the fetch did not extract) runs in a child process that "
        "is killed past this many seconds: the page is stored with error extract_timeout",
        positive,
    )
    max_memory_mb: int = setting(
        2048,
        "that child process (on Linux) is killed when its resident memory passes this many MiB "
        "during a page (the page is stored with error extract_memory), and restarted when it "
        "passes it between pages; it needs about 160 at rest",
        at_least(256),
    )
    processes: int = setting(
        0,
        "extraction processes per fetch task, each extracting one page at a time beside the "
        "task's fetching (0: the cores each fetch task has, the engine's parallelism / the "
        "fetch tasks, at least 1: one task on one machine extracts on every core)",
        at_least(0),
    )


@dataclasses.dataclass(frozen=True)
class StorageConfig:
    fetch_slices: int = setting(
        8, "fetch commits in at most this many slices; a crash loses one", at_least(1)
    )
    min_slice_urls: int = setting(
        500, "fewer slices when a generation is small: each holds at least this many URLs",
        at_least(1),
    )  # fmt: skip
    min_slice_seconds: float = setting(
        60.0,
        "fewer slices when a generation is short: each lasts at least this long at "
        "politeness.default_delay (a slice's commit costs seconds)",
        at_least(0),
    )
    lease_seconds: float = setting(
        300.0,
        "a writer's lease on the crawl root lasts this long unless renewed (every third of it); "
        "a dead writer's lease can be taken over once it expires",
        at_least(1),
    )


@dataclasses.dataclass(frozen=True)
class MaintainConfig:
    min_files: int = setting(
        4,
        "`crawl maintain` compacts a table partition (a generation; a whole table when it has "
        "none) holding more files than this",
        at_least(1),
    )
    vacuum_hours: float = setting(
        168.0,
        "`crawl maintain` deletes the files no table version of the last this many hours uses; "
        "it must exceed the longest a stage or a reader (crawl sql, a notebook) runs. Below 168 "
        "Delta refuses unless spark.conf sets "
        "spark.databricks.delta.retentionDurationCheck.enabled = false",
        positive,
    )


@dataclasses.dataclass(frozen=True)
class WarcConfig:
    archive_root: str = setting(
        "",
        "the folder (local path or URI) under which `crawl export-warc` writes each "
        "generation's WARC files (gen=N/) unless given OUT_DIR, and the root ccindex's "
        "warc_filename is relative to, as Common Crawl's is to s3://commoncrawl/; empty: "
        "ROOT/warc",
    )


def _check_memory(v: str) -> str | None:
    if re.fullmatch(r"[0-9]+(\.[0-9]+)?\s*(KB|MB|GB|TB|KiB|MiB|GiB|TiB)", v.strip(), re.I):
        return None
    return "an amount of memory such as 4GB or 512MiB"


@dataclasses.dataclass(frozen=True)
class SqlConfig:
    max_seconds: float = setting(
        600.0,
        "a `crawl sql` query is stopped after this many seconds (DuckDB interrupts it, Spark "
        "cancels its jobs) and exits 2",
        positive,
    )
    max_memory: str = setting(
        "4GB",
        "memory a `crawl sql` query on DuckDB may use (its memory_limit; nothing spills to "
        "disk); past it the query stops and exits 2, as when the process grows past twice "
        "this (at least 256 MiB) outside DuckDB's limit (one huge value, say)",
        _check_memory,
    )
    table_rows: int = setting(
        1000,
        "the rows `crawl sql` prints at most in its table format without --limit (a table "
        "holds its rows to size its columns); the rest are said to exist, not read: --limit "
        "or --format csv|json, which stream every row",
        at_least(1),
    )
    max_value_chars: int = setting(
        100_000,
        "`crawl sql` prints a text or binary value past this many characters (bytes), or a "
        "list past this many items, cut there, in every format, and says how much it cut: "
        "…[1,900,000 more chars: sql.max_value_chars]",
        at_least(1),
    )


@dataclasses.dataclass(frozen=True)
class SparkConfig:
    master: str = setting("local[*]", "Spark master; empty leaves it to spark-submit")
    app_name: str = setting("crawllib", "Spark application name")
    log_level: Literal["ERROR", "WARN", "INFO", "DEBUG"] = setting("WARN", "Spark log level")
    ui: bool = setting(False, "start the Spark UI")
    shuffle_partitions: int = setting(8, "spark.sql.shuffle.partitions", at_least(1))
    delta_jars: Literal["download", "provided"] = setting(
        "download",
        "download: fetch Delta jars once into jars_cache; provided: the cluster has them",
    )
    s3_jars: Literal["download", "provided"] = setting(
        "download",
        "download: a session this process starts (master set) gets the S3A jars, fetched "
        "once into jars_cache; provided: the cluster or spark-submit --jars has them",
    )
    jars_cache: str = setting("~/.cache/crawllib/ivy", "where the Delta and S3A jars are cached")
    conf: dict[str, str | int | float | bool] = setting(
        {}, "extra Spark conf, key -> value", _check_conf
    )


@dataclasses.dataclass(frozen=True)
class Config:
    """The whole configuration: one frozen dataclass per section (cfg.fetch.user_agent)."""

    crawl: CrawlConfig = dataclasses.field(default_factory=CrawlConfig)
    generate: GenerateConfig = dataclasses.field(default_factory=GenerateConfig)
    recrawl: RecrawlConfig = dataclasses.field(default_factory=RecrawlConfig)
    traps: TrapsConfig = dataclasses.field(default_factory=TrapsConfig)
    aliases: AliasesConfig = dataclasses.field(default_factory=AliasesConfig)
    politeness: PolitenessConfig = dataclasses.field(default_factory=PolitenessConfig)
    robots: RobotsConfig = dataclasses.field(default_factory=RobotsConfig)
    sitemaps: SitemapsConfig = dataclasses.field(default_factory=SitemapsConfig)
    fetch: FetchConfig = dataclasses.field(default_factory=FetchConfig)
    network: NetworkConfig = dataclasses.field(default_factory=NetworkConfig)
    parse: ParseConfig = dataclasses.field(default_factory=ParseConfig)
    extract: ExtractConfig = dataclasses.field(default_factory=ExtractConfig)
    storage: StorageConfig = dataclasses.field(default_factory=StorageConfig)
    maintain: MaintainConfig = dataclasses.field(default_factory=MaintainConfig)
    warc: WarcConfig = dataclasses.field(default_factory=WarcConfig)
    sql: SqlConfig = dataclasses.field(default_factory=SqlConfig)
    spark: SparkConfig = dataclasses.field(default_factory=SparkConfig)


@dataclasses.dataclass(frozen=True)
class Setting:
    """One declared setting, read back from its dataclass field."""

    default: Any
    doc: str
    kind: str  # int, float, bool, str, list[str], table, enum
    check: Check | None = None
    choices: tuple[str, ...] = ()


def _kind(annotation: Any) -> tuple[str, tuple[str, ...]]:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        return "enum", tuple(args)
    if origin is tuple:
        return "list[str]", ()
    if origin is dict:
        return "table", ()
    return {int: "int", float: "float", bool: "bool", str: "str"}[annotation], ()


def _declared(section_class: type) -> dict[str, Setting]:
    hints = typing.get_type_hints(section_class)
    out = {}
    for f in dataclasses.fields(section_class):
        kind, choices = _kind(hints[f.name])
        factory = f.default_factory
        default = f.default if factory is dataclasses.MISSING else factory()
        out[f.name] = Setting(default, f.metadata["doc"], kind, f.metadata["check"], choices)
    return out


SECTION_CLASSES: dict[str, type] = {
    f.name: typing.get_type_hints(Config)[f.name] for f in dataclasses.fields(Config)
}
SETTINGS: dict[str, dict[str, Setting]] = {
    name: _declared(cls) for name, cls in SECTION_CLASSES.items()
}


def coerce(key: str, value: Any, from_text: bool = False) -> Any:
    """Check (and for ``--set`` text, parse) one value; raise ConfigError naming key, value, allowed."""
    section, _, name = key.partition(".")
    setting_ = _lookup(section, name)
    kind = setting_.kind
    if from_text:
        value = _parse_text(key, value, setting_)
    ok: bool
    if kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "float":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif kind == "bool":
        ok = isinstance(value, bool)
    elif kind in ("str", "enum"):
        ok = isinstance(value, str)
    elif kind == "list[str]":
        ok = isinstance(value, list | tuple) and all(isinstance(x, str) for x in value)
    elif kind == "table":
        ok = isinstance(value, dict)
    else:  # pragma: no cover - the declarations above are fixed
        raise AssertionError(kind)
    if not ok or (kind == "enum" and value not in setting_.choices):
        raise _refused(key, value, _allowed(setting_))
    if kind == "float" and not math.isfinite(value):
        raise _refused(key, value, "a finite number")
    problem = setting_.check(value) if setting_.check is not None else None
    if problem:  # the setting's own range first: it is the narrower one to state
        raise _refused(key, value, problem)
    if kind == "int" and not -MAX_INT <= value <= MAX_INT:
        # what the tables and Spark hold: an int setting goes into queries as a bigint
        raise _refused(key, value, f"an integer from {-MAX_INT} to {MAX_INT}")
    return _freeze(value)


def _refused(key: str, value: Any, expected: str) -> ConfigError:
    return ConfigError(f"config key {key!r}: value {value!r} is not allowed; expected {expected}")


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, dict):
        return dict(value)
    return value


def _allowed(setting_: Setting) -> str:
    if setting_.kind == "enum":
        return "one of " + ", ".join(setting_.choices)
    return {
        "int": "an integer",
        "float": "a number",
        "bool": "true or false",
        "str": "a string",
        "list[str]": "a list of strings",
        "table": "a table",
    }[setting_.kind]


def _parse_text(key: str, text: str, setting_: Setting) -> Any:
    if setting_.kind in ("str", "enum"):
        return text
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        raise _refused(key, text, _allowed(setting_)) from None


# Settings an older crawllib had, and what replaced them.
RENAMED = {
    "fetch.retry_backoff_base": (
        "retries are due by time now: set fetch.retry_backoff_seconds (seconds before the "
        "first retry, doubled at each further failure)"
    ),
}


def _lookup(section: str, name: str) -> Setting:
    if section not in SETTINGS:
        raise ConfigError(
            f"unknown config section {section!r} (in key {section + '.' + name!r}); "
            f"sections are: {', '.join(SETTINGS)}"
        )
    renamed = RENAMED.get(f"{section}.{name}")
    if renamed:
        raise ConfigError(f"config key {section + '.' + name!r} is gone: {renamed}")
    if name not in SETTINGS[section]:
        raise ConfigError(
            f"unknown config key {section + '.' + name!r}; keys of [{section}] are: "
            f"{', '.join(SETTINGS[section])}"
        )
    return SETTINGS[section][name]


def _apply(values: dict[str, dict[str, Any]], key: str, value: Any, from_text: bool) -> None:
    if "." not in key:
        raise ConfigError(f"config key {key!r} must be written section.key (e.g. crawl.max_depth)")
    section, _, name = key.partition(".")
    values.setdefault(section, {})[name] = coerce(key, value, from_text)


def load_config(files: Iterable[str | Path] = (), overrides: Iterable[str] = ()) -> Config:
    """Build a Config: defaults, then each TOML file in order, then ``section.key=value`` texts."""
    values: dict[str, dict[str, Any]] = {}
    for path in files:
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file {str(path)!r} does not exist") from None
        except IsADirectoryError:
            raise ConfigError(f"config file {str(path)!r} is a folder, not a file") from None
        except PermissionError:
            raise ConfigError(f"config file {str(path)!r} cannot be read (permission)") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"config file {str(path)!r} is not UTF-8 text (byte {exc.start}): TOML is UTF-8"
            ) from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {str(path)!r} is not valid TOML: {exc}") from None
        for section, table in data.items():
            if not isinstance(table, dict):
                raise ConfigError(
                    f"config file {str(path)!r}: {section!r} must be a [section] table"
                )
            for name, value in table.items():
                _apply(values, f"{section}.{name}", value, from_text=False)
    for text in overrides:
        key, sep, raw = text.partition("=")
        if not sep:
            raise ConfigError(f"--set {text!r}: expected section.key=value")
        _apply(values, key.strip(), raw.strip(), from_text=True)
    return make_config(values)


def make_config(values: Mapping[str, Mapping[str, Any]] | None = None) -> Config:
    """Config from nested values, each checked (missing ones take defaults)."""
    values = values or {}
    for section in values:
        if section not in SECTION_CLASSES:
            _lookup(section, "")
    return Config(
        **{
            section: cls(
                **{k: coerce(f"{section}.{k}", v) for k, v in values.get(section, {}).items()}
            )
            for section, cls in SECTION_CLASSES.items()
        }
    )


def replace(cfg: Config, **changes: Any) -> Config:
    """A copy of cfg with ``section__key=value`` changes, each checked like ``--set``."""
    values = to_dict(cfg)
    for dunder, value in changes.items():
        section, _, name = dunder.partition("__")
        _apply(values, f"{section}.{name}", value, from_text=False)
    return make_config(values)


def to_dict(cfg: Config) -> dict[str, dict[str, Any]]:
    return {
        section: {
            k: (list(v) if isinstance(v, tuple) else v)
            for k, v in dataclasses.asdict(getattr(cfg, section)).items()
        }
        for section in SECTION_CLASSES
    }


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{" + ", ".join(f"{_toml_value(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
        )
    return repr(value)


# A spark.conf key whose value is a secret (the S3 secret key, a session token, a password): a
# word that says so anywhere in it, or "key" (and the like) between its dots or dashes.
SECRET_WORDS = re.compile(
    r"secret|passw(or)?d|token|credential|api[._-]?key|access[._-]?key|private[._-]?key"
    r"|(^|[._-])(key|keys|pwd|sas)([._-]|$)",
    re.IGNORECASE,
)
MASK = "(masked)"


def is_secret(key: str) -> bool:
    """Whether a ``spark.conf`` key's value is a secret, not to be shown."""
    return SECRET_WORDS.search(key) is not None


# Secrets inside a value whose key is not one: a URI's password (s3a://AKIA:pw@bucket,
# jdbc:postgresql://user:pw@host), a JVM option -Dfs.s3a.secret.key=..., a name=value pair
# (password=..., ;Pwd=...) in a JDBC URL or connection string.
_URI_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/@\s:]*:)[^/@\s]+(?=@)")
_PAIR = re.compile(r"(?P<head>(?:-D)?(?P<name>[A-Za-z0-9_.-]+)=)(?P<value>[^\s&;,]+)")


def mask_value(value: str) -> str:
    """``value`` with the secrets it holds (module comment above) replaced by MASK."""
    value = _URI_PASSWORD.sub(lambda m: m["head"] + MASK, value)
    return _PAIR.sub(lambda m: m["head"] + MASK if is_secret(m["name"]) else m[0], value)


def _masked(value: Any) -> Any:
    if isinstance(value, str):
        return mask_value(value)
    if isinstance(value, dict):
        return {k: MASK if is_secret(str(k)) else _masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value


def config_toml(cfg: Config, masked: bool = False) -> str:
    """A configuration as a TOML file that loads back to it; ``masked`` (``crawl config
    show``): the values of secret ``spark.conf`` keys (`is_secret`) shown as MASK, and the
    secrets inside other values (`mask_value`)."""
    values = to_dict(cfg)
    if masked:
        values["spark"]["conf"] = {
            k: MASK if is_secret(k) else v for k, v in values["spark"]["conf"].items()
        }
        values = {
            section: {k: _masked(v) for k, v in settings.items()}
            for section, settings in values.items()
        }
    blocks = [
        "\n".join([f"[{section}]"] + [f"{k} = {_toml_value(v)}" for k, v in settings.items()])
        for section, settings in values.items()
    ]
    return "\n\n".join(blocks) + "\n"


def defaults_toml() -> str:
    """The text of conf/default.toml: every key, its default and its one-line documentation."""
    lines = [
        "# crawllib defaults. Generated by `python -m crawllib.config`; do not edit by hand.",
        "# Override in a file given with --config, or with --set section.key=value.",
    ]
    for section, settings in SETTINGS.items():
        lines += ["", f"[{section}]"]
        for name, s in settings.items():
            allowed = f" ({_allowed(s)})" if s.kind == "enum" else ""
            lines.append(f"# {s.doc}{allowed}")
            lines.append(f"{name} = {_toml_value(s.default)}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(defaults_toml())
