"""crawllib.content.extract: text, title, language, fingerprints and links of real HTML snippets."""

from __future__ import annotations

import random
import re

import pytest

from crawllib.config import load_config, replace
from crawllib.content.extract import decode_html, extract_page, extract_record
from crawllib.content.hashing import content_hash, simhash64
from crawllib.content.quality import quality_signals
from crawllib.testweb.content import article_html, paragraph
from crawllib.testweb.payloads import charset_page, garbage_page

CFG = load_config()
URL = "http://www.example.com/news/2026/story.html"


def page(body_html: str, head: str = "", lang: str = "en") -> bytes:
    return (
        f'<!DOCTYPE html><html lang="{lang}"><head><meta charset="utf-8">{head}</head>'
        f"<body>{body_html}</body></html>"
    ).encode()


def links_of(body_html: str, head: str = "", url: str = URL) -> list[tuple[str, str]]:
    result = extract_page(page(body_html, head), url, "utf-8", CFG)
    assert result["error"] is None
    return result["links"]


def prose(seed: int = 1, paragraphs: int = 4) -> str:
    rng = random.Random(seed)
    return "".join(f"<p>{paragraph(rng)}</p>" for _ in range(paragraphs))


def test_article_gives_main_text_title_language_and_fingerprints():
    rng = random.Random(7)
    html = article_html(rng, "www.example.com", "Harbor Lantern Report", [("/a.html", "A")])
    result = extract_page(html.encode(), URL, None, CFG)
    assert result["error"] is None
    assert result["title"] == "Harbor Lantern Report | www.example.com"
    assert result["language"] == "en"
    text = result["text"]
    assert text.startswith("Harbor Lantern Report")
    assert "All rights reserved" not in text  # footer boilerplate is not main text
    assert result["text_chars"] == len(text) > 1000
    assert result["content_hash"] == content_hash(text)
    assert result["simhash"] == simhash64(text)
    assert result["quality"] == quality_signals(text)
    assert result["quality"]["gopher_words"] > 150
    assert ("http://www.example.com/a.html", "A") in result["links"]


def test_boilerplate_only_differences_give_the_same_content_hash():
    body = f"<article><h1>Same story</h1>{prose()}</article>"
    one = extract_page(page(f"<nav><a href='/'>Home</a></nav>{body}"), URL, None, CFG)
    two = extract_page(
        page(f"<nav><a href='/x'>Other menu</a></nav>{body}<footer>(c) 2027</footer>"),
        "http://mirror.example.org/copy.html",
        None,
        CFG,
    )
    assert one["content_hash"] == two["content_hash"] is not None


def test_link_forms_are_resolved_and_normalised():
    body = """
      <a href="https://Other.EXAMPLE.org:443/Path/?b=2&a=1#frag">absolute</a>
      <a href="/root.html">root-relative</a>
      <a href="sibling.html">relative</a>
      <a href="../up/./index.html">dot segments</a>
      <a href="//cdn.example.net/lib">protocol-relative</a>
      <a href="?page=2&utm_source=x&utm_medium=y">query only</a>
      <a href="page.html;jsessionid=ABC?id=3&sid=77&fbclid=z">session ids</a>
      <a href="HTTP://WWW.Example.COM/news/2026/story.html#comments">self with fragment</a>
      <a href="#top">fragment only</a>
    """
    assert links_of(body) == [
        ("https://other.example.org/Path/?a=1&b=2", "absolute"),
        ("http://www.example.com/root.html", "root-relative"),
        ("http://www.example.com/news/2026/sibling.html", "relative"),
        ("http://www.example.com/news/up/index.html", "dot segments"),
        ("http://cdn.example.net/lib", "protocol-relative"),
        ("http://www.example.com/news/2026/story.html?page=2", "query only"),
        ("http://www.example.com/news/2026/page.html?id=3", "session ids"),
    ]


def test_base_href_is_honoured_even_when_relative():
    head = '<base href="/docs/v2/">'
    assert links_of('<a href="intro.html">Intro</a>', head) == [
        ("http://www.example.com/docs/v2/intro.html", "Intro")
    ]
    head = '<base href="https://static.example.com/assets/">'
    assert links_of('<a href="../a">A</a> <a href="/b">B</a>', head) == [
        ("https://static.example.com/a", "A"),
        ("https://static.example.com/b", "B"),
    ]


def test_uncrawlable_hrefs_are_dropped_and_nofollow_kept():
    body = """
      <a href="javascript:void(0)">js</a> <a href="mailto:a@example.com">mail</a>
      <a href="tel:+123">tel</a> <a href="ftp://files.example.com/x">ftp</a>
      <a href="data:text/html,hi">data</a> <a href="http://bad host/">space</a>
      <a href="http://[::1">broken ipv6</a> <a href="">empty</a> <a>no href</a>
      <a href="http://ok.example.com/" rel="nofollow">kept</a>
    """
    assert links_of(body) == [("http://ok.example.com/", "kept")]


