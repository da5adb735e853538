"""crawllib.transforms.exclusions on Spark: ``Exclusions.column`` (built-ins) decides as ``matches``
(Python), and an exclude file is read through Spark."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from crawllib.core.errors import ConfigError
from crawllib.core.urls import host_of, normalize_url, registered_domain
from crawllib.policy.exclusions import Exclusions, parse
from crawllib.transforms.exclusions import column, read_with_spark

URLS = [
    "http://example.co.uk/",
    "https://a.b.example.co.uk/page",
    "http://notexample.co.uk/",
    "http://www.foo.org:8080/a",
    "http://foo.org/",
    "http://[2001:db8::1]/x",
    "http://a.com/x/y",
    "http://a.com/xy",
    "http://a.com/",
    "https://a.com/x",
    "http://b.com/",
    "http://b.com.evil.net/",
    "http://c.com/s?q=1",
    "http://c.com/s?a=1&q=1",
    "http://d.com/news/2024/01/",
    "http://d.com/CART/?id=3",
    "http://d.com/]/",
    "http://d.com/{x}",
    "http://xn--bcher-kva.de/",
    "http://site1.test/a.html",
]

RULE_SETS = {
    "domains": ["domain:example.co.uk", "domain:site1.test"],
    "hosts": ["host:www.foo.org", "host:[2001:db8::1]", "host:bücher.de"],
    "prefixes": ["prefix:http://a.com/x", "prefix:http://b.com", "prefix:http://c.com/s?q="],
    "regexes": [
        r"regex:/20\d\d/",
        "regex:(?i)/cart/",
        "regex:[]]",
        r"regex:\{x\}$",
        r"regex:^https://",
        r"regex:[?&]id=\d+",
    ],
    "all": [
        "domain:example.co.uk",
        "host:www.foo.org",
        "prefix:http://a.com/x",
        r"regex:/20\d\d/",
    ],
    "none": [],
}


@pytest.mark.parametrize("name", RULE_SETS)
def test_column_agrees_with_matches(spark, name):
    rules = parse(RULE_SETS[name], name)
    rows = []
    for url in URLS:
        normalized = normalize_url(url)
        host = host_of(normalized)
        rows.append((normalized, host, registered_domain(host)))
    df = spark.createDataFrame(rows, "url string, host string, domain string")
    got = {
        r["url"]: r["excluded"]
        for r in df.select(
            "url", column(rules, F.col("url"), F.col("host"), F.col("domain")).alias("excluded")
        ).collect()
    }
    expected = {url: rules.matches(url, host, domain) for url, host, domain in rows}
    assert got == expected
    assert any(expected.values()) == (name != "none")


def test_column_is_false_not_null_for_missing_values(spark):
    rules = parse(["host:a.com", "prefix:http://a.com/", "regex:a"], "x")
    df = spark.createDataFrame([(None, None, None)], "url string, host string, domain string")
    row = df.select(column(rules, F.col("url"), F.col("host"), F.col("domain")).alias("x")).first()
    assert row is not None and row["x"] is False
    empty = df.select(column(Exclusions(), F.col("url"), F.col("host"), F.col("domain")).alias("x"))
    assert empty.first()["x"] is False


def test_an_exclude_file_is_read_through_spark(spark, tmp_path):
    path = tmp_path / "exclude.txt"
    path.write_text("# operator list\n\nhost:b.com\nregex:/private/\n", encoding="utf-8")
    [(source, text)] = read_with_spark(spark, str(path))
    assert source.endswith("exclude.txt")
    assert parse(text.splitlines(), source) == parse(["host:b.com", "regex:/private/"], "x")
    with pytest.raises(ConfigError, match="missing.txt.*cannot be read"):
        read_with_spark(spark, str(tmp_path / "missing.txt"))
