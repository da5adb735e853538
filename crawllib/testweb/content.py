"""Building blocks of the test web's responses: :class:`Route`, seeded prose and HTML pages.

Everything here is pure: a page is a function of a ``random.Random`` seeded from
``(seed, host, path)``, so the same inputs give the same bytes in every process.
"""

from __future__ import annotations

import html
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

HTML = "text/html; charset=utf-8"

# Server behaviours whose response never completes: the URL is attempted, never fetched.
BROKEN_BEHAVIOURS = frozenset({"drop", "drop_early"})


@dataclass(frozen=True)
class Route:
    """What the web answers for one (host, path, query).

    ``status`` and ``content_type`` are those of the response a patient client finally gets
    (a ``flaky`` URL fails first, then answers ``status``). ``links`` are the ``href`` values
    of the page, in document order, exactly as written in the HTML. ``behaviour`` names what
    the server adds on top (slow, trickle, flaky, first429, drop, drop_early, big, bomb).
    ``body`` renders the bytes; only the server calls it. A ``conditional`` route answers 304
    without a body to a request whose If-None-Match or If-Modified-Since matches the ETag or
    Last-Modified in ``headers`` (see :func:`crawllib.testweb.live.not_modified`).
    ``headers`` are sent as they are, a name given twice as two header lines. ``head`` is the
    markup the page carries in its ``<head>`` after the charset and the title (robots ``<meta>``
    tags, ``<link rel="canonical">``), exactly as written in the HTML, like ``links``.
    """

    status: int = 200
    content_type: str = HTML
    links: tuple[str, ...] = ()
    location: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    behaviour: str = ""
    body: Callable[[], bytes] | None = None
    conditional: bool = False
    head: str = ""

    @property
    def is_redirect(self) -> bool:
        return 300 <= self.status < 400 and bool(self.location)

    @property
    def delivers_html(self) -> bool:
        """A complete 200 response with an HTML content type (what ``expected_fetches`` counts)."""
        return (
            self.status == 200
            and self.content_type.split(";")[0].strip() == "text/html"
            and self.behaviour not in BROKEN_BEHAVIOURS
        )

    def render(self) -> bytes:
        return self.body() if self.body is not None else b""


REASONS = {
    200: "OK",
    301: "Moved Permanently",
    302: "Found",
    307: "Temporary Redirect",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def status_route(status: int, *headers: tuple[str, str]) -> Route:
    text = f"{status} {REASONS.get(status, 'Error')}"
    body = f"<!DOCTYPE html><html><head><title>{text}</title></head><body><h1>{text}</h1></body></html>"
    return Route(status=status, headers=tuple(headers), body=lambda: body.encode())


def redirect_route(status: int, location: str) -> Route:
    return Route(status=status, location=location, body=lambda: b"")


def fixed_route(body: bytes | Callable[[], bytes], content_type: str = HTML) -> Route:
    fn = body if callable(body) else (lambda: body)
    return Route(content_type=content_type, body=fn)


NOT_FOUND = status_route(404)


def text_route(text: str) -> Route:
    return fixed_route(text.encode(), "text/plain; charset=utf-8")


WORDS = tuple(
    """
    river market garden engine winter signal harbor forest copper lantern village orbit
    meadow canyon thunder pepper silver marble ladder castle pocket rhythm island velvet
    anchor basket candle desert falcon glacier hammer insect jungle kettle lemon mirror
    needle ocean pillow quartz rocket saddle tunnel umbrella valley wagon yellow zephyr
    ancient brave calm distant eager fragile gentle hollow idle jolly keen lively modest
    narrow patient quiet rapid steady tender urgent vivid warm young bright clever simple
    build carry drift explain follow gather handle imagine measure notice observe prepare
    question reach share travel wander whisper balance council budget climate festival
    library museum network policy reform science station theory traffic volume weather
    farmer teacher sailor painter doctor student writer miner baker pilot judge nurse
    morning evening season century minute summer autumn spring history future moment
    bridge street corner tower square harbour market school office factory garden field
    report study record answer method result reason effect choice detail change growth
    quickly slowly often rarely always never together almost nearly mostly probably
    """.split()
)
ACCENTED = ("café", "crème", "brûlée", "naïve", "façade", "Müller", "señor", "déjà", "über")


def sentence(rng: random.Random, words: Sequence[str] = WORDS) -> str:
    picked = [rng.choice(words) for _ in range(rng.randint(7, 16))]
    return " ".join(picked).capitalize() + rng.choice((".", ".", ".", "!", "?"))


def paragraph(rng: random.Random, words: Sequence[str] = WORDS) -> str:
    return " ".join(sentence(rng, words) for _ in range(rng.randint(3, 6)))


def title(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 6))).title()


