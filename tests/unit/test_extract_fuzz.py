"""Pathological HTML costs `extract_record` time linear in its size: unclosed tags repeated,
deep nesting, huge and numerous attributes, a <title> never closed (issue 37: 117 KB of
"<title" took 4 s, the opening tag's pattern was quadratic). Bounded in CPU seconds per MB
of the extracting thread (this machine's and this process's other work does not count; a
measure over the bound is taken again, up to three times, so that a moment's contention does
not fail it and a page that is slow every time does); a page of plain paragraphs takes about
one."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawllib.config import load_config, replace
from crawllib.content.extract import extract_record

MB = 1 << 20
SECONDS_PER_MB = 6.0
OVERHEAD = 0.3  # seconds of any page, however small (trafilatura's passes)
CFG = replace(load_config(), parse__max_html_bytes=2 * MB)


def sized(unit: str, size: int = MB) -> str:
    return (unit * (size // len(unit) + 1))[:size]


CASES = {
    "title never closed": sized("<title"),
    "title's opening tag never closed": "<title " + "a" * MB,
    "unclosed divs": sized("<div>"),
    "unclosed links": sized('<a href="/x">'),
    "unclosed inline tags": sized("<p><b><i><span>"),
    "deep nesting": "<div>" * 100_000 + "text" + "</div>" * 100_000,
    "a huge attribute": '<a href="' + "x" * MB + '">link</a>',
    "numerous attributes": "<div " + " ".join(f"a{i}=v" for i in range(100_000)) + ">t</div>",
    "meta charset never closed": sized("<meta charset"),
    "unclosed comments": sized("<!--"),
    "unclosed scripts": sized("<script>"),
    "many links": "".join(f'<a href="/p{i}">link {i}</a>' for i in range(50_000)),
    "entities": sized("&amp;&#x41;&lt;"),
    "table cells never closed": sized("<table><tr><td>"),
    "plain paragraphs": sized("<p>Words of a real article, with some length to it. </p>"),
}


@pytest.fixture(scope="module", autouse=True)
def warm():
    """trafilatura's first page loads its word lists: not the time of any page."""
    extract_record(b"<p>warm up</p>", "http://a.test/", None, CFG)


def cpu_seconds(body: bytes, bound: float) -> float:
    """The extracting thread's CPU seconds for ``body``: the least of up to three runs, the
    first under ``bound`` ending them."""
    least = float("inf")
    for _ in range(3):
        started = time.thread_time()
        extracted = extract_record(body, "http://a.test/", None, CFG)
        least = min(least, time.thread_time() - started)
        assert extracted["error"] is None or extracted["error"].startswith("ParserError")
        if least <= bound:
            break
    return least


@pytest.mark.parametrize("name", CASES)
def test_pathological_pages_take_time_linear_in_their_size(name):
    body = CASES[name].encode()
    size = len(body) / MB
    bound = OVERHEAD + SECONDS_PER_MB * size
    assert cpu_seconds(body, bound) <= bound, (name, size)


FRAGMENTS = [
    "<title", "<title x=", "<div>", "<a href='/", "<a href=\"", "<p><b><i>", "<!--", "-->",
    "<script>", "</script>", "<meta charset=", "<meta ", ">", "\"", "'", "=", " a=b",
    "&amp;", "&#", "<table><tr><td>", "</div>", "<![CDATA[", "<?xml", "<!DOCTYPE", "\x00",
    "words and more words ", "<html lang=", "<link rel=canonical href=", "\ufffd", "<",
]  # fmt: skip


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=12), st.integers(1, 4000))
def test_random_mixes_of_broken_markup_take_linear_time(pieces, repeat):
    body = ("".join(pieces) * repeat).encode("utf-8", "surrogatepass")[:MB]
    bound = OVERHEAD + SECONDS_PER_MB * len(body) / MB
    assert cpu_seconds(body, bound) <= bound
