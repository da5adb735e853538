"""crawllib.transforms.exclusions on both engines: ``matches_sql`` (built-ins) decides as
``Exclusions.matches`` (Python), and an exclude file is read through the engine."""

from __future__ import annotations

import pytest

from crawllib.config import replace
from crawllib.core.errors import ConfigError
from crawllib.core.urls import host_of, normalize_url, registered_domain
from crawllib.policy.exclusions import Exclusions, parse
from crawllib.store.schemas import S, struct_of
from crawllib.transforms import exclusions
from crawllib.transforms.exclusions import matches_sql
from tests.rows import rel, run

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
    "http://d.com/it's",
    "http://xn--bcher-kva.de/",
    "http://site1.test/a.html",
]

RULE_SETS = {
    "domains": ["domain:example.co.uk", "domain:site1.test"],
    "hosts": ["host:www.foo.org", "host:[2001:db8::1]", "host:bücher.de"],
    "prefixes": [
        "prefix:http://a.com/x",
        "prefix:http://b.com",
        "prefix:http://c.com/s?q=",
        "prefix:http://d.com/it's",
    ],
    "regexes": [
        r"regex:/20\d\d/",
        "regex:(?i)/cart/",
        "regex:[]]",
        r"regex:\{x\}$",
        r"regex:^https://",
        r"regex:[?&]id=\d+",
        r"regex:it\'s$",
    ],
    "all": [
        "domain:example.co.uk",
        "host:www.foo.org",
        "prefix:http://a.com/x",
        r"regex:/20\d\d/",
    ],
    "none": [],
}

URL_ROWS = struct_of(("url", S), ("host", S), ("domain", S))


def excluded_of(db, rules, rows):
    """url -> whether ``matches_sql`` excludes it, on the engine."""
    query = f"SELECT url, {matches_sql(rules, 'url', 'host', 'domain')} AS excluded FROM {{urls}}"
    got = run(db, query, urls=rel(db, URL_ROWS, rows))
    assert got
    return {r["url"]: r["excluded"] for r in got}


@pytest.mark.parametrize("name", RULE_SETS)
def test_matches_sql_agrees_with_matches(db, name):
    rules = parse(RULE_SETS[name], name)
    rows = []
    for url in URLS:
        normalized = normalize_url(url)
        host = host_of(normalized)
        rows.append({"url": normalized, "host": host, "domain": registered_domain(host)})
    expected = {r["url"]: rules.matches(r["url"], r["host"], r["domain"]) for r in rows}
    assert excluded_of(db, rules, rows) == expected
    assert any(expected.values()) == (name != "none")


def test_matches_sql_is_false_not_null_for_missing_values(db):
    rules = parse(["host:a.com", "prefix:http://a.com/", "regex:a"], "x")
    nothing = [{"url": None, "host": None, "domain": None}]
    assert list(excluded_of(db, rules, nothing).values()) == [False]
    assert list(excluded_of(db, Exclusions(), nothing).values()) == [False]


def test_an_exclude_file_is_read_through_the_engine(db, spark_cfg, tmp_path):
    """A file that is not local (S3) is read by the engine (Db.read_file), once, and inlined
    into the config the fetch tasks get; here the engine reads a local file in its place."""
    path = tmp_path / "exclude.txt"
    path.write_text("# operator list\n\nhost:b.com\nregex:/private/\n", encoding="utf-8")
    remote = "s3a://bucket/exclude.txt"
    stand_in = {remote: str(path), "s3a://bucket/missing.txt": str(tmp_path / "missing.txt")}
    read = []

    def read_file(uri: str) -> bytes:
        read.append(uri)
        return db.read_file(stand_in[uri])

    cfg = replace(spark_cfg, crawl__exclude=("host:c.com",), crawl__exclude_file=remote)
    rules = exclusions.load(cfg, read_file)
    assert rules == parse(["host:c.com", "host:b.com", "regex:/private/"], "x")
    assert read == [remote]
    inlined = exclusions.inlined(cfg, read_file)
    assert inlined.crawl.exclude_file == ""
    assert parse(inlined.crawl.exclude, "x") == rules
    missing = replace(cfg, crawl__exclude_file="s3a://bucket/missing.txt")
    with pytest.raises(ConfigError, match="missing.txt.*does not exist"):
        exclusions.load(missing, read_file)
    with pytest.raises(ConfigError, match="cannot be read here"):
        exclusions.load(cfg)
