"""Unit tests of crawllib.content.sitemaps: urlsets, indexes, text lists, gzip, limits, hostile input."""

from __future__ import annotations

import gzip
import random
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawllib.content.sitemaps import (
    SitemapError,
    SitemapKind,
    SitemapResult,
    SitemapURL,
    changefreq_seconds,
    parse_lastmod,
    parse_sitemap,
)
from crawllib.core.vocab import words

NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
SITEMAP = "http://example.com/sitemap.xml"
ERRORS = (None, *words(SitemapError))


def urlset(*entries: str, ns: str | None = NS) -> bytes:
    xmlns = f' xmlns="{ns}"' if ns else ""
    body = "".join(entries)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset{xmlns}>{body}</urlset>\n'.encode()


def url(loc: str, extra: str = "") -> str:
    return f"<url><loc>{loc}</loc>{extra}</url>"


def pages(n: int, host: str = "example.com") -> list[str]:
    return [f"http://{host}/p/{i}.html" for i in range(n)]


def locs(result: SitemapResult) -> list[str]:
    return [entry.url for entry in result.urls]


# --- urlset and index -----------------------------------------------------------------------


def test_a_urlset_gives_every_field_of_each_entry():
    doc = urlset(
        url(
            "http://Example.com/a?utm_source=x&amp;b=2",
            "<lastmod>2024-01-01T00:00:00Z</lastmod><changefreq> Daily </changefreq>"
            "<priority>0.8</priority>",
        ),
        url("http://example.com/b", "<lastmod>2024-01-01</lastmod><priority>1.0</priority>"),
        url("http://example.com/c"),
    )
    result = parse_sitemap(doc, SITEMAP)
    assert result == SitemapResult(
        kind=SitemapKind.URLSET,
        urls=[
            SitemapURL("http://example.com/a?b=2", 1704067200.0, "daily", 0.8),
            SitemapURL("http://example.com/b", 1704067200.0, None, 1.0),
            SitemapURL("http://example.com/c"),
        ],
        sitemaps=[],
        error=None,
    )


@pytest.mark.parametrize(
    "ns",
    [
        None,
        NS,
        "https://www.sitemaps.org/schemas/sitemap/0.9",
        "http://www.google.com/schemas/sitemap/0.84",
    ],
)
def test_a_urlset_is_read_in_any_namespace_or_none(ns):
    result = parse_sitemap(urlset(*map(url, pages(3)), ns=ns), SITEMAP)
    assert (result.kind, locs(result), result.error) == (SitemapKind.URLSET, pages(3), None)


def test_extensions_in_other_namespaces_are_ignored():
    doc = (
        f'<urlset xmlns="{NS}" xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">'
        "<url><loc>http://example.com/a</loc>"
        "<image:image><image:loc>http://cdn.example.com/a.jpg</image:loc></image:image>"
        "<image:loc>http://example.com/not-a-page</image:loc>"
        "</url></urlset>"
    ).encode()
    result = parse_sitemap(doc, SITEMAP)
    assert locs(result) == ["http://example.com/a"]
    assert (result.invalid, result.out_of_scope) == (0, 0)


def test_a_sitemap_index_gives_its_children():
    doc = (
        f'<sitemapindex xmlns="{NS}">'
        "<sitemap><loc>http://example.com/s1.xml.gz</loc><lastmod>2024-01-01</lastmod></sitemap>"
        "<sitemap><loc>http://example.com/s2.xml</loc></sitemap>"
        "<url><loc>http://example.com/page-in-an-index</loc></url>"
        "</sitemapindex>"
    ).encode()
    result = parse_sitemap(doc, SITEMAP)
    assert result.kind == SitemapKind.INDEX
    assert result.sitemaps == [
        SitemapURL("http://example.com/s1.xml.gz", 1704067200.0),
        SitemapURL("http://example.com/s2.xml"),
    ]
    assert (result.urls, result.error) == ([], None)


def test_an_empty_urlset_is_a_usable_answer():
    result = parse_sitemap(urlset(), SITEMAP)
    assert (result.kind, result.urls, result.error) == (SitemapKind.URLSET, [], None)


