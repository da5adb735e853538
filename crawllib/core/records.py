"""The fetch engine's rows in and records out, declared once with their Python types.

The engine (:mod:`crawllib.engine`) takes :class:`FetchInput` rows and emits one
:class:`FetchRecord` per row plus one :class:`RobotsRecord` per robots.txt it requested, one
:class:`HostRecord` per slot, one :class:`SitemapRecord` per sitemap document and one
:class:`ProbeRecord` per soft-404 probe; the fetch stage's steps
(:mod:`crawllib.transforms.fetch_inputs`) derive their Spark schema and select lists from these
declarations and the tables of :mod:`crawllib.store.schemas`. A record is a plain
dict at run time. Pure Python: no aiohttp (Spark-side modules import this), no Spark.

A key that is also a table column has that column's meaning; times are epoch seconds (the
tables hold timestamps). The ``record`` literals are the words of ``crawllib.core.vocab.Record``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Literal, NotRequired, TypedDict

from crawllib.core.vocab import Record


class FetchInput(TypedDict):
    """One URL to fetch: fetchlist columns. ``slot`` is the politeness key value (default:
    the host); ``host`` defaults to the URL's."""

    slot: NotRequired[str]
    url: str
    url_key: int
    host: NotRequired[str]
    depth: int
    attempts: NotRequired[int | None]  # earlier attempts (crawldb); none or 0: its first
    etag: NotRequired[str | None]  # the stored version's validators: a revisit's conditional GET
    last_modified: NotRequired[str | None]


class Link(TypedDict):
    """An outbound link of a page: a row of the links table without its source."""

    dst_url: str
    dst_key: int
    dst_host: str
    anchor: str


class Directives(TypedDict):
    """What a page asks of crawlers (`crawllib.content.directives.page_directives`): the robots
    directives that apply to us (known words, lowercase, sorted, each once: "noindex",
    "nofollow" ...), whether text-and-data-mining rights are reserved, and its canonical URL
    (normalised; None if absent or the page itself)."""

    directives: list[str]
    tdm_reserved: bool
    canonical_url: str | None


class Quality(TypedDict):
    """A main text's quality signals (`crawllib.content.quality.quality_signals`): what
    datatrove's Gopher, C4 and FineWeb filters compute of it, named after the rule. A ratio
    over nothing (no words, no lines) is None."""

    gopher_words: int
    gopher_mean_word_length: float | None
    gopher_hash_ratio: float | None
    gopher_ellipsis_ratio: float | None
    gopher_bullet_lines: float | None
    gopher_ellipsis_lines: float | None
    gopher_alpha_words: float | None
    gopher_stop_words: int
    gopher_dup_para_frac: float
    gopher_dup_para_char_frac: float
    gopher_dup_line_frac: float
    gopher_dup_line_char_frac: float
    gopher_top_2gram_char_frac: float
    gopher_top_3gram_char_frac: float
    gopher_top_4gram_char_frac: float
    gopher_dup_5gram_char_frac: float
    gopher_dup_6gram_char_frac: float
    gopher_dup_7gram_char_frac: float
    gopher_dup_8gram_char_frac: float
    gopher_dup_9gram_char_frac: float
    gopher_dup_10gram_char_frac: float
    c4_lines: int
    c4_terminal_punctuation_lines: int
    c4_javascript_lines: int
    c4_policy_lines: int
    c4_lorem_ipsum: bool
    c4_curly_bracket: bool
    c4_sentences: int
    fineweb_c4_lorem_ipsum: bool
    fineweb_c4_curly_bracket: bool
    fineweb_c4_sentences: int
    fineweb_line_punct_ratio: float | None
    fineweb_short_line_ratio: float | None
    fineweb_char_dup_ratio: float | None
    fineweb_list_ratio: float | None


