"""Sitemap documents (sitemaps.org protocol) -> the URLs they list. Pure Python, no I/O.

In: the raw bytes of one fetched sitemap, the URL it was fetched from, and the hosts whose
robots.txt listed it. The bytes may be gzip-compressed (recognised by the gzip magic, not by
name or header: a client may already have decoded them), and hold an XML ``<urlset>``, an XML
``<sitemapindex>`` (namespaced or not) or a plain-text list of URLs, one a line.
Out: a `SitemapResult`: the normalised in-scope page URLs with their hints (``lastmod`` as epoch
seconds in UTC, ``changefreq``, ``priority``), or the child sitemaps of an index, counts of what
was dropped, and at most one error word of `SitemapError`. `parse_sitemap` never raises: a bad
document is data, and the entries read before the problem are kept.

Limits, because a sitemap is untrusted input of any size:
- at most ``max_bytes`` of (uncompressed) document are read; gzip is inflated a chunk at a time,
  so a gzip bomb costs ``max_bytes``, not its inflated size (``too_large``);
- at most ``max_urls`` entries are kept (``too_many_urls``); the protocol's own limits are
  50,000 URLs and 50 MB, the defaults;
- a DTD is refused as soon as expat meets ``<!DOCTYPE`` (``doctype``), before any entity is
  declared: no entity expansion (billion laughs), no external entities. A plain expat parser
  with a doctype handler, not ElementTree, because ElementTree's C parser offers no such hook
  (and defusedxml is not a dependency); it also builds no tree, so memory stays per entry.
Scope: an entry is kept only if its host is the sitemap's own host or one of ``allowed_hosts``
(robots.txt may list a sitemap on another host). The protocol's path rule (a sitemap under
/a/ lists only URLs under /a/) is not applied: search engines accept any URL of the host.
"""

from __future__ import annotations

import functools
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from itertools import chain
from typing import Final
from xml.parsers import expat

from crawllib.core.urls import InvalidURL, host_of, normalize_url


class SitemapError:
    """``SitemapResult.error``: why parsing stopped early or found nothing usable."""

    NOT_SITEMAP: Final = "not_sitemap"  # an HTML page, a feed, binary data: no URLs to read
    BAD_XML: Final = "bad_xml"  # an XML syntax error, or a document cut short
    DOCTYPE: Final = "doctype"  # a DTD, refused (entity expansion, external entities)
    DECODE_ERROR: Final = "decode_error"  # corrupt or truncated gzip
    TOO_LARGE: Final = "too_large"  # more than max_bytes of uncompressed document
    TOO_MANY_URLS: Final = "too_many_urls"  # more than max_urls entries


class SitemapKind:
    """``SitemapResult.kind``: the form of the document (None: nothing usable in it)."""

    URLSET: Final = "urlset"
    INDEX: Final = "index"
    TEXT: Final = "text"


# changefreq -> revisit interval hint in seconds. "always" (the page changes on every visit)
# gets an hour: nothing is worth revisiting more often in a crawl of generational rounds.
# "never" (archived) gets no hint: the caller's own interval applies.
_CHANGEFREQ_SECONDS: Final[dict[str, float | None]] = {
    "always": 3600.0,
    "hourly": 3600.0,
    "daily": 86400.0,
    "weekly": 7 * 86400.0,
    "monthly": 30 * 86400.0,
    "yearly": 365 * 86400.0,
    "never": None,
}
GZIP_MAGIC: Final = b"\x1f\x8b"
_CHUNK: Final = 64 * 1024
# Text of one field (or one text line) kept at most: far past any useful URL length (plan
# filters by crawl.max_url_length); bounds the work one hostile field can cause.
_MAX_FIELD_CHARS: Final = 64 * 1024
_FIELDS: Final = ("loc", "lastmod", "changefreq", "priority")
_W3C_DATETIME = re.compile(
    r"(\d{4})(?:-(\d\d)(?:-(\d\d)(?:[T ](\d\d):(\d\d)(?::(\d\d)(?:[.,](\d+))?)?)?)?)?"
    r"\s*(Z|[+-]\d\d(?::?\d\d)?)?",
    re.ASCII | re.IGNORECASE,
)


