"""What each slot of a fetch receives to follow links: its room, the keys it knows and its hosts'
trapped URL patterns."""

from __future__ import annotations

from crawllib.config import replace
from crawllib.transforms.fetch import follow_inputs


def test_each_slot_with_room_gets_its_known_keys_and_trapped_patterns(spark, spark_cfg):
    cfg = replace(spark_cfg, generate__max_per_host=3)
    fetchlist = spark.createDataFrame(
        [("a.net", "a.net"), ("b.net", "b.net"), ("b.net", "b.net"), ("b.net", "b.net")],
        "slot string, host string",
    )
    fetches = spark.createDataFrame(
        [(1, "a.net", None), (2, "a.net", "http://a.net/")],
        "url_key long, host string, source_url string",
    )
    crawldb = spark.createDataFrame(
        [(1, "a.net", "a.net"), (5, "a.net", "a.net"), (7, "b.net", "b.net")],
        "url_key long, host string, domain string",
    )
    trapped = spark.createDataFrame(
        [("a.net", "/cal/{n}"), ("a.net", "/shop?page"), ("b.net", "/x/{n}")],
        "host string, pattern string",
    )
    rows = {
        r["slot"]: r for r in follow_inputs(fetchlist, fetches, crawldb, cfg, trapped).collect()
    }
    # a.net: 3 - 1 planned - 1 followed = 1; b.net planned its 3: no room, no row
    assert set(rows) == {"a.net"}
    a = rows["a.net"]
    assert a["room"] == 1 and sorted(a["known"]) == [1, 2, 5]
    assert sorted(a["trapped"]) == ["a.net /cal/{n}", "a.net /shop?page"]
    untrapped = follow_inputs(fetchlist, fetches, crawldb, cfg).collect()
    assert [r["trapped"] for r in untrapped] == [[]]
