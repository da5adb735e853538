"""The schema of every crawl table, and how each is partitioned: pure Python, so that both
engines (Spark: crawllib.store.spark_types; the embedded engine: crawllib.store.embedded) derive
their own types from this one definition.

Keys: ``url_key`` is the signed 64-bit mmh3 of the normalised URL (``crawllib.core.urls.url_key``).
Tables that grow with the crawl are partitioned by ``gen``.

Types are written as Spark SQL names them (``bigint``, ``array<string>``): the rules' SQL
(crawllib.transforms) casts to ``Field.type.ddl``, which both engines read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from crawllib.core.records import Quality, value_type
from crawllib.core.records import fields as record_fields


@dataclasses.dataclass(frozen=True)
class Prim:
    """A primitive type: its Spark SQL name."""

    name: str

    @property
    def ddl(self) -> str:
        return self.name


@dataclasses.dataclass(frozen=True)
class Array:
    element: DataType

    @property
    def ddl(self) -> str:
        return f"array<{self.element.ddl}>"


@dataclasses.dataclass(frozen=True)
class Map:
    key: DataType
    value: DataType

    @property
    def ddl(self) -> str:
        return f"map<{self.key.ddl},{self.value.ddl}>"


@dataclasses.dataclass(frozen=True)
class Field:
    name: str
    type: DataType


@dataclasses.dataclass(frozen=True)
class Struct:
    """A struct type, and a table's schema: its fields in order."""

    fields: tuple[Field, ...]

    @property
    def ddl(self) -> str:
        return "struct<" + ",".join(f"{f.name}:{f.type.ddl}" for f in self.fields) + ">"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def __getitem__(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        return any(f.name == name for f in self.fields)

    def __iter__(self) -> Iterator[Field]:
        return iter(self.fields)


DataType = Prim | Array | Map | Struct


def struct_of(*fields: tuple[str, DataType]) -> Struct:
    """A Struct of (nullable) fields from (name, type) pairs."""
    return Struct(tuple(Field(name, dtype) for name, dtype in fields))


S, L, I, T, D, B = (  # noqa: E741
    Prim("string"),
    Prim("bigint"),
    Prim("int"),
    Prim("timestamp"),
    Prim("double"),
    Prim("boolean"),
)
BIN = Prim("binary")


def select_list(schema: Struct, **given: str) -> str:
    """An SQL select list for rows of a table: its columns in order, each the SQL expression
    ``given`` for it or else the input's column of that name, cast to the table's type."""
    return ", ".join(
        f"CAST({given.get(f.name, f'`{f.name}`')} AS {f.type.ddl}) AS `{f.name}`" for f in schema
    )


# URL scheduled for a generation. reason: crawllib.core.vocab.FrontierReason (seed, link, redirect,
# sitemap). score: its priority when found (crawllib.transforms.priority): the cash its
# linking pages passed it, generate.seed_score for a seed. redirects: for a redirect target,
# the redirects that led to it from the URL first found (a chain ends past fetch.max_redirects).
FRONTIER = struct_of(
    ("gen", I),
    ("url", S),
    ("url_key", L),
    ("host", S),
    ("domain", S),
    ("depth", I),
    ("source_url", S),
    ("reason", S),
    ("discovered_at", T),
    ("score", D),
    ("redirects", I),
)

# Every known URL: the crawl's whole state. status: queued, fetched, redirected, gone, failed,
# dead, robots_denied, blocked, duplicate, filtered. reason says why (e.g. "depth", "budget").
# attempts: attempts of the current visit (a revisit starts again from 0). content_hash: the
# SHA-256 of the stored version's extracted text. The revisit schedule (crawllib.policy.revisit):
# fetched_at, the last visit that reached the page (ok or not_modified; the crawl's clock,
# crawl.now, when set); fetch_interval (seconds) and where it came from (interval_source:
# crawllib.core.vocab.IntervalSource); next_fetch_at = fetched_at + fetch_interval, when plan takes
# it again; etag and last_modified, the validators of the stored version (conditional GET);
# visits_changed / visits_unchanged: revisits whose text differed from / matched the stored
# version (a 304 is unchanged); changed_at: the visit that found the stored version (its first
# visit, or the last revisit that found the text changed). score: the URL's priority, the cash
# the pages linking to it have passed it so far (crawllib.transforms.priority); score_gen: the
# last generation whose links added to it (a rerun of update adds nothing twice). redirects:
# the redirects that led to it (its frontier row's; null: none). not_before: a failed URL's
# retry is due at this time (backoff by the crawl's clock; null: due in its next_gen).
CRAWLDB = struct_of(
    ("url_key", L),
    ("url", S),
    ("host", S),
    ("domain", S),
    ("status", S),
    ("reason", S),
    ("attempts", I),
    ("depth", I),
    ("first_gen", I),
    ("last_gen", I),
    ("next_gen", I),
    ("http_status", I),
    ("content_hash", S),
    ("updated_at", T),
    ("fetched_at", T),
    ("fetch_interval", D),
    ("next_fetch_at", T),
    ("interval_source", S),
    ("etag", S),
    ("last_modified", S),
    ("visits_changed", I),
    ("visits_unchanged", I),
    ("changed_at", T),
    ("score", D),
    ("score_gen", I),
    ("redirects", I),
    ("not_before", T),
)

# What plan chose for a generation: the fetch stage's input. slot: the politeness key value
# (host, registered domain or server address); slice: commit group (each slot's URLs dealt
# round-robin over the slices); attempts: the URL's earlier attempts (crawldb), 0 for its first;
# etag, last_modified: the stored version's validators, sent as a conditional GET (revisits).
FETCHLIST = struct_of(
    ("gen", I),
    ("slice", I),
    ("url", S),
    ("url_key", L),
    ("host", S),
    ("domain", S),
    ("depth", I),
    ("slot", S),
    ("attempts", I),
    ("etag", S),
    ("last_modified", S),
    # On one row of each slot with room to follow links: the url_keys crawldb holds for the
    # slot (crawllib.transforms.fetch_inputs.with_known_keys); null on every other row.
    ("known", Array(L)),
)

# What identifies a URL in analysts' terms, as Common Crawl's index does (fetches, pages,
# texts): its host's registered domain (crawllib.core.urls.registered_domain) and its SURT key
# (crawllib.core.urls.surt: "com,example)/path?q=1", Common Crawl's urlkey). Null in rows an older
# crawllib wrote.
URL_NAMES: tuple[tuple[str, DataType], ...] = (
    ("domain", S),
    ("surt", S),
)

# What identifies a fetched URL in the rows of a fetch slice (fetches and pages).
FETCHED_URL: tuple[tuple[str, DataType], ...] = (
    ("gen", I),
    ("slice", I),
    ("url_key", L),
    ("url", S),
    ("host", S),
    *URL_NAMES,
    ("depth", I),
)

# Every fetch attempt, failures included. outcome: crawllib.core.vocab.Outcome. slice: the commit
# slice (group of hosts) that wrote the row. etag, last_modified: the answer's validators.
FETCHES = struct_of(
    *FETCHED_URL,
    ("outcome", S),
    ("fetched_at", T),
    ("http_status", I),
    ("error_kind", S),
    ("redirect_to", S),
    ("content_type", S),
    ("body_bytes", L),
    ("is_truncated", B),
    ("fetch_ms", I),
    ("ip", S),
    ("retry_after", D),
    ("source_url", S),
    ("etag", S),
    ("last_modified", S),
    # what the body's first bytes show (crawllib.core.sniff; a 2xx answer's), and the host's
    # domain under the public suffix list's private part too (crawllib.core.urls.private_domain)
    ("mime_detected", S),
    ("private_domain", S),
)

# Raw HTML of successful fetches: parse can be rerun without refetching.
PAGES = struct_of(
    *FETCHED_URL,
    ("fetched_at", T),
    ("http_status", I),
    ("content_type", S),
    ("charset", S),
    ("headers", Map(S, S)),
    ("body", BIN),
    ("is_truncated", B),
    ("content_hash", S),
)

# An outbound link, normalised, and a page's extraction: crawllib.core.records.Link and Extracted.
LINK = struct_of(("dst_url", S), ("dst_key", L), ("dst_host", S), ("anchor", S))
# What an extraction says of a page's text (in EXTRACTED and in TEXTS). language: as the page
# declares it (<html lang>, primary subtag); language_detected: as its text reads
# (crawllib.content.language: an ISO 639 code, null for a text too short or unclear).
EXTRACTED_TEXT: tuple[tuple[str, DataType], ...] = (
    ("title", S),
    ("text", S),
    ("language", S),
    ("language_detected", S),
    ("text_chars", I),
    ("content_hash", S),
    ("simhash", L),
)
# What a page asks of crawlers (crawllib.core.records.Directives): the robots directives that apply
# to this crawler (meta robots, meta <agent>, X-Robots-Tag: "noindex", "nofollow", "noarchive",
# "noai" ...), whether text-and-data-mining rights are reserved (TDMRep tdm-reservation, or
# noai), and its <link rel=canonical> (or Link header) URL when that is another URL.
PAGE_DIRECTIVES: tuple[tuple[str, DataType], ...] = (
    ("directives", Array(S)),
    ("tdm_reserved", B),
    ("canonical_url", S),
)
# A main text's quality signals (crawllib.core.records.Quality, from
# crawllib.content.quality): datatrove's Gopher, C4 and FineWeb rules; docs/tables.md.
_QUALITY_TYPES: dict[object, DataType] = {int: I, float: D, bool: B}
QUALITY = struct_of(
    *((name, _QUALITY_TYPES[value_type(t)]) for name, t in record_fields(Quality).items())
)
EXTRACTED = struct_of(
    *EXTRACTED_TEXT,
    ("quality", QUALITY),
    ("non_document", S),
    ("error", S),
    *PAGE_DIRECTIVES,
    ("links", Array(LINK)),
)

# Extracted documents. duplicate_of: url_key of the first copy (exact or near), or of the
# canonical URL the page names (duplicate_kind canonical), else null. A noindex page keeps no
# text (text and title null, text_chars 0; its fingerprints stay, for revisits). slice: the
# fetch slice of its page.
TEXTS = struct_of(
    ("gen", I),
    ("slice", I),
    ("url_key", L),
    ("url", S),
    ("host", S),
    *URL_NAMES,
    *EXTRACTED_TEXT,
    ("duplicate_of", L),
    ("duplicate_kind", S),
    ("error", S),
    *PAGE_DIRECTIVES,
    # last: a table made before them has them added at its end (crawllib.store.embedded,
    # crawllib.store.tables)
    ("quality", QUALITY),
    # why the page is not a document (crawllib.core.vocab.NonDocument), else null
    ("non_document", S),
    # url_key of the first copy of its cluster of duplicates (its own for a first copy),
    # crawllib.transforms.parse.cluster_chains
    ("cluster", L),
)

# Outbound links, one per (src_key, dst_key). slice: as in texts.
LINKS = struct_of(
    ("gen", I),
    ("slice", I),
    ("src_key", L),
    ("src_url", S),
    ("dst_key", L),
    ("dst_url", S),
    ("dst_host", S),
    ("anchor", S),
)

# A host's robots.txt, reused until expires_at.
ROBOTS = struct_of(
    ("host", S),
    ("fetched_at", T),
    ("http_status", I),
    ("body", S),
    ("crawl_delay", D),
    ("sitemaps", Array(S)),
    ("expires_at", T),
    ("error_kind", S),
)

# Politeness that outlives a slice: one row per politeness key (slot), MERGEd with each slice's
# commit, read when a slice starts; with politeness.key = ip a row per host (slot: its name)
# and one per server address (slot: the address). kind: host, domain or address; address: the
# server address the host is paced within (key = ip) or its last request reached. delay:
# seconds from an answer's end to the next request as of the last slice (backoff included; an address's by its
# rule, politeness.address_delay); response_seconds: the moving average of its response times
# (robots.txt included); adaptive_delay: the delay they ask for (politeness.adaptive:
# response_factor times it, up to max_delay); crawl_delay: as robots.txt asks (never
# shortened); http_failures: 5xx/429
# answers in a row (the backoff level); down_failures: DNS/connect failures in a row;
# robots_failures: robots.txt fetches in a row that failed (5xx, timeout, unreachable); totals
# (urls_attempted, pages, bytes) over the crawl; urls_tried: URLs given their first attempt,
# the running total plan's budgets read with politeness.key = host (the same count as crawldb
# rows of the host with last_gen set); domain: the registered domain of the slot's hosts;
# gen/slice: the last slice that wrote the row, slice_*: its share of the totals (a rerun of
# that slice replaces it).
HOSTS = struct_of(
    ("slot", S),
    ("last_request_at", T),
    ("delay", D),
    ("delay_source", S),
    ("crawl_delay", D),
    ("http_failures", I),
    ("down_failures", I),
    ("robots_failures", I),
    ("not_before", T),
    ("not_before_reason", S),
    ("down_until", T),
    ("robots_state", S),
    ("addresses", Array(S)),
    ("urls_attempted", L),
    ("pages", L),
    ("bytes", L),
    ("slice_urls", L),
    ("slice_pages", L),
    ("slice_bytes", L),
    ("urls_tried", L),
    ("slice_urls_tried", L),
    ("domain", S),
    ("first_gen", I),
    ("last_gen", I),
    ("gen", I),
    ("slice", I),
    ("updated_at", T),
    ("kind", S),
    ("address", S),
    ("response_seconds", D),
    ("adaptive_delay", D),
)

# One row per generation and stage. state: running, done, failed. versions: the Delta version
# of every other table after a done stage's commits (crawllib.store.integrity).
GENERATIONS = struct_of(
    ("gen", I),
    ("stage", S),
    ("state", S),
    ("started_at", T),
    ("finished_at", T),
    ("seconds", D),
    ("counts", Map(S, L)),
    ("versions", Map(S, L)),
)

# Host names resolved by plan for politeness.key = ip: address (the slot: the first address
# of the answer) and addresses; error_kind when the name gave no usable address (dns, or a
# network-safety kind; the slot is then the host, and fetch records the failure per URL);
# expires_at = resolved_at + politeness.address_ttl_seconds.
DNS = struct_of(
    ("host", S),
    ("address", S),
    ("addresses", Array(S)),
    ("error_kind", S),
    ("resolved_at", T),
    ("expires_at", T),
)

# One URL of a sitemap (crawllib.content.sitemaps.SitemapURL): normalised, in the sitemap's scope.
SITEMAP_ENTRY = struct_of(
    ("url", S),
    ("url_key", L),
    ("host", S),
    ("lastmod", D),
    ("changefreq", S),
    ("priority", D),
)

# Every sitemap document fetched: gen/slice of the fetch that asked for it, the host whose
# robots.txt (or /sitemap.xml) led to it, its URL, the answer, error_kind (a fetch error kind,
# http_<status>, or a crawllib.content.sitemaps.SitemapError word: entries read before it are kept),
# sitemap_kind (urlset, index, text), its entries (lastmod in epoch seconds), the child
# sitemaps of an index, and how many URLs were invalid or out of scope.
SITEMAPS = struct_of(
    ("gen", I),
    ("slice", I),
    ("host", S),
    ("url", S),
    ("fetched_at", T),
    ("http_status", I),
    ("error_kind", S),
    ("sitemap_kind", S),
    ("entries", Array(SITEMAP_ENTRY)),
    ("children", Array(S)),
    ("invalid", I),
    ("out_of_scope", I),
)

# A soft-404 probe (crawllib.engine.engine): one request, per host and robots.txt refresh, of a
# URL no page links to, and what its answer's text is (the fingerprints of texts); a page whose
# text is the probe's (parse) is a soft 404.
PROBES = struct_of(
    ("gen", I),
    ("slice", I),
    ("host", S),
    ("url", S),
    ("fetched_at", T),
    ("http_status", I),
    ("error_kind", S),
    ("redirect_to", S),
    ("content_type", S),
    ("text_chars", I),
    ("content_hash", S),
    ("simhash", L),
)

# A URL pattern of a host (crawllib.policy.traps.url_pattern): the pages fetched of it and how many
# were duplicates (exact or near), over the whole crawl; gen: the last generation counted.
TRAPS = struct_of(
    ("host", S),
    ("pattern", S),
    ("pages", L),
    ("duplicates", L),
    ("first_gen", I),
    ("gen", I),
    ("updated_at", T),
)

# Exact duplicates between two hosts (crawllib.store.aliases): copies = pages of host marked exact
# duplicates whose first copy is on of_host, over the whole crawl; gen: the last generation
# counted.
ALIASES = struct_of(
    ("host", S),
    ("of_host", S),
    ("copies", L),
    ("first_gen", I),
    ("gen", I),
    ("updated_at", T),
)

# One row per capture `crawl export-warc` wrote (crawllib.stages.export): where its response record
# lies, as in a CDX index: warc_filename (the file's full path or URI), the offset and length
# of the record's gzip member (seek, read that many bytes, gunzip: one WARC record); the
# capture's url, fetch time, status, stored content_type, payload_digest (the record's
# WARC-Payload-Digest). A rerun of a generation's export replaces its rows.
WARC_INDEX = struct_of(
    ("gen", I),
    ("url_key", L),
    ("url", S),
    ("fetched_at", T),
    ("http_status", I),
    ("content_type", S),
    ("is_truncated", B),
    ("payload_digest", S),
    ("warc_filename", S),
    ("warc_record_offset", L),
    ("warc_record_length", L),
    # the response record's WARC-Record-ID (<urn:uuid:...>); last: an older table gains it
    ("warc_record_id", S),
)

TABLES: dict[str, tuple[Struct, list[str]]] = {
    "frontier": (FRONTIER, ["gen"]),
    "crawldb": (CRAWLDB, []),
    "fetchlist": (FETCHLIST, ["gen"]),
    "fetches": (FETCHES, ["gen"]),
    "pages": (PAGES, ["gen"]),
    "texts": (TEXTS, ["gen"]),
    "links": (LINKS, ["gen"]),
    "robots": (ROBOTS, []),
    "hosts": (HOSTS, []),
    "dns": (DNS, []),
    "sitemaps": (SITEMAPS, ["gen"]),
    "traps": (TRAPS, []),
    "aliases": (ALIASES, []),
    "probes": (PROBES, ["gen"]),
    "generations": (GENERATIONS, []),
    "warc_index": (WARC_INDEX, ["gen"]),
}
