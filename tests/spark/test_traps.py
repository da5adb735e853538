"""URL-pattern traps in SQL, on both engines: the twins agree with Python, counts per pattern,
plan's filter."""

from __future__ import annotations

from crawllib.config import replace
from crawllib.policy.traps import repeated_segments, url_pattern
from crawllib.store.schemas import TRAPS, L, S, struct_of
from crawllib.transforms.plan import filter_trapped
from crawllib.transforms.traps import (
    pattern_counts,
    repeats_more_than,
    trapped_patterns,
)
from crawllib.transforms.traps import (
    url_pattern as url_pattern_sql,
)
from tests.rows import rel, run

URLS = [
    "http://a.com/",
    "http://a.com/cal/2026/11",
    "http://a.com/a/b/a/b/a/b",
    "http://a.com/x/x/x/y?x=1",
    "https://a.com:8443/item/0123456789abcdef0123/v2?b=&a=1&a=2",
    "http://a.com/shop?size=m&color=red&page=10",
    "http://a.com/p/1.html?q",
    "http://a.com/{n}/it's?{h}=1",
]
URL = struct_of(("url", S))
PAGES = struct_of(("url_key", L), ("url", S), ("host", S))
MARKS = struct_of(("url_key", L), ("duplicate_kind", S))
CANDIDATES = struct_of(("url", S), ("host", S), ("filter_reason", S))


def test_sql_twins_agree_with_python(db):
    query = (
        f"SELECT url, {url_pattern_sql('url')} AS pattern, {repeats_more_than('url', 2)} AS over "
        "FROM {urls}"
    )
    rows = run(db, query, urls=rel(db, URL, [{"url": u} for u in URLS]))
    assert {r["url"]: r["pattern"] for r in rows} == {u: url_pattern(u) for u in URLS}
    assert {r["url"]: r["over"] for r in rows} == {u: repeated_segments(u) > 2 for u in URLS}


def test_patterns_of_mostly_duplicate_pages_are_trapped_unless_allowed(db, spark_cfg):
    pages = rel(
        db,
        PAGES,
        [
            {"url_key": k, "url": f"http://cal.com/cal/2026/{k}", "host": "cal.com"}
            for k in range(1, 7)
        ]
        + [
            {"url_key": 10 + k, "url": f"http://news.com/story/{k}.html", "host": "news.com"}
            for k in range(6)
        ],
    )
    marks = rel(
        db,
        MARKS,
        [{"url_key": k, "duplicate_kind": "exact"} for k in range(2, 7)]
        + [{"url_key": 10, "duplicate_kind": "canonical"}],
    )
    counted = run(db, pattern_counts(3), pages=pages, marks=marks)
    got = {(r["host"], r["pattern"]): (r["pages"], r["duplicates"]) for r in counted}
    assert got == {("cal.com", "/cal/{n}/{n}"): (6, 5), ("news.com", "/story/{n}.html"): (6, 0)}
    assert {(r["first_gen"], r["gen"]) for r in counted} == {(3, 3)}
    assert all(r["updated_at"] is not None for r in counted)
    counts = rel(db, TRAPS, counted)

    def trapped(cfg):
        return {(r["host"], r["pattern"]) for r in run(db, trapped_patterns(cfg), traps=counts)}

    cfg = replace(spark_cfg, traps__min_pages=5, traps__duplicate_share=0.8)
    assert trapped(cfg) == {("cal.com", "/cal/{n}/{n}")}
    assert trapped(replace(cfg, traps__min_pages=7)) == set()
    assert trapped(replace(cfg, traps__allow=("cal.com /cal/{n}/{n}",))) == set()

    candidates = rel(
        db,
        CANDIDATES,
        [
            {"url": "http://cal.com/cal/1999/1", "host": "cal.com"},
            {"url": "http://cal.com/about", "host": "cal.com"},
            {"url": "http://news.com/story/9.html", "host": "news.com"},
            # a reason already: kept
            {"url": "http://cal.com/cal/1999/2", "host": "cal.com", "filter_reason": "depth"},
        ],
    )
    out = run(
        db,
        filter_trapped(CANDIDATES.names),
        df=candidates,
        trapped=db.sql(trapped_patterns(cfg), traps=counts),
    )
    assert out and all(tuple(r) == CANDIDATES.names for r in out)
    assert {r["url"]: r["filter_reason"] for r in out} == {
        "http://cal.com/cal/1999/1": "trap_pattern",
        "http://cal.com/about": None,
        "http://news.com/story/9.html": None,
        "http://cal.com/cal/1999/2": "depth",
    }
