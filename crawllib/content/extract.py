"""HTML page -> title, main text, language, fingerprints and outlinks. Pure Python: no Spark.

`extract_page` never raises: a page that cannot be read becomes a result with ``error`` set
(``"ExceptionType: message"``), ``text`` None and no links, so one bad page never fails a task.

Choices:
- The body is cut at ``cfg.parse.max_html_bytes`` before anything else (a huge page costs at
  most that much parsing).
- Bytes are decoded with the HTTP charset if Python knows it, else the charset a ``<meta>``
  declares, else UTF-8; undecodable bytes become U+FFFD, so a wrong charset never fails a page.
- The text is trafilatura's main content (plain text, comments left out, default
  precision/recall balance). ``content_hash`` and ``simhash`` fingerprint that *extracted*
  text, not the raw HTML: two pages that differ only in boilerplate (navigation, dates in the
  footer, ads) are exact duplicates. A page where trafilatura finds no main text gets
  ``text`` "" and null fingerprints (an empty text duplicates nothing); that is not an error.
- The title is the <title> (else og:title, else the first <h1>), the language the primary
  subtag of <html lang> (else <meta http-equiv=content-language>): read from the lxml tree
  directly, because trafilatura's metadata pass (date detection included) is costly and
  computes what is not kept. ``language_detected`` is the language of the extracted text
  itself (`crawllib.content.language.detect_language`): what the page says it is written in and
  what it is written in differ often enough that analysts want both.
- ``quality`` holds the text's quality signals (`crawllib.content.quality`: datatrove's
  Gopher, C4 and FineWeb rules), computed here while the text is in memory; None for a page
  without text (none found, noindex, failed).
- ``non_document`` says why a page is not a document, from its title and main text
  (`crawllib.content.nondocument`: a 200 "page not found", a parked domain, a server's default
  page), else None; a noindex page is judged on what it would have kept.
- Characters XML does not allow (controls but tab and line ends, U+FFFE/U+FFFF) are dropped
  before parsing: libxml2 stops at the first, and would cut the page's text and links there.
- An unclosed <title> is closed before the next tag: parsers (browsers too) would otherwise
  read the whole page as the title and find neither text nor links.
- No regular expression with unbounded repetition meets a body where it could backtrack over
  what it already scanned (the title's opening tag and a <meta charset> are found by
  scanning): the work is linear in the page. Links: at most ``cfg.parse.max_links_per_page``
  (the first ones). `crawllib.content.extract_worker` bounds the time of one page in all.
- Links come from lxml (fast and tolerant of broken HTML): every ``<a href>``, resolved against
  ``<base href>`` if present, normalised with `crawllib.core.urls.normalize_url` (scheme, host case,
  fragment, tracking parameters ...). hrefs that cannot be crawled (javascript:, mailto:,
  tel:, ftp:, data:, broken hosts) are dropped, and so are links to the page itself
  (``#top``). One link per target, with the first anchor text.
- Links with ``rel="nofollow"`` are kept unless ``cfg.parse.follow_rel_nofollow`` is false:
  nofollow asks search engines not to pass ranking, not crawlers not to discover (``ugc`` and
  ``sponsored`` are not nofollow).
- What the page asks of crawlers (`crawllib.content.directives.page_directives`: robots meta tags and
  the X-Robots-Tag header for ``cfg.robots.agent``, the canonical URL, a TDM reservation) is
  part of the result, and acted on:
  ``noindex``: the text is not kept as a document: ``title`` and ``text`` None,
  ``text_chars`` 0; but ``content_hash`` and ``simhash`` are still those of the extracted text,
  so that a later revisit can tell whether the page changed (the languages are kept too).
  ``nofollow``: the page's links are all dropped, but for its canonical URL.
  A canonical URL (other than the page's own) is one more link (anchor ""), nofollow or not:
  it is queued like a link target.
  ``tdm_reserved`` is only recorded.
"""

from __future__ import annotations

import codecs
import logging
import re
from collections.abc import Mapping
from typing import Any

import lxml.html
import trafilatura

from crawllib.config import Config
from crawllib.content.directives import base_url, headers_tdm_reserved, page_directives, rel_tokens
from crawllib.content.hashing import content_hash, simhash64
from crawllib.content.language import detect_language
from crawllib.content.nondocument import non_document
from crawllib.content.quality import quality_signals
from crawllib.core.records import Extracted, Link
from crawllib.core.urls import InvalidURL, host_of, normalize_url, url_key