@dataclass(frozen=True)
class SitemapURL:
    """One entry: a normalised URL and its hints (None when absent or invalid)."""

    url: str
    lastmod: float | None = None  # epoch seconds, UTC
    changefreq: str | None = None  # one of the protocol's words, lowercase
    priority: float | None = None  # in [0, 1]


@dataclass(frozen=True)
class SitemapResult:
    """What one sitemap document lists; entries in document order."""

    kind: str | None  # a SitemapKind word
    urls: list[SitemapURL]  # pages of a urlset or a text sitemap
    sitemaps: list[SitemapURL]  # children of an index (changefreq and priority None)
    error: str | None  # a SitemapError word
    invalid: int = 0  # entries without a crawlable URL (no loc, not http(s), malformed)
    out_of_scope: int = 0  # entries on a host neither the sitemap's nor allowed
    bad_lastmod: int = 0  # kept entries whose lastmod is not a W3C datetime (lastmod None)


def changefreq_seconds(changefreq: str | None) -> float | None:
    """Revisit interval hinted by a changefreq word, in seconds; None for "never" or no word."""
    return _CHANGEFREQ_SECONDS.get((changefreq or "").strip().lower())


def parse_sitemap(
    data: bytes,
    sitemap_url: str,
    *,
    content_type: str | None = None,
    allowed_hosts: frozenset[str] | None = None,
    max_urls: int = 50_000,
    max_bytes: int = 50 * 1024 * 1024,
) -> SitemapResult:
    """Entries of the sitemap `data` fetched from `sitemap_url` (see the module docstring).

    The bytes decide the format: XML when the document starts with "<" (but not an HTML page),
    else a text list. `allowed_hosts`: hosts (as `host_of` gives them) whose robots.txt listed the sitemap.
    """
    out = _Collector(sitemap_url, allowed_hosts, max_urls)
    raw = _gunzip(data) if data.startswith(GZIP_MAGIC) else _slices(data)
    chunks = _bounded(raw, max_bytes)
    try:
        head = _read_head(chunks)
        form = _sniff(b"".join(head), content_type)
        if form == "html":
            raise _Stop(SitemapError.NOT_SITEMAP)
        parse = _parse_xml if form == "xml" else _parse_text
        parse(chain(head, chunks), out)
    except _Stop as stop:
        out.error = stop.error
    return SitemapResult(
        out.kind, out.urls, out.sitemaps, out.error, out.invalid, out.out_of_scope, out.bad_lastmod
    )


# Many entries of one sitemap share their lastmod: worth a small cache.
@functools.lru_cache(maxsize=1024)
def parse_lastmod(text: str) -> float | None:
    """W3C datetime ("2024", "2024-05", "2024-05-01", "2024-05-01T10:00:00.5+02:00") -> epoch
    seconds in UTC; None if unparseable. Without a time zone, UTC is assumed."""
    match = _W3C_DATETIME.fullmatch(text.strip())
    if not match:
        return None
    *fields, fraction, zone = match.groups()
    defaults = (0, 1, 1, 0, 0, 0)  # missing month and day are the first, times are zero
    year, month, day, hour, minute, second = (
        int(v) if v else default for v, default in zip(fields, defaults, strict=True)
    )
    try:
        tz = UTC
        if zone and zone.upper() != "Z":
            sign = -1 if zone[0] == "-" else 1
            digits = zone[1:].replace(":", "")
            tz = timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0)))
        micro = int((fraction or "0")[:6].ljust(6, "0"))
        parsed = datetime(year, month, day, hour, minute, second, micro, tzinfo=tz)
        return parsed.timestamp()
    except (ValueError, OverflowError):
        return None