@pytest.mark.parametrize(
    "doc",
    [
        b"<!DOCTYPE html><html><body>Not found</body></html>",
        b"\n <!doctype html>\n<html><body>Not found</body></html>",  # not well-formed XML
        b'<?xml version="1.0"?><!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" "x">',
        b"<html><body>Not found</body></html>",
        b'<?xml version="1.0"?><rss version="2.0"><channel></channel></rss>',
    ],
)
def test_an_html_page_or_a_feed_is_not_a_sitemap(doc):
    result = parse_sitemap(doc, SITEMAP, content_type="text/html")
    assert (result.kind, result.urls, result.error) == (None, [], SitemapError.NOT_SITEMAP)


# --- gzip ------------------------------------------------------------------------------------


def test_gzip_is_recognised_by_its_bytes():
    plain = urlset(*map(url, pages(5)))
    for data in (gzip.compress(plain), gzip.compress(plain[:100]) + gzip.compress(plain[100:])):
        result = parse_sitemap(data, "http://example.com/sitemap.xml", content_type="text/xml")
        assert (result.kind, locs(result), result.error) == (SitemapKind.URLSET, pages(5), None)


def test_a_gzip_bomb_stops_at_max_bytes():
    head = urlset(url("http://example.com/a"))[: -len(b"</urlset>\n")]
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    spaces = b" " * (1 << 20)
    bomb = packer.compress(head) + b"".join(packer.compress(spaces) for _ in range(64))
    bomb += packer.flush()
    assert len(bomb) < 200_000  # 64 MiB inflated
    result = parse_sitemap(bomb, SITEMAP, max_bytes=1 << 20)
    assert (result.error, locs(result)) == (SitemapError.TOO_LARGE, ["http://example.com/a"])


