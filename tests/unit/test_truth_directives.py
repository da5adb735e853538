"""Ground truth of directives.org: robots meta tags, X-Robots-Tag, canonical links, TDM.

What a correct crawl fetches (``expect``) and what it learns from each page (``directives``),
checked against the pages of :mod:`crawllib.testweb.special` and the bytes the server sends.
"""

from __future__ import annotations

import http.client

import pytest

from crawllib.testweb import (
    Directives,
    Site,
    WebSpec,
    expect,
    expected_noindex,
    page_directives,
    serve_in_thread,
)
from crawllib.testweb.truth import directives

SPEC = WebSpec(hosts=3)
HOME = "http://directives.org/"


def urls(*paths: str) -> set[str]:
    return {f"http://directives.org{p}" for p in paths}


DEPTH_1 = urls(
    "/noindex.html",
    "/nofollow.html",
    "/agent-nofollow.html",
    "/other-agent.html",
    "/header-noindex.html",
    "/header-none.html",
    "/header-other.html",
    "/canonical.html",
    "/nofollow-canonical.html",
    "/relnofollow.html",
    "/noai.html",
    "/tdm.html",
)
DEPTH_2 = urls(
    "/noindex-child.html",  # noindex: links still followed
    "/other-child.html",  # <meta name="otherbot" content="noindex, nofollow">: not for us
    "/header-other-child.html",  # X-Robots-Tag: otherbot: nofollow: not for us
    "/canonical-target.html",  # only through <link rel="canonical">
    "/nfc-target.html",  # canonical of a nofollow page: still queued
    "/relnf-target.html",  # <a rel="nofollow">: followed by default
)
NEVER = urls(
    "/nofollow-only.html",  # meta robots nofollow
    "/agent-only.html",  # meta crawllib nofollow
    "/header-only.html",  # X-Robots-Tag: none
    "/nfc-only.html",  # meta robots nofollow beside a canonical link
)


@pytest.fixture(scope="module")
def site():
    return Site(SPEC)


def test_max_depth_2_fetches_every_page_but_those_only_nofollow_pages_link(site):
    e = expect(site, 2, seeds=[HOME])
    assert e.fetches == e.attempts == {HOME} | DEPTH_1 | DEPTH_2
    assert NEVER.isdisjoint(e.depth)  # not even discovered
    assert {u: e.depth[u] for u in DEPTH_2} == dict.fromkeys(DEPTH_2, 2)
    assert {u for u, d in e.depth.items() if d == 1} == DEPTH_1


def test_shallower_crawls_stop_before_the_targets(site):
    assert expect(site, 1, seeds=[HOME]).fetches == {HOME} | DEPTH_1
    assert expect(site, 0, seeds=[HOME]).fetches == {HOME}
    deep = expect(site, 5, seeds=[HOME])
    assert deep.fetches == {HOME} | DEPTH_1 | DEPTH_2  # nothing more: the targets link only /


def test_canonical_is_queued_from_a_page_seeded_directly(site):
    e = expect(site, 1, seeds=["http://directives.org/nofollow-canonical.html"])
    assert e.fetches == urls("/nofollow-canonical.html", "/nfc-target.html")
    assert e.depth["http://directives.org/nfc-target.html"] == 1
    assert expect(site, 0, seeds=["http://directives.org/canonical.html"]).fetches == urls(
        "/canonical.html"
    )


def test_directives_of_each_page(site):
    e = expect(site, 2, seeds=[HOME])
    assert e.noindex == urls("/noindex.html", "/header-noindex.html", "/header-none.html")
    assert expected_noindex(site, 2, seeds=[HOME]) == e.noindex
    assert {u for u, d in e.directives.items() if d.nofollow} == urls(
        "/nofollow.html", "/agent-nofollow.html", "/header-none.html", "/nofollow-canonical.html"
    )
    assert {u: d.canonical for u, d in e.directives.items() if d.canonical} == {
        "http://directives.org/canonical.html": "http://directives.org/canonical-target.html",
        "http://directives.org/nofollow-canonical.html": "http://directives.org/nfc-target.html",
    }
    assert {u for u, d in e.directives.items() if d.tdm_reserved} == urls("/tdm.html")
    noai = e.directives["http://directives.org/noai.html"]
    assert noai.noai and noai.rules == {"noai", "noimageai"} and not noai.noindex
    assert set(e.directives) == DEPTH_1 - urls(
        "/other-agent.html", "/header-other.html", "/relnofollow.html"
    )
    plain = page_directives(site, "http://directives.org/other-child.html")
    assert plain == Directives() and not plain