class Extracted(TypedDict):
    """A page's extraction (`crawllib.content.extract.extract_record`): the columns of its texts row,
    its `Directives` and its outbound links. ``content_hash`` and ``simhash`` fingerprint the
    extracted text (kept for a noindex page, whose title and text are None)."""

    title: str | None
    text: str | None
    language: str | None
    language_detected: str | None
    text_chars: int | None
    content_hash: str | None
    simhash: int | None
    quality: Quality | None
    non_document: str | None
    error: str | None
    directives: list[str]
    tdm_reserved: bool
    canonical_url: str | None
    links: list[Link]


class FetchRecord(TypedDict):
    """What became of one input URL: exactly one per :class:`FetchInput` row.

    url_key, url and depth are the input row's (None where it has none); domain and surt are
    the host's registered domain and the URL's SURT key (`crawllib.core.urls`). ``outcome`` is a
    ``crawllib.core.vocab.Outcome`` word, ``error_kind`` an ``ErrorKind`` (or ``BlockedKind``) word;
    ``error_detail`` (the exception's text) is in no table.
    """

    record: Literal["fetch"]
    url_key: int | None
    url: str | None
    host: str
    domain: str | None
    surt: str | None
    depth: int | None
    outcome: str
    fetched_at: float
    http_status: int | None
    error_kind: str | None
    error_detail: str | None
    redirect_to: str | None
    content_type: str | None
    charset: str | None
    headers: dict[str, str]
    body: bytes | None
    body_bytes: int
    is_truncated: bool
    fetch_ms: int
    ip: str | None
    retry_after: float | None
    extracted: Extracted | None  # a kept page's extraction when fetch.extract is on
    source_url: str | None  # the page whose link the task followed to this URL (fetch.follow)
    etag: str | None  # the answer's validators (ETag, Last-Modified)
    last_modified: str | None
    mime_detected: str | None  # what the body's first bytes show (crawllib.core.sniff)
    # the host's domain under the public suffix list's private part too (blogspot.com ...)
    private_domain: str | None
    # requested again by a task attempt after an earlier attempt of the task, lost with its
    # executor, had requested it too (crawllib.engine.resume): in no table, counted by the stage
    refetched: bool


class RobotsRecord(TypedDict):
    """One host's robots.txt as fetched in this call: a row of the robots table."""

    record: Literal["robots"]
    host: str
    fetched_at: float
    http_status: int | None
    body: str
    crawl_delay: float | None
    sitemaps: list[str]
    expires_at: float
    error_kind: str | None


class HostState(TypedDict):
    """A slot's politeness as the hosts table keeps it (times in epoch seconds): what its
    slot starts from in the next engine call."""

    slot: str
    last_request_at: float | None
    http_failures: int | None
    down_failures: int | None
    robots_failures: int | None
    not_before: float | None
    not_before_reason: str | None
    down_until: float | None
    response_seconds: float | None


class HostRecord(TypedDict):
    """One slot's politeness at the end of an engine call: a row of the hosts table, less the
    columns the fetch stage adds (totals, generations, slice, updated_at). kind: what the row
    paces (crawllib.core.vocab.HostKind: with politeness.key = ip a row per host and one per
    address); address: the server address the host is paced within (key = ip) or its last
    request reached; slice_urls: URLs
    requested in this call (its soft-404 probes included; robots.txt and sitemaps not),
    slice_pages: pages kept, slice_bytes: their body bytes,
    slice_urls_tried: URLs given their first attempt (any outcome but deferred: what sets
    crawldb's last_gen); domain: the registered domain of its hosts (None if they differ);
    addresses: the server addresses its requests reached; response_seconds: the moving
    average of its response times; adaptive_delay: the delay they ask for
    (politeness.adaptive: response_factor times it, up to max_delay)."""

    record: Literal["host"]
    slot: str
    kind: str
    address: str | None
    last_request_at: float | None
    delay: float
    delay_source: str
    response_seconds: float | None
    adaptive_delay: float | None
    crawl_delay: float | None
    http_failures: int
    down_failures: int
    robots_failures: int
    not_before: float | None
    not_before_reason: str | None
    down_until: float | None
    robots_state: str | None
    addresses: list[str]
    domain: str | None
    slice_urls: int
    slice_pages: int
    slice_bytes: int
    slice_urls_tried: int


