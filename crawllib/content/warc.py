"""WARC 1.1 writer for stored captures. Pure Python: no Spark (the export feeds it rows).

In: :class:`Capture` values (one fetched page each). Out: ``.warc.gz`` bytes where every record
is its own gzip member, so readers can seek to any record's offset. Per capture three records,
in order: ``request`` (reconstructed GET), ``response`` (status line, stored headers, body) and
``metadata`` (fetch facts); request and metadata name the response in ``WARC-Concurrent-To``,
metadata also in ``WARC-Refers-To``. Every file opens with a ``warcinfo`` record.

The stored body is already decoded (no gzip, no chunking), so the response drops
``Content-Encoding``/``Transfer-Encoding`` and sets ``Content-Length`` to the body's length;
the original values are kept as ``X-Crawler-<Name>`` (the Common Crawl convention).
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import gzip
import hashlib
import http
import importlib.metadata
import logging
import os
import re
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import BinaryIO
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

# A file is closed and the next part started once it reaches this many (compressed) bytes;
# a capture's three records always stay in one file.
ROLLOVER_BYTES = 1_000_000_000
VERSION = "1.1"
# Headers describing the transfer of the original bytes, which the stored body no longer has.
_TRANSFER_HEADERS = ("content-encoding", "transfer-encoding", "content-length")
_LINE_BREAKS = re.compile(r"[\r\n]+")


@dataclass(frozen=True)
class Capture:
    """One stored fetch: a ``pages`` row, with ``ip`` and ``fetch_ms`` from ``fetches`` if known.

    fetched_at must be timezone-aware (it is written as UTC); headers are the stored response
    headers (names lowercased); body the decoded body bytes; content_type the stored media
    type (for the export's index: the record itself takes the headers).
    """

    url: str
    url_key: int
    gen: int
    fetched_at: dt.datetime
    http_status: int
    headers: Mapping[str, str]
    body: bytes
    is_truncated: bool = False
    content_hash: str | None = None
    ip: str | None = None
    fetch_ms: int | None = None
    content_type: str | None = None


@dataclass
class FileReport:
    """One written file: its path, its records by WARC-Type, its captures and size in bytes."""

    path: str
    records: dict[str, int] = field(default_factory=dict)
    captures: int = 0
    size: int = 0

    @property
    def total_records(self) -> int:
        return sum(self.records.values())


def software() -> str:
    try:
        return f"crawllib/{importlib.metadata.version('crawllib')}"
    except importlib.metadata.PackageNotFoundError:  # running from a source tree
        return "crawllib"


def warc_date(when: dt.datetime) -> str:
    """ISO 8601 UTC, ``2026-01-02T03:04:05Z``; microseconds only when there are some."""
    if when.tzinfo is None:
        raise ValueError(f"WARC-Date needs a timezone-aware datetime, got {when!r}")
    when = when.astimezone(dt.UTC)
    spec = "%Y-%m-%dT%H:%M:%S.%fZ" if when.microsecond else "%Y-%m-%dT%H:%M:%SZ"
    return when.strftime(spec)


def sha1_digest(data: bytes) -> str:
    """``sha1:`` + base32 of the SHA-1, the form the WARC spec's examples and tools use."""
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode("ascii")


def new_record_id() -> str:
    return f"<urn:uuid:{uuid.uuid4()}>"


def _clean(value: object) -> str:
    # A CR or LF inside a value would end the header early and corrupt the record.
    return _LINE_BREAKS.sub(" ", str(value))


def _encode(text: str) -> bytes:
    try:  # surrogateescape: header bytes that were not valid UTF-8 go back out as they came
        return text.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="replace")


def fields(pairs: Iterable[tuple[str, object]]) -> bytes:
    """``name: value`` lines, CRLF-terminated (WARC headers, HTTP headers, warc-fields)."""
    return b"".join(_encode(f"{_clean(k)}: {_clean(v)}") + b"\r\n" for k, v in pairs)


def record(
    warc_type: str,
    content_type: str,
    headers: Iterable[tuple[str, object]],
    block: bytes,
    version: str = VERSION,
) -> bytes:
    """One WARC record as its own gzip member: version line (``WARC/<version>``), headers,
    block digest, block."""
    head = [
        ("WARC-Type", warc_type),
        *headers,
        ("Content-Type", content_type),
        ("WARC-Block-Digest", sha1_digest(block)),
        ("Content-Length", len(block)),
    ]
    raw = f"WARC/{version}\r\n".encode() + fields(head) + b"\r\n" + block + b"\r\n\r\n"
    return gzip.compress(raw, compresslevel=6, mtime=0)


