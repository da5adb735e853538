"""One HTTP GET of one URL with every limit applied; the answer is a :class:`Fetched`.

Never follows redirects (the target is recorded), never raises for a per-URL failure, never
reads more than the caps: at most ``max_raw`` bytes from the wire and ``max_decoded`` bytes
out of the decompressor (gzip, deflate; the session sends ``Accept-Encoding: gzip, deflate``
and decompresses nothing itself). A body is read only for 2xx answers whose media type is
kept (``keep_types``; None keeps all) or that have no Content-Type at all.

Memory: with a `crawllib.engine.budget.Share`, the body grows into it as it is read (a piece
of the wire, a step of the decompressor), pausing while the task's budget is spent. Time: the
session's total timeout (``fetch.total_timeout``) bounds the request, less the time its body
spent paused on the budget: a page waiting for other pages' bytes to be stored has not timed
out (it did on a loaded machine, 24 bodies of 0.9 MB under a 1 MB budget).

Decompressed overflow: when ``overflow_is_error`` (pages) the fetch is an "error" with
error_kind "decompressed_too_large" and no body (a page that inflates past the cap is a
decompression bomb far more often than a real document); otherwise (robots.txt) the body is
cut at the cap and marked truncated.
"""

from __future__ import annotations

import asyncio
import codecs
import email.utils
import time
import zlib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

import aiohttp
from yarl import URL

from crawllib.core.sniff import SNIFF_BYTES, detect_mime
from crawllib.core.urls import InvalidURL, normalize_url
from crawllib.core.vocab import ErrorKind, Outcome
from crawllib.engine.budget import Share
from crawllib.engine.dns import ResolveError

MAX_HEADERS = 64
MAX_HEADER_VALUE = 1024
_DRAIN_BYTES = 65536  # small unread bodies are drained so the connection can be reused


@dataclass
class Fetched:
    """What one request gave; the fetch row's columns without the row's identity."""

    outcome: str
    error_kind: str | None = None
    error_detail: str | None = None
    http_status: int | None = None
    redirect_to: str | None = None
    content_type: str | None = None
    charset: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    body_bytes: int = 0
    is_truncated: bool = False
    fetch_ms: int = 0
    ip: str | None = None
    retry_after: float | None = None
    etag: str | None = None
    last_modified: str | None = None
    # the media type the body's first bytes show (crawllib.core.sniff), for a 2xx answer: of
    # the body read, or of the first bytes of one not kept (an image, a PDF)
    mime_detected: str | None = None


@dataclass(frozen=True)
class Limits:
    max_raw: int
    max_decoded: int
    keep_types: Collection[str] | None
    overflow_is_error: bool = True


class _Overflow(Exception):
    pass


class _Paused:
    """A body's budget share whose waits push the request's deadline back by their length."""

    def __init__(self, share: Share, deadline: asyncio.Timeout) -> None:
        self.share, self.deadline = share, deadline

    async def grow_to(self, size: int) -> None:
        when = self.deadline.when()
        if when is None:
            await self.share.grow_to(size)
            return
        loop = asyncio.get_running_loop()
        left = when - loop.time()
        self.deadline.reschedule(None)  # no deadline while paused
        try:
            await self.share.grow_to(size)
        finally:
            self.deadline.reschedule(loop.time() + left)


def trace_config() -> aiohttp.TraceConfig:
    """The session's tracing: calls the request's ``on_sent`` once its headers are written,
    so that the slot measures its delay from when the request really left (after DNS,
    connect and TLS), not from when it was queued."""

    async def headers_sent(session: object, ctx: object, params: object) -> None:
        on_sent = getattr(ctx, "trace_request_ctx", None)
        if callable(on_sent):
            on_sent()

    config = aiohttp.TraceConfig()
    config.on_request_headers_sent.append(headers_sent)
    return config


