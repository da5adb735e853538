"""Progress of long stages on the driver: a bar on a terminal, plain lines otherwise.

Stages call :func:`report` after each unit of work (a fetch slice, a stage); the CLI decides
how it is shown. On a terminal (:func:`use_terminal_bar`) each stage gets a tqdm bar with its
rate and the time left; log lines are written above the bars (:func:`write`). Without a
terminal (logs, Airflow, CI) every report is one log line, whose figures a JSON log keeps as
fields (``extra={"progress": ...}``).
"""

from __future__ import annotations

import io
import logging
import os
import sys
import time
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from tqdm import tqdm

log = logging.getLogger(__name__)
_bar_stream: TextIO | None = None
_bars: dict[str, tqdm] = {}
# When the last report (or the command) came: a new bar's stage started about then, as the
# stages of a generation run one after another and report as each step ends.
_last_report = time.time()


# What a stage's steps count, by the first word of its name in reports.
UNITS = {"fetch": "URLs", "gen": "stages"}


def _width(stream: TextIO) -> int | None:
    """None when the terminal tells its width (the bar follows it), else 100 columns."""
    try:
        if os.get_terminal_size(stream.fileno()).columns > 0:
            return None
    except (OSError, ValueError, io.UnsupportedOperation):
        pass
    return 100


def use_terminal_bar(stream: TextIO | None = None) -> None:
    """Draw reports as progress bars on stream (default: the current sys.stderr) when it is a
    terminal; plain log lines otherwise."""
    global _bar_stream, _last_report
    close()
    stream = stream or sys.stderr
    _bar_stream = stream if stream.isatty() else None
    _last_report = time.time()


def bars_shown() -> bool:
    """Whether reports are drawn as bars (on a terminal)."""
    return _bar_stream is not None


def use_plain_lines() -> None:
    """Report as log lines, whatever stderr is (``crawl -q``, JSON logs)."""
    global _bar_stream
    close()
    _bar_stream = None


def render(stage: str, done: int, total: int, figures: dict[str, float], width: int = 30) -> str:
    share = done / total if total else 1.0
    filled = int(round(share * width))
    text = " ".join(f"{k}={v:g}" for k, v in figures.items())
    return f"{stage:<12} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {text}"


def report(stage: str, done: int, total: int, **figures: float) -> None:
    """One step of a stage: done of total units, with figures such as pages_per_s or errors."""
    global _last_report
    now = time.time()
    if _bar_stream is None:
        fields = {"stage": stage, "done": done, "total": total, **figures}
        log.info("%s", render(stage, done, total, figures), extra={"progress": fields})
        _last_report = now
        return
    bar = _bars.get(stage)
    if bar is None or bar.total != total:
        if bar is not None:
            bar.close()
        # smoothing 0: the rate is done / elapsed since the stage started, so the time left
        # is right from the first step on
        from tqdm import tqdm  # here: `crawl status` and the other quick commands draw no bar

        width = _width(_bar_stream)
        bar = tqdm(
            total=total,
            desc=stage,
            unit=UNITS.get(stage.split()[0], "steps"),
            file=_bar_stream,
            smoothing=0,
            dynamic_ncols=width is None,
            ncols=width,
            leave=True,
        )
        bar.start_t = min(_last_report, now)
        _bars[stage] = bar
    bar.set_postfix({k: f"{v:g}" for k, v in figures.items()}, refresh=False)
    bar.update(done - bar.n)
    _last_report = now
    if done >= total:
        bar.close()
        del _bars[stage]


def write(text: str) -> None:
    """Write a line above the bars (they are redrawn below it), or to stderr without bars."""
    if _bar_stream is None:
        sys.stderr.write(text + "\n")
        return
    from tqdm import tqdm

    tqdm.write(text, file=_bar_stream)


def close() -> None:
    """End every open bar (a stage that failed midway leaves its bar open)."""
    for bar in _bars.values():
        bar.close()
    _bars.clear()