def test_another_agent_obeys_its_own_directives_not_ours(site):
    e = expect(site, 2, agent="otherbot", seeds=[HOME])
    assert urls("/other-child.html", "/header-other-child.html").isdisjoint(e.fetches)
    assert urls("/agent-only.html") <= e.fetches  # <meta name="crawllib">: not for otherbot
    assert urls("/nofollow-only.html", "/header-only.html").isdisjoint(e.fetches)
    assert e.noindex == urls(
        "/noindex.html", "/header-noindex.html", "/header-none.html", "/other-agent.html"
    )


def test_the_whole_web_changes_only_by_directives_org(site):
    others = [s for s in site.seeds() if s != HOME]
    full, rest = expect(site, 2), expect(site, 2, seeds=others)
    assert full.fetches == rest.fetches | {HOME} | DEPTH_1 | DEPTH_2
    assert not {u for u in rest.attempts | set(rest.depth) if "directives.org" in u}
    assert {u.split("/")[2] for u in full.directives} == {"directives.org"}
    assert full.attempts - rest.attempts == full.fetches - rest.fetches


@pytest.mark.parametrize(
    ("head", "headers", "want"),
    [
        ('<meta name="ROBOTS" content="NoIndex , NOFOLLOW">', [], {"noindex", "nofollow"}),
        ('<meta name="CrawlLib" content="none">', [], {"noindex", "nofollow"}),
        ('<meta name="otherbot" content="none">', [], set()),
        ('<meta name="googlebot" content="noindex">', [], set()),
        ("", [("x-robots-tag", "NONE")], {"noindex", "nofollow"}),
        ("", [("X-Robots-Tag", "crawllib: nofollow")], {"nofollow"}),
        ("", [("X-Robots-Tag", "CRAWLLIB: noindex, nofollow")], {"noindex", "nofollow"}),
        ("", [("X-Robots-Tag", "otherbot: noindex")], set()),
        ("", [("X-Robots-Tag", "max-snippet: 20, nofollow")], {"max-snippet", "nofollow"}),
        (
            "",
            [("X-Robots-Tag", "unavailable_after: 25 Jun 2010 15:00:00 PST")],
            {"unavailable_after"},
        ),
        ("", [("X-Robots-Tag", "otherbot: none"), ("X-Robots-Tag", "noindex")], {"noindex"}),
        ("", [("X-Robots-Tag", "noarchive, nosnippet")], {"noarchive", "nosnippet"}),
    ],
)
def test_directive_parsing(head, headers, want):
    assert directives(head, headers, "http://x.org/a.html").rules == want


def test_canonical_parsing():
    base = "http://x.org/dir/a.html"

    def canonical(head):
        return directives(head, [], base).canonical

    assert canonical('<link rel="canonical" href="b.html?utm_source=x#top">') == (
        "http://x.org/dir/b.html"
    )
    assert canonical('<link rel="Canonical" href="//X.org/dir/a.html">') is None  # itself
    assert canonical('<link rel="alternate" href="/c.html">') is None
    assert canonical('<link rel="canonical" href="mailto:a@x.org">') is None
    two = '<link rel="canonical" href="/1.html"><link rel="canonical" href="/2.html">'
    assert canonical(two) == "http://x.org/1.html"
    assert directives("", [("TDM-Reservation", "1")], base).tdm_reserved
    assert not directives('<meta name="tdm-reservation" content="0">', [], base).tdm_reserved


def test_truth_reads_the_same_directives_from_the_served_bytes(site):
    """Route.head and headers (what truth reads) give what the full response gives."""
    paths = [u.split("directives.org")[1] for u in {HOME} | DEPTH_1 | DEPTH_2 | NEVER]
    with serve_in_thread(WebSpec(hosts=0)) as web:
        for path in paths:
            conn = http.client.HTTPConnection("127.0.0.1", web.port, timeout=10)
            try:
                conn.request("GET", path, headers={"Host": "directives.org"})
                resp = conn.getresponse()
                body, headers = resp.read().decode(), resp.getheaders()
            finally:
                conn.close()
            url = f"http://directives.org{path}"
            for agent in ("crawllib", "otherbot"):
                served = directives(body, headers, url, agent)
                assert served == page_directives(site, url, agent), (path, agent)
