"""Large or binary bodies of the special hosts, built lazily and never held twice in memory."""

from __future__ import annotations

import functools
import random
import struct
import threading
import zlib
from collections.abc import Callable, Iterator

from crawllib.testweb.content import ACCENTED, paragraph

_BOMB_CHUNK = 16 << 20
_bombs: dict[int, bytes] = {}
_bomb_lock = threading.Lock()


def gzip_bomb(size: int) -> bytes:
    """A gzip stream of ``size`` zero bytes (1 GiB -> about 1 MB), computed once per size.

    A full flush resets the compressor, so the deflate blocks of one 16 MiB chunk of zeros
    are the same bytes every time: they are computed once and repeated instead of
    compressing the whole gigabyte.
    """
    with _bomb_lock:
        if size not in _bombs:
            _bombs[size] = _make_bomb(size)
        return _bombs[size]


def _make_bomb(size: int) -> bytes:
    chunk = min(size, _BOMB_CHUNK) or 1
    full, rest = divmod(size, chunk)
    zeros = bytes(chunk)
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    piece = comp.compress(zeros) + comp.flush(zlib.Z_FULL_FLUSH)
    tail = comp.compress(bytes(rest)) + comp.flush(zlib.Z_FINISH)
    crc = 0
    for _ in range(full):
        crc = zlib.crc32(zeros, crc)
    crc = zlib.crc32(bytes(rest), crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    trailer = struct.pack("<II", crc, size & 0xFFFFFFFF)
    return header + piece * full + tail + trailer


def big_body_chunks(total: int, chunk: int = 64 * 1024) -> Iterator[bytes]:
    """Exactly ``total`` bytes of HTML in ``chunk``-sized pieces; one piece in memory at a time."""
    head = b"<!DOCTYPE html><html><head><title>A very big page</title></head><body>\n"
    line = b"<p>" + b"This page is very long and keeps going on and on. " * 4 + b"</p>\n"
    filler = (line * (chunk // len(line) + 1))[:chunk]
    first = (head + filler)[:chunk]
    sent = 0
    while sent < total:
        piece = first if sent == 0 else filler
        piece = piece[: total - sent]
        sent += len(piece)
        yield piece


@functools.cache
def big_robots() -> bytes:
    """A robots.txt over 600 KiB whose last rule lies beyond the 500 KiB parse limit."""
    pad = "# " + "padding to make this robots.txt very large " * 2 + "\n"
    head = "User-agent: *\nDisallow: /early/\n"
    return (head + pad * (600 * 1024 // len(pad) + 1) + "Disallow: /late/\n").encode()


@functools.cache
def png_bytes() -> bytes:
    """A valid 1x1 PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + crc

    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00\xff\x00\x00")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


PDF = (
    b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n"
    b"2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"
)


UNCLOSED = (
    b"<html><head><title>Unclosed tags<body><div class=main><h1>Broken but readable"
    b"<p>This page never closes its tags. <b>Bold <i>italic <p>Another paragraph with "
    b'<a href="/after.html">a link after the mess</a> <ul><li>one<li>two <table><tr><td>cell'
)


def garbage_page(seed: int) -> Callable[[], bytes]:
    """HTML start, 4 KiB of random bytes (NULs, invalid UTF-8), no end."""

    def render() -> bytes:
        rng = random.Random(f"{seed}|garbage")
        noise = bytes(rng.randrange(256) for _ in range(4096))
        return b"<html><body><p>Garbage follows\x00\xff\xfe " + noise + b"</p></body>"

    return render


def charset_page(encoding: str, meta: bool) -> Callable[[], bytes]:
    """Accented prose encoded in ``encoding``; declared in a ``<meta>`` only if ``meta``."""

    def render() -> bytes:
        rng = random.Random(f"charset|{encoding}|{meta}")
        head = f'<meta charset="{encoding}">' if meta else ""
        text = " ".join(paragraph(rng, ACCENTED + ("la", "de", "et", "un")) for _ in range(3))
        doc = (
            f"<!DOCTYPE html><html><head>{head}<title>Café crème</title></head><body>"
            f'<nav><a href="/">Home</a></nav><h1>Crème brûlée</h1><p>{text}</p></body></html>'
        )
        return doc.encode(encoding)

    return render
