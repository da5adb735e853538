"""URL-pattern traps in Spark: the twins agree with Python, counts per pattern, plan's filter."""

from __future__ import annotations

from pyspark.sql import functions as F

from crawllib.config import replace
from crawllib.policy.traps import repeated_segments, url_pattern
from crawllib.transforms.plan import filter_trapped
from crawllib.transforms.traps import (
    pattern_counts,
    repeats_more_than,
    trapped_patterns,
    url_pattern_column,
)

URLS = [
    "http://a.com/",
    "http://a.com/cal/2026/11",
    "http://a.com/a/b/a/b/a/b",
    "http://a.com/x/x/x/y?x=1",
    "https://a.com:8443/item/0123456789abcdef0123/v2?b=&a=1&a=2",
    "http://a.com/shop?size=m&color=red&page=10",
    "http://a.com/p/1.html?q",
]


def test_spark_twins_agree_with_python(spark):
    df = spark.createDataFrame([(u,) for u in URLS], "url string")
    rows = df.select(
        "url",
        url_pattern_column(F.col("url")).alias("pattern"),
        repeats_more_than(F.col("url"), 2).alias("over"),
    ).collect()
    assert {r["url"]: r["pattern"] for r in rows} == {u: url_pattern(u) for u in URLS}
    assert {r["url"]: r["over"] for r in rows} == {u: repeated_segments(u) > 2 for u in URLS}


def test_patterns_of_mostly_duplicate_pages_are_trapped_unless_allowed(spark, spark_cfg):
    pages = spark.createDataFrame(
        [(k, f"http://cal.com/cal/2026/{k}", "cal.com") for k in range(1, 7)]
        + [(10 + k, f"http://news.com/story/{k}.html", "news.com") for k in range(6)],
        "url_key long, url string, host string",
    )
    marks = spark.createDataFrame(
        [(k, "exact") for k in range(2, 7)] + [(10, "canonical")],
        "url_key long, duplicate_kind string",
    )
    counts = pattern_counts(pages, marks, 3)
    got = {(r["host"], r["pattern"]): (r["pages"], r["duplicates"]) for r in counts.collect()}
    assert got == {("cal.com", "/cal/{n}/{n}"): (6, 5), ("news.com", "/story/{n}.html"): (6, 0)}

    cfg = replace(spark_cfg, traps__min_pages=5, traps__duplicate_share=0.8)
    trapped = {(r["host"], r["pattern"]) for r in trapped_patterns(counts, cfg).collect()}
    assert trapped == {("cal.com", "/cal/{n}/{n}")}
    assert trapped_patterns(counts, replace(cfg, traps__min_pages=7)).isEmpty()
    allowed = replace(cfg, traps__allow=("cal.com /cal/{n}/{n}",))
    assert trapped_patterns(counts, allowed).isEmpty()

    candidates = spark.createDataFrame(
        [
            ("http://cal.com/cal/1999/1", "cal.com", None),
            ("http://cal.com/about", "cal.com", None),
            ("http://news.com/story/9.html", "news.com", None),
            ("http://cal.com/cal/1999/2", "cal.com", "depth"),  # a reason already: kept
        ],
        "url string, host string, filter_reason string",
    )
    out = filter_trapped(candidates, trapped_patterns(counts, cfg))
    assert out.columns == candidates.columns
    assert {r["url"]: r["filter_reason"] for r in out.collect()} == {
        "http://cal.com/cal/1999/1": "trap_pattern",
        "http://cal.com/about": None,
        "http://news.com/story/9.html": None,
        "http://cal.com/cal/1999/2": "depth",
    }