class SitemapEntry(TypedDict):
    """One URL a sitemap lists (crawllib.content.sitemaps.SitemapURL, with its key and host)."""

    url: str
    url_key: int
    host: str
    lastmod: float | None
    changefreq: str | None
    priority: float | None


class SitemapRecord(TypedDict):
    """One sitemap document as fetched and read in this call: a row of the sitemaps table
    (less gen and slice)."""

    record: Literal["sitemap"]
    host: str
    url: str
    fetched_at: float
    http_status: int | None
    error_kind: str | None
    sitemap_kind: str | None
    entries: list[SitemapEntry]
    children: list[str]
    invalid: int
    out_of_scope: int


class ProbeRecord(TypedDict):
    """A host's answer to its soft-404 probe: one request for a URL no page links to
    (``crawllib.core.vocab.probe_path``), made after the host's robots.txt was fetched in this call.

    ``http_status``, ``error_kind``, ``redirect_to`` (the normalised Location: a redirect is
    not followed) and ``content_type`` mean what they mean in a fetch record (a 404 has
    error_kind None, a timeout no http_status). For an answer whose body a page would keep
    (2xx, media type in fetch.content_types or none), ``text_chars``, ``content_hash`` and
    ``simhash`` are its extraction's (:class:`Extracted`: the texts row's fingerprints); else
    None. The body itself is not kept."""

    record: Literal["probe"]
    host: str
    url: str
    fetched_at: float
    http_status: int | None
    error_kind: str | None
    redirect_to: str | None
    content_type: str | None
    text_chars: int | None
    content_hash: str | None
    simhash: int | None


class CheckpointRecord(TypedDict):
    """Every slot's :class:`HostRecord` at one moment of an engine call, emitted every
    ``checkpoint_seconds`` when the caller asks for them (crawllib.engine.stream). No table's
    row: the fetch task's journal keeps them with the records emitted before, so that a later
    attempt of the task starts each slot from there (crawllib.engine.resume)."""

    record: Literal["checkpoint"]
    hosts: list[HostRecord]


EngineRecord = (
    FetchRecord | RobotsRecord | HostRecord | SitemapRecord | ProbeRecord | CheckpointRecord
)


def fields(declaration: type) -> dict[str, object]:
    """Key -> type annotation of a record declaration, in declaration order."""
    return typing.get_type_hints(declaration)


def value_type(annotation: object) -> object:
    """The type of a key's non-null values: ``int | None`` -> int, ``Literal["fetch"]`` -> str;
    a generic (``dict[str, str]``) is returned as it is."""
    if typing.get_origin(annotation) is Literal:
        (value, *_) = typing.get_args(annotation)
        return type(value)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        (inner,) = [a for a in typing.get_args(annotation) if a is not type(None)]
        return value_type(inner)
    return annotation


@dataclasses.dataclass(frozen=True)
class Resume:
    """What earlier attempts of a task did: ``records`` (fetch, robots, sitemap and probe
    records, in the order they were emitted), ``hosts`` (slot -> its state at the last
    checkpoint) and ``requested`` (url_keys requested without a record here)."""

    records: tuple[EngineRecord, ...] = ()
    hosts: Mapping[str, HostRecord] = dataclasses.field(default_factory=dict)
    requested: frozenset[int] = frozenset()

    def fetched(self) -> frozenset[int]:
        """The url_keys that have a fetch record."""
        return frozenset(
            r["url_key"]
            for r in self.records
            if r["record"] == Record.FETCH and r["url_key"] is not None
        )

    def of_kind(self, kind: str) -> list[Any]:
        return [r for r in self.records if r["record"] == kind]


def hosts_of(checkpoints: Iterable[Mapping[str, Any]]) -> dict[str, HostRecord]:
    """slot -> its HostRecord in the latest of ``checkpoints`` (CheckpointRecords in order)."""
    out: dict[str, HostRecord] = {}
    for checkpoint in checkpoints:
        for host in checkpoint["hosts"]:
            out[host["slot"]] = host
    return out
