"""The WARC writer, read back with warcio (an independent reader that checks digests)."""

from __future__ import annotations

import datetime as dt
import functools
import io
import os
import pathlib
import zlib

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawllib.content import warc

UA = "crawllib/0.1 (+https://example.invalid/bot)"
WHEN = dt.datetime(2026, 3, 4, 5, 6, 7, 890000, tzinfo=dt.UTC)


def capture(url: str = "http://site.test:8080/a/b?x=1&y=2", **changes) -> warc.Capture:
    values = dict(
        url=url,
        url_key=42,
        gen=3,
        fetched_at=WHEN,
        http_status=200,
        headers={"content-type": "text/html; charset=utf-8", "server": "test"},
        body="<html><p>Grüße, 世界</p></html>".encode(),
        is_truncated=False,
        content_hash="ab" * 32,
        ip="127.0.0.7",
        fetch_ms=12,
    )
    values.update(changes)
    return warc.Capture(**values)


def write(*captures: warc.Capture) -> bytes:
    out = io.BytesIO()
    writer = warc.WarcWriter(out, "test.warc.gz", UA, {"isPartOf": "test"})
    for c in captures:
        writer.write(c)
    return out.getvalue()


def read(data: bytes) -> list[dict]:
    """Every record: type, WARC headers, HTTP status and headers, payload (digests checked)."""
    out = []
    for rec in ArchiveIterator(io.BytesIO(data), check_digests="raise"):
        http = rec.http_headers if rec.rec_type in ("request", "response") else None
        out.append(
            {
                "type": rec.rec_type,
                "warc": dict(rec.rec_headers.headers),
                "http": http,
                "payload": rec.raw_stream.read(),
            }
        )
    return out


def gzip_members(data: bytes) -> list[bytes]:
    members = []
    while data:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        members.append(d.decompress(data))
        assert d.eof
        data = d.unused_data
    return members


def test_warcinfo_then_request_response_metadata_per_capture():
    a = capture()
    b = capture(url="https://other.test/", url_key=43, body=b"\x00\xff\xfe binary \x89PNG")
    records = read(write(a, b))
    assert [r["type"] for r in records] == [
        "warcinfo",
        *["request", "response", "metadata"] * 2,
    ]
    info = records[0]
    assert info["warc"]["WARC-Filename"] == "test.warc.gz"
    fields = info["payload"].decode()
    assert "format: WARC File Format 1.1\r\n" in fields
    assert "conformsTo: https://iipc.github.io/warc-specifications/" in fields
    assert "software: crawllib" in fields and f"http-header-user-agent: {UA}" in fields
    assert "isPartOf: test" in fields
    for (req, resp, meta), c in zip([records[1:4], records[4:7]], [a, b], strict=True):
        for r in (req, resp, meta):
            assert r["warc"]["WARC-Target-URI"] == c.url
            assert r["warc"]["WARC-Date"] == "2026-03-04T05:06:07.890000Z"
            assert r["warc"]["WARC-Record-ID"].startswith("<urn:uuid:")
            assert r["warc"]["WARC-Warcinfo-ID"] == info["warc"]["WARC-Record-ID"]
        response_id = resp["warc"]["WARC-Record-ID"]
        assert req["warc"]["WARC-Concurrent-To"] == response_id
        assert meta["warc"]["WARC-Concurrent-To"] == response_id
        assert meta["warc"]["WARC-Refers-To"] == response_id
        assert req["warc"]["WARC-IP-Address"] == resp["warc"]["WARC-IP-Address"] == c.ip
        assert resp["http"].get_statuscode() == "200"
        assert resp["payload"] == c.body
        assert resp["warc"]["WARC-Payload-Digest"] == warc.sha1_digest(c.body)
        assert "WARC-Truncated" not in resp["warc"]


def test_request_is_the_get_the_crawler_sent():
    req = read(write(capture()))[1]
    assert req["http"].protocol == "GET"
    assert req["http"].statusline == "/a/b?x=1&y=2 HTTP/1.1"
    assert req["http"].get_header("Host") == "site.test:8080"
    assert req["http"].get_header("User-Agent") == UA
    assert req["payload"] == b""
    assert warc.http_request("https://u:p@h.test", UA).startswith(
        b"GET / HTTP/1.1\r\nHost: h.test\r\n"
    )


def test_response_headers_describe_the_decoded_body():
    headers = {
        "content-type": "text/html",
        "content-encoding": "gzip",
        "transfer-encoding": "chunked",
        "content-length": "17",
        "x-evil": "a\r\nWARC-Type: forged",
    }
    resp = read(write(capture(headers=headers, http_status=404)))[2]
    http = resp["http"]
    assert http.statusline == "404 Not Found"
    assert http.get_header("Content-Length") == str(len(capture().body))
    assert http.get_header("Content-Encoding") is None
    assert http.get_header("Transfer-Encoding") is None
    assert http.get_header("X-Crawler-Content-Encoding") == "gzip"
    assert http.get_header("X-Crawler-Content-Length") == "17"
    assert http.get_header("x-evil") == "a WARC-Type: forged"
    assert warc.http_response_head(599, {}, 0).startswith(b"HTTP/1.1 599 \r\n")


