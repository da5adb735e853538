"""Printing rows for people (aligned table) and programs (JSON lines, CSV). No Spark here."""

from __future__ import annotations

import csv
import datetime as dt
import json
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, TextIO


def _plain(value: Any, zoned: bool = False) -> Any:
    """A value as the outputs print it. Times are UTC (the tables hold them so, without a
    zone): the table and CSV print them bare, JSON (``zoned``) with their offset, +00:00."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return (value.replace(tzinfo=dt.UTC) if zoned else value).isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, dict):
        return {str(k): _plain(v, zoned) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v, zoned) for v in value]
    return value


# Control characters a crawled page can carry into a title or an anchor (ESC, BEL, CSI...): a
# terminal would obey them (retitle the window, clear the screen), so the outputs show them
# escaped, ``\x1b``. Tabs and line ends are CSV's to quote; the table makes them spaces.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_C1 = re.compile(r"[\x7f-\x9f]")  # what json.dumps(ensure_ascii=False) leaves raw


def _escaped(text: str) -> str:
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _cell(value: Any, width: int = 60) -> str:
    value = _plain(value)
    text = (
        "NULL"
        if value is None
        else json.dumps(value)
        if isinstance(value, dict | list)
        else str(value)
    )
    text = _escaped(text) if width == CSV_WIDTH else _escaped(_SPACED.sub(" ", text))
    return text if len(text) <= width else text[: width - 1] + "…"


CSV_WIDTH = 1 << 30  # a CSV cell is never cut
_SPACED = re.compile(r"[\t\n\r]")


def capped_values(rows: Iterable[Sequence[Any]], max_chars: int) -> Iterator[tuple[Any, ...]]:
    """``rows`` with every text or binary value longer than ``max_chars`` (characters, bytes)
    cut there, and every list (an array) longer than that many items, at any depth (inside
    structs, maps and arrays); what was cut is said at the end: ``…[1,900,000 more chars:
    sql.max_value_chars]`` (a final item of a list)."""
    for row in rows:
        yield tuple(_capped(v, max_chars) for v in row)


def _capped(value: Any, max_chars: int) -> Any:
    if isinstance(value, str | bytes | bytearray):
        if len(value) <= max_chars:
            return value
        unit = "chars" if isinstance(value, str) else "bytes"
        marker = f"…[{len(value) - max_chars:,} more {unit}: sql.max_value_chars]"
        if isinstance(value, str):
            return value[:max_chars] + marker
        return bytes(value[:max_chars]) + marker.encode()
    if isinstance(value, dict):
        return {k: _capped(v, max_chars) for k, v in value.items()}
    if isinstance(value, list | tuple):
        items = [_capped(v, max_chars) for v in value[:max_chars]]
        if len(value) > max_chars:
            items.append(f"…[{len(value) - max_chars:,} more items: sql.max_value_chars]")
        return items if isinstance(value, list) else tuple(items)
    return value


def write_table(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], out: TextIO | None = None
) -> int:
    out = out or sys.stdout  # looked up per call: sys.stdout may have been replaced
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out.write(line + "\n")
    out.write("| " + " | ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)) + " |\n")
    out.write(line + "\n")
    for r in cells:
        out.write("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |\n")
    out.write(line + "\n")
    out.write(f"({len(cells)} row{'s' if len(cells) != 1 else ''})\n")
    return len(cells)


def write_json(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], out: TextIO | None = None
) -> int:
    out = out or sys.stdout  # looked up per call: sys.stdout may have been replaced
    n = 0
    for row in rows:
        line = json.dumps(
            {c: _plain(v, zoned=True) for c, v in zip(columns, row, strict=True)},
            ensure_ascii=False,
        )
        out.write(_C1.sub(lambda m: f"\\u{ord(m.group()):04x}", line) + "\n")
        n += 1
    return n


def write_csv(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], out: TextIO | None = None
) -> int:
    out = out or sys.stdout  # looked up per call: sys.stdout may have been replaced
    writer = csv.writer(out)
    writer.writerow(columns)
    n = 0
    for row in rows:
        writer.writerow([_cell(v, width=CSV_WIDTH) if v is not None else "" for v in row])
        n += 1
    return n


def counts_line(counts: Mapping[str, int | float]) -> str:
    """A stage's counts as one line naming the non-zero ones, in their order:
    ``planned 39, hosts 12, slices 2``; ``nothing`` when every count is 0."""
    return (
        ", ".join(
            f"{k} {round(v, 1) if isinstance(v, float) else v}" for k, v in counts.items() if v
        )
        or "nothing"
    )


WRITERS = {"table": write_table, "json": write_json, "csv": write_csv}


def plural(n: int, noun: str) -> str:
    """``n`` and ``noun``, in the plural unless n is 1: "1 slice", "3 slices"."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"
