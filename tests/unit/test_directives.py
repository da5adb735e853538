"""crawllib.content.directives: robots meta tags, X-Robots-Tag, canonical links and TDM opt-outs."""

from __future__ import annotations

import lxml.html
import pytest

from crawllib.config import load_config
from crawllib.content.directives import link_header_targets, page_directives, x_robots_tag

CFG = load_config()
TOKEN = CFG.robots.agent
URL = "http://www.example.com/news/story.html"


def tree(head: str = "", body: str = "<p>Hello</p>") -> lxml.html.HtmlElement:
    html = f"<!DOCTYPE html><html><head>{head}</head><body>{body}</body></html>"
    return lxml.html.document_fromstring(html)


def asks(head: str = "", headers: dict[str, str] | None = None, url: str = URL, body: str = ""):
    return page_directives(tree(head, body or "<p>Hello</p>"), headers, url, TOKEN)


def directives(head: str = "", headers: dict[str, str] | None = None) -> list[str]:
    return asks(head, headers)["directives"]


def test_a_plain_page_asks_nothing():
    assert asks() == {"directives": [], "tdm_reserved": False, "canonical_url": None}
    assert asks(headers={}) == asks(headers=None) == asks()


def test_meta_robots_words_are_lowercased_deduplicated_and_sorted():
    head = (
        '<meta name="robots" content="NoFollow, noindex,noarchive">'
        '<meta name="ROBOTS" content=" noindex , nosnippet ">'
    )
    assert directives(head) == ["noarchive", "nofollow", "noindex", "nosnippet"]


def test_meta_for_our_token_applies_and_other_agents_do_not():
    head = (
        f'<meta name="{TOKEN.upper()}" content="noindex">'
        '<meta name="googlebot" content="nofollow">'
        '<meta name="otherbot" content="noarchive">'
    )
    assert directives(head) == ["noindex"]


@pytest.mark.parametrize(
    "content, expected",
    [
        ("none", ["nofollow", "noindex"]),
        ("all", []),
        ("index, follow", []),
        ("all, noarchive", ["noarchive"]),
        ("noimageindex, notranslate, noai, noimageai", sorted(
            ["noimageindex", "notranslate", "noai", "noimageai"]
        )),
        ("max-snippet:0, max-image-preview:large, noindex", ["noindex"]),
        ("unavailable_after: 2030-01-01, nosnippet", ["nosnippet"]),
        ("max-image-preview: none", []),  # a value "none" is no "none" directive
        ("frobnicate, noindex nofollow, ", []),  # unknown words (space is no separator)
        ("", []),
    ],
)  # fmt: skip
def test_meta_words_none_all_valued_and_unknown(content, expected):
    assert directives(f'<meta name="robots" content="{content}">') == expected


def test_meta_without_content_or_name_is_ignored():
    head = '<meta name="robots"><meta content="noindex"><meta name="robots" content="nofollow">'
    assert directives(head) == ["nofollow"]


def test_x_robots_tag_without_agent_applies_to_everyone():
    assert directives(headers={"x-robots-tag": "noindex, NOARCHIVE"}) == ["noarchive", "noindex"]
    assert directives(headers={"x-robots-tag": "none"}) == ["nofollow", "noindex"]
    assert directives(headers={"x-robots-tag": "all"}) == []


def test_x_robots_tag_agent_groups():
    assert directives(headers={"x-robots-tag": "otherbot: noindex"}) == []
    assert directives(headers={"x-robots-tag": f"{TOKEN}: noindex, nofollow"}) == [
        "nofollow",
        "noindex",
    ]
    # Repeated headers arrive joined by ", ": both directives belong to otherbot, and our
    # token starts a new group.
    joined = f"otherbot: noindex, nofollow, {TOKEN}: noarchive, nosnippet"
    assert directives(headers={"x-robots-tag": joined}) == ["noarchive", "nosnippet"]
    joined = f"noimageindex, otherbot: noindex, {TOKEN.upper()}:nofollow"
    assert directives(headers={"x-robots-tag": joined}) == ["nofollow", "noimageindex"]


def test_x_robots_tag_valued_directives_do_not_start_agent_groups():
    value = "max-snippet: 20, unavailable_after: 25 Jun 2030 15:00:00 PST, noindex"
    assert x_robots_tag(value, TOKEN) == {"noindex"}
    value = "unavailable_after: Friday, 25-Jun-30 15:00:00 PST, nofollow"
    assert x_robots_tag(value, TOKEN) == {"nofollow"}
    assert x_robots_tag("max-image-preview: none", TOKEN) == set()