def test_one_link_per_target_first_anchor_wins_and_anchors_are_tidied():
    long_anchor = "word " * 100
    body = f"""
      <a href="/x">  First
         anchor </a>
      <a href="/x?utm_campaign=c">Second anchor</a>
      <a href="/img"><img src="i.png" alt="Picture alt"></a>
      <a href="/titled" title="Title attr"></a>
      <a href="/long">{long_anchor}</a>
    """
    links = links_of(body)
    assert links[:3] == [
        ("http://www.example.com/x", "First anchor"),
        ("http://www.example.com/img", "Picture alt"),
        ("http://www.example.com/titled", "Title attr"),
    ]
    assert links[3][0] == "http://www.example.com/long"
    assert len(links[3][1]) == 200 and links[3][1].startswith("word word")


def test_broken_html_still_gives_text_and_links():
    body = (
        b"<html><head><title>Unclosed tags<body><div class=main><h1>Broken but readable"
        b"<p>This page never closes its tags. <b>Bold <i>italic <p>Another paragraph with "
        b'<a href="/after.html">a link after the mess</a> <ul><li>one<li>two <table><tr><td>cell'
    )
    result = extract_page(body, URL, None, CFG)
    assert result["error"] is None
    assert result["title"] == "Unclosed tags"  # an unclosed <title> does not eat the page
    assert "never closes its tags" in result["text"]
    assert result["links"] == [("http://www.example.com/after.html", "a link after the mess")]


@pytest.mark.parametrize(
    "charset, meta, declared",
    [
        ("iso-8859-1", True, None),  # <meta charset> only
        ("iso-8859-1", False, "ISO-8859-1"),  # HTTP header only
        ("cp1252", False, "windows-1252"),
        ("utf-8", False, None),  # neither: UTF-8
    ],
)
def test_charset_from_header_then_meta_then_utf8(charset, meta, declared):
    result = extract_page(charset_page(charset, meta)(), URL, declared, CFG)
    assert result["error"] is None
    assert result["title"] == "Café crème"
    assert "brûlée" in result["text"] and "naïve" in result["text"]


def test_wrong_or_unknown_charset_does_not_crash():
    latin1 = charset_page("iso-8859-1", False)()
    for declared in ("utf-8", "no-such-charset", "rot13", ""):
        result = extract_page(latin1, URL, declared, CFG)
        assert result["error"] is None
        assert result["title"] == "Caf\ufffd cr\ufffdme"
    # An HTTP charset wins over a lying <meta>.
    utf8 = '<meta charset="iso-8859-1"><title>Crème</title>'.encode()
    assert decode_html(utf8, "utf-8").endswith("<title>Crème</title>")
    assert decode_html(b"\xef\xbb\xbfbom \xc3\xa9", "iso-8859-1") == "bom é"


def test_garbage_bytes_do_not_crash():
    result = extract_page(garbage_page(3)(), URL, None, CFG)
    assert result["error"] is None
    assert isinstance(result["text"], str)
    noise = bytes(range(256)) * 8
    assert extract_page(noise, URL, "utf-8", CFG)["error"] is None


@pytest.mark.parametrize("body", [b"", b"  \n\t ", None])
def test_empty_body_is_a_recorded_error(body):
    assert extract_page(body, URL, None, CFG) == {
        "title": None,
        "text": None,
        "language": None,
        "language_detected": None,
        "text_chars": None,
        "content_hash": None,
        "simhash": None,
        "quality": None,
        "non_document": None,
        "error": "ExtractError: empty body",
        "directives": [],
        "tdm_reserved": False,
        "canonical_url": None,
        "links": [],
    }


def test_a_failed_page_still_records_a_tdm_reservation_of_its_headers():
    result = extract_page(None, URL, None, CFG, headers={"tdm-reservation": "1"})
    assert result["error"] and result["tdm_reserved"] is True and result["directives"] == []


def test_any_exception_becomes_the_error_field():
    result = extract_page("<html>not bytes</html>", URL, None, CFG)  # type: ignore[arg-type]
    assert re.fullmatch(r"[A-Za-z]+Error: .+", result["error"])
    assert result["text"] is None and result["links"] == []


def test_page_without_main_text_is_not_an_error():
    body = page('<script>var a = 1;</script><a href="/a"><img src="a.png" alt="Pic"></a>')
    result = extract_page(body, URL, None, CFG)
    assert result["error"] is None
    assert result["text"] == "" and result["text_chars"] == 0
    assert result["content_hash"] is None and result["simhash"] is None
    assert result["links"] == [("http://www.example.com/a", "Pic")]


