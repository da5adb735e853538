"""crawl export-warc: pages of one generation written as WARC files by the executors, read
back with warcio, and the warc_index rows that locate each response record."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import zlib
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawllib.config import load_config
from crawllib.content import warc
from crawllib.core import urls
from crawllib.stages import export
from crawllib.store import lease, tables
from crawllib.store.spark_schemas import FETCHES, PAGES
from tests.spark.test_platform import crawl

UTC = dt.UTC
T0 = dt.datetime(2026, 5, 6, 7, 8, 9, 250000, tzinfo=UTC)
HTML = "text/html; charset=utf-8"
PAGE_ROWS = [
    # url, status, headers, body, is_truncated, ip (None: no ok fetch row)
    (
        "http://site.test/",
        200,
        {"content-type": HTML, "content-encoding": "gzip", "content-length": "99"},
        b"<html><a href='/x'>home</a></html>",
        False,
        "127.0.0.2",
    ),
    (
        "http://site.test/%C3%BCber?q=1",
        200,
        {"content-type": HTML, "server": "testweb"},
        "<html><p>Grüße aus Köln, 世界 🌍</p></html>".encode(),
        False,
        "127.0.0.3",
    ),
    (
        "https://other.test:8443/bin",
        203,
        {"content-type": "text/html; charset=iso-8859-1", "transfer-encoding": "chunked"},
        b"<html>\x00\x01\xff\xfe\x80 caf\xe9 \r\n\r\nWARC/1.1\r\n</html>",
        False,
        None,
    ),
    (
        "http://site.test/long",
        200,
        {"content-type": HTML},
        b"<html><body>" + b"x" * 5000,
        True,
        "127.0.0.2",
    ),
]


def row(schema, **values) -> tuple:
    return tuple(values.get(f.name) for f in schema.fields)


@pytest.fixture(scope="module")
def root(tmp_path_factory, spark):
    """A crawl root with the pages above in gen 1 (and one in gen 2); tests export gen 1."""
    path = str(tmp_path_factory.mktemp("export") / "crawl")
    assert crawl("init", path) == 0
    pages, fetches = [], []
    for i, (url, status, headers, body, truncated, ip) in enumerate(PAGE_ROWS):
        common = dict(
            gen=1,
            slice=0,
            url_key=urls.url_key(url),
            url=url,
            host=urls.host_of(url),
            depth=0,
            fetched_at=T0 + dt.timedelta(seconds=i),
            http_status=status,
            content_type=headers["content-type"].split(";")[0],
            is_truncated=truncated,
        )
        pages.append(
            row(
                PAGES,
                **common,
                charset="utf-8",
                headers=headers,
                body=body,
                content_hash=hashlib.sha256(body).hexdigest(),
            )
        )
        if ip:
            fetches.append(row(FETCHES, **common, outcome="ok", ip=ip, fetch_ms=10 + i))
            # An earlier failed attempt from another address must not be the one reported.
            earlier = {**common, "fetched_at": T0 - dt.timedelta(hours=1)}
            fetches.append(row(FETCHES, **earlier, outcome="error", ip="10.9.9.9"))
    other_gen = dict(gen=2, url="http://site.test/next", url_key=1, http_status=200, body=b"n")
    pages.append(row(PAGES, **other_gen, fetched_at=T0))
    with lease.hold(path, "pytest", load_config()):
        tables.append(spark.createDataFrame(pages, PAGES), path, "pages")
        tables.append(spark.createDataFrame(fetches, FETCHES), path, "fetches")
    return path


def read_records(path) -> list:
    """(type, WARC headers, HTTP status, payload) of every record; digests must verify."""
    out = []
    with open(path, "rb") as f:
        for rec in ArchiveIterator(f, check_digests="raise"):
            status = rec.http_headers.get_statuscode() if rec.rec_type == "response" else None
            out.append((rec.rec_type, rec.rec_headers, status, rec.raw_stream.read()))
    return out


def gzip_member_count(data: bytes) -> int:
    n = 0
    while data:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        assert d.decompress(data).startswith(b"WARC/1.1\r\n")
        data, n = d.unused_data, n + 1
    return n


def test_export_writes_request_response_metadata_per_page(root, tmp_path, capsys):
    out = tmp_path / "warc"
    (out / "older").mkdir(parents=True)
    (out / "crawl-gen2-00000-000.warc.gz").write_bytes(b"another generation's file")
    assert crawl("export-warc", root, "--gen", "1", str(out), "--max-file-bytes", "1") == 0
    # one page per file: 4 tasks (one per page at most), each rolling after every capture
    ones = sorted(p.name for p in out.glob("crawl-gen1-*"))
    assert len(ones) == 4 and all(n.startswith("crawl-gen1-0000") for n in ones)
    capsys.readouterr()
    assert crawl("export-warc", root, "--gen", "1", str(out)) == 0  # rerun: replaces them
    stdout = capsys.readouterr().out
    path = out / "crawl-gen1-00000-000.warc.gz"
    assert sorted(out.iterdir()) == [path, out / "crawl-gen2-00000-000.warc.gz", out / "older"]
    assert f"wrote {path}: 13 records (warcinfo=1 request=4 response=4 metadata=4)" in stdout
    assert "exported generation 1: 4 pages, 13 records in 1 file" in stdout
    assert "indexed 4 captures in table warc_index (gen = 1)" in stdout

    records = read_records(path)
    assert gzip_member_count(path.read_bytes()) == len(records) == 13
    assert [r[0] for r in records] == ["warcinfo", *["request", "response", "metadata"] * 4]
    info = records[0][3].decode()
    assert "format: WARC File Format 1.1" in info and "isPartOf: crawl-gen1" in info
    user_agent = load_config().fetch.user_agent
    assert f"http-header-user-agent: {user_agent}" in info

    expected = sorted(
        ((urls.url_key(r[0]), i, r) for i, r in enumerate(PAGE_ROWS)), key=lambda t: t[0]
    )
    for n, (key, i, (url, status, _, body, truncated, ip)) in enumerate(expected):
        request, response, metadata = records[1 + 3 * n : 4 + 3 * n]
        for _, headers, _, _ in (request, response, metadata):
            assert headers.get_header("WARC-Target-URI") == url
            assert headers.get_header("WARC-Date") == warc.warc_date(T0 + dt.timedelta(seconds=i))
        assert response[2] == str(status)
        assert response[3] == body
        assert response[1].get_header("WARC-Payload-Digest") == warc.sha1_digest(body)
        assert response[1].get_header("WARC-IP-Address") == ip
        assert response[1].get_header("WARC-Truncated") == ("length" if truncated else None)
        response_id = response[1].get_header("WARC-Record-ID")
        assert request[1].get_header("WARC-Concurrent-To") == response_id
        assert metadata[1].get_header("WARC-Refers-To") == response_id
        facts = metadata[3].decode()
        assert f"urlKey: {key}\r\n" in facts and "gen: 1\r\n" in facts
        assert f"isTruncated: {'true' if truncated else 'false'}\r\n" in facts
        assert ("fetchTimeMs: " in facts) == (ip is not None)


def test_request_records_rebuild_the_get(root, tmp_path):
    out = tmp_path / "warc"
    assert crawl("export-warc", root, "--gen", "1", str(out)) == 0
    with open(out / "crawl-gen1-00000-000.warc.gz", "rb") as f:
        requests = {
            rec.rec_headers.get_header("WARC-Target-URI"): rec.http_headers
            for rec in ArchiveIterator(f)
            if rec.rec_type == "request"
        }
    umlaut = requests["http://site.test/%C3%BCber?q=1"]
    assert umlaut.protocol == "GET" and umlaut.statusline == "/%C3%BCber?q=1 HTTP/1.1"
    assert umlaut.get_header("Host") == "site.test"
    assert umlaut.get_header("User-Agent") == load_config().fetch.user_agent
    assert requests["https://other.test:8443/bin"].get_header("Host") == "other.test:8443"


def test_generation_without_pages_writes_nothing(root, tmp_path, capsys):
    out = tmp_path / "warc"
    capsys.readouterr()
    assert crawl("export-warc", root, "--gen", "7", str(out)) == 0
    assert "generation 7 has no pages; no WARC file written" in capsys.readouterr().out
    assert not out.exists() or list(out.iterdir()) == []


def test_export_to_a_file_uri_writes_that_folder(root, tmp_path, capsys):
    # s3a:// URIs: tests/e2e/test_s3.py
    out = tmp_path / "warc"
    assert crawl("export-warc", root, "--gen", "1", out.as_uri()) == 0
    path = out / "crawl-gen1-00000-000.warc.gz"
    assert sorted(out.iterdir()) == [path]
    assert f"wrote {path}: 13 records" in capsys.readouterr().out
    records = read_records(path)
    assert [r[0] for r in records] == ["warcinfo", *["request", "response", "metadata"] * 4]


def test_an_unsupported_uri_is_refused(root, capsys):
    assert crawl("export-warc", root, "--gen", "1", "hdfs://namenode/warc") == 2
    assert "a local folder, a file: URI or an S3 URI" in capsys.readouterr().err


def test_index_rows_locate_each_response_record(spark, root, capsys):
    """By default the files go to ROOT/warc/gen=N; warc_index says where each response lies:
    seek to warc_record_offset, read warc_record_length bytes: one gzip member, the record."""
    for max_bytes in ("1", str(10**9)):  # the rerun replaces files and rows
        assert crawl("export-warc", root, "--gen", "1", "--max-file-bytes", max_bytes) == 0
    folder = Path(root) / "warc" / "gen=1"
    assert sorted(p.name for p in folder.iterdir()) == ["crawl-gen1-00000-000.warc.gz"]
    index = tables.read(spark, root, "warc_index").where("gen = 1").orderBy("url_key").collect()
    pages = {r[0]: r for r in PAGE_ROWS}
    assert [r["url"] for r in index] == sorted(pages, key=urls.url_key)
    for row in index:
        url, status, headers, body, truncated, _ = pages[row["url"]]
        assert row["url_key"] == urls.url_key(url)
        assert row["warc_filename"] == str(folder / "crawl-gen1-00000-000.warc.gz")
        assert (row["http_status"], row["is_truncated"]) == (status, truncated)
        assert row["content_type"] == headers["content-type"].split(";")[0]
        assert row["payload_digest"] == warc.sha1_digest(body)
        assert row["fetched_at"] is not None
        with open(row["warc_filename"], "rb") as f:
            f.seek(row["warc_record_offset"])
            member = f.read(row["warc_record_length"])
        assert gzip_member_count(member) == 1
        records = [
            (
                r.rec_type,
                r.rec_headers.get_header("WARC-Target-URI"),
                r.rec_headers.get_header("WARC-Record-ID"),
                r.raw_stream.read(),
            )
            for r in ArchiveIterator(io.BytesIO(member), check_digests="raise")
        ]
        assert records == [("response", url, row["warc_record_id"], body)]
        assert row["warc_record_id"].startswith("<urn:uuid:")


def test_a_partition_per_file_of_bodies_at_most_one_per_page():
    assert export.export_partitions(pages=4, body_bytes=10, max_bytes=10**9) == 1
    assert export.export_partitions(pages=4, body_bytes=3 * 10**9 + 1, max_bytes=10**9) == 4
    assert export.export_partitions(pages=1000, body_bytes=2500, max_bytes=1000) == 3
    assert export.export_partitions(pages=4, body_bytes=5000, max_bytes=1) == 4
