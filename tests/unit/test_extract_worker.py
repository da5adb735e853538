"""One page's extraction has a time limit (extract.max_seconds): its child process is killed
past it, the page gets an extract_timeout error, and the next page goes on in a new child;
in the fetch engine too, where the slice goes on. A child that dies gives extract_crashed, one
whose resident memory passes extract.max_memory_mb extract_memory."""

from __future__ import annotations

import threading
import time

from crawllib.config import load_config, replace
from crawllib.content.extract import extract_record
from crawllib.content.extract_worker import Extractor
from crawllib.core.vocab import ExtractFailure
from crawllib.engine import fetch_rows
from tests.unit.test_fetch_support import LocalWeb, config, row

MB = 1 << 20
# A page that takes seconds (a few MB of paragraphs), and a limit far below that and far above
# what a small page takes.
SLOW = ("<p>Words of a long article, paragraph after paragraph. </p>" * 120_000).encode()
SMALL = b"<html><head><title>Small</title></head><body><p>A small page.</p></body></html>"
LIMIT = 1.0


def cfg_with(**changes):
    return replace(load_config(), parse__max_html_bytes=16 * MB, **changes)


def test_a_page_past_the_limit_is_stopped_and_the_next_page_is_extracted():
    cfg = cfg_with(extract__max_seconds=LIMIT)
    extractor = Extractor(cfg)
    try:
        small = extractor.extract(SMALL, "http://a.test/", None)
        assert small == extract_record(SMALL, "http://a.test/", None, cfg)  # the same result
        child = extractor._child
        slow = extractor.extract(SLOW, "http://a.test/slow", None)
        assert slow["error"] == (
            "extract_timeout: extraction took longer than 1 s (extract.max_seconds) and was stopped"
        )
        assert slow["text"] is None and slow["links"] == [] and slow["content_hash"] is None
        assert child.poll() is not None  # killed
        again = extractor.extract(SMALL, "http://a.test/", None)
        assert again["title"] == "Small" and again["error"] is None
    finally:
        extractor.close()


def test_a_child_that_dies_is_an_extract_crashed_page_and_the_next_page_goes_on():
    extractor = Extractor(cfg_with(extract__max_seconds=600.0))
    try:
        extractor.extract(SMALL, "http://a.test/", None)  # started
        child = extractor._child
        killer = threading.Timer(0.5, child.kill)  # killed (out of memory, a crash)
        killer.start()
        dead = extractor.extract(SLOW, "http://a.test/slow", None)
        killer.join()
        assert dead["error"].startswith(f"{ExtractFailure.CRASHED}: the extraction's process")
        assert extractor.extract(SMALL, "http://a.test/", None)["error"] is None
    finally:
        extractor.close()


def test_a_page_past_the_memory_limit_is_stopped_and_the_next_page_is_extracted():
    # SLOW's tree takes the child from about 160 MiB to about 480 MiB, over 8 s
    extractor = Extractor(cfg_with(extract__max_seconds=600.0, extract__max_memory_mb=256))
    try:
        assert extractor.extract(SMALL, "http://a.test/", None)["error"] is None
        child = extractor._child
        started = time.monotonic()
        big = extractor.extract(SLOW, "http://a.test/slow", None)
        assert big["error"] == (
            f"{ExtractFailure.MEMORY}: extraction used more than 256 MiB "
            "(extract.max_memory_mb) and was stopped"
        )
        assert big["text"] is None and big["links"] == []
        assert time.monotonic() - started < 6  # stopped while it grew, not after
        assert child.poll() is not None  # killed
        again = extractor.extract(SMALL, "http://a.test/", None)
        assert again["title"] == "Small" and again["error"] is None
        assert extractor._child is not None and extractor._child.pid != child.pid
    finally:
        extractor.close()


def test_the_fetch_engine_stores_a_timed_out_page_and_the_slice_goes_on():
    with LocalWeb() as server:
        server.text("a.test", "/slow", SLOW.decode(), content_type="text/html")
        for i in range(3):
            server.text("a.test", f"/{i}", SMALL.decode(), content_type="text/html")
        cfg = config(
            server.resolve("a.test"),
            extract__max_seconds=LIMIT,
            parse__max_html_bytes=16 * MB,
            fetch__max_body_bytes=16 * MB,
            fetch__max_decompressed_bytes=16 * MB,
            fetch__follow=False,
        )
        urls = ["http://a.test/0", "http://a.test/slow", "http://a.test/1", "http://a.test/2"]
        records = [r for r in fetch_rows([row(u) for u in urls], cfg) if r["record"] == "fetch"]
    fetches = {r["url"]: r for r in records}
    assert set(fetches) == set(urls) and all(r["outcome"] == "ok" for r in records)
    assert fetches["http://a.test/slow"]["extracted"]["error"].startswith("extract_timeout: ")
    assert fetches["http://a.test/slow"]["body"] == SLOW  # the page is stored all the same
    for url in ("http://a.test/0", "http://a.test/1", "http://a.test/2"):
        assert fetches[url]["extracted"]["title"] == "Small", url
