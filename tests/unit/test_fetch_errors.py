"""Per-URL failures of the fetch engine: each one is a row with the right outcome."""

from __future__ import annotations

import asyncio
import gzip
import threading
import time
import tracemalloc
import zlib

import pytest
from aiohttp import web
from test_fetch_support import LocalWeb, RawServer, config, crawl, row

from crawllib.core.records import FetchRecord, fields
from crawllib.engine import fetch_async, fetch_rows


def html(body: bytes, **headers: str):
    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=body, headers={"Content-Type": "text/html", **headers})

    return handler


def test_row_keys_and_types():
    with LocalWeb() as server:
        fetches, _ = crawl(["http://a.test/p?q=1"], config(server.resolve("a.test")))
    r = fetches["http://a.test/p?q=1"]
    assert list(r) == list(fields(FetchRecord))  # see also test_records.py
    assert (r["outcome"], r["http_status"], r["content_type"], r["ip"]) == (
        "ok",
        200,
        "text/html",
        "127.0.0.1",
    )
    assert r["body"] == b"<html><body>a.test/p?q=1</body></html>" == b"".join([r["body"]])
    assert r["body_bytes"] == len(r["body"]) and not r["is_truncated"]
    assert r["host"] == "a.test" and r["depth"] == 0 and isinstance(r["url_key"], int)
    assert all(k == k.lower() for k in r["headers"]) and "content-type" in r["headers"]
    assert isinstance(r["fetched_at"], float) and isinstance(r["fetch_ms"], int)


def test_redirects_are_resolved_and_normalised_not_followed():
    with LocalWeb() as server:
        for path, location in {"/rel": "next?b=2&a=1#f", "/abs": "HTTP://B.test:80/x",
                               "/bad": "mailto:x@y", "/empty": ""}.items():  # fmt: skip

            async def handler(request: web.Request, location=location) -> web.Response:
                headers = {"Location": location} if location else {}
                return web.Response(status=302, headers=headers)

            server.route("a.test", f"/d{path}", handler)
        urls = [f"http://a.test/d{p}" for p in ("/rel", "/abs", "/bad", "/empty")]
        fetches, _ = crawl(urls, config(server.resolve("a.test")))
        assert {h.path_qs for h in server.hits} == {"/robots.txt", *[u[13:] for u in urls]}
    assert fetches[urls[0]]["redirect_to"] == "http://a.test/d/next?a=1&b=2"
    assert fetches[urls[1]]["redirect_to"] == "http://b.test/x"
    assert (fetches[urls[2]]["outcome"], fetches[urls[2]]["error_kind"]) == (
        "redirect",
        "bad_location",
    )
    assert (fetches[urls[3]]["outcome"], fetches[urls[3]]["error_kind"]) == (
        "http_error",
        "no_location",
    )


def test_compressed_bodies_are_decoded():
    page = b"<html>" + b"hello world " * 1000 + b"</html>"
    raw = zlib.compressobj(9, zlib.DEFLATED, -15)
    with LocalWeb() as server:
        server.route("a.test", "/gz", html(gzip.compress(page), **{"Content-Encoding": "gzip"}))
        server.route(
            "a.test", "/zlib", html(zlib.compress(page), **{"Content-Encoding": "deflate"})
        )
        server.route(
            "a.test",
            "/raw",
            html(raw.compress(page) + raw.flush(), **{"Content-Encoding": "deflate"}),
        )
        server.route("a.test", "/br", html(b"xx", **{"Content-Encoding": "br"}))
        server.route("a.test", "/junk", html(b"not gzip at all", **{"Content-Encoding": "gzip"}))
        fetches, _ = crawl([f"http://a.test/{p}" for p in ("gz", "zlib", "raw", "br", "junk")],
                           config(server.resolve("a.test")))  # fmt: skip
    for p in ("gz", "zlib", "raw"):
        r = fetches[f"http://a.test/{p}"]
        assert (r["outcome"], r["body"]) == ("ok", page)
        assert r["body_bytes"] < len(page) // 10  # bytes read from the wire
    assert fetches["http://a.test/br"]["error_kind"] == "unsupported_encoding"
    assert fetches["http://a.test/junk"]["error_kind"] == "decode_error"