# trafilatura logs a warning for every page it finds no text in; the result records that.
logging.getLogger("trafilatura").setLevel(logging.ERROR)

MAX_ANCHOR_CHARS = 200
MAX_ATTRIBUTES = 512  # of one tag (`cap_attributes`)
_META_SNIFF_BYTES = 4096
_META_OPEN = re.compile(rb"<meta\b", re.IGNORECASE)
_CHARSET_VALUE = re.compile(rb"""charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE)
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_WEB_ALIASES = {"iso8859-1": "cp1252", "ascii": "cp1252"}
_TITLE_OPEN = re.compile(r"<title\b", re.IGNORECASE)
_TITLE_CLOSE = re.compile(r"</title", re.IGNORECASE)
_SPACES = re.compile(r"\s+")
# Control characters (C0 but whitespace, DEL, C1) a page can put in a title or an anchor: a
# terminal that prints the stored value obeys them (ESC ] 0; retitles it, ESC [ 2 J clears it).
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# Characters XML does not allow: libxml2 stops reading a page at the first (a stray form feed
# in a script), and the tree, so the text and links, end there. Dropped before parsing.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _one_line(text: str) -> str:
    """``text`` without control characters, its whitespace collapsed to single spaces."""
    return _SPACES.sub(" ", _CONTROLS.sub("", text)).strip()


_LANG = re.compile(r"[A-Za-z]{2,3}")


class ExtractError(ValueError):
    """A page with nothing to extract (no body at all)."""


def extract_page(
    body: bytes | None,
    url: str,
    charset: str | None,
    cfg: Config,
    *,
    headers: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Extract one HTML page.

    In: the raw body, the page's (normalised) URL, the charset of its Content-Type header (or
    None), the config (``cfg.parse``, ``cfg.robots.agent``) and the response headers
    (lowercase keys, as the pages table holds them; None: none).
    Out: dict with title, text, language (primary subtag, lowercase: "en"),
    language_detected (of the text, `crawllib.content.language.detect_language`), text_chars,
    content_hash (hex SHA-256 of text), simhash (signed 64-bit), quality (its
    `crawllib.content.quality.quality_signals`), non_document (`crawllib.content.nondocument`),
    error (None or
    "ExceptionType: message"), directives (robots directives for us, sorted), tdm_reserved,
    canonical_url (normalised or None) and links: list of (normalised dst URL, anchor text).
    A failed page has directives [] and canonical_url None; its tdm_reserved is what the
    headers alone say.
    """
    try:
        return _extract(body, url, charset, cfg, headers)
    except Exception as exc:  # per-page isolation: any failure is data, never a task failure
        return failed_page(f"{type(exc).__name__}: {exc}", cfg, headers)


def failed_page(
    error: str, cfg: Config, headers: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The `extract_page` result of a page whose extraction failed with ``error``."""
    try:
        reserved = headers_tdm_reserved(headers, cfg.robots.agent)
    except Exception:
        reserved = False
    return {
        "title": None,
        "text": None,
        "language": None,
        "language_detected": None,
        "text_chars": None,
        "content_hash": None,
        "simhash": None,
        "quality": None,
        "non_document": None,
        "error": error[:1000],
        "directives": [],
        "tdm_reserved": reserved,
        "canonical_url": None,
        "links": [],
    }


def extract_record(
    body: bytes | None,
    url: str,
    charset: str | None,
    cfg: Config,
    *,
    headers: Mapping[str, str] | None = None,
) -> Extracted:
    """`extract_page` with each link's url_key and host: what the fetch engine and the parse
    stage store of a page (its texts row, its directives and its links rows). One link per
    target url_key, the first."""
    return record_of(extract_page(body, url, charset, cfg, headers=headers))


def record_of(page: Mapping[str, Any]) -> Extracted:
    """An `extract_page` result as `extract_record` gives it (each link once, keyed)."""
    by_key: dict[int, Link] = {}
    for dst, anchor in page["links"]:
        key = url_key(dst)
        if key not in by_key:
            by_key[key] = {
                "dst_url": dst,
                "dst_key": key,
                "dst_host": host_of(dst),
                "anchor": anchor,
            }
    links = list(by_key.values())
    return {
        "title": page["title"],
        "text": page["text"],
        "language": page["language"],
        "language_detected": page["language_detected"],
        "text_chars": page["text_chars"],
        "content_hash": page["content_hash"],
        "simhash": page["simhash"],
        "quality": page["quality"],
        "non_document": page["non_document"],
        "error": page["error"],
        "directives": page["directives"],
        "tdm_reserved": page["tdm_reserved"],
        "canonical_url": page["canonical_url"],
        "links": links,
    }


def _extract(
    body: bytes | None,
    url: str,
    charset: str | None,
    cfg: Config,
    headers: Mapping[str, str] | None,
) -> dict[str, Any]:
    if not body or not body.strip():
        raise ExtractError("empty body")
    html = cap_attributes(
        close_unclosed_title(
            _NOT_XML.sub("", decode_html(body[: cfg.parse.max_html_bytes], charset))
        )
    )
    # Re-encoded as UTF-8 and parsed with that encoding declared, so that an XML declaration
    # or a <meta charset> in the text cannot make lxml decode it a second time.
    parser = lxml.html.HTMLParser(encoding="utf-8", remove_comments=True, collect_ids=False)
    tree = lxml.html.document_fromstring(html.encode("utf-8", errors="replace"), parser=parser)
    asks = page_directives(tree, headers, url, cfg.robots.agent)
    noindex = "noindex" in asks["directives"]
    links = (
        []
        if "nofollow" in asks["directives"]
        else extract_links(
            tree,
            url,
            rel_nofollow=cfg.parse.follow_rel_nofollow,
            limit=cfg.parse.max_links_per_page,
        )
    )
    canonical = asks["canonical_url"]
    if canonical is not None and all(dst != canonical for dst, _ in links):
        links.append((canonical, ""))
    # trafilatura works on a copy of the tree: the one above stays intact.
    text = (
        trafilatura.extract(
            tree,
            url=url,
            include_comments=False,
            include_tables=True,
            output_format="txt",
        )
        or ""
    )
    title = page_title(tree)
    return {
        "title": None if noindex else title,
        "text": None if noindex else text,
        "language": page_language(tree),
        "language_detected": detect_language(text),
        "text_chars": 0 if noindex else len(text),
        "content_hash": content_hash(text) if text else None,
        "simhash": simhash64(text) if text else None,
        "quality": None if noindex else quality_signals(text),
        "non_document": non_document(title, text),
        "error": None,
        **asks,
        "links": links,
    }


def decode_html(body: bytes, charset: str | None) -> str:
    """Bytes -> text, never failing: a byte-order mark, else the HTTP charset if Python knows
    it, else the charset a <meta> declares, else UTF-8; undecodable bytes become U+FFFD."""
    for bom, encoding in _BOMS:
        if body.startswith(bom):
            return body[len(bom) :].decode(encoding, errors="replace")
    meta = sniff_meta_charset(body)
    # A <meta> cannot truly declare UTF-16/32: the tag itself was read as ASCII (WHATWG).
    if meta and meta.lower().replace("_", "-").startswith(("utf-16", "utf-32")):
        meta = "utf-8"
    for candidate in (charset, meta):
        if not candidate:
            continue
        try:
            encoding = codecs.lookup(candidate.strip().strip("\"'")).name
            # Browsers read Latin-1 and ASCII labels as windows-1252 (WHATWG Encoding).
            return body.decode(_WEB_ALIASES.get(encoding, encoding), errors="replace")
        except (LookupError, TypeError, ValueError):  # unknown, or not a text codec (rot13)
            continue
    return body.decode("utf-8", errors="replace")


def close_unclosed_title(html: str) -> str:
    """Close a ``<title>`` that is never closed, before the next tag.

    HTML parsers (browsers too) read everything after an unclosed <title> as its text, so
    the whole page would vanish into the title. A real title never holds a raw "<".
    """
    opening = _TITLE_OPEN.search(html)
    # its end: the first ">" after it (without one, no later <title> has one either)
    end = html.find(">", opening.end()) + 1 if opening else 0
    if not end or _TITLE_CLOSE.search(html, end):
        return html
    cut = html.find("<", end)
    return html if cut < 0 else f"{html[:cut]}</title>{html[cut:]}"


def cap_attributes(html: str, limit: int = MAX_ATTRIBUTES) -> str:
    """``html`` with each tag cut after its ``limit``-th attribute (counting its "="s): a tag of
    tens of thousands of attributes costs the parser (libxml2 checks each against all before
    it) and trafilatura time quadratic in their number. Tags are found by scanning, once."""
    if html.count("=") <= limit:
        return html
    pieces, start, at = [], 0, html.find("<")
    while at >= 0:
        end = html.find(">", at)
        if end < 0:
            end = len(html)
        if html.count("=", at, end) > limit:
            cut = at
            for _ in range(limit + 1):  # the "=" of the first attribute past the cap
                cut = html.index("=", cut) + 1
            head = html[start : cut - 1].rstrip()
            space = max(head.rfind(" "), head.rfind("\t"), head.rfind("\n"))
            pieces += [head[:space] if space > at - start else head, ">"]
            start = end + 1
        at = html.find("<", end)
    return "".join(pieces) + html[start:] if pieces else html


def sniff_meta_charset(body: bytes) -> str | None:
    """The charset of ``<meta charset>`` or ``<meta http-equiv content="...; charset=">``:
    each <meta> tag of the first bytes is read once, up to its ">"."""
    head = body[:_META_SNIFF_BYTES]
    for opening in _META_OPEN.finditer(head):
        end = head.find(b">", opening.end())
        tag = head[opening.end() : end if end >= 0 else len(head)]
        match = _CHARSET_VALUE.search(tag)
        if match:
            return match.group(1).decode("ascii")
        if end < 0:
            return None
    return None


def extract_links(
    tree: lxml.html.HtmlElement, url: str, *, rel_nofollow: bool = True, limit: int | None = None
) -> list[tuple[str, str]]:
    """[(normalised URL, anchor text), ...] of every crawlable ``<a href>``, first anchor wins;
    without those whose rel holds "nofollow" if ``rel_nofollow`` is false; the first ``limit``
    targets (None: all)."""
    base = base_url(tree, url)
    try:
        own = normalize_url(url)
    except InvalidURL:
        own = url
    seen: dict[str, str] = {}
    hrefs: dict[str, str | None] = {}  # an href seen before: its target (None: not crawlable)
    for element in tree.iter("a"):
        href = element.get("href")
        if href is None or not href.strip():
            continue
        if not rel_nofollow and "nofollow" in rel_tokens(element.get("rel")):
            continue
        if href not in hrefs:
            try:
                hrefs[href] = normalize_url(href, base=base)
            except InvalidURL:
                hrefs[href] = None
        target = hrefs[href]
        if target is None or target == own or target in seen:
            continue
        if limit is not None and len(seen) >= limit:
            break
        seen[target] = anchor_text(element)
    return list(seen.items())


def anchor_text(element: lxml.html.HtmlElement) -> str:
    """Whitespace-collapsed text of a link (or its title / an image's alt), <= 200 chars."""
    text = _one_line(element.text_content())
    if not text:
        text = element.get("title") or next(
            (img.get("alt") for img in element.iter("img") if img.get("alt")), ""
        )
        text = _one_line(text)
    return text[:MAX_ANCHOR_CHARS]


def page_title(tree: lxml.html.HtmlElement) -> str | None:
    """The <title>, else og:title, else the first <h1>; whitespace collapsed; None if none."""
    candidates = [
        *(el.text_content() for el in tree.iter("title")),
        *(el.get("content") or "" for el in tree.xpath('//meta[@property="og:title"]')),
        *(el.text_content() for el in tree.iter("h1")),
    ]
    for candidate in candidates:
        title = _one_line(candidate)
        if title:
            return title[:1000]
    return None


def page_language(tree: lxml.html.HtmlElement) -> str | None:
    """Primary language subtag of <html lang> or <meta http-equiv=content-language>, lowercase."""
    values = [tree.get("lang"), tree.get("xml:lang")]
    values += tree.xpath(
        '//meta[translate(@http-equiv, "CONTENT-LANGUAGE", "content-language")'
        '="content-language"]/@content'
    )
    for value in values:
        match = _LANG.match((value or "").strip())
        if match:
            return match.group(0).lower()
    return None