async def fetch_url(
    session: aiohttp.ClientSession,
    url: str,
    limits: Limits,
    on_sent: Callable[[], None] | None = None,
    validators: Mapping[str, str] | None = None,
    share: Share | None = None,
) -> Fetched:
    """GET `url` once. Safety checks of the literal host are the caller's (engine) job; the
    session's resolver checks resolved addresses and raises ResolveError, turned here into a
    "blocked" or "error"/"dns" result. ``on_sent`` needs the session's :func:`trace_config`.
    ``validators`` (:func:`conditional_headers`) make it a conditional GET: a 304 answer is
    ``not_modified``. ``share``: the body's part of the task's byte budget (module text); it
    holds the body's size once read, nothing when there is no body."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    result = Fetched(outcome=Outcome.ERROR)
    total = session.timeout.total
    try:
        async with asyncio.timeout(total) as deadline:
            request = session.get(
                URL(url, encoded=True),
                allow_redirects=False,
                trace_request_ctx=on_sent,
                headers=validators or None,
                # the total is the deadline above, which pauses on the budget do not spend
                timeout=aiohttp.ClientTimeout(
                    total=None, sock_connect=session.timeout.sock_connect
                ),
            )
            async with request as resp:
                paused = _Paused(share, deadline) if share is not None else None
                await _take_response(resp, url, limits, result, bool(validators), paused)
    except aiohttp.ClientConnectorDNSError as exc:
        cause = exc.__cause__ if isinstance(exc.__cause__, ResolveError) else None
        if cause is not None and cause.blocked:
            result.outcome, result.error_kind = Outcome.BLOCKED, cause.kind
        else:
            result.outcome, result.error_kind = Outcome.ERROR, ErrorKind.DNS
        result.error_detail = str(cause or exc)
    except Exception as exc:  # per-URL failures are data
        result.outcome = Outcome.ERROR
        result.error_kind = error_kind_of(exc)
        result.error_detail = f"{type(exc).__name__}: {exc}"[:300]
        result.body = None
    if share is not None:
        share.done_reading(len(result.body) if result.body is not None else 0)
    result.fetch_ms = int((loop.time() - started) * 1000)
    return result


def error_kind_of(exc: BaseException) -> str:
    """The error_kind vocabulary of failed requests."""
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return ErrorKind.CONNECT_TIMEOUT
    if isinstance(exc, asyncio.TimeoutError):
        return ErrorKind.TIMEOUT
    if isinstance(exc, _Overflow):
        return ErrorKind.DECOMPRESSED_TOO_LARGE
    if isinstance(exc, zlib.error):
        return ErrorKind.DECODE_ERROR
    if isinstance(exc, aiohttp.ClientConnectorSSLError | aiohttp.ClientSSLError):
        return ErrorKind.SSL
    if isinstance(exc, aiohttp.ClientConnectorError):
        return ErrorKind.CONNECT
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return ErrorKind.DISCONNECTED
    if isinstance(exc, ConnectionError | aiohttp.ClientOSError):
        return ErrorKind.DISCONNECTED
    if isinstance(exc, aiohttp.ClientResponseError):
        return ErrorKind.BAD_RESPONSE  # unparseable status line or headers
    if isinstance(exc, aiohttp.InvalidURL | ValueError):
        return ErrorKind.INVALID_URL
    if isinstance(exc, aiohttp.ClientError):
        return ErrorKind.CLIENT_ERROR
    return ErrorKind.INTERNAL


def conditional_headers(etag: str | None, last_modified: str | None) -> dict[str, str]:
    """The request headers of a conditional GET from a stored version's validators (RFC 9110
    13.1): If-None-Match with the entity tag, If-Modified-Since with the Last-Modified date
    as the server sent it; none for a value that is empty or holds a control character."""
    headers = {}
    for name, value in (("If-None-Match", etag), ("If-Modified-Since", last_modified)):
        if value and value.strip() and not any(ord(c) < 32 or ord(c) == 127 for c in value):
            headers[name] = value.strip()
    return headers


async def _take_response(
    resp: aiohttp.ClientResponse,
    url: str,
    limits: Limits,
    result: Fetched,
    conditional: bool = False,
    share: _Paused | None = None,
) -> None:
    result.http_status = resp.status
    result.headers = _headers(resp)
    result.etag = result.headers.get("etag")
    result.last_modified = result.headers.get("last-modified")
    result.content_type, result.charset = parse_content_type(resp.headers.get("Content-Type"))
    result.ip = _peer_ip(resp)
    if resp.status in (429, 503) and "Retry-After" in resp.headers:
        result.retry_after = parse_retry_after(resp.headers["Retry-After"], time.time())
    if resp.status == 304 and conditional:
        result.outcome = Outcome.NOT_MODIFIED
        await _discard(resp)
        return
    if 300 <= resp.status < 400:
        location = resp.headers.get("Location")
        if location:
            result.outcome = Outcome.REDIRECT
            try:
                result.redirect_to = normalize_url(location, base=url)
            except InvalidURL as exc:
                result.error_kind, result.error_detail = ErrorKind.BAD_LOCATION, str(exc)
        else:
            result.outcome, result.error_kind = Outcome.HTTP_ERROR, ErrorKind.NO_LOCATION
        await _discard(resp)
        return
    if not 200 <= resp.status < 300:
        result.outcome = Outcome.HTTP_ERROR
        await _discard(resp)
        return
    result.outcome = Outcome.OK
    encoding = resp.headers.get("Content-Encoding", "identity").strip().lower()
    if limits.keep_types is not None and result.content_type is not None:
        if result.content_type not in limits.keep_types:
            read = b""
            if encoding in ("identity", ""):  # its first bytes, what it is
                read = await _first_piece(resp)
                result.mime_detected = detect_mime(read[:SNIFF_BYTES])
            await _discard(resp, len(read))
            return
    if encoding not in ("identity", "", "gzip", "x-gzip", "deflate"):
        result.outcome, result.error_kind = Outcome.ERROR, ErrorKind.UNSUPPORTED_ENCODING
        result.error_detail = encoding[:100]
        resp.close()
        return
    await _read_body(resp, encoding, limits, result, share)
    result.mime_detected = detect_mime(result.body)


async def _first_piece(resp: aiohttp.ClientResponse) -> bytes:
    """The first piece of a body not kept, to tell what it is: what the connection holds, or
    its first packet; b"" past _SNIFF_WAIT or on an error."""
    try:
        return await asyncio.wait_for(resp.content.readany(), _SNIFF_WAIT)
    except (TimeoutError, aiohttp.ClientError, OSError):
        return b""


_SNIFF_WAIT = 2.0  # seconds: a first piece later than this is not waited for


async def _read_body(
    resp: aiohttp.ClientResponse,
    encoding: str,
    limits: Limits,
    result: Fetched,
    share: _Paused | None = None,
) -> None:
    inflater = _Inflater(encoding) if encoding in ("gzip", "x-gzip", "deflate") else None
    out = bytearray()
    raw = 0
    complete = False
    cap = limits.max_decoded
    while True:
        chunk = await resp.content.readany()
        if not chunk:
            complete = True
            break
        if raw + len(chunk) > limits.max_raw:
            chunk = chunk[: limits.max_raw - raw]
            result.is_truncated = True
        raw += len(chunk)
        result.body_bytes = raw
        if inflater is None:
            if share is not None:
                await share.grow_to(min(len(out) + len(chunk), cap + 1))
            out += chunk
            overflow = len(out) > cap
            if overflow:
                del out[cap:]
        else:
            overflow, pending = False, chunk
            while pending and not overflow:
                if share is not None:
                    await share.grow_to(min(len(out) + _INFLATE_STEP, cap + 1))
                overflow, pending = inflater.step(pending, out, cap)
        if overflow:
            result.is_truncated = True
            if limits.overflow_is_error:
                resp.close()
                raise _Overflow(f"more than {limits.max_decoded} decoded bytes")
            break
        if result.is_truncated:
            break
    if not complete:
        resp.close()  # never read the rest of an over-long body
    result.body = bytes(out)


_INFLATE_STEP = 1 << 20


class _Inflater:
    """Incremental gzip/deflate decoder whose output never grows past the caller's cap. A
    gzip body may hold several members (RFC 1952 2.2: ``cat a.gz b.gz``), decoded one after
    the other; bytes after the last member that start no member (padding) are ignored."""

    def __init__(self, encoding: str) -> None:
        self.deflate = encoding == "deflate"
        self.started = False
        self.d = zlib.decompressobj(zlib.MAX_WBITS if self.deflate else 16 + zlib.MAX_WBITS)
        self.tail = b""  # the first byte of what may be the next member
        self.ended = False  # padding seen after the last member: the rest is not decoded

    def step(self, data: bytes, out: bytearray, cap: int) -> tuple[bool, bytes]:
        """Append at most one step (_INFLATE_STEP bytes) of the decoding of `data` to `out`:
        (whether it would pass `cap`: out is cut, the input of `data` not decoded yet)."""
        if self.deflate and not self.started:
            self.started = True
            try:
                probe = zlib.decompressobj(zlib.MAX_WBITS)
                probe.decompress(data[:2048], 1)
            except zlib.error:  # "deflate" sent raw, without the zlib header (old IIS)
                self.d = zlib.decompressobj(-zlib.MAX_WBITS)
        if self.d.eof:
            if self.deflate or self.ended:
                return False, b""
            data, self.tail = self.tail + data, b""
            if len(data) < 2:
                self.tail = data
                return False, b""
            if data[:2] != b"\x1f\x8b":
                self.ended = True
                return False, b""
            self.d = zlib.decompressobj(16 + zlib.MAX_WBITS)  # the next member
        if not data:
            return False, b""
        # In steps: one call asked for the whole cap would hold a copy of it (bomb x3).
        piece = self.d.decompress(data, min(cap - len(out) + 1, _INFLATE_STEP))
        out += piece
        if len(out) > cap:
            del out[cap:]
            return True, b""
        if self.d.eof:
            return False, self.d.unused_data  # what follows the member: perhaps another
        return False, self.d.unconsumed_tail


async def _discard(resp: aiohttp.ClientResponse, read: int = 0) -> None:
    """Drop a body we do not want (``read`` bytes of it read already): drain it if small
    (keeps the connection), else close."""
    length = resp.content_length
    if length is not None and read <= length <= _DRAIN_BYTES:
        try:
            await resp.content.readexactly(length - read)
            return
        except (asyncio.IncompleteReadError, aiohttp.ClientError, OSError):
            pass
    resp.close()


def _headers(resp: aiohttp.ClientResponse) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in resp.headers.items():
        key = name.lower()
        if key in out:
            value = out[key] + ", " + value
        elif len(out) >= MAX_HEADERS:
            continue
        out[key] = value[:MAX_HEADER_VALUE]
    return out


def _peer_ip(resp: aiohttp.ClientResponse) -> str | None:
    conn = resp.connection
    transport = conn.transport if conn is not None else None
    if transport is None:  # a small body read at once releases the connection early
        transport = getattr(getattr(resp.content, "_protocol", None), "transport", None)
    peer = transport.get_extra_info("peername") if transport is not None else None
    return str(peer[0]) if peer else None


def parse_content_type(value: str | None) -> tuple[str | None, str | None]:
    """("text/html", "utf-8") from 'text/html; charset="UTF-8"'. The charset is kept only if
    Python knows it (an unknown label gives None: the parser sniffs the body instead)."""
    if not value:
        return None, None
    media_type, *params = value.split(";")
    media = media_type.strip().lower() or None
    charset = None
    for param in params:
        key, _, val = param.partition("=")
        if key.strip().lower() == "charset":
            label = val.strip().strip("\"'").lower()
            try:
                codecs.lookup(label)
                charset = label
            except LookupError:
                charset = None
    return media, charset


def parse_retry_after(value: str, now: float) -> float | None:
    """Seconds to wait from a Retry-After value: delay-seconds or an HTTP date; None if bad."""
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - now)