Link = tuple[str, str]  # (href as written, anchor text)


def article_html(
    rng: random.Random,
    host: str,
    heading: str,
    body_links: Sequence[Link] = (),
    nav: Sequence[Link] = (("/", "Home"),),
    footer: Sequence[Link] = (),
    sections: int | None = None,
    lead: str = "",
    aside: str = "",
    head: str = "",
    rels: Mapping[str, str] | None = None,
) -> str:
    """An article page: nav, title, byline, sections of prose with links, footer.

    ``aside`` is HTML put between the article and the footer as is (a sidebar, no links);
    ``head`` is HTML put in ``<head>`` after the title as is (meta tags, link elements, no
    ``<a>``). ``rels`` maps an href to the ``rel`` attribute of its ``<a>`` tags
    (``{"/x.html": "nofollow"}``).

    The ``href`` values appear in the order nav, body_links, footer (see :func:`hrefs`).
    """
    rel = rels or {}

    def a(link: Link) -> str:
        return _a(link, rel.get(link[0], ""))

    n_sections = sections if sections is not None else rng.randint(3, 6)
    size = -(-len(body_links) // n_sections) if n_sections else 0
    chunks = [body_links[i * size : (i + 1) * size] for i in range(n_sections)]
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        f'<head><meta charset="utf-8"><title>{_esc(heading)} | {_esc(host)}</title>{head}</head>',
        "<body>",
        '<header><nav class="site-nav">' + " | ".join(a(link) for link in nav) + "</nav></header>",
        '<main id="main"><article>',
        f"<h1>{_esc(heading)}</h1>",
        f'<p class="byline">By {rng.choice(WORDS).title()} {rng.choice(WORDS).title()}, '
        f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}</p>",
    ]
    if lead:
        out.append(f"<p>{_esc(lead)}</p>")
    for i in range(n_sections):
        out.append(f'<h2 id="sec{i + 1}">{_esc(title(rng))}</h2>')
        for _ in range(rng.randint(1, 3)):
            out.append(f"<p>{_esc(paragraph(rng))}</p>")
        if chunks and chunks[i]:
            out.append("<p>Read also: " + ", ".join(a(link) for link in chunks[i]) + ".</p>")
    if not n_sections and body_links:
        out.append("<ul>" + "".join(f"<li>{a(link)}</li>" for link in body_links) + "</ul>")
    out += [
        "</article></main>",
        *([aside] if aside else []),
        '<footer><p class="legal">Copyright 2026 '
        + _esc(host)
        + ". All rights reserved.</p>"
        + ("<p>" + " · ".join(a(link) for link in footer) + "</p>" if footer else "")
        + "</footer>",
        "</body>",
        "</html>",
    ]
    return "\n".join(out) + "\n"


def hrefs(
    body_links: Sequence[Link], nav: Sequence[Link] = (("/", "Home"),), footer: Sequence[Link] = ()
) -> tuple[str, ...]:
    """The hrefs :func:`article_html` writes, in document order, without rendering the page."""
    sections_order = list(nav) + list(body_links) + list(footer)
    return tuple(h for h, _ in sections_order)


def simple_page(seed: int, host: str, path: str, links: Sequence[str], heading: str = "") -> Route:
    """A short article on a special host whose body links are ``links`` (anchor = the href)."""
    body = [(h, h) for h in links]

    def render() -> bytes:
        rng = random.Random(f"{seed}|special|{host}|{path}")
        head = heading or title(rng)
        # One section holding all links keeps their document order equal to ``links``.
        return article_html(rng, host, head, body, sections=1).encode()

    return Route(links=hrefs(body), body=render)


def _a(link: Link, rel: str = "") -> str:
    href, text = link
    attr = f'rel="{html.escape(rel, quote=True)}" ' if rel else ""
    return f'<a {attr}href="{html.escape(href, quote=True)}">{_esc(text)}</a>'


def _esc(text: str) -> str:
    return html.escape(text, quote=False)
