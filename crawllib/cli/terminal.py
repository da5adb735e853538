"""What `crawl` prints on stderr: the crawler's own log lines, progress bars on a terminal, and
Spark's and Ivy's output only when asked for.

- default: crawllib's INFO lines (``12:44:43 plan gen 0: candidates 3, planned 3``) and its
  warnings; other libraries' warnings; on a terminal, a progress bar per stage
  (crawllib.core.progress), with log lines written above the bars.
- ``-q``: warnings and errors only, no bars.
- ``-v``: DEBUG, with each line's logger, and the output of the JVMs crawl starts (Spark's log,
  Ivy's resolution report: the logger ``crawllib.jvm``, crawllib.store.session).
- ``--log-format json``: one JSON object a line (``time``, ``level``, ``logger``,
  ``message``; a progress report's figures under ``progress``), no bars: for log collectors.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import TextIO

from crawllib.core import progress

LOG_FORMATS = ("text", "json")
# Libraries whose INFO lines are not the crawler's: only their warnings are shown (-v: DEBUG
# of crawllib only; py4j's DEBUG is a line per JVM call).
QUIETED = ("py4j", "pyspark", "asyncio", "botocore", "boto3", "urllib3", "s3transfer")


class JsonFormatter(logging.Formatter):
    """One JSON object a record: time (UTC, ISO 8601), level, logger, message, and the
    figures of a progress report (``progress``) or the exception, when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        figures = getattr(record, "progress", None)
        if figures is not None:
            line["progress"] = figures
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """``HH:MM:SS message``; the level before the message from WARNING up; with ``verbose``
    every line's level and logger."""

    def __init__(self, verbose: bool) -> None:
        super().__init__(datefmt="%H:%M:%S")
        self.verbose = verbose

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        when = self.formatTime(record, self.datefmt)
        if self.verbose:
            text = f"{when} {record.levelname} {record.name}: {record.message}"
        elif record.levelno >= logging.WARNING:
            text = f"{when} {record.levelname} {record.message}"
        else:
            text = f"{when} {record.message}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


class BarsHandler(logging.StreamHandler):
    """Writes through crawllib.core.progress, so that log lines go above the progress bars."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            progress.write(self.format(record))
        except Exception:
            self.handleError(record)


_installed: logging.Handler | None = None  # the handler configure() added last


class StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record comes (a redirect, or a test's
    capture made after the handler), never to a stream closed since."""

    @property
    def stream(self) -> TextIO:
        import sys

        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass


def configure(
    verbosity: int, log_format: str = "text", stream: TextIO | None = None
) -> logging.Handler:
    """Set up logging for one `crawl` command: ``verbosity`` -1 (``-q``), 0 or 1 (``-v``);
    bars on ``stream`` (default stderr) when it is a terminal, the format text and not ``-q``.
    Returns the handler installed on the root logger (replacing the one an earlier call
    installed; handlers others added, a test's log capture, are kept)."""
    import sys

    given = stream
    stream = stream or sys.stderr
    bars = log_format == "text" and verbosity >= 0 and stream.isatty()
    if bars:
        progress.use_terminal_bar(stream)
    else:
        progress.use_plain_lines()
    handler: logging.Handler
    if bars:
        handler = BarsHandler(stream)
    else:
        handler = logging.StreamHandler(given) if given is not None else StderrHandler()
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else TextFormatter(verbose=verbosity > 0)
    )
    root = logging.getLogger()
    global _installed
    if _installed is not None:  # an earlier command's, in this process (others are kept)
        root.removeHandler(_installed)
    root.addHandler(handler)
    _installed = handler
    level = logging.WARNING if verbosity < 0 else logging.DEBUG if verbosity > 0 else logging.INFO
    root.setLevel(logging.WARNING if verbosity <= 0 else logging.INFO)
    logging.getLogger("crawllib").setLevel(level)
    for name in QUIETED:
        logging.getLogger(name).setLevel(logging.WARNING)
    # PySpark logs a failed query's context as an error; the command reports it in one line.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    return handler
