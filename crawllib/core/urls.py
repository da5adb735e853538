"""URL normalisation and URL-derived keys. Pure Python: no Spark, no I/O.

Every URL enters the crawl through `normalize_url` (seed load, link extraction, redirects), so
that two spellings of one resource get one `url_key` and one crawldb row.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from urllib.parse import quote_from_bytes, unquote, unquote_to_bytes, urljoin, urlsplit

import idna  # a dependency of tldextract; UTS #46 mapping as browsers do
import mmh3
import tldextract


class InvalidURL(ValueError):
    """A URL the crawler cannot use; the message is a short reason ("no host")."""


_DEFAULT_PORTS = {"http": 80, "https": 443}
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# Characters left literal (RFC 3986 pchar / query); everything else is percent-encoded.
_PATH_SAFE = _UNRESERVED | frozenset("!$&'()*+,;=:@/")
_QUERY_SAFE = _PATH_SAFE | frozenset("?")
_PCT = re.compile(r"%([0-9A-Fa-f]{2})")
_HOST_LABEL = re.compile(r"[a-z0-9_-]{1,63}")
_PORT = re.compile(r"[0-9]{1,5}")
_TRACKING = re.compile(
    r"utm_.*|gclid|fbclid|msclkid|mc_cid|mc_eid|_ga|yclid"
    r"|jsessionid|phpsessid|sid|sessionid|session_id|aspsessionid.*",
    re.IGNORECASE,
)
_SESSION_PATH_PARAM = re.compile(
    r";(?:jsessionid|phpsessid|sid|sessionid|session_id|aspsessionid[^=;/]*)=[^;/]*",
    re.IGNORECASE,
)


def normalize_url(url: str, base: str | None = None) -> str:
    """Resolve `url` against `base` (if given) and return its canonical absolute form.

    In: any string, e.g. an href and the page URL it was found on.
    Out: `scheme://host[:port]/path[?query]` in ASCII; http/https only, lowercase scheme and
    host, IDNA host, no default port, userinfo, fragment, dot segments, tracking or session
    parameters; percent-encoding canonical; query parameters sorted.
    Raises InvalidURL (and nothing else) with a short reason when the URL cannot be crawled.
    """
    if not isinstance(url, str):
        raise InvalidURL("not a string")
    try:
        return _normalize(url, base)
    except InvalidURL:
        raise
    except UnicodeError as exc:  # lone surrogates and the like; a ValueError, checked first
        raise InvalidURL("invalid characters") from exc
    except ValueError as exc:  # urllib rejects some netlocs ("Invalid IPv6 URL")
        raise InvalidURL("invalid host") from exc


def _normalize(url: str, base: str | None) -> str:
    url = url.strip()
    if base:
        url = urljoin(base.strip(), url)
    if len(url) > CACHED_URL_CHARS:
        return _normalize_uncached(url)
    return _normalize_absolute(url)


# Pages of a site repeat their navigation links: parse meets the same resolved URL again and
# again (most of a page's links on the test web), and normalising is worth caching. Bounded in
# entries and in their size, so a worker holds at most about 8,192 x 2 x 4 KB of it: a longer
# URL is normalised each time (100 pages of one 1.8 MB link each took a worker from 59 to
# 846 MB when every URL was cached).
CACHED_URL_CHARS = 4096


@functools.lru_cache(maxsize=8192)
def _normalize_absolute(url: str) -> str:
    return _normalize_uncached(url)


def _normalize_uncached(url: str) -> str:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if not scheme:
        raise InvalidURL("no scheme")
    if scheme not in _DEFAULT_PORTS:
        raise InvalidURL(f"unsupported scheme '{scheme}'")
    host, port = _split_netloc(parts.netloc)
    netloc = _normalize_host(host)
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        netloc = f"{netloc}:{port}"
    # Escapes first, so that "%2E%2E" and ";j%73essionid=" are seen for what they are.
    path = _SESSION_PATH_PARAM.sub("", _normalize_escapes(parts.path, _PATH_SAFE))
    path = _remove_dot_segments(path)
    query = _normalize_query(parts.query)
    return f"{scheme}://{netloc}{path}{'?' + query if query else ''}"


def _split_netloc(netloc: str) -> tuple[str, int | None]:
    """Drop userinfo and split `host[:port]`; IPv6 hosts keep their brackets."""
    hostport = netloc.rpartition("@")[2]
    if hostport.startswith("["):
        host, bracket, rest = hostport.partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise InvalidURL("invalid host")
        host += bracket
        port_text = rest[1:]
    else:
        host, _, port_text = hostport.partition(":")
    if not host:
        raise InvalidURL("no host")
    if not port_text:
        return host, None
    if not _PORT.fullmatch(port_text) or not 0 < int(port_text) <= 65535:
        raise InvalidURL("invalid port")
    return host, int(port_text)


def _normalize_host(host: str) -> str:
    """Lowercase, IDNA-encoded host name, or canonical IPv4 or bracketed IPv6 literal."""
    if host.startswith("["):
        literal = host[1:-1]
        try:
            if "%" in literal:  # zone ids ("fe80::1%25eth0") mean nothing off the local link
                raise ValueError(literal)
            return f"[{ipaddress.IPv6Address(literal)}]"
        except ValueError as exc:
            raise InvalidURL("invalid host") from exc
    host = unquote(host, errors="strict")
    if host.endswith("."):
        host = host[:-1]
    if not host.isascii():
        try:
            host = idna.encode(host, uts46=True, transitional=False).decode("ascii")
        except idna.IDNAError as exc:
            raise InvalidURL("invalid host") from exc
    host = host.lower()
    labels = host.split(".")
    if len(host) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in labels):
        raise InvalidURL("invalid host")
    if labels[-1].isdigit():
        # No TLD is numeric: this is an IP literal, and only the dotted quad is accepted, so
        # that "0x7f.1" or "2130706433" cannot slip past the private-address checks.
        try:
            return str(ipaddress.IPv4Address(host))
        except ValueError as exc:
            raise InvalidURL("invalid host") from exc
    return host


def _normalize_escapes(text: str, safe: frozenset[str]) -> str:
    """Decode escapes of unreserved characters, uppercase the others, encode unsafe chars."""
    out = []
    i = 0
    while i < len(text):
        char = text[i]
        match = _PCT.match(text, i) if char == "%" else None
        if match:
            decoded = chr(int(match.group(1), 16))
            out.append(decoded if decoded in _UNRESERVED else match.group(0).upper())
            i += 3
            continue
        if char in safe:
            out.append(char)
        else:  # stray "%", spaces, quotes, non-ASCII: percent-encode the UTF-8 bytes
            out.append("".join(f"%{byte:02X}" for byte in char.encode("utf-8")))
        i += 1
    return "".join(out)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4 for an absolute path ("/a/./b/../c" -> "/a/c")."""
    segments = path.split("/")[1:]
    out: list[str] = []
    for segment in segments:
        if segment == "..":
            if out:
                out.pop()
        elif segment != ".":
            out.append(segment)
    if segments and segments[-1] in (".", ".."):
        out.append("")  # "/a/b/.." names the directory "/a/"
    return "/" + "/".join(out) if out else "/"


