"""Special hosts whose paths follow a pattern: endless traps and near-duplicates.

See the table in :mod:`crawllib.testweb.special`. Each function returns None for a path the
host does not serve (404).
"""

from __future__ import annotations

import random
import re

from crawllib.testweb.content import Route, article_html, hrefs, paragraph, simple_page

PATTERN_HOSTS = (
    "trapcalendar.com",
    "sessiontrap.net",
    "deeptrap.org",
    "mirror.net",
    "neardup.org",
    "shopfacets.com",
)
COLORS = ("red", "blue", "green")
SIZES = ("s", "m", "l")
NEAR_DUPS = 10
_NATO = (
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
)


def home_links(host: str, nonce: str) -> list[str]:
    """Links of the home page of a pattern host."""
    if host == "trapcalendar.com":
        return ["/cal/2026/11"]
    if host == "sessiontrap.net":
        return [f"/item/1.html?sid={nonce}", f"/item/2.html;jsessionid={nonce}"]
    if host == "deeptrap.org":
        return ["/deep/a/"]
    if host == "neardup.org":
        return [f"/v/{n}.html" for n in range(NEAR_DUPS)]
    if host == "shopfacets.com":
        return ["/shop?color=red&page=1&size=s"]
    return []


def route(seed: int, host: str, path: str, nonce: str, query: str = "") -> Route | None:
    if host == "trapcalendar.com":
        return _calendar(seed, host, path)
    if host == "sessiontrap.net":
        m = re.fullmatch(r"/item/([1-9][0-9]{0,8})\.html", path)
        if not m:
            return None
        n = int(m.group(1))
        links = [f"/?sid={nonce}", f"/item/{n + 1}.html?sid={nonce}"]
        links.append(f"/item/{2 * n}.html;jsessionid={nonce}")
        return simple_page(seed, host, path, links, f"Item {n}")
    if host == "deeptrap.org":
        if not re.fullmatch(r"/deep/(?:[a-z]/)+", path):
            return None
        nxt = chr((ord(path[-2]) - ord("a") + 1) % 26 + ord("a"))
        return simple_page(seed, host, path, ["/", f"{nxt}/"], f"Level {path.count('/') - 2}")
    if host == "neardup.org":
        m = re.fullmatch(r"/v/([0-9])\.html", path)
        return _near_dup(seed, int(m.group(1))) if m else None
    if host == "shopfacets.com" and path == "/shop":
        return _facets(seed, host, query)
    return None


def _calendar(seed: int, host: str, path: str) -> Route | None:
    m = re.fullmatch(r"/cal/([1-9][0-9]{3})/([1-9][0-9]?)", path)
    if not m or not 1 <= int(m.group(2)) <= 12:
        return None
    year, month = int(m.group(1)), int(m.group(2))
    prev = (year, month - 1) if month > 1 else (year - 1, 12)
    nxt = (year, month + 1) if month < 12 else (year + 1, 1)
    # An empty month: the same text on every page (its links' targets differ, not their words)
    body = [("/", "Home")]
    for (y, mo), label in ((prev, "Previous month"), (nxt, "Next month")):
        if 1000 <= y <= 9999:
            body.append((f"/cal/{y}/{mo}", label))
    return _listing(seed, host, body, "Events")


def _listing(seed: int, host: str, body: list[tuple[str, str]], heading: str) -> Route:
    """A page whose text is the same on every URL of the host: an empty calendar month, a
    product listing under other filters (``body``: its links, href and anchor)."""

    def render() -> bytes:
        rng = random.Random(f"{seed}|listing|{host}")
        return article_html(rng, host, heading, body, sections=1).encode()

    return Route(links=hrefs(body), body=render)


def _facets(seed: int, host: str, query: str) -> Route | None:
    """shopfacets.com/shop?color=C&page=P&size=S: the same products whatever the filters;
    links to every other color and size, and to the next page (pages never end)."""
    m = re.fullmatch(r"color=([a-z]+)&page=([1-9][0-9]{0,8})&size=([a-z]+)", query)
    if not m or m.group(1) not in COLORS or m.group(3) not in SIZES:
        return None
    color, page, size = m.group(1), int(m.group(2)), m.group(3)
    body = [("/", "Home")]
    body += [(f"/shop?color={c}&page=1&size={s}", f"{c}, size {s}") for c in COLORS for s in SIZES]
    body.append((f"/shop?color={color}&page={page + 1}&size={size}", "Next page"))
    return _listing(seed, host, body, "Products")


def _near_dup(seed: int, n: int) -> Route:
    """Page n of neardup.org: the same text for every n but one word and the date line."""

    def render() -> bytes:
        base = random.Random(f"{seed}|neardup")
        paras = [paragraph(base) for _ in range(5)]
        words = paras[2].split(" ")
        words[5] = _NATO[n]
        paras[2] = " ".join(words)
        lead = f"Updated 2026-03-{n + 1:02d}. " + " ".join(paras)
        frame = random.Random(f"{seed}|neardup|frame")
        return article_html(
            frame, "neardup.org", "Quarterly report", sections=0, lead=lead
        ).encode()

    return Route(links=("/",), body=render)
