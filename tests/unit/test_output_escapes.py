"""Rows from crawled pages printed for people and programs: a title's terminal escapes (ESC,
BEL, the C1 CSI) reach the terminal as visible text, never as commands; JSON keeps the value
exact."""

from __future__ import annotations

import csv
import io
import json

import pytest

from crawllib.core import output

HOSTILE = "Hi \x1b]0;PWNED\x07\x1b[2J end\x9b"
ROW = (HOSTILE, "line\nnext\ttab")


def printed(fmt: str) -> str:
    buffer = io.StringIO()
    output.WRITERS[fmt](["title", "text"], [ROW], buffer)
    return buffer.getvalue()


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_no_control_character_reaches_the_terminal(fmt: str) -> None:
    text = printed(fmt)
    controls = {c for c in text if ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F} - {"\n", "\r", "\t"}
    assert not controls, (fmt, text)
    if fmt != "json":
        assert "\\x1b]0;PWNED\\x07\\x1b[2J end\\x9b" in text


def test_the_table_puts_line_ends_and_tabs_on_one_line() -> None:
    body = printed("table").splitlines()[3]
    assert "line next tab" in body


def test_csv_keeps_line_ends_quoted_and_json_keeps_the_value_exact() -> None:
    rows = list(csv.reader(io.StringIO(printed("csv"))))
    assert rows[1][1] == "line\nnext\ttab"
    assert json.loads(printed("json")) == {"title": HOSTILE, "text": "line\nnext\ttab"}


def test_json_times_carry_their_offset_the_table_and_csv_print_them_as_stored() -> None:
    import datetime as dt

    naive = dt.datetime(2026, 12, 6, 21, 5, 3, 250000)  # the tables' UTC, without a zone
    aware = dt.datetime(2026, 12, 6, 22, 5, 3, 250000, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    for value in (naive, aware):
        buffer = io.StringIO()
        output.WRITERS["json"](["at", "day"], [(value, dt.date(2026, 12, 6))], buffer)
        got = json.loads(buffer.getvalue())
        assert got == {"at": "2026-12-06T21:05:03.250000+00:00", "day": "2026-12-06"}
        assert dt.datetime.fromisoformat(got["at"]) == naive.replace(tzinfo=dt.UTC)
        buffer = io.StringIO()
        output.WRITERS["csv"](["at"], [(value,)], buffer)
        assert buffer.getvalue().splitlines()[1] == "2026-12-06T21:05:03.250000"