def _normalize_query(query: str) -> str:
    """Canonical escapes, no tracking or session parameters, sorted by (key, value)."""
    params = []
    for piece in query.split("&"):
        if not piece:
            continue
        key, sep, value = piece.partition("=")
        key = _normalize_escapes(key, _QUERY_SAFE)
        if _TRACKING.fullmatch(key):
            continue
        params.append((key, value and _normalize_escapes(value, _QUERY_SAFE), sep))
    params.sort()
    return "&".join(f"{key}{sep}{value}" for key, value, sep in params)


def url_key(normalized_url: str) -> int:
    """Signed 64-bit key of a normalised URL, the join key of every table (Spark LongType).

    In: the output of `normalize_url`. Out: the first 64 bits of MurmurHash3 x64-128 (seed 0)
    of its UTF-8 bytes, as a signed int in [-2**63, 2**63).
    """
    return mmh3.hash64(normalized_url.encode("utf-8"), seed=0, signed=True)[0]


def redirect_target(url: str | None) -> tuple[str, int, str, str] | None:
    """(normalised URL, url_key, host, registered domain) of a redirect target, or None if the
    crawler cannot use it. The engine already normalises Location; this keeps the rule in one
    place whatever gave the URL."""
    if not url:
        return None
    try:
        normalized = normalize_url(url)
    except InvalidURL:
        return None
    host = host_of(normalized)
    return normalized, url_key(normalized), host, registered_domain(host)


def host_of(url: str) -> str:
    """Lowercase host of a URL without port or IPv6 brackets; '' if it has none."""
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


@functools.cache
def _extractor() -> tldextract.TLDExtract:
    # Built on first use in each process (Spark executors included); the bundled suffix list
    # only: no download, no cache directory.
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


@functools.cache
def _private_extractor() -> tldextract.TLDExtract:
    return tldextract.TLDExtract(
        suffix_list_urls=(), cache_dir=None, include_psl_private_domains=True
    )


def _domain_under(extractor: tldextract.TLDExtract, host: str) -> tuple[str, str | None]:
    """(the host lowercased without its trailing dot, its domain under ``extractor``'s
    suffixes: None for an IP address or a host with no known suffix)."""
    host = host.lower().rstrip(".")
    try:
        ipaddress.ip_address(host.strip("[]"))
        return host, None
    except ValueError:
        return host, extractor(host).top_domain_under_public_suffix or None


