"""Progress reports: a bar on a terminal, one log line each otherwise."""

from __future__ import annotations

import io
import logging

from crawllib.core import progress


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_render_shows_done_total_and_figures():
    line = progress.render("fetch gen 1", 3, 4, {"pages_per_s": 12.5, "errors": 2}, width=8)
    assert line == "fetch gen 1  [######..] 3/4 pages_per_s=12.5 errors=2"


def test_plain_lines_when_not_a_terminal(caplog):
    progress.use_terminal_bar(io.StringIO())
    with caplog.at_level(logging.INFO, logger="crawllib.core.progress"):
        progress.report("parse gen 0", 1, 2, pages=10)
    assert "1/2 pages=10" in caplog.text


def test_a_bar_per_stage_with_rate_time_left_and_figures():
    out = FakeTty()
    progress.use_terminal_bar(out)
    try:
        progress.report("fetch gen 0", 1, 2, pages=5)
        progress.write("a log line")  # above the bar, which is drawn again below it
        progress.report("fetch gen 0", 2, 2, pages=9)
    finally:
        progress.use_terminal_bar(io.StringIO())
    text = out.getvalue()
    last = text.rsplit("\r", 1)[-1]
    assert last.startswith("fetch gen 0: 100%") and last.endswith("\n")
    assert "2/2 [" in last and "URLs/s" in last and "pages=9" in last  # done/total, rate
    assert "1/2 [" in text and "<" in text  # elapsed<left: the time left after step 1
    assert "a log line\n" in text


def test_a_stage_that_started_before_its_first_report_counts_from_then(monkeypatch):
    """A bar starts when the step before it in the command reported (the stages run one
    after another), so the rate after a first slice is the slice's, not infinite."""
    out = FakeTty()
    clock = [1000.0]
    monkeypatch.setattr(progress.time, "time", lambda: clock[0])
    progress.use_terminal_bar(out)
    try:
        clock[0] = 1010.0  # the fetch's first slice of 10 URLs took 10 s
        progress.report("fetch gen 0", 10, 20)
        (bar,) = progress._bars.values()
        assert bar.start_t == 1000.0
    finally:
        progress.use_terminal_bar(io.StringIO())


def test_default_streams_are_the_current_ones(monkeypatch):
    """The CLI's default streams are looked up per call: a replaced sys.stderr/sys.stdout
    (pytest's capture, a notebook) is used, not the one there when the module was imported."""
    from crawllib.core.output import write_table

    err, out = FakeTty(), io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    monkeypatch.setattr("sys.stdout", out)
    progress.use_terminal_bar()
    try:
        progress.report("fetch gen 0", 1, 1)
    finally:
        progress.use_terminal_bar(io.StringIO())
    assert "1/1 [" in err.getvalue() and err.getvalue().endswith("\n")
    assert write_table(["a"], [(1,)]) == 1 and "| 1 |" in out.getvalue()
