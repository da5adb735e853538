"""The media type of a body by its first bytes, whatever the server said it was: ccindex's
``content_mime_detected``, as Common Crawl detects it from the content.

The rules are the WHATWG MIME Sniffing Standard's "identify an unknown MIME type" patterns
(HTML tags after leading whitespace, XML, PDF, PostScript, images, audio and video
containers, archives), with three refinements where a crawl's readers want a finer answer and
Common Crawl's detector (Apache Tika) gives one: XML opening an ``<html>`` element is
``application/xhtml+xml``, an ``<rss>`` or Atom ``<feed>`` is ``application/rss+xml`` or
``application/atom+xml``, and text opening with ``{`` or ``[`` that holds no binary byte is
``application/json``; markup opening with another tag that holds ``<html>``, ``<head>`` or
``<body>`` in the bytes read is HTML. Otherwise bytes without a binary control byte are ``text/plain``, the
rest ``application/octet-stream``; no bytes, None.

Only the first `SNIFF_BYTES` are read (a byte-order mark skipped): the cost is bounded
whatever the body.
"""

from __future__ import annotations

import re

SNIFF_BYTES = 1024

_BOMS = (b"\xef\xbb\xbf", b"\xfe\xff", b"\xff\xfe")
# Tags that make a body HTML when they open it (after whitespace), followed by a space or ">"
_HTML_TAGS = (
    b"!doctype html", b"html", b"head", b"script", b"iframe", b"h1", b"div", b"font", b"table",
    b"a", b"style", b"title", b"b", b"body", b"br", b"p",
)  # fmt: skip
_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "application/pdf"),
    (b"%!PS-Adobe-", "application/postscript"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"BM", "image/bmp"),
    (b"\x00\x00\x01\x00", "image/x-icon"),
    (b"OggS\x00", "application/ogg"),
    (b"ID3", "audio/mpeg"),
    (b"\x1f\x8b\x08", "application/gzip"),
    (b"PK\x03\x04", "application/zip"),
    (b"Rar!\x1a\x07", "application/x-rar-compressed"),
    (b"\x1a\x45\xdf\xa3", "video/webm"),
    (b"wOFF", "font/woff"),
    (b"wOF2", "font/woff2"),
)
_BINARY = re.compile(rb"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f]")
_HTML_INSIDE = re.compile(rb"<(?:html|head|body)[\s>]", re.I)
_XML_ROOT = re.compile(rb"<(?:[a-z0-9_-]+:)?(html|rss|feed)[\s>/]", re.I)


def detect_mime(body: bytes | None) -> str | None:
    """The media type the first bytes of ``body`` show (module docstring), or None."""
    if not body:
        return None
    head = body[:SNIFF_BYTES]
    for bom in _BOMS:
        if head.startswith(bom):
            head = head[len(bom) :]
            break
    for signature, mime in _SIGNATURES:
        if head.startswith(signature):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head[4:8] == b"ftyp":
        return "video/mp4"
    text = head.lstrip(b"\t\n\x0c\r ")
    lower = text[:64].lower()
    if lower.startswith(b"<?xml"):
        root = _XML_ROOT.search(text)
        kind = root.group(1).lower() if root else b""
        return {
            b"html": "application/xhtml+xml",
            b"rss": "application/rss+xml",
            b"feed": "application/atom+xml",
        }.get(kind, "application/xml")
    if lower.startswith(b"<!--"):
        return "text/html"
    for tag in _HTML_TAGS:
        opened = b"<" + tag
        if lower.startswith(opened) and lower[len(opened) : len(opened) + 1] in (b" ", b">"):
            return "text/html"
    if text[:1] == b"<" and _HTML_INSIDE.search(text):  # <meta charset=...> first, say
        return "text/html"
    if _BINARY.search(head):
        return "application/octet-stream"
    if text[:1] in (b"{", b"["):
        return "application/json"
    return "text/plain"