def test_truncated_capture_and_metadata_fields():
    c = capture(is_truncated=True, ip=None, fetch_ms=None)
    _, req, resp, meta = read(write(c))
    assert resp["warc"]["WARC-Truncated"] == "length"
    assert "WARC-IP-Address" not in req["warc"] and "WARC-IP-Address" not in resp["warc"]
    assert meta["warc"]["Content-Type"] == "application/warc-fields"
    assert meta["payload"].decode().splitlines() == [
        "fetchTime: 2026-03-04T05:06:07.890000Z",
        "isTruncated: true",
        f"contentHash: sha256:{'ab' * 32}",
        "gen: 3",
        "urlKey: 42",
    ]


def test_every_record_is_its_own_gzip_member_and_seekable():
    data = write(capture(), capture(url_key=7))
    members = gzip_members(data)
    assert len(members) == 7
    assert all(m.startswith(b"WARC/1.1\r\nWARC-Type: ") for m in members)
    it = ArchiveIterator(io.BytesIO(data))
    offsets = [(rec.rec_type, it.get_record_offset()) for rec in it]
    for kind, offset in offsets:
        stream = io.BytesIO(data)
        stream.seek(offset)
        assert next(iter(ArchiveIterator(stream))).rec_type == kind


def test_dates_and_digests():
    assert warc.warc_date(dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)) == "2026-01-02T03:04:05Z"
    plus2 = dt.timezone(dt.timedelta(hours=2))
    assert warc.warc_date(dt.datetime(2026, 1, 2, 5, 4, 5, tzinfo=plus2)) == "2026-01-02T03:04:05Z"
    with pytest.raises(ValueError, match="timezone-aware"):
        warc.warc_date(dt.datetime(2026, 1, 2))
    assert warc.sha1_digest(b"") == "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"


def names_of(gen: int, part: int):
    return functools.partial(warc.part_name, gen, part)


def test_write_files_rolls_over_between_captures(tmp_path):
    # ~4.7 kB per file with one capture (random bytes do not compress): two fit under 8 kB.
    captures = [capture(url_key=i, body=os.urandom(3000)) for i in range(5)]
    reports: list[warc.FileReport] = []
    written = list(
        warc.write_files(captures, str(tmp_path), names_of(3, 7), UA, 8000, done=reports.append)
    )
    names = [os.path.basename(r.path) for r in reports]
    assert names == [f"crawl-gen3-00007-{i:03d}.warc.gz" for i in range(3)]
    assert sorted(os.listdir(tmp_path)) == names
    assert [r.captures for r in reports] == [2, 2, 1]
    assert [w.filename for w in written] == [names[0]] * 2 + [names[1]] * 2 + [names[2]]
    assert [w.capture for w in written] == captures
    bodies = []
    for report in reports:
        records = read(pathlib.Path(report.path).read_bytes())
        n = report.captures
        assert [r["type"] for r in records] == [
            "warcinfo",
            *["request", "response", "metadata"] * n,
        ]
        assert report.records == {"warcinfo": 1, "request": n, "response": n, "metadata": n}
        assert report.size == os.path.getsize(report.path)
        bodies += [r["payload"] for r in records if r["type"] == "response"]
    assert bodies == [c.body for c in captures]


def test_written_offset_and_length_are_the_response_records_gzip_member(tmp_path):
    captures = [
        capture(url=f"http://site.test/{i}", url_key=i, body=os.urandom(i * 700)) for i in range(4)
    ]
    written = list(warc.write_files(captures, str(tmp_path), names_of(1, 0), UA))
    assert len(written) == 4
    for w in written:  # the file is complete once write_files has ended
        with open(tmp_path / w.filename, "rb") as f:
            f.seek(w.offset)
            member = f.read(w.length)
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        inflate.decompress(member)
        assert inflate.eof and inflate.unused_data == b""  # exactly one gzip member
        records = [
            (
                r.rec_type,
                r.rec_headers.get_header("WARC-Target-URI"),
                r.rec_headers.get_header("WARC-Record-ID"),
                r.raw_stream.read(),
            )
            for r in ArchiveIterator(io.BytesIO(member), check_digests="raise")
        ]
        assert records == [("response", w.capture.url, w.record_id, w.capture.body)]
    assert len({w.record_id for w in written}) == 4


def test_write_files_no_captures_no_file(tmp_path):
    assert list(warc.write_files([], str(tmp_path), names_of(1, 0), UA)) == []
    assert os.listdir(tmp_path) == []


def test_stale_parts_are_gens_files_and_part_files_not_written():
    names = [
        "crawl-gen1-00000-000.warc.gz",
        "crawl-gen1-00000-001.warc.gz",
        "crawl-gen1-00003-000.warc.gz.part",
        "crawl-gen1-00001-1000.warc.gz",
        "crawl-gen2-00000-000.warc.gz",
        "crawl-gen11-00000-000.warc.gz",
        "notes.txt",
    ]
    assert warc.stale_parts(names, 1, {"crawl-gen1-00000-000.warc.gz"}) == [
        "crawl-gen1-00000-001.warc.gz",
        "crawl-gen1-00001-1000.warc.gz",
        "crawl-gen1-00003-000.warc.gz.part",
    ]


def test_failed_write_leaves_no_file(tmp_path):
    def broken():
        yield capture()
        raise RuntimeError("executor lost")

    with pytest.raises(RuntimeError):
        list(warc.write_files(broken(), str(tmp_path), names_of(1, 0), UA))
    assert os.listdir(tmp_path) == []