def test_a_gzip_body_of_several_members_is_decoded_whole():
    """RFC 1952 2.2: a gzip file is a series of members (what `cat a.gz b.gz` makes); the
    first member's end was taken for the body's (issue 49). Padding after the last member is
    ignored, as before; a member cut short is still a decode error of its own kind."""
    first, second = b"<html><p>" + b"one " * 3000, b"two " * 3000 + b"</p></html>"
    members = gzip.compress(first) + gzip.compress(second)
    with LocalWeb() as server:
        gz = {"Content-Encoding": "gzip"}
        server.route("a.test", "/two", html(members, **gz))
        server.route("a.test", "/three", html(members + gzip.compress(b"<!-- 3 -->"), **gz))
        server.route("a.test", "/padded", html(members + bytes(512), **gz))
        fetches, _ = crawl(
            [f"http://a.test/{p}" for p in ("two", "three", "padded")],
            config(server.resolve("a.test")),
        )
    for p, want in (("two", first + second), ("three", first + second + b"<!-- 3 -->"),
                    ("padded", first + second)):  # fmt: skip
        r = fetches[f"http://a.test/{p}"]
        assert (r["outcome"], r["is_truncated"]) == ("ok", False), (p, r["error_kind"])
        assert r["body"] == want, p


def test_content_type_charset_and_header_caps():
    with LocalWeb() as server:
        server.route(
            "a.test", "/bogus", html(b"x", **{"Content-Type": 'text/HTML; Charset="bogus-9"'})
        )
        server.route(
            "a.test", "/latin", html(b"\xe9", **{"Content-Type": "text/html;charset=ISO-8859-1"})
        )
        server.route("a.test", "/xhtml", html(b"<x/>", **{"Content-Type": "application/xhtml+xml"}))
        server.route("a.test", "/none", html(b"<p>untyped</p>", **{"Content-Type": ""}))
        server.route("a.test", "/long", html(b"x", **{"X-Long": "v" * 5000}))
        urls = [f"http://a.test/{p}" for p in ("bogus", "latin", "xhtml", "none", "long")]
        fetches, _ = crawl(urls, config(server.resolve("a.test")))
    assert (fetches[urls[0]]["content_type"], fetches[urls[0]]["charset"]) == ("text/html", None)
    assert (fetches[urls[1]]["charset"], fetches[urls[1]]["body"]) == ("iso-8859-1", b"\xe9")
    assert fetches[urls[2]]["body"] == b"<x/>"
    assert fetches[urls[3]]["body"] == b"<p>untyped</p>"  # no Content-Type: the parser decides
    assert len(fetches[urls[4]]["headers"]["x-long"]) == 1024


def test_dropped_and_broken_responses():
    requested: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        path = request.split(b" ")[1]
        requested.append(path)
        if path == b"/robots.txt":
            writer.write(
                b"HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
            )
        elif path == b"/garbage":
            writer.write(b"SPLAT\r\n\r\n")
        elif path == b"/short":
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 999\r\n\r\n<p>"
            )
        elif path == b"/crlf":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX: a\x00b\r\n\r\n")
        await writer.drain()  # and close: /nothing gets no answer at all

    with RawServer(serve) as raw:
        cfg = config({"r.test": f"127.0.0.1:{raw.port}"})
        urls = [f"http://r.test/{p}" for p in ("nothing", "garbage", "short", "crlf")]
        fetches, robots = crawl(urls, cfg)
    kinds = {u.rsplit("/", 1)[1]: (fetches[u]["outcome"], fetches[u]["error_kind"]) for u in urls}
    assert kinds == {
        "nothing": ("error", "disconnected"),
        "garbage": ("error", "bad_response"),
        "short": ("error", "disconnected"),
        "crlf": ("error", "bad_response"),
    }
    assert robots[0]["http_status"] == 404
    # A dropped connection is one failed attempt: never resent at once (politeness). The first
    # page request comes on a new connection (robots.txt said close), so it reaches the server.
    assert requested.count(b"/nothing") == 1
    assert max(requested.count(p) for p in set(requested)) == 1