def test_corrupt_or_truncated_gzip_is_a_decode_error_keeping_what_came_before():
    data = gzip.compress(urlset(*map(url, pages(20_000))), compresslevel=1)
    result = parse_sitemap(data[: len(data) // 2], SITEMAP)
    assert result.error == SitemapError.DECODE_ERROR
    assert 0 < len(result.urls) < 20_000
    assert locs(result) == pages(len(result.urls))
    corrupt = data[:10] + bytes(len(data) - 10)
    assert parse_sitemap(corrupt, SITEMAP).error == SitemapError.DECODE_ERROR


# --- limits and hostile documents ------------------------------------------------------------


def test_more_than_max_urls_keeps_the_first_max_urls():
    result = parse_sitemap(urlset(*map(url, pages(10))), SITEMAP, max_urls=3)
    assert (result.error, locs(result)) == (SitemapError.TOO_MANY_URLS, pages(3))
    exactly = parse_sitemap(urlset(*map(url, pages(3))), SITEMAP, max_urls=3)
    assert (exactly.error, locs(exactly)) == (None, pages(3))
    text = parse_sitemap("\n".join(pages(10)).encode(), SITEMAP, max_urls=4)
    assert (text.error, text.kind, locs(text)) == (SitemapError.TOO_MANY_URLS, "text", pages(4))


def test_max_bytes_applies_to_plain_documents_too():
    doc = urlset(*map(url, pages(1000)))
    result = parse_sitemap(doc, SITEMAP, max_bytes=len(doc) // 2)
    assert result.error == SitemapError.TOO_LARGE
    assert 0 < len(result.urls) < 1000
    assert locs(result) == pages(len(result.urls))
    assert parse_sitemap(doc, SITEMAP, max_bytes=len(doc)).error is None


BILLION_LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY a "aaaaaaaaaa">'
    + "".join(
        f'<!ENTITY {b} "{("&" + a + ";") * 10}">'
        for a, b in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + f']><urlset xmlns="{NS}"><url><loc>http://example.com/&i;</loc></url></urlset>'
)
XXE = (
    '<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
    f'<urlset xmlns="{NS}"><url><loc>http://example.com/&x;</loc></url></urlset>'
)


@pytest.mark.parametrize(
    "data",
    [
        BILLION_LAUGHS.encode(),
        XXE.encode(),
        BILLION_LAUGHS.encode("utf-16"),  # no "<!DOCTYPE" among its bytes
        gzip.compress(BILLION_LAUGHS.encode()),
    ],
)
def test_a_dtd_is_refused(data):
    result = parse_sitemap(data, SITEMAP)
    assert result == SitemapResult(None, [], [], SitemapError.DOCTYPE)


def test_broken_xml_keeps_the_entries_before_the_break():
    doc = urlset(*map(url, pages(3)), "<url><loc>http://example.com/x</lo></url>", url(pages(9)[8]))
    result = parse_sitemap(doc, SITEMAP)
    assert (result.kind, result.error, locs(result)) == ("urlset", SitemapError.BAD_XML, pages(3))
    cut = parse_sitemap(urlset(*map(url, pages(3)))[:-5], SITEMAP)  # inside </urlset>
    assert (cut.error, locs(cut)) == (SitemapError.BAD_XML, pages(3))


# --- scope and validity ----------------------------------------------------------------------


def test_urls_off_the_sitemaps_host_are_dropped_unless_allowed():
    listed = ["http://example.com/a", "https://EXAMPLE.com:8443/b", "http://www.example.com/c"]
    listed += ["http://other.org/d"]
    doc = urlset(*map(url, listed))
    alone = parse_sitemap(doc, SITEMAP)
    assert locs(alone) == ["http://example.com/a", "https://example.com:8443/b"]
    assert alone.out_of_scope == 2
    allowed = parse_sitemap(doc, SITEMAP, allowed_hosts=frozenset({"other.org"}))
    assert locs(allowed) == ["http://example.com/a", "https://example.com:8443/b", listed[3]]
    assert allowed.out_of_scope == 1
    index = f'<sitemapindex xmlns="{NS}"><sitemap><loc>http://other.org/s.xml</loc></sitemap>'
    result = parse_sitemap(f"{index}</sitemapindex>".encode(), SITEMAP)
    assert (result.sitemaps, result.out_of_scope) == ([], 1)


def test_a_sitemap_on_another_host_keeps_urls_of_the_hosts_that_listed_it():
    doc = urlset(*map(url, ["http://cdn.net/x", "http://example.com/y", "http://third.org/z"]))
    result = parse_sitemap(doc, "http://cdn.net/sm.xml", allowed_hosts=frozenset({"example.com"}))
    assert locs(result) == ["http://cdn.net/x", "http://example.com/y"]
    assert result.out_of_scope == 1


def test_entries_without_a_crawlable_url_are_counted_invalid():
    doc = urlset(
        url("ftp://example.com/file"),
        url("/relative/path"),
        url("http://"),
        url("javascript:alert(1)"),
        url("http://example.com/" + "x" * 70_000),
        "<url><lastmod>2024-01-01</lastmod></url>",
        url("http://example.com/ok"),
    )
    result = parse_sitemap(doc, SITEMAP)
    assert (locs(result), result.invalid, result.out_of_scope) == (["http://example.com/ok"], 6, 0)


def test_bad_hints_become_none():
    doc = urlset(
        url("http://example.com/a", "<lastmod>yesterday</lastmod><changefreq>often</changefreq>"),
        url("http://example.com/b", "<priority>1.5</priority><lastmod>2024-13-01</lastmod>"),
        url("http://example.com/c", "<priority>nan</priority><lastmod> </lastmod>"),
    )
    result = parse_sitemap(doc, SITEMAP)
    assert [(u.lastmod, u.changefreq, u.priority) for u in result.urls] == [(None, None, None)] * 3
    assert result.bad_lastmod == 2  # an empty lastmod is absent, not bad


@pytest.mark.parametrize(
    ("text", "epoch"),
    [
        ("2024", 1704067200.0),
        ("2024-02", 1706745600.0),
        ("2024-02-29", 1709164800.0),
        ("2024-02-29T12:30Z", 1709209800.0),
        ("2024-02-29T12:30:15Z", 1709209815.0),
        ("2024-02-29T12:30:15.25Z", 1709209815.25),
        ("2024-02-29T12:30:15+02:00", 1709202615.0),
        ("2024-02-29T12:30:15-0530", 1709229615.0),
        ("2024-02-29T12:30:15", 1709209815.0),  # no zone: UTC
        (" 2024-02-29 12:30:15z ", 1709209815.0),
        ("1970-01-01T00:00:00.000001+00:00", 0.000001),
    ],
)
def test_lastmod_w3c_datetimes(text, epoch):
    assert parse_lastmod(text) == pytest.approx(epoch, abs=1e-6)


@pytest.mark.parametrize(
    "text",
    ["", "24-01-01", "2023-02-29", "2024-00", "2024-01-01T25:00Z", "2024-01-01T10:00+25:00",
     "2024/01/01", "٢٠٢٤", "2024-01-01T10Z", "today"],
)  # fmt: skip
def test_lastmod_that_is_no_w3c_datetime_is_none(text):
    assert parse_lastmod(text) is None


def test_changefreq_hints_in_seconds():
    assert [changefreq_seconds(w) for w in ("always", "hourly", " Daily", "weekly")] == [
        3600.0,
        3600.0,
        86400.0,
        604800.0,
    ]
    assert changefreq_seconds("monthly") == 30 * 86400.0
    assert changefreq_seconds("yearly") == 365 * 86400.0
    assert [changefreq_seconds(w) for w in ("never", "often", None)] == [None, None, None]


# --- text sitemaps ---------------------------------------------------------------------------


def test_a_text_sitemap_lists_one_url_a_line():
    data = (
        b"\xef\xbb\xbfhttp://example.com/a\r\n\r\n  http://example.com/b  \n"
        b"not a url\nhttp://other.org/c\n\xff\xfe\nhttp://example.com/caf\xc3\xa9"
    )
    result = parse_sitemap(data, SITEMAP, content_type="text/plain")
    assert result.kind == SitemapKind.TEXT
    assert locs(result) == [
        "http://example.com/a",
        "http://example.com/b",
        "http://example.com/caf%C3%A9",
    ]
    assert (result.invalid, result.out_of_scope, result.error) == (2, 1, None)


def test_a_text_sitemap_cut_by_max_bytes_drops_the_cut_line():
    data = "\n".join(pages(100)).encode()
    cut_inside_line_4 = len("\n".join(pages(4))) - 3
    result = parse_sitemap(data, SITEMAP, max_bytes=cut_inside_line_4)
    assert (result.error, locs(result)) == (SitemapError.TOO_LARGE, pages(3))


@pytest.mark.parametrize(
    ("data", "content_type"),
    [(b"", None), (b"404 Not Found\n", "text/plain"), (b"http://example.com/x", "text/html")],
)
def test_text_without_urls_or_served_as_html_is_not_a_sitemap(data, content_type):
    result = parse_sitemap(data, SITEMAP, content_type=content_type)
    assert (result.kind, result.urls, result.error) == (None, [], SitemapError.NOT_SITEMAP)


# --- any bytes -------------------------------------------------------------------------------


def check(result: SitemapResult, expected: list[str] | None, cut_last: bool = False) -> None:
    """A result in the module's vocabulary; its URLs (but the last, if `cut_last`) a prefix of
    `expected` when given."""
    assert isinstance(result, SitemapResult)
    assert result.error in ERRORS
    assert result.kind in (None, *words(SitemapKind))
    if expected is not None:
        kept = locs(result)[:-1] if cut_last else locs(result)
        assert kept == expected[: len(kept)]


def test_truncated_and_mangled_sitemaps_never_raise():
    expected = pages(150)
    rng = random.Random(7)
    text = "\n".join(expected).encode()
    docs = [urlset(*map(url, expected)), text, gzip.compress(urlset(*map(url, expected)))]
    docs += [gzip.compress(text)]
    for doc in docs:
        for cut in range(0, len(doc), max(1, len(doc) // 61)):
            result = parse_sitemap(doc[:cut], SITEMAP)
            # a plain text list cut anywhere looks whole: only its last line can be cut short
            check(result, expected, cut_last=doc is text)
            mangled = bytearray(doc)
            for _ in range(3):
                mangled[rng.randrange(len(doc))] = rng.randrange(256)
            check(parse_sitemap(bytes(mangled), SITEMAP), None)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000), st.sampled_from([b"", b"\x1f\x8b", b"<", b"<urlset>"]))
def test_random_bytes_never_raise(data, prefix):
    check(parse_sitemap(prefix + data, SITEMAP, max_urls=5, max_bytes=1000), [])