class _Stop(Exception):
    """Parsing ends here with `error`; what was collected so far stands."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


class _Collector:
    """Checks entries (URL, scope, hints) and collects the kept ones and the counts."""

    def __init__(self, sitemap_url: str, allowed_hosts: frozenset[str] | None, max_urls: int):
        try:
            own_host = host_of(normalize_url(sitemap_url))
        except InvalidURL:
            own_host = ""
        self.hosts = {h.lower() for h in allowed_hosts or ()} | ({own_host} if own_host else set())
        self.max_urls = max_urls
        self.kind: str | None = None
        self.error: str | None = None
        self.urls: list[SitemapURL] = []
        self.sitemaps: list[SitemapURL] = []
        self.invalid = self.out_of_scope = self.bad_lastmod = 0
        self.seen_url = False  # any http(s) URL at all, in scope or not

    def add(self, fields: dict[str, str], *, child: bool = False) -> None:
        loc = fields.get("loc", "")
        try:
            if len(loc) > _MAX_FIELD_CHARS:
                raise InvalidURL("too long")
            url = normalize_url(loc)
        except InvalidURL:
            self.invalid += 1
            return
        self.seen_url = True
        if host_of(url) not in self.hosts:
            self.out_of_scope += 1
            return
        if len(self.urls) + len(self.sitemaps) >= self.max_urls:
            raise _Stop(SitemapError.TOO_MANY_URLS)
        lastmod = None
        if fields.get("lastmod", "").strip():
            lastmod = parse_lastmod(fields["lastmod"])
            if lastmod is None:
                self.bad_lastmod += 1
        if child:
            self.sitemaps.append(SitemapURL(url, lastmod))
            return
        changefreq = fields.get("changefreq", "").strip().lower()
        self.urls.append(
            SitemapURL(
                url,
                lastmod,
                changefreq if changefreq in _CHANGEFREQ_SECONDS else None,
                _priority(fields.get("priority", "")),
            )
        )


def _priority(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0.0 <= value <= 1.0 else None  # NaN fails both comparisons


def _slices(data: bytes) -> Iterator[bytes]:
    view = memoryview(data)
    for start in range(0, len(data), _CHUNK):
        yield bytes(view[start : start + _CHUNK])


def _gunzip(data: bytes) -> Iterator[bytes]:
    """Inflated pieces of a gzip stream (members concatenated), each at most _CHUNK bytes.

    Input goes in _CHUNK at a time and output is capped per call, so memory stays a few chunks
    whatever the compression ratio. Bytes after the last member that are no gzip are ignored.
    """
    view = memoryview(data)
    pos = 0
    try:
        while data.startswith(GZIP_MAGIC, pos):
            inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            while not inflater.eof:
                piece = bytes(view[pos : pos + _CHUNK])
                pos += len(piece)
                out = inflater.decompress(piece, _CHUNK)
                while out or inflater.unconsumed_tail:
                    if out:
                        yield out
                    out = inflater.decompress(inflater.unconsumed_tail, _CHUNK)
                if not piece and not inflater.eof:
                    raise _Stop(SitemapError.DECODE_ERROR)  # input ended inside the member
            pos -= len(inflater.unused_data)
    except zlib.error as exc:
        raise _Stop(SitemapError.DECODE_ERROR) from exc


def _bounded(chunks: Iterable[bytes], max_bytes: int) -> Iterator[bytes]:
    """`chunks` up to `max_bytes` in all; _Stop(TOO_LARGE) when there is more."""
    budget = max_bytes
    for chunk in chunks:
        if len(chunk) > budget:
            if budget:
                yield chunk[:budget]
            raise _Stop(SitemapError.TOO_LARGE)
        budget -= len(chunk)
        yield chunk


def _read_head(chunks: Iterator[bytes]) -> list[bytes]:
    """The first chunks, up to and including the first one with a non-blank byte."""
    head = []
    for chunk in chunks:
        head.append(chunk)
        if chunk.strip():
            break
    return head


def _sniff(head: bytes, content_type: str | None) -> str:
    """ "xml", "html" (an error page, most often) or "text", from the first bytes; the declared
    type only keeps an HTML page that does not start with "<" from being read as text."""
    start = head.removeprefix(b"\xef\xbb\xbf").lstrip()[:14].lower()
    if start.startswith((b"<!doctype html", b"<html")):
        return "html"
    # UTF-16 with or without a byte order mark: expat reads it, a text list cannot be
    if start.startswith((b"<", b"\xff\xfe", b"\xfe\xff", b"\x00<")):
        return "xml"
    return "html" if content_type and "html" in content_type.lower() else "text"


def _parse_text(chunks: Iterable[bytes], out: _Collector) -> None:
    """One URL a line (UTF-8); a line that is no URL counts as invalid. A line cut by a stop
    is not read: its URL would be truncated."""
    pending: list[bytes] = []
    size = 0
    try:
        for chunk in chunks:
            lines = chunk.split(b"\n")
            if size <= _MAX_FIELD_CHARS:
                pending.append(lines[0])
                size += len(lines[0])
            for line in lines[1:]:
                _text_line(b"".join(pending) if size <= _MAX_FIELD_CHARS else None, out)
                pending, size = [line], len(line)
        _text_line(b"".join(pending) if size <= _MAX_FIELD_CHARS else None, out)
        if not out.seen_url:
            raise _Stop(SitemapError.NOT_SITEMAP)
    finally:
        if out.seen_url:
            out.kind = SitemapKind.TEXT


def _text_line(line: bytes | None, out: _Collector) -> None:
    if line is None:  # too long to be a URL
        out.invalid += 1
        return
    line = line.removeprefix(b"\xef\xbb\xbf").strip()
    if not line:
        return
    try:
        out.add({"loc": line.decode("utf-8")})
    except UnicodeDecodeError:
        out.invalid += 1


def _parse_xml(chunks: Iterable[bytes], out: _Collector) -> None:
    reader = _XMLReader(out)
    try:
        for chunk in chunks:
            reader.parser.Parse(chunk, False)
        reader.parser.Parse(b"", True)
    # LookupError, ValueError: pyexpat's answer to an encoding it does not know or cannot use
    except (expat.ExpatError, LookupError, ValueError) as exc:
        raise _Stop(SitemapError.BAD_XML) from exc


class _XMLReader:
    """expat handlers: root <urlset>/<sitemapindex>, entries <url>/<sitemap> under it, fields
    (loc, lastmod, ...) directly under an entry, all in the root's namespace (or none), so
    that extensions (image:loc, xhtml:link, ...) are ignored."""

    def __init__(self, out: _Collector) -> None:
        self.out = out
        self.depth = 0
        self.prefix = ""  # the root's "namespace-uri " (expat's separator is a space)
        self.entry_tag = ""
        self.entry: dict[str, str] | None = None
        self.field: str | None = None
        self.text: list[str] = []
        self.size = 0
        self.parser = expat.ParserCreate(namespace_separator=" ")
        self.parser.buffer_text = True
        self.parser.StartDoctypeDeclHandler = self._doctype
        self.parser.StartElementHandler = self._start
        self.parser.EndElementHandler = self._end
        self.parser.CharacterDataHandler = self._text

    def _doctype(self, name: str, *_: object) -> None:
        # An exception in a handler stops expat at once: the DTD's declarations are not read.
        html = name.lower() == "html"
        raise _Stop(SitemapError.NOT_SITEMAP if html else SitemapError.DOCTYPE)

    def _start(self, name: str, _attrs: object) -> None:
        self.depth += 1
        if self.depth == 1:
            ns, _, local = name.rpartition(" ")
            if local not in ("urlset", "sitemapindex"):
                raise _Stop(SitemapError.NOT_SITEMAP)
            self.prefix = f"{ns} " if ns else ""
            index = local == "sitemapindex"
            self.out.kind = SitemapKind.INDEX if index else SitemapKind.URLSET
            self.entry_tag = self.prefix + ("sitemap" if index else "url")
        elif self.depth == 2 and name == self.entry_tag:
            self.entry = {}
        elif self.depth == 3 and self.entry is not None:
            local = name.removeprefix(self.prefix)
            if local in _FIELDS and name == self.prefix + local:
                self.field, self.text, self.size = local, [], 0

    def _text(self, data: str) -> None:
        if self.field is not None and self.size <= _MAX_FIELD_CHARS:
            self.text.append(data)
            self.size += len(data)

    def _end(self, _name: str) -> None:
        if self.depth == 3 and self.field is not None and self.entry is not None:
            self.entry.setdefault(self.field, "".join(self.text))  # the first one counts
            self.field = None
        elif self.depth == 2 and self.entry is not None:
            entry, self.entry = self.entry, None
            self.out.add(entry, child=self.out.kind == SitemapKind.INDEX)
        self.depth -= 1