def warcinfo_record(
    filename: str,
    record_id: str,
    when: dt.datetime,
    info: Mapping[str, object],
    version: str = VERSION,
) -> bytes:
    """The ``warcinfo`` record of a WARC/<version> file: software, format and conformsTo, then
    ``info`` fields."""
    spec = f"https://iipc.github.io/warc-specifications/specifications/warc-format/warc-{version}/"
    block = fields(
        [("software", software()), ("format", f"WARC File Format {version}"), ("conformsTo", spec)]
    )
    block += fields((k, v) for k, v in info.items() if v is not None)
    headers = [
        ("WARC-Date", warc_date(when)),
        ("WARC-Filename", filename),
        ("WARC-Record-ID", record_id),
    ]
    return record("warcinfo", "application/warc-fields", headers, block, version)


def http_request(url: str, user_agent: str) -> bytes:
    """The GET the crawler sent, rebuilt: request line from path and query, Host, User-Agent."""
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host = parts.netloc.rpartition("@")[2]
    return (
        _encode(f"GET {target} HTTP/1.1\r\n")
        + fields([("Host", host), ("User-Agent", user_agent)])
        + b"\r\n"
    )


def http_response_head(status: int, headers: Mapping[str, str], body_length: int) -> bytes:
    """Status line and headers (sorted by name) for a decoded body of body_length bytes."""
    try:
        reason = http.HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    kept: list[tuple[str, object]] = []
    for name, value in sorted(headers.items()):
        if value is None:
            continue
        if name.lower() in _TRANSFER_HEADERS:
            kept.append((f"X-Crawler-{name.title()}", value))
        else:
            kept.append((name, value))
    kept.append(("Content-Length", body_length))
    return _encode(f"HTTP/1.1 {status} {reason}\r\n") + fields(kept) + b"\r\n"


def capturefields(capture: Capture) -> bytes:
    """The metadata record's block (application/warc-fields): the facts of the fetch."""
    facts: list[tuple[str, object]] = [
        ("fetchTime", warc_date(capture.fetched_at)),
        ("isTruncated", "true" if capture.is_truncated else "false"),
        ("contentHash", f"sha256:{capture.content_hash}" if capture.content_hash else None),
        ("gen", capture.gen),
        ("urlKey", capture.url_key),
        ("fetchTimeMs", capture.fetch_ms),
    ]
    return fields((k, v) for k, v in facts if v is not None)


def capture_records(
    capture: Capture, user_agent: str, warcinfo_id: str | None = None
) -> list[tuple[str, bytes, str]]:
    """The request, response and metadata records of one capture: (WARC-Type, gzip member,
    WARC-Record-ID)."""
    date = warc_date(capture.fetched_at)
    ids = {kind: new_record_id() for kind in ("request", "response", "metadata")}

    def common(kind: str) -> list[tuple[str, object]]:
        pairs: list[tuple[str, object]] = [
            ("WARC-Record-ID", ids[kind]),
            ("WARC-Date", date),
            ("WARC-Target-URI", capture.url),
        ]
        if warcinfo_id:
            pairs.append(("WARC-Warcinfo-ID", warcinfo_id))
        return pairs

    ip = [("WARC-IP-Address", capture.ip)] if capture.ip else []
    body = capture.body or b""
    response_id = ids["response"]
    parts = {  # WARC-Type: (block, Content-Type, headers of that type)
        "request": (
            http_request(capture.url, user_agent),
            "application/http;msgtype=request",
            [*ip, ("WARC-Concurrent-To", response_id)],
        ),
        "response": (
            http_response_head(capture.http_status, capture.headers or {}, len(body)) + body,
            "application/http;msgtype=response",
            [
                *ip,
                ("WARC-Payload-Digest", sha1_digest(body)),
                *([("WARC-Truncated", "length")] if capture.is_truncated else []),
            ],
        ),
        "metadata": (
            capturefields(capture),
            "application/warc-fields",
            [("WARC-Concurrent-To", response_id), ("WARC-Refers-To", response_id)],
        ),
    }
    return [
        (kind, record(kind, content_type, [*common(kind), *extra], block), ids[kind])
        for kind, (block, content_type, extra) in parts.items()
    ]