def test_huge_body_is_capped_before_extraction():
    cfg = replace(CFG, parse__max_html_bytes=20_000)
    head = prose(seed=1, paragraphs=3)
    tail = "".join(f'<p>Tail paragraph {i} <a href="/t{i}">t{i}</a></p>' for i in range(20_000))
    body = page(f"<article><h1>Big</h1>{head}{tail}</article>")
    assert len(body) > 1_000_000
    result = extract_page(body, URL, None, cfg)
    assert result["error"] is None
    assert 0 < result["text_chars"] < 20_000
    assert 0 < len(result["links"]) < 1000
    assert ("http://www.example.com/t19999", "t19999") not in result["links"]


def test_language_from_html_lang_or_meta():
    assert extract_page(page(prose(), lang="de-AT"), URL, None, CFG)["language"] == "de"
    meta = '<meta http-equiv="Content-Language" content="fr">'
    body = f"<html><head>{meta}</head><body>{prose()}</body></html>".encode()
    assert extract_page(body, URL, None, CFG)["language"] == "fr"
    assert extract_page(page(prose(), lang=""), URL, None, CFG)["language"] is None


def test_detected_language_is_the_texts_not_the_declared_one():
    german = (
        "<article><h1>Haushalt</h1>"
        + "<p>Der Stadtrat hat am Dienstagabend über den neuen Haushalt der öffentlichen "
        "Bibliothek beraten. Mehrere Bürger fragten, warum die Öffnungszeiten im letzten "
        "Winter gekürzt wurden, und die Bürgermeisterin versprach Besserung.</p>" * 3 + "</article>"
    )
    result = extract_page(page(german, lang="en"), URL, "utf-8", CFG)
    assert (result["language"], result["language_detected"]) == ("en", "de")
    assert extract_page(page(prose(), lang="de"), URL, None, CFG)["language_detected"] == "en"
    empty = extract_page(page("<div></div>"), URL, None, CFG)
    assert empty["text"] == "" and empty["language_detected"] is None


def test_directives_canonical_and_tdm_are_part_of_the_result():
    head = (
        '<meta name="robots" content="noarchive"><meta name="tdm-reservation" content="1">'
        '<link rel="canonical" href="/news/2026/story">'
    )
    headers = {"x-robots-tag": "otherbot: noindex, nofollow, crawllib: nosnippet"}
    result = extract_page(page(prose(), head), URL, None, CFG, headers=headers)
    assert result["error"] is None
    assert result["directives"] == ["noarchive", "nosnippet"]
    assert result["tdm_reserved"] is True
    assert result["canonical_url"] == "http://www.example.com/news/2026/story"
    assert result["text_chars"] > 0  # noindex was for otherbot
    record = extract_record(page(prose(), head), URL, None, CFG, headers=headers)
    assert (record["directives"], record["tdm_reserved"], record["canonical_url"]) == (
        result["directives"],
        result["tdm_reserved"],
        result["canonical_url"],
    )


@pytest.mark.parametrize(
    "head, headers",
    [
        ('<meta name="robots" content="noindex">', None),
        ("", {"x-robots-tag": "crawllib: noindex"}),
    ],
)
def test_noindex_keeps_no_text_but_its_fingerprints(head, headers):
    body = f"<article><h1>Quiet page</h1>{prose()}</article>"
    indexed = extract_page(page(body), URL, None, CFG)
    result = extract_page(page(body, head), URL, None, CFG, headers=headers)
    assert result["error"] is None and "noindex" in result["directives"]
    assert result["text"] is None and result["title"] is None and result["text_chars"] == 0
    assert indexed["content_hash"] is not None and indexed["text_chars"] > 0
    assert result["content_hash"] == indexed["content_hash"]
    assert result["simhash"] == indexed["simhash"]
    assert result["language"] == "en"
    # a text not kept has no quality signals
    assert indexed["quality"] is not None and result["quality"] is None


def test_nofollow_drops_every_link_but_the_canonical():
    body = '<a href="/a">A</a> <a href="http://other.example.org/">Other</a>'
    canonical = '<link rel="canonical" href="http://www.example.com/news/2026/">'
    head = f'<meta name="robots" content="nofollow">{canonical}'
    assert links_of(body, head) == [("http://www.example.com/news/2026/", "")]
    headers = {"x-robots-tag": "nofollow"}
    result = extract_page(page(body), URL, None, CFG, headers=headers)
    assert result["directives"] == ["nofollow"] and result["links"] == []
    record = extract_record(page(body, head), URL, None, CFG)
    assert [link["dst_url"] for link in record["links"]] == ["http://www.example.com/news/2026/"]