def test_connection_refused_then_host_deferred():
    with RawServer(lambda r, w: asyncio.sleep(0)) as raw:
        port = raw.port
    cfg = config({"gone.test": f"127.0.0.1:{port}"})  # nothing listens there any more
    fetches, robots = crawl([f"http://gone.test/{i}" for i in range(3)], cfg)
    assert robots[0]["error_kind"] == "connect"
    assert {(r["outcome"], r["error_kind"]) for r in fetches.values()} == {("error", "connect")}


def test_big_body_and_gzip_bomb_keep_memory_bounded():
    big = 40 * 1024 * 1024
    chunk = b"<p>" + b"x" * 65533

    async def big_body(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/html"})
        resp.content_length = big
        await resp.prepare(request)
        try:
            for _ in range(big // len(chunk)):
                await resp.write(chunk)
        except ConnectionError:
            pass
        return resp

    bomb = gzip.compress(bytes(200 * 1024 * 1024), 9)  # 200 MiB of zeros in ~200 KB
    with LocalWeb() as server:
        server.route("a.test", "/big", big_body)
        server.route("a.test", "/bomb", html(bomb, **{"Content-Encoding": "gzip"}))
        cfg = config(
            server.resolve("a.test"),
            fetch__max_body_bytes=2_000_000,
            fetch__max_decompressed_bytes=3_000_000,
        )
        tracemalloc.start()
        try:
            fetches, _ = crawl(["http://a.test/big", "http://a.test/bomb"], cfg)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    big_row, bomb_row = fetches["http://a.test/big"], fetches["http://a.test/bomb"]
    assert (big_row["outcome"], big_row["is_truncated"], len(big_row["body"])) == (
        "ok",
        True,
        2_000_000,
    )
    assert (bomb_row["outcome"], bomb_row["error_kind"]) == ("error", "decompressed_too_large")
    assert bomb_row["body"] is None and bomb_row["body_bytes"] <= len(bomb)
    assert peak < 16 * 1024 * 1024, peak  # 40 MiB body and 200 MiB bomb: a few MB at most


def test_deadline_defers_what_was_not_started():
    delay, deadline = 0.3, 1.0
    with LocalWeb() as server:
        cfg = config(
            server.resolve("a.test", "b.test"),
            politeness__default_delay=delay,
            fetch__deadline_seconds=deadline,
        )
        urls = [f"http://{h}/{i}" for h in ("a.test", "b.test") for i in range(10)]
        fetches, _ = crawl(urls, cfg)
        pages = {h: len(server.hits_of(h)) - 1 for h in ("a.test", "b.test")}  # no robots.txt
    outcomes = [fetches[u]["outcome"] for u in urls]
    started = sum(pages.values())
    assert outcomes.count("ok") == started >= 1
    # Turns are `delay` apart from the robots.txt request on: none can start past the deadline
    assert max(pages.values()) <= int(deadline / delay)
    assert outcomes.count("deferred") == 20 - started
    deferred = [fetches[u] for u in urls if fetches[u]["outcome"] == "deferred"]
    assert {r["error_kind"] for r in deferred} == {"deadline"}
    # Deferred at once, not at the turn each would have had: waiting out one host's turns
    # would spread its deferred rows over (n - 1) * delay seconds.
    for h in ("a.test", "b.test"):
        times = [r["fetched_at"] for r in deferred if r["host"] == h]
        assert max(times) - min(times) < 0.5 * (len(times) - 1) * delay


def test_no_time_left_defers_every_url_without_a_request():
    # a slice started past the generation's deadline gets 0 s: not even robots.txt is asked
    with LocalWeb() as server:
        cfg = config(server.resolve("a.test", "b.test"), fetch__deadline_seconds=0.0)
        urls = [f"http://{h}/{i}" for h in ("a.test", "b.test") for i in range(3)]
        fetches, robots = crawl(urls, cfg)
        assert server.hits == [] and robots == []
    assert {(fetches[u]["outcome"], fetches[u]["error_kind"]) for u in urls} == {
        ("deferred", "deadline")
    }


def test_max_urls_per_host_defers_the_rest():
    with LocalWeb() as server:
        cfg = config(server.resolve("a.test"), fetch__max_urls_per_host=2)
        fetches, _ = crawl([f"http://a.test/{i}" for i in range(4)], cfg)
    assert [fetches[f"http://a.test/{i}"]["outcome"] for i in range(4)] == [
        "ok",
        "ok",
        "deferred",
        "deferred",
    ]
    assert fetches["http://a.test/3"]["error_kind"] == "max_urls_per_host"


def test_blocked_and_invalid_urls_make_no_request():
    with LocalWeb() as server:
        resolve = server.resolve("a.test")
        cfg = config(resolve, network__allow_private=True)
        urls = ["ftp://a.test/x", "http://metadata.google.internal/computeMetadata/v1/",
                f"http://127.0.0.1:{server.port}/", "http://[fd00:ec2::254]/", "http://100.100.100.200/"]  # fmt: skip
        fetches, robots = crawl(urls, cfg)
        assert server.hits == [] and robots == []
    kinds = [(fetches[u]["outcome"], fetches[u]["error_kind"]) for u in urls]
    assert kinds == [
        ("blocked", "scheme"),
        ("blocked", "metadata_address"),
        ("blocked", "resolve_only"),  # allow_private, but resolve_only reaches only the map
        ("blocked", "metadata_address"),  # metadata stays refused even with allow_private
        ("blocked", "metadata_address"),
    ]


def test_a_crash_for_one_host_does_not_stop_the_others():
    broken = [{"host": "a.test", "http_status": 200, "error_kind": None, "body": 12345,
               "fetched_at": time.time(), "expires_at": time.time() + 60}]  # fmt: skip
    with LocalWeb() as server:
        cfg = config(server.resolve("a.test", "b.test"))
        fetches, _ = crawl(["http://a.test/1", "http://a.test/2", "http://b.test/1"], cfg, broken)
    for u in ("http://a.test/1", "http://a.test/2"):
        assert (fetches[u]["outcome"], fetches[u]["error_kind"]) == ("error", "internal")
        assert fetches[u]["error_detail"].split(":")[0].endswith("Error")
    assert fetches["http://b.test/1"]["outcome"] == "ok"


def test_closing_the_iterator_early_stops_the_fetch():
    with LocalWeb() as server:
        cfg = config(server.resolve("a.test"), politeness__default_delay=0.5)
        threads = set(threading.enumerate())
        it = fetch_rows([row(f"http://a.test/{i}") for i in range(50)], cfg)
        first = [next(it) for _ in range(2)]
        started = sorted(t.name for t in set(threading.enumerate()) - threads)
        assert started == ["crawllib-extract_0", "crawllib-fetch"]  # the loop, the extraction
        it.close()
        # close() returns once the engine's threads have ended: no request can follow
        assert set(threading.enumerate()) - threads == set()
        sent = len(server.hits)
        time.sleep(0.6)  # longer than a turn: a fetch still running would have sent more
        assert len(server.hits) == sent <= 3  # robots.txt, the page read, one in flight
    assert [r["record"] for r in first] == ["robots", "fetch"]


def test_fetch_async_with_an_async_emit():
    with LocalWeb() as server:
        cfg = config(server.resolve("a.test"))
        got = []

        async def emit(record):
            await asyncio.sleep(0)
            got.append(record)

        asyncio.run(fetch_async([row("http://a.test/1"), row("http://a.test/2")], cfg, (), emit))
    assert sorted(r["record"] for r in got) == ["fetch", "fetch", "host", "robots"]


def test_an_emit_failure_stops_the_call():
    with LocalWeb() as server:
        cfg = config(server.resolve("a.test", "b.test"))

        def emit(record):
            raise KeyError("sink is full")

        rows = [row("http://a.test/1"), row("http://b.test/1")]
        with pytest.raises(KeyError, match="sink is full"):
            asyncio.run(fetch_async(rows, cfg, (), emit))
