"""Progress reports: a bar on a terminal, one log line each otherwise."""

from __future__ import annotations

import io
import logging

from crawllib import progress


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_render_shows_done_total_and_figures():
    line = progress.render("fetch gen 1", 3, 4, {"pages_per_s": 12.5, "errors": 2}, width=8)
    assert line == "fetch gen 1  [######..] 3/4 pages_per_s=12.5 errors=2"


def test_plain_lines_when_not_a_terminal(caplog):
    progress.use_terminal_bar(io.StringIO())
    with caplog.at_level(logging.INFO, logger="crawllib.progress"):
        progress.report("parse gen 0", 1, 2, pages=10)
    assert "1/2 pages=10" in caplog.text


def test_bar_redraws_in_place_and_ends_the_line():
    out = FakeTty()
    progress.use_terminal_bar(out)
    try:
        progress.report("fetch gen 0", 1, 2, pages=5)
        progress.report("fetch gen 0", 2, 2, pages=9)
    finally:
        progress.use_terminal_bar(io.StringIO())
    text = out.getvalue()
    assert text.count("\r") == 2 and text.endswith("2/2 pages=9\n")


def test_default_streams_are_the_current_ones(monkeypatch):
    """The CLI's default streams are looked up per call: a replaced sys.stderr/sys.stdout
    (pytest's capture, a notebook) is used, not the one there when the module was imported."""
    from crawllib.output import write_table

    err, out = FakeTty(), io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    monkeypatch.setattr("sys.stdout", out)
    progress.use_terminal_bar()
    try:
        progress.report("fetch gen 0", 1, 1)
    finally:
        progress.use_terminal_bar(io.StringIO())
    assert err.getvalue().endswith("1/1 \n")
    assert write_table(["a"], [(1,)]) == 1 and "| 1 |" in out.getvalue()
