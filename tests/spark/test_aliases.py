"""Alias hosts in Spark: exact copies counted per pair of hosts, the copy judged an alias, plan's
filter."""

from __future__ import annotations

from crawllib.config import replace
from crawllib.store.aliases import alias_counts, alias_hosts
from crawllib.transforms.plan import filter_aliases


def _aliases(spark, rows):
    return spark.createDataFrame(
        [(h, o, c, 1, 2) for h, o, c in rows],
        "host string, of_host string, copies long, first_gen int, gen int",
    )


def _pages(spark, counts):
    return spark.createDataFrame(
        [(h, f"/p{i}", n) for h, ns in counts.items() for i, n in enumerate(ns)],
        "host string, pattern string, pages long",
    )


def test_exact_copies_are_counted_per_pair_of_different_hosts(spark):
    owners = spark.createDataFrame(
        [(k, "site.net") for k in range(1, 5)]
        + [(10 + k, "mirror.net") for k in range(1, 5)]
        + [(20, "other.net")],
        "url_key long, host string",
    )
    marks = spark.createDataFrame(
        [
            (11, 1, "exact"),  # mirror.net copies site.net, three times
            (12, 2, "exact"),
            (13, 3, "exact"),
            (14, 4, "near"),  # near copies do not count
            (2, 11, "exact"),  # site.net copies mirror.net once
            (3, 1, "exact"),  # a copy on its own host does not count
            (20, 99, "canonical"),
        ],
        "url_key long, duplicate_of long, duplicate_kind string",
    )
    rows = alias_counts(marks, owners.unionByName(owners), 5).collect()  # owners seen twice
    got = {(r["host"], r["of_host"]): r["copies"] for r in rows}
    assert got == {("mirror.net", "site.net"): 3, ("site.net", "mirror.net"): 1}
    assert {(r["first_gen"], r["gen"]) for r in rows} == {(5, 5)}


def test_the_copy_of_a_host_sharing_most_pages_is_its_alias_unless_allowed(spark, spark_cfg):
    cfg = replace(spark_cfg, aliases__min_pages=10, aliases__duplicate_share=0.8, aliases__allow=())
    aliases = _aliases(
        spark,
        [
            ("mirror.net", "site.net", 8),  # 8 + 1 of mirror.net's 10 pages shared: an alias
            ("site.net", "mirror.net", 1),  # site.net: 9 of 30 shared, and the original
            ("b.org", "a.org", 5),  # two equal mirrors: the greater name is the alias
            ("a.org", "b.org", 5),
            ("partial.com", "site.net", 7),  # 7 of 20: not an alias
            ("few.com", "site.net", 5),  # all 5 pages copies, but fewer than min_pages
        ],
    )
    pages = _pages(
        spark,
        {
            "mirror.net": [6, 4],
            "site.net": [30],
            "a.org": [10],
            "b.org": [10],
            "partial.com": [20],
            "few.com": [5],
        },
    )
    got = {r["host"]: r["alias_of"] for r in alias_hosts(aliases, pages, cfg).collect()}
    assert got == {"mirror.net": "site.net", "b.org": "a.org"}
    loose = replace(cfg, aliases__min_pages=5, aliases__duplicate_share=0.3)
    got = {r["host"]: r["alias_of"] for r in alias_hosts(aliases, pages, loose).collect()}
    assert got == {
        "mirror.net": "site.net",
        "b.org": "a.org",
        "partial.com": "site.net",
        "few.com": "site.net",
    }
    kept = replace(cfg, aliases__allow=("MIRROR.net",))
    assert {r["host"] for r in alias_hosts(aliases, pages, kept).collect()} == {"b.org"}


def test_plan_filters_every_url_of_an_alias_without_another_reason(spark):
    df = spark.createDataFrame(
        [
            ("http://mirror.net/a", "mirror.net", None),
            ("http://mirror.net/b", "mirror.net", "depth"),
            ("http://site.net/a", "site.net", None),
        ],
        "url string, host string, filter_reason string",
    )
    aliased = spark.createDataFrame([("mirror.net", "site.net")], "host string, alias_of string")
    got = {r["url"]: r["filter_reason"] for r in filter_aliases(df, aliased).collect()}
    assert got == {
        "http://mirror.net/a": "alias",
        "http://mirror.net/b": "depth",
        "http://site.net/a": None,
    }
    assert filter_aliases(df, None) is df