@pytest.mark.parametrize("junk", ["", ",,,", ":", "::noindex", "a b: c: d", "\x00\ufffd", ", :"])
def test_x_robots_tag_junk_never_raises(junk):
    assert isinstance(directives(headers={"x-robots-tag": junk}), list)


def test_meta_and_header_merge():
    head = '<meta name="robots" content="noarchive">'
    assert directives(head, {"x-robots-tag": "noindex"}) == ["noarchive", "noindex"]


def test_tdm_reservation_header_and_meta():
    assert asks(headers={"tdm-reservation": "1"})["tdm_reserved"] is True
    assert asks(headers={"tdm-reservation": " 1 "})["tdm_reserved"] is True
    assert asks(headers={"tdm-reservation": "0"})["tdm_reserved"] is False
    assert asks(headers={"tdm-reservation": "yes"})["tdm_reserved"] is False
    assert asks('<meta name="tdm-reservation" content="1">')["tdm_reserved"] is True
    assert asks('<meta name="TDM-Reservation" content="0">')["tdm_reserved"] is False
    assert asks('<meta name="tdm-reservation">')["tdm_reserved"] is False


def test_noai_is_a_tdm_reservation():
    result = asks('<meta name="robots" content="noai">')
    assert result["directives"] == ["noai"] and result["tdm_reserved"] is True
    assert asks(headers={"x-robots-tag": "noai"})["tdm_reserved"] is True
    assert asks(headers={"x-robots-tag": "otherbot: noai"})["tdm_reserved"] is False
    assert asks('<meta name="robots" content="noimageai">')["tdm_reserved"] is False


def canonical(head: str = "", headers: dict[str, str] | None = None, url: str = URL):
    return asks(head, headers, url)["canonical_url"]


def test_canonical_from_link_tag_resolved_and_normalised():
    head = '<link rel="canonical" href="/News/Story.html?utm_source=x&b=2&a=1#top">'
    assert canonical(head) == "http://www.example.com/News/Story.html?a=1&b=2"
    head = '<link rel="Alternate CANONICAL" href="https://Other.Example.org:443/x">'
    assert canonical(head) == "https://other.example.org/x"


def test_canonical_honours_base_href():
    head = '<base href="/docs/v2/"><link rel="canonical" href="intro.html">'
    assert canonical(head) == "http://www.example.com/docs/v2/intro.html"


def test_canonical_from_link_header():
    headers = {"link": '<https://cdn.example.net/style.css>; rel="preload", </a/b>; rel=canonical'}
    assert canonical(headers=headers) == "http://www.example.com/a/b"
    headers = {"link": '<https://www.example.com/x,y>; rel="canonical"'}
    assert canonical(headers=headers) == "https://www.example.com/x,y"
    assert link_header_targets('<http://a/>; REL="Canonical Other"', "canonical") == ["http://a/"]


def test_canonical_link_tag_wins_over_header_and_header_ignores_base():
    headers = {"link": '<https://www.example.com/from-header>; rel="canonical"'}
    assert canonical('<link rel="canonical" href="/from-tag">', headers).endswith("/from-tag")
    headers = {"link": '<relative.html>; rel="canonical"'}
    head = '<base href="https://elsewhere.example.org/">'
    assert canonical(head, headers) == "http://www.example.com/news/relative.html"


def test_self_canonical_is_none():
    assert (
        canonical('<link rel="canonical" href="http://WWW.example.com/news/story.html#x">') is None
    )
    headers = {"link": f'<{URL}>; rel="canonical"'}
    assert canonical(headers=headers) is None


@pytest.mark.parametrize(
    "head, headers",
    [
        ('<link rel="canonical" href="javascript:void(0)">', None),
        ('<link rel="canonical" href="   ">', None),
        ('<link rel="canonical">', None),
        ('<link rel="stylesheet" href="/style.css">', None),
        ("", {"link": "<mailto:a@example.com>; rel=canonical"}),
        ("", {"link": "garbage; rel=canonical, <>"}),
        ("", {"link": '<http://[::1>; rel="canonical"'}),
    ],
)
def test_invalid_or_absent_canonical_is_none(head, headers):
    assert canonical(head, headers) is None


def test_first_crawlable_canonical_is_taken():
    head = '<link rel="canonical" href="ftp://x/y"><link rel="canonical" href="/ok">'
    assert canonical(head) == "http://www.example.com/ok"


def test_odd_headers_never_raise():
    headers = {"X-Robots-Tag": "noindex", "link": None, "tdm-reservation": 1}
    result = page_directives(tree(), headers, URL, TOKEN)  # type: ignore[arg-type]
    assert result == {"directives": ["noindex"], "tdm_reserved": False, "canonical_url": None}
    assert page_directives(tree(), {}, "not a url", TOKEN)["canonical_url"] is None
