"""Sitemaps in the fetch engine: which documents a slot asks for, and how politely."""

from __future__ import annotations

import gzip

from aiohttp import web
from test_fetch_support import LocalWeb, config, gaps, row

from crawllib.core.vocab import Record
from crawllib.engine import fetch_rows
from crawllib.engine.sitemap_fetch import sitemap_urls

INDEX = (
    "<sitemapindex xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'>"
    "<sitemap><loc>http://a.test/s1.xml</loc></sitemap>"
    "<sitemap><loc>http://a.test/s2.xml.gz</loc></sitemap>"
    "<sitemap><loc>http://a.test/s3.xml</loc></sitemap>"
    "</sitemapindex>"
)


def urlset(*urls: str) -> str:
    entries = "".join(f"<url><loc>{u}</loc><changefreq>daily</changefreq></url>" for u in urls)
    return f"<urlset xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'>{entries}</urlset>"


def test_sitemap_urls_are_the_listed_ones_on_the_slots_hosts_or_the_default():
    assert sitemap_urls("http://a.test/x", [], {"a.test"}) == ["http://a.test/sitemap.xml"]
    listed = ["http://A.test/s.xml", "http://other.test/s.xml", "http://a.test/s.xml", "::"]
    assert sitemap_urls("http://a.test/x", listed, {"a.test"}) == ["http://a.test/s.xml"]


def test_listed_sitemaps_and_index_children_are_fetched_after_the_pages_within_the_cap():
    with LocalWeb() as server:
        robots = "User-agent: *\nSitemap: http://a.test/index.xml\nSitemap: http://b.test/x.xml\n"
        server.text("a.test", "/robots.txt", robots)
        server.text("a.test", "/page", "<html><body>hi</body></html>", content_type="text/html")
        server.text("a.test", "/index.xml", INDEX, content_type="application/xml")
        server.text("a.test", "/s1.xml", urlset("http://a.test/1", "http://b.test/off"))
        gz = gzip.compress(urlset("http://a.test/2").encode())

        async def gzipped(request: web.Request) -> web.Response:
            return web.Response(body=gz, content_type="application/gzip")

        server.route("a.test", "/s2.xml.gz", gzipped)
        cfg = config(
            server.resolve("a.test"),
            sitemaps__enabled=True,
            sitemaps__max_documents=3,
            politeness__default_delay=0.2,
        )
        records = list(fetch_rows([row("http://a.test/page")], cfg))
        hits = [h for h in server.hits if h.host == "a.test"]
    sitemaps = {r["url"]: r for r in records if r["record"] == Record.SITEMAP}
    # the index and two children: max_documents 3 (s3 is never asked for); b.test is no
    # host of this slot
    assert [h.path_qs for h in hits] == ["/robots.txt", "/page", "/index.xml", "/s1.xml",
                                         "/s2.xml.gz"]  # fmt: skip
    assert sitemaps["http://a.test/index.xml"]["sitemap_kind"] == "index"
    assert sitemaps["http://a.test/index.xml"]["children"][:2] == [
        "http://a.test/s1.xml",
        "http://a.test/s2.xml.gz",
    ]
    s1 = sitemaps["http://a.test/s1.xml"]
    assert [e["url"] for e in s1["entries"]] == ["http://a.test/1"]
    assert (s1["out_of_scope"], s1["entries"][0]["changefreq"]) == (1, "daily")
    assert [e["url"] for e in sitemaps["http://a.test/s2.xml.gz"]["entries"]] == ["http://a.test/2"]
    assert min(gaps(hits)) >= 0.2 - 0.05  # one request per delay, sitemaps included


def test_a_missing_or_broken_sitemap_is_a_recorded_error():
    with LocalWeb() as server:
        server.text("a.test", "/robots.txt", "User-agent: *\nSitemap: http://a.test/bad.xml\n")
        server.text("a.test", "/bad.xml", "<urlset><url><loc>http://a.test/1</loc></url><url>")
        server.text("c.test", "/robots.txt", "User-agent: *\nDisallow:\n")
        server.text("c.test", "/sitemap.xml", "gone", status=404)
        cfg = config(server.resolve("a.test", "c.test"), sitemaps__enabled=True)
        records = list(fetch_rows([row("http://a.test/"), row("http://c.test/")], cfg))
    sitemaps = {r["url"]: r for r in records if r["record"] == Record.SITEMAP}
    bad = sitemaps["http://a.test/bad.xml"]
    assert (bad["error_kind"], [e["url"] for e in bad["entries"]]) == (
        "bad_xml",
        ["http://a.test/1"],
    )
    missing = sitemaps["http://c.test/sitemap.xml"]
    assert (missing["http_status"], missing["error_kind"], missing["entries"]) == (
        404,
        "http_404",
        [],
    )


def test_a_sitemap_on_another_host_of_the_slot_keeps_the_urls_of_the_host_that_listed_it():
    www, bare = "www.site9.net", "site9.net"  # one registered domain: one slot by domain
    with LocalWeb() as server:
        server.text(www, "/robots.txt", f"User-agent: *\nSitemap: http://{bare}/s.xml\n")
        server.text(bare, "/robots.txt", "User-agent: *\nSitemap: http://other.net/s.xml\n")
        listed = urlset(f"http://{www}/1", f"http://{bare}/2", "http://other.net/3")
        server.text(bare, "/s.xml", listed, content_type="application/xml")
        cfg = config(
            server.resolve(www, bare, "other.net"),
            sitemaps__enabled=True,
            politeness__key="domain",
        )
        rows = [row(f"http://{h}/", slot=bare) for h in (www, bare)]
        records = list(fetch_rows(rows, cfg))
        asked = {(h.host, h.path_qs) for h in server.hits}
    (sitemap,) = [r for r in records if r["record"] == Record.SITEMAP]
    # listed by www's robots.txt: its own host's URLs and www's; other.net's sitemap (listed
    # by the bare host) is on no host of the slot and is never asked for
    assert [e["url"] for e in sitemap["entries"]] == [f"http://{www}/1", f"http://{bare}/2"]
    assert sitemap["out_of_scope"] == 1
    assert ("other.net", "/s.xml") not in asked
