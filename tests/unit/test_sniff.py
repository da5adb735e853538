"""What a body's first bytes show (crawllib.core.sniff), and the host's domain under the
public suffix list's private part (crawllib.core.urls.private_domain): ccindex's
content_mime_detected and url_host_private_domain."""

from __future__ import annotations

import pytest

from crawllib.core.sniff import SNIFF_BYTES, detect_mime
from crawllib.core.urls import private_domain, registered_domain
from crawllib.testweb.payloads import PDF, png_bytes


@pytest.mark.parametrize(
    ("body", "mime"),
    [
        (b"<!DOCTYPE html>\n<html><body>x</body></html>", "text/html"),
        (b"\xef\xbb\xbf  \n<HTML lang=en>", "text/html"),
        (b"<!-- generated --><p>x", "text/html"),
        (b'<meta charset="utf-8"><title>t</title><body>x', "text/html"),
        (
            b'<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml">',
            "application/xhtml+xml",
        ),
        (b'<?xml version="1.0"?>\n<rss version="2.0"><channel>', "application/rss+xml"),
        (
            b'<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom">',
            "application/atom+xml",
        ),
        (b'<?xml version="1.0"?><urlset>', "application/xml"),
        (PDF, "application/pdf"),
        (png_bytes(), "image/png"),
        (b"GIF89a\x01\x00", "image/gif"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF", "image/jpeg"),
        (b"RIFF\x00\x00\x00\x00WEBPVP8 ", "image/webp"),
        (b"\x1f\x8b\x08\x00\x00\x00", "application/gzip"),
        (b'{"a": [1, 2]}', "application/json"),
        (b"Plain words, and a line.\nAnother.", "text/plain"),
        (b"\x00\x01\x02\x03binary", "application/octet-stream"),
        (b"", None),
        (None, None),
    ],
)
def test_the_first_bytes_say_what_a_body_is(body, mime):
    assert detect_mime(body) == mime


def test_only_the_first_bytes_are_read():
    assert detect_mime(b"x" * SNIFF_BYTES + b"\x00") == "text/plain"  # the byte past is unseen


@pytest.mark.parametrize(
    ("host", "private", "registered"),
    [
        ("someone.blogspot.com", "someone.blogspot.com", "blogspot.com"),
        ("a.b.someone.github.io", "someone.github.io", "github.io"),
        ("www.example.co.uk", "example.co.uk", "example.co.uk"),  # no private suffix applies
        ("127.0.0.1", None, "127.0.0.1"),
        ("[::1]", None, "[::1]"),
        ("localhost", None, "localhost"),
    ],
)
def test_the_private_domain_uses_the_lists_private_part(host, private, registered):
    assert private_domain(host) == private
    assert registered_domain(host) == registered
