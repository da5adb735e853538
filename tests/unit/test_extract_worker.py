"""One page's extraction has a time limit (extract.max_seconds): its child process is killed
past it, the page gets an extract_timeout error, and the next page goes on in a new child;
in the fetch engine too, where the slice goes on. A child that dies gives extract_crashed, one
whose resident memory passes extract.max_memory_mb extract_memory. A fetch task with more than
one extraction process (extract.processes) extracts on each at once."""

from __future__ import annotations

import threading
import time

from crawllib.config import load_config, replace
from crawllib.content.extract import extract_record
from crawllib.content.extract_worker import Extractor, Extractors
from crawllib.core.vocab import ExtractFailure
from crawllib.engine import fetch_rows
from tests.unit.test_fetch_support import LocalWeb, config, row

MB = 1 << 20
# A page that takes seconds (a few MB of paragraphs), and a limit far below that and far above
# what a small page takes.
SLOW = ("<p>Words of a long article, paragraph after paragraph. </p>" * 120_000).encode()
SMALL = b"<html><head><title>Small</title></head><body><p>A small page.</p></body></html>"
LIMIT = 1.0
SLOWER = SLOW[: len(SLOW) // 3]  # a page that takes a second or two


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


def test_extractors_extract_in_as_many_children_at_once_and_one_caller_keeps_one():
    cfg = cfg_with(extract__max_seconds=600.0)
    extractors = Extractors(cfg, 2)
    try:
        extractors.start()
        pids = {e._child.pid for e in extractors.lanes}
        assert len(pids) == 2  # both started, at once
        # one caller at a time keeps the child it used last
        for _ in range(3):
            assert extractors.extract(SMALL, "http://a.test/", None)["title"] == "Small"
        assert extractors._free.queue[-1] is extractors.lanes[0]
        # a slow page holds one child; a small page meanwhile is extracted by the other
        slow = threading.Thread(target=extractors.extract, args=(SLOWER, "http://a.test/s", None))
        slow.start()
        time.sleep(0.3)
        assert extractors.extract(SMALL, "http://a.test/", None)["title"] == "Small"
        assert slow.is_alive()  # still on the slow page: the small one did not wait for it
        slow.join()
        assert {e._child.pid for e in extractors.lanes} == pids  # neither was replaced
    finally:
        extractors.close()


def test_the_fetch_engine_extracts_on_every_process_it_is_given():
    """extract.processes = 2: while the slow page holds one child, the small pages of another
    host are extracted by the other, and each page gets its own record."""
    with LocalWeb() as server:
        server.text("a.test", "/slow", SLOWER.decode(), content_type="text/html")
        for i in range(3):
            server.text("b.test", f"/{i}", SMALL.decode(), content_type="text/html")
        cfg = config(
            server.resolve("a.test", "b.test"),
            extract__processes=2,
            extract__max_seconds=600.0,
            politeness__default_delay=0.3,  # b.test's pages come while a.test's is extracted
            parse__max_html_bytes=16 * MB,
            fetch__max_body_bytes=16 * MB,
            fetch__max_decompressed_bytes=16 * MB,
            fetch__follow=False,
        )
        urls = ["http://a.test/slow", *(f"http://b.test/{i}" for i in range(3))]
        order = []
        for r in fetch_rows([row(u) for u in urls], cfg):
            if r["record"] == "fetch":
                order.append(r["url"])
                assert r["extracted"]["error"] is None, r["url"]
    # the slow page, fetched first (its host's only URL), is extracted last
    assert set(order) == set(urls) and order[-1] == "http://a.test/slow"