class WarcWriter:
    """Writes one WARC file to a binary file object: ``warcinfo`` first, then captures."""

    def __init__(
        self,
        out: BinaryIO,
        filename: str,
        user_agent: str,
        info: Mapping[str, object] | None = None,
        now: dt.datetime | None = None,
    ) -> None:
        self.out = out
        self.user_agent = user_agent
        self.report = FileReport(filename)
        self.warcinfo_id = new_record_id()
        info = {"http-header-user-agent": user_agent, **(info or {})}
        when = now or dt.datetime.now(dt.UTC)
        self._write("warcinfo", warcinfo_record(filename, self.warcinfo_id, when, info))

    def _write(self, kind: str, member: bytes) -> None:
        self.out.write(member)
        self.report.size += len(member)
        self.report.records[kind] = self.report.records.get(kind, 0) + 1

    def write(self, capture: Capture) -> tuple[int, int, str]:
        """Write the capture's records; return (offset, length) of its response's gzip member
        in the file, what a reader seeks to and reads (the offset and length of a CDX line),
        and the response's WARC-Record-ID."""
        where = (0, 0, "")
        records = capture_records(capture, self.user_agent, self.warcinfo_id)
        for kind, member, record_id in records:
            if kind == "response":
                where = (self.report.size, len(member), record_id)
            self._write(kind, member)
        self.report.captures += 1
        return where


def part_name(gen: int, part: int, seq: int = 0) -> str:
    """The name of file seq of part ``part`` (a Spark partition of the export) of gen."""
    return f"crawl-gen{gen}-{part:05d}-{seq:03d}.warc.gz"


@dataclass(frozen=True)
class Written:
    """One capture written: its file's name, where its response record lies in that file
    (offset and length of the gzip member) and that record's WARC-Record-ID."""

    capture: Capture
    filename: str
    offset: int
    length: int
    record_id: str


def write_files(
    captures: Iterable[Capture],
    out_dir: str,
    name: Callable[[int], str],
    user_agent: str,
    max_bytes: int = ROLLOVER_BYTES,
    info: Mapping[str, object] | None = None,
    done: Callable[[FileReport], None] | None = None,
) -> Iterator[Written]:
    """Write captures to ``OUT_DIR/name(seq)`` for seq 0, 1, ..., rolling at max_bytes; yield
    each capture as written (its file complete only once ``done`` has it).

    Streams: holds one capture at a time. No captures, no file. Each file is written under a
    ``.part`` name and renamed when complete, then handed to ``done`` (which may move it and
    set its report's path). An error mid-file leaves no complete-looking file behind.
    """
    os.makedirs(out_dir, exist_ok=True)
    seq, filename = 0, ""
    writer: WarcWriter | None = None
    handle: BinaryIO | None = None

    def close() -> None:
        assert writer is not None and handle is not None
        handle.close()
        os.replace(writer.report.path + ".part", writer.report.path)
        log.info(
            "wrote %s: %d captures, %d records, %d bytes",
            writer.report.path,
            writer.report.captures,
            writer.report.total_records,
            writer.report.size,
        )
        if done is not None:
            done(writer.report)

    try:
        for capture in captures:
            if writer is None:
                filename = name(seq)
                path = os.path.join(out_dir, filename)
                handle = open(path + ".part", "wb")
                writer = WarcWriter(handle, filename, user_agent, info)
                writer.report.path = path
            offset, length, record_id = writer.write(capture)
            yield Written(capture, filename, offset, length, record_id)
            if writer.report.size >= max_bytes:
                close()
                writer, handle, seq = None, None, seq + 1
        if writer is not None:
            close()
            writer, handle = None, None
    finally:
        if handle is not None:  # an error mid-file: leave no complete-looking file behind
            handle.close()
            with contextlib.suppress(FileNotFoundError):  # renamed before ``done`` failed
                os.remove(handle.name)


def stale_parts(names: Iterable[str], gen: int, written: Collection[str]) -> list[str]:
    """The names among ``names`` of gen's WARC files (and their ``.part`` files) that are not
    in ``written``: what an earlier export of gen, or a task that died, left behind."""
    pattern = re.compile(rf"crawl-gen{gen}-\d{{5}}-\d{{3,}}\.warc\.gz(\.part)?")
    return sorted(n for n in names if pattern.fullmatch(n) is not None and n not in written)
