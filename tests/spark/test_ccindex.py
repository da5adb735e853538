"""The view ``ccindex`` is Common Crawl's columnar index (cc-index-table's
cc-index-schema-flat.json): every column of theirs, in their order and meaning, on both
engines of `crawl sql`, over captures written straight into a crawl root's tables (a page, a
file of a type not stored, a redirect, a 404, an IP address, a long host name, bodies cut
short three ways). warc_filename is relative to ``warc.archive_root``."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from crawllib import cli
from crawllib.core.urls import host_of, private_domain, registered_domain, surt, url_key
from crawllib.sql import duckdb_engine
from crawllib.store.embedded import EmbeddedDb
from crawllib.store.schemas import FETCHES, PAGES, TEXTS, WARC_INDEX
from tests.rows import rel

pytestmark = pytest.mark.skipif(not duckdb_engine.available(), reason="the sql extra is missing")

# Common Crawl's columns, in their order (cc-index-schema-flat.json), then ours
CC_COLUMNS = [
    "url_surtkey", "url", "url_host_name", "url_host_tld", "url_host_2nd_last_part",
    "url_host_3rd_last_part", "url_host_4th_last_part", "url_host_5th_last_part",
    "url_host_registry_suffix", "url_host_registered_domain", "url_host_private_suffix",
    "url_host_private_domain", "url_host_name_reversed", "url_protocol", "url_port", "url_path",
    "url_query", "fetch_time", "fetch_status", "fetch_redirect", "content_digest",
    "content_mime_type", "content_mime_detected", "content_charset", "content_languages",
    "content_truncated", "warc_record_id", "warc_filename", "warc_record_offset",
    "warc_record_length", "warc_segment", "crawl", "subset",
]  # fmt: skip
OURS = ["gen", "url_key", "warc_location"]
AT = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
PAGE = "http://www.example.co.uk:8080/a/b.html?x=1"
LONG = "http://a.b.c.d.example.com/"


def fetch(url: str, status: int | None, outcome: str = "ok", **more) -> dict:
    host = host_of(url)
    return {
        "gen": 0, "slice": 0, "url_key": url_key(url), "url": url, "host": host,
        "domain": registered_domain(host), "private_domain": private_domain(host),
        "surt": surt(url), "depth": 0, "outcome": outcome,
        "fetched_at": AT, "http_status": status, "content_type": "text/html; charset=utf-8",
        "is_truncated": False, **more,
    }  # fmt: skip


@pytest.fixture
def root(new_root, spark_cfg) -> str:
    fetches = [
        fetch(PAGE, 200, mime_detected="text/html"),
        # not stored; what its first bytes show
        fetch(
            "http://example.com/logo.png", 200, content_type="image/png", mime_detected="image/png"
        ),
        fetch("http://someone.blogspot.com/p.html", 200),
        fetch("http://example.com/old", 301, "redirect", redirect_to="http://example.com/new"),
        fetch("http://example.com/gone", 404, "http_error"),
        fetch("http://10.1.2.3/x", 200),
        fetch(LONG, 200, is_truncated=True),
        fetch("http://example.com/slow", 200, "error", error_kind="timeout"),
        fetch("http://example.com/cut", 200, "error", error_kind="disconnected"),
        fetch("http://example.com/down", None, "error", error_kind="dns"),  # no answer
    ]
    stored = [f for f in fetches if f["url"] in (PAGE, LONG)]
    db = EmbeddedDb(new_root, spark_cfg)
    db.append(rel(db, FETCHES, fetches), "fetches")
    db.append(rel(db, PAGES, stored, charset="utf-8"), "pages")
    db.append(rel(db, TEXTS, stored, language_detected="en"), "texts")
    archived = [
        {**stored[0], "payload_digest": "sha1:CH7IV3XAD3M7A42JARKRLJ3T5PGGCGXD",
         "warc_filename": f"{new_root}/warc/gen=0/crawl-gen0-00000-000.warc.gz",
         "warc_record_offset": 1234, "warc_record_length": 567,
         "warc_record_id": "<urn:uuid:7a3f6b52-5b0e-4d0c-9a57-0a8c2e8f1d11>"},
        {**stored[1], "payload_digest": "sha1:AAAA", "warc_filename": "/elsewhere/x.warc.gz",
         "warc_record_offset": 0, "warc_record_length": 99},
    ]  # fmt: skip
    db.append(rel(db, WARC_INDEX, archived), "warc_index")
    db.close()
    return new_root


def rows_of(capsys, root: str, engine: str, *options: str) -> list[dict]:
    capsys.readouterr()
    query = "SELECT * FROM ccindex ORDER BY url"
    rc = cli.main(["sql", root, query, "--format", "json", "--engine", engine, *options])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return [json.loads(line) for line in out.splitlines()]


def both(capsys, root: str, *options: str) -> dict[str, dict]:
    duck = rows_of(capsys, root, "duckdb", *options)
    assert duck == rows_of(capsys, root, "spark", *options)
    assert duck and list(duck[0]) == CC_COLUMNS + OURS
    return {r["url"]: r for r in duck}


def test_every_column_of_common_crawls_index_on_both_engines(spark, root, capsys):
    rows = both(capsys, root)
    assert "http://example.com/down" not in rows  # no HTTP answer, no capture
    page = rows[PAGE]
    assert {k: page[k] for k in CC_COLUMNS[:17]} == {
        "url_surtkey": "uk,co,example:8080)/a/b.html?x=1",
        "url": PAGE,
        "url_host_name": "www.example.co.uk",
        "url_host_tld": "uk",
        "url_host_2nd_last_part": "co",
        "url_host_3rd_last_part": "example",
        "url_host_4th_last_part": "www",
        "url_host_5th_last_part": None,
        "url_host_registry_suffix": "co.uk",
        "url_host_registered_domain": "example.co.uk",
        "url_host_private_suffix": "co.uk",  # no private suffix applies: the public one
        "url_host_private_domain": "example.co.uk",
        "url_host_name_reversed": "uk.co.example.www",
        "url_protocol": "http",
        "url_port": 8080,
        "url_path": "/a/b.html",
        "url_query": "x=1",
    }
    assert (page["fetch_status"], page["fetch_redirect"], page["subset"]) == (200, None, "warc")
    assert page["content_digest"] == "CH7IV3XAD3M7A42JARKRLJ3T5PGGCGXD"
    assert (page["content_mime_type"], page["content_mime_detected"]) == ("text/html", "text/html")
    assert rows["http://example.com/logo.png"]["content_mime_detected"] == "image/png"
    assert (page["content_charset"], page["content_languages"]) == ("utf-8", "en")
    assert page["content_truncated"] is None
    assert page["warc_record_id"] == "<urn:uuid:7a3f6b52-5b0e-4d0c-9a57-0a8c2e8f1d11>"
    # relative to the archive's root (ROOT/warc by default), as Common Crawl's to its bucket
    assert page["warc_filename"] == "gen=0/crawl-gen0-00000-000.warc.gz"
    assert page["warc_location"] == f"{root}/warc/gen=0/crawl-gen0-00000-000.warc.gz"
    assert (page["warc_record_offset"], page["warc_record_length"]) == (1234, 567)
    assert (page["warc_segment"], page["crawl"]) == ("0", "crawl")

    long = rows[LONG]
    parts = [long[f"url_host_{n}_last_part"] for n in ("2nd", "3rd", "4th", "5th")]
    assert (long["url_host_tld"], parts) == ("com", ["example", "d", "c", "b"])
    assert long["url_host_name_reversed"] == "com.example.d.c.b.a"
    assert long["warc_filename"] == "/elsewhere/x.warc.gz"  # outside the archive: as it is
    assert long["content_truncated"] == "length"
    ip = rows["http://10.1.2.3/x"]
    assert ip["url_host_name"] == "10.1.2.3"
    assert all(
        v is None for k, v in ip.items() if k.startswith("url_host_") and k != "url_host_name"
    )
    assert rows["http://example.com/slow"]["content_truncated"] == "time"
    assert rows["http://example.com/cut"]["content_truncated"] == "disconnect"
    assert rows["http://example.com/old"]["fetch_redirect"] == "http://example.com/new"
    # the public suffix list's private part: blogspot.com is a suffix there, not in ICANN's
    blog = rows["http://someone.blogspot.com/p.html"]
    assert (blog["url_host_registry_suffix"], blog["url_host_registered_domain"]) == (
        "com",
        "blogspot.com",
    )
    assert (blog["url_host_private_suffix"], blog["url_host_private_domain"]) == (
        "blogspot.com",
        "someone.blogspot.com",
    )


def test_subset_is_the_answers_status_as_common_crawls(spark, root, capsys):
    """warc: the 2xx answers, stored or not (an image's body is not kept: no WARC record);
    crawldiagnostics: redirects, 404s and the other non-2xx answers."""
    rows = both(capsys, root)
    subsets = {url: r["subset"] for url, r in rows.items()}
    assert {u for u, s in subsets.items() if s == "crawldiagnostics"} == {
        "http://example.com/old",
        "http://example.com/gone",
    }
    assert subsets["http://example.com/logo.png"] == "warc"
    assert all(r["fetch_status"] // 100 == 2 for r in rows.values() if r["subset"] == "warc")


def test_warc_filename_is_relative_to_the_archive_root_setting(spark, root, capsys):
    rows = both(capsys, root, "--set", f"warc.archive_root={root}")
    assert rows[PAGE]["warc_filename"] == "warc/gen=0/crawl-gen0-00000-000.warc.gz"
    rows = both(capsys, root, "--set", f"warc.archive_root=file:{root}/warc/gen=0/")
    assert rows[PAGE]["warc_filename"] == "crawl-gen0-00000-000.warc.gz"


def test_sitemap_lastmod_seconds_read_as_a_time_on_both_engines(spark, new_root, capsys):
    """sitemaps.entries.lastmod is seconds since the epoch (docs/tables.md): Spark's
    timestamp_seconds makes it a time, on DuckDB too."""
    query = "SELECT timestamp_seconds(CAST(1767323045.5 AS DOUBLE)) AS lastmod"
    answers = []
    for engine in ("duckdb", "spark"):
        capsys.readouterr()
        rc = cli.main(["sql", new_root, query, "--format", "json", "--engine", engine])
        out, err = capsys.readouterr()
        assert rc == 0, err
        answers.append(json.loads(out))
    assert answers[0] == answers[1]
    assert dt.datetime.fromisoformat(answers[0]["lastmod"]) == AT.replace(microsecond=500000)
