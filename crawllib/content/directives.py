"""What a page asks of crawlers: robots directives, its canonical URL, a TDM opt-out.

Read from the parsed page and its response headers during extraction. Pure Python: no Spark.
Nothing here raises on odd input (missing attributes, junk header values): what cannot be read
is ignored.

Choices:
- Robots directives come from every ``<meta name="robots">``, every ``<meta name="<token>">``
  (our product token, any case) and the ``X-Robots-Tag`` header; all that apply are merged
  (the most restrictive wins). Only the word directives of ``KNOWN`` are kept; ``none`` is
  noindex + nofollow, ``all`` (and index, follow) adds nothing; directives with a value
  (``max-snippet:0``, ``unavailable_after: ...``) and unknown words are dropped.
- ``X-Robots-Tag`` follows Google's reading: a value may start with ``agent:``; its directives
  apply to that agent only, up to the next ``agent:`` (repeated headers arrive joined by ", ",
  so an unprefixed header after a prefixed one reads as part of that group). A token followed
  by ":" starts a group unless it is a directive (``max-snippet:``, ``unavailable_after:``).
- TDM rights are reserved (``tdm_reserved``) by W3C TDMRep's ``tdm-reservation: 1`` header or
  ``<meta name="tdm-reservation" content="1">``, and by a ``noai`` robots directive: it asks
  that the content not be used to train AI, the same opt-out (``noimageai``, images only, is
  kept as a directive but reserves nothing of the text).
- The canonical URL is the first ``<link rel="canonical" href>`` (resolved against
  ``<base href>`` if present) that is a crawlable URL, else the first ``rel="canonical"`` entry
  of the ``Link`` header (resolved against the page URL: HTTP knows no ``<base>``, RFC 8288);
  normalised with `crawllib.core.urls.normalize_url`. A page naming itself has none.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import lxml.html

from crawllib.core.records import Directives
from crawllib.core.urls import InvalidURL, normalize_url

# The word directives kept: what a crawler or an index may act on.
KNOWN = frozenset(
    {
        "noindex",
        "nofollow",
        "noarchive",
        "nosnippet",
        "noimageindex",
        "notranslate",
        "noai",
        "noimageai",
    }
)
# Directives that take a value after ":": such a name is never a user agent.
VALUED = frozenset(
    {
        "max-snippet",
        "max-image-preview",
        "max-video-preview",
        "unavailable_after",
        "indexifembedded",
    }
)
_EXPANDS = {"none": ("noindex", "nofollow"), "all": (), "index": (), "follow": ()}
_NOT_AGENTS = KNOWN | VALUED | _EXPANDS.keys()
# A user-agent product token (RFC 9309: letters, digits, "_", "-"; "." seen in the wild).
_AGENT = re.compile(r"[a-z0-9][a-z0-9_.-]*")
# One Link header entry: <target> and its parameters (up to the next "<").
_LINK_ENTRY = re.compile(r"<([^>]*)>([^<]*)")
_REL_PARAM = re.compile(r"""(?:^|;)\s*rel\s*=\s*(?:"([^"]*)"|([^\s;,"]+))""", re.IGNORECASE)


def page_directives(
    tree: lxml.html.HtmlElement, headers: Mapping[str, str] | None, url: str, token: str
) -> Directives:
    """Robots directives, TDM reservation and canonical URL of one page.

    In: the parsed page, its response headers (lowercase keys, or None), its URL and our
    product token (``cfg.robots.agent``).
    Out: directives (applying to us: sorted, lowercase, each once), tdm_reserved, and
    canonical_url (normalised; None if absent, not crawlable or the page itself).
    """
    token = token.strip().lower()
    metas = list(_metas(tree))
    found: set[str] = set()
    for name, content in metas:
        if name in ("robots", token):
            found |= meta_directives(content)
    found |= x_robots_tag(header(headers, "x-robots-tag") or "", token)
    reserved = (
        tdm_reservation(header(headers, "tdm-reservation"))
        or any(name == "tdm-reservation" and tdm_reservation(c) for name, c in metas)
        or "noai" in found
    )
    return {
        "directives": sorted(found),
        "tdm_reserved": reserved,
        "canonical_url": canonical_url(tree, headers, url),
    }


def headers_tdm_reserved(headers: Mapping[str, str] | None, token: str) -> bool:
    """Whether the response headers alone reserve TDM rights (``tdm-reservation: 1``, or noai
    in an X-Robots-Tag for us): what a page that could not be read still says."""
    directives = x_robots_tag(header(headers, "x-robots-tag") or "", token.strip().lower())
    return tdm_reservation(header(headers, "tdm-reservation")) or "noai" in directives


def meta_directives(content: str) -> set[str]:
    """The known word directives of a robots meta ``content`` ("noindex, nofollow")."""
    return _words(content.split(","))


def x_robots_tag(value: str, token: str) -> set[str]:
    """The known word directives of an ``X-Robots-Tag`` value that apply to ``token``
    (lowercase): unprefixed ones and those of ``token:`` groups.

    "otherbot: noindex, nofollow, crawllib: noarchive" -> {"noarchive"} for crawllib.
    """
    applying: list[str] = []
    agent: str | None = None  # the current group's user agent; None: every agent
    for item in value.split(","):
        name, colon, rest = item.partition(":")
        name = name.strip().lower()
        if colon and name not in _NOT_AGENTS and _AGENT.fullmatch(name):
            agent, item = name, rest  # a new group; its first directive follows the ":"
        if agent is None or agent == token:
            applying.append(item)
    return _words(applying)


def tdm_reservation(value: str | None) -> bool:
    """Whether a TDMRep ``tdm-reservation`` value (header or meta content) is 1."""
    return isinstance(value, str) and any(part.strip() == "1" for part in value.split(","))


def canonical_url(
    tree: lxml.html.HtmlElement, headers: Mapping[str, str] | None, url: str
) -> str | None:
    """The page's canonical URL, normalised: its first crawlable ``<link rel="canonical">``
    (against ``<base href>``), else the first of the Link header (against the page URL);
    None if there is none or it is the page itself."""
    base = base_url(tree, url)
    candidates = [
        (href, base)
        for element in tree.iter("link")
        if "canonical" in rel_tokens(element.get("rel"))
        and (href := element.get("href")) is not None
    ]
    candidates += [
        (href, url) for href in link_header_targets(header(headers, "link"), "canonical")
    ]
    for href, against in candidates:
        if not href.strip():
            continue
        try:
            target = normalize_url(href, base=against)
        except InvalidURL:
            continue
        return None if target == _own(url) else target
    return None


def link_header_targets(value: str | None, rel: str) -> list[str]:
    """Targets of the entries of an HTTP ``Link`` header value whose rel holds ``rel``
    ('<https://x/y>; rel="canonical"' -> ["https://x/y"])."""
    if not isinstance(value, str):
        return []
    targets = []
    for target, params in _LINK_ENTRY.findall(value):
        match = _REL_PARAM.search(params.strip())
        if match and rel in rel_tokens(match.group(1) or match.group(2)):
            targets.append(target)
    return targets


def base_url(tree: lxml.html.HtmlElement, url: str) -> str:
    """What the page's relative URLs resolve against: its first non-empty ``<base href>``
    (itself resolved against the page URL) if that is a crawlable URL, else the page URL."""
    for element in tree.iter("base"):
        href = element.get("href")
        if href and href.strip():
            try:
                return normalize_url(href, base=url)
            except InvalidURL:
                return url
    return url


def header(headers: Mapping[str, str] | None, name: str) -> str | None:
    """A response header's value (``name`` lowercase; other key cases tolerated), None if
    absent or not text."""
    if not headers:
        return None
    value = headers.get(name)
    if value is None:
        value = next((v for k, v in headers.items() if str(k).lower() == name), None)
    return value if isinstance(value, str) else None


def _metas(tree: lxml.html.HtmlElement) -> Iterable[tuple[str, str]]:
    """(lowercase name, content) of every ``<meta name content>``."""
    for element in tree.iter("meta"):
        name, content = element.get("name"), element.get("content")
        if name is not None and content is not None:
            yield name.strip().lower(), content


def _words(items: Iterable[str]) -> set[str]:
    """Known word directives among directive items; none expanded, valued ones dropped."""
    found: set[str] = set()
    for item in items:
        word = item.strip().lower()
        if word in KNOWN:
            found.add(word)
        else:
            found.update(_EXPANDS.get(word, ()))
    return found


def rel_tokens(value: str | None) -> set[str]:
    """The lowercase tokens of a ``rel`` value ("NoFollow ugc" -> {"nofollow", "ugc"})."""
    return set(value.lower().split()) if isinstance(value, str) else set()


def _own(url: str) -> str:
    try:
        return normalize_url(url)
    except InvalidURL:
        return url