def test_canonical_is_one_more_link_unless_already_there():
    canonical = '<link rel="canonical" href="/a">'
    assert links_of('<a href="/a">A</a>', canonical) == [("http://www.example.com/a", "A")]
    assert links_of('<a href="/b">B</a>', canonical) == [
        ("http://www.example.com/b", "B"),
        ("http://www.example.com/a", ""),
    ]
    self_canonical = f'<link rel="canonical" href="{URL}">'
    assert links_of('<a href="/b">B</a>', self_canonical) == [("http://www.example.com/b", "B")]


@pytest.mark.parametrize("follow", [True, False])
def test_rel_nofollow_links_follow_the_setting(follow):
    cfg = replace(CFG, parse__follow_rel_nofollow=follow)
    body = """
      <a href="/plain">plain</a>
      <a href="/nf" rel="NoFollow">nofollow</a>
      <a href="/nf2" rel="external nofollow noopener">nofollow among others</a>
      <a href="/ugc" rel="ugc">ugc</a>
      <a href="/sponsored" rel="sponsored">sponsored</a>
    """
    result = extract_page(page(body), URL, None, cfg)
    targets = [dst.rsplit("/", 1)[1] for dst, _ in result["links"]]
    if follow:
        assert targets == ["plain", "nf", "nf2", "ugc", "sponsored"]
    else:
        assert targets == ["plain", "ugc", "sponsored"]


def test_links_per_page_are_capped_to_the_first_targets():
    """issue 37: links per page were not capped (a page of a million links)."""
    anchors = "".join(f'<a href="/p{i}">page {i}</a><a href="/p{i}">again</a>' for i in range(3000))
    body = f"<html><body><p>{'words ' * 50}</p>{anchors}</body></html>".encode()
    default = extract_record(body, "http://a.test/", None, load_config())
    assert [k["dst_url"] for k in default["links"]] == [f"http://a.test/p{i}" for i in range(1000)]
    few = extract_record(
        body, "http://a.test/", None, replace(load_config(), parse__max_links_per_page=7)
    )
    assert [k["anchor"] for k in few["links"]] == [f"page {i}" for i in range(7)]
    none = extract_record(
        body, "http://a.test/", None, replace(load_config(), parse__max_links_per_page=0)
    )
    assert none["links"] == [] and none["text"]


def test_a_tag_of_numerous_attributes_is_cut_after_the_cap():
    from crawllib.content.extract import MAX_ATTRIBUTES, cap_attributes

    tag = "<div " + " ".join(f"a{i}=v" for i in range(3 * MAX_ATTRIBUTES)) + ">text</div>"
    html = "<p id=x>before</p>" + tag + "<p>after</p>"
    capped = cap_attributes(html)
    assert capped.count("=") == MAX_ATTRIBUTES + 1 and "text</div><p>after</p>" in capped
    assert cap_attributes("<p id=x>few</p>") == "<p id=x>few</p>"


def test_titles_and_anchors_are_stored_without_control_characters():
    """Issue 49: a page titled `Hi ESC]0;PWNED BEL ESC[2J` kept its escapes in texts.title and
    links.anchor, which a terminal printing the stored value obeys."""
    hostile = "Hi \x1b]0;PWNED\x07\x1b[2J there\x9b"
    body = f'<a href="/next">Next \x1b[31mpage\x07</a>{prose()}'
    result = extract_page(page(body, f"<title>{hostile}</title>"), URL, "utf-8", CFG)
    assert result["error"] is None
    assert result["title"] == "Hi ]0;PWNED[2J there"
    assert result["links"] == [("http://www.example.com/next", "Next [31mpage")]
    for value in (result["title"], *(anchor for _, anchor in result["links"])):
        assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in value), value


@pytest.mark.parametrize("char", ["\x07", "\x0c", "\x00"])
def test_a_character_xml_forbids_does_not_cut_the_page(char):
    """libxml2 stops reading at such a character (BELs in an article's sources, on a real page
    of trafilatura's evaluation set): the text and links after it were lost."""
    rng = random.Random(11)
    html = article_html(rng, "www.example.com", "Harbor Lantern Report", [("/a.html", "A")])
    cut = html.index("</p>", len(html) // 2)  # in the article's text, past its middle
    broken = html[:cut] + char + html[cut:]
    clean = extract_page(html.encode(), URL, None, CFG)
    result = extract_page(broken.encode(), URL, None, CFG)
    assert clean["text_chars"] > 1000
    assert result["text"] == clean["text"]
    assert result["links"] == clean["links"]