@functools.lru_cache(maxsize=4096)
def private_domain(host: str) -> str | None:
    """The host's domain under the public suffix list's private part too, as Common Crawl's
    url_host_private_domain ("a.example.blogspot.com" -> "example.blogspot.com"; where no
    private suffix applies, the registered domain). None for an IP address and a host with no
    known public suffix."""
    return _domain_under(_private_extractor(), host)[1]


def registered_domain(host: str) -> str:
    """Registrable domain of a host ("a.b.example.co.uk" -> "example.co.uk").

    In: a host as returned by `host_of`. Out: public-suffix + 1 label, or the host itself for
    IP addresses and hosts without a known public suffix ("localhost", "site1.test").
    """
    host, domain = _domain_under(_extractor(), host)
    return domain or host


# SURT (Sort-friendly URI Reordering Transform), as the `surt` package (the Internet Archive's
# WaybackURLKeyMaker) writes a CDX ``urlkey``: escapes are decoded, then only what is outside
# printable ASCII (and "%", "#", space) is escaped again, and path and query are lowercase.
_SURT_WWW = re.compile(r"www\d*\.")
_SURT_SAFE = "!\"$&'()*+,-./:;<=>?@[\\]^_`{|}~"


def surt(url: str) -> str | None:
    """The SURT key of a URL, as Common Crawl's index (its ``urlkey``) and Wayback CDX files
    write it: ``http://www.Example.com:8080/A/b/?y=2&x=1`` -> ``com,example:8080)/a/b?x=1&y=2``.

    In: a URL, normally `normalize_url`'s output. Out: the host's labels reversed and joined by
    commas (an IPv4 address reversed too, an IPv6 one as it is, without brackets), lowercase,
    IDNA-encoded, a leading ``www.`` (``www2.`` ...) dropped; ``:port`` unless the scheme's
    default; ``)``; the path with empty and dot segments dropped, a trailing ``/`` dropped
    unless the path is ``/``; the query's parameters sorted; path and query lowercase, escapes
    decoded and only non-printable or non-ASCII bytes escaped again; no scheme, userinfo or
    fragment. None if the URL has no host or cannot be parsed. (The `surt` package also strips
    session ids of a few known forms from path and query; `normalize_url` drops session
    parameters by name already.)
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return None
    host = host.strip(".")
    if not host.isascii():
        try:
            host = idna.encode(host, uts46=True, transitional=False).decode("ascii")
        except idna.IDNAError:
            return None
    if not host:
        return None
    www = _SURT_WWW.match(host)
    key = ",".join(reversed(host[www.end() if www else 0 :].split(".")))
    if port is not None and port != _DEFAULT_PORTS.get(parts.scheme.lower()):
        key = f"{key}:{port}"
    path = _surt_escape(_surt_path(_unescape_all(parts.path))).lower()
    if len(path) > 1 and path.endswith("/"):
        path = path[:-1]
    query = _surt_escape(_unescape_all(parts.query)).lower()
    if query:
        pairs = sorted(tuple(arg.split("=", 1)) for arg in query.split("&"))
        path = f"{path}?{'&'.join('='.join(pair) for pair in pairs)}"
    return f"{key}){path}"


def _unescape_all(text: str) -> bytes:
    """Percent-escapes decoded until none is left ("%2541" -> "%41" -> "A")."""
    data = text.encode("utf-8")
    while True:
        decoded = unquote_to_bytes(data)
        if decoded == data:
            return data
        data = decoded


def _surt_escape(data: bytes) -> str:
    return quote_from_bytes(data, safe=_SURT_SAFE)


def _surt_path(path: bytes) -> bytes:
    """Dot segments resolved and empty segments dropped (but a last one: "/a/" stays), as
    the `surt` package's GoogleURLCanonicalizer does; "/" for an empty path."""
    kept: list[bytes] = []
    for segment in path.split(b"/")[1:]:
        if segment == b"..":
            if kept:
                kept.pop()
            else:
                kept.append(segment)
        elif segment != b".":
            kept.append(segment)
    if not kept:
        return b"/"
    return b"/" + b"".join(s + b"/" for s in kept[:-1] if s) + kept[-1]


def url_extension(url: str) -> str:
    """Lowercase extension of the URL's last path segment without the dot ('jpg'), or ''."""
    try:
        path = urlsplit(url).path
    except ValueError:
        return ""
    segment = unquote(path.rpartition("/")[2].partition(";")[0])
    stem, dot, extension = segment.rpartition(".")
    return extension.lower() if dot and stem else ""
