"""Progress of long stages on the driver: a bar on a terminal, plain lines otherwise.

Stages call :func:`report` after each unit of work (a fetch slice, a stage); the CLI decides
how it is shown. Without a terminal (logs, Airflow, CI) every report is one log line.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

log = logging.getLogger(__name__)
_bar_stream: TextIO | None = None


def use_terminal_bar(stream: TextIO | None = None) -> None:
    """Draw reports as a progress bar on stream (default: the current sys.stderr) when it is a
    terminal."""
    global _bar_stream
    stream = stream or sys.stderr
    _bar_stream = stream if stream.isatty() else None


def render(stage: str, done: int, total: int, figures: dict[str, float], width: int = 30) -> str:
    share = done / total if total else 1.0
    filled = int(round(share * width))
    text = " ".join(f"{k}={v:g}" for k, v in figures.items())
    return f"{stage:<12} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {text}"


def report(stage: str, done: int, total: int, **figures: float) -> None:
    """One step of a stage: done of total units, with figures such as pages_per_s or errors."""
    line = render(stage, done, total, figures)
    if _bar_stream is None:
        log.info("%s", line)
        return
    _bar_stream.write("\r" + line)
    if done >= total:
        _bar_stream.write("\n")
    _bar_stream.flush()
