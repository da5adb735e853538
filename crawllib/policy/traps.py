"""The pure rules of URL-pattern traps (crawllib.stages.traps has their Spark twins and the tables).

URL-pattern traps: URLs that only a crawler would follow for ever.

Two rules, each with its reason ``trap_pattern`` in crawldb:

- **Repeated segments** (one URL): a path segment that occurs more than
  ``traps.max_segment_repeats`` times (``/a/b/a/b/a/b``: relative links resolved against the
  wrong base, include loops). Heritrix's PathologicalPathDecideRule and Nutch's default
  regex-urlfilter have the same rule.
- **Patterns of near-identical pages** (a host's history): a URL's *pattern* is its path with
  every run of digits written ``{n}`` and every long hexadecimal run ``{h}``, plus the sorted
  names of its query parameters (values dropped): ``/cal/2026/11`` and ``/cal/1999/2`` are
  ``/cal/{n}/{n}``, ``/shop?size=m&color=red`` is ``/shop?color&size``. Calendars, counters,
  faceted search and parameters with ever-new values give one pattern endless URLs whose
  pages say nearly the same thing; so parse counts, per host and pattern, the pages fetched
  and those marked duplicates (exact or near), in the ``traps`` table, and once a pattern has
  ``traps.min_pages`` pages of which ``traps.duplicate_share`` or more are duplicates, plan
  filters its new URLs. A pattern of real articles (``/news/{n}.html``) has distinct texts
  and is never trapped, however many URLs it has. An operator keeps a pattern crawled with
  ``traps.allow`` (``host pattern`` lines, as the table shows them).

Every rule here has a Spark twin in crawllib.stages.traps (built-ins, no UDF); a test keeps them
equal. This module imports neither pyspark nor the tables: the fetch engine's followers use it.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

HEX = r"[0-9a-fA-F]{12,}"  # ids, hashes: long runs of hexadecimal digits
DIGITS = r"[0-9]+"
_SEGMENT = re.compile(r"[^/]+")


def url_pattern(url: str) -> str:
    """The pattern of a normalised URL (module docstring): its path with ``{h}`` for each run
    of 12 or more hexadecimal digits, then ``{n}`` for each run of digits, and ``?`` plus its
    query's parameter names, sorted and each once, joined by ``&``."""
    parts = urlsplit(url)
    path = re.sub(DIGITS, "{n}", re.sub(HEX, "{h}", parts.path))
    if not parts.query:
        return path
    names = sorted({pair.split("=", 1)[0] for pair in parts.query.split("&")})
    return f"{path}?{'&'.join(names)}"


def repeated_segments(url: str) -> int:
    """How many times the most frequent segment of the URL's path occurs (0 for ``/``)."""
    segments = _SEGMENT.findall(urlsplit(url).path)
    return max((segments.count(s) for s in set(segments)), default=0)


def allowed_patterns(lines: tuple[str, ...]) -> list[tuple[str, str]]:
    """traps.allow lines (``host pattern``) as (host, pattern) pairs; raises ValueError for a
    line that is not two fields."""
    pairs = []
    for line in lines:
        fields = line.split()
        if len(fields) != 2:
            raise ValueError(f"{line!r}: expected 'host pattern', as the traps table shows them")
        pairs.append((fields[0].lower(), fields[1]))
    return pairs
