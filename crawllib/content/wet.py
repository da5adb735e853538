"""WET records: extracted text as WARC/1.0 ``conversion`` records, as Common Crawl's WET files
hold it. Pure Python: no Spark (the text export feeds it documents).

A WET file opens with a ``warcinfo`` record; then per document one ``conversion`` record:
WARC-Target-URI, WARC-Date (the fetch time), WARC-Record-ID, WARC-Refers-To (the WARC record
the text was converted from, when known), WARC-Identified-Content-Language (when known),
WARC-Block-Digest (SHA-1), Content-Type ``text/plain`` and Content-Length; the block is the
text in UTF-8. Every record is its own gzip member, as in the WARC export
(:mod:`crawllib.content.warc`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from crawllib.content import warc

VERSION = "1.0"  # Common Crawl's WET files are WARC/1.0


@dataclass(frozen=True)
class Document:
    """One exported text: its URL, fetch time (timezone-aware), text, and when known its
    language (an ISO 639 code) and the record id of the WARC response it came from."""

    url: str
    fetched_at: dt.datetime
    text: str
    language: str | None = None
    refers_to: str | None = None


def warcinfo(filename: str, when: dt.datetime, info: Mapping[str, object]) -> bytes:
    """The ``warcinfo`` record a WET file opens with."""
    return warc.warcinfo_record(filename, warc.new_record_id(), when, info, VERSION)


def conversion(doc: Document) -> bytes:
    """The ``conversion`` record of one document (a gzip member)."""
    headers: list[tuple[str, object]] = [
        ("WARC-Target-URI", doc.url),
        ("WARC-Date", warc.warc_date(doc.fetched_at.replace(microsecond=0))),
        ("WARC-Record-ID", warc.new_record_id()),
    ]
    if doc.refers_to:
        headers.append(("WARC-Refers-To", doc.refers_to))
    if doc.language:
        headers.append(("WARC-Identified-Content-Language", doc.language))
    block = doc.text.encode("utf-8", errors="replace")
    return warc.record("conversion", "text/plain", headers, block, VERSION)
