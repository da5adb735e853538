"""`crawl` in a pipe whose reader stops early (`| head -1`): it ends quietly, with no
traceback: status 0 for a command that only reads (it printed what was taken), and as a process
killed by SIGPIPE does (status 141) for one that writes the crawl root (its work may be
unfinished)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from crawllib.cli import BROKEN_PIPE

REPO = Path(__file__).resolve().parents[2]


def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path: Path) -> None:
    root = tmp_path / "crawl"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    crawl = [sys.executable, "-c", "import sys; from crawllib.cli import main; sys.exit(main())"]
    made = subprocess.run(
        [*crawl, "init", str(root)], capture_output=True, text=True, timeout=120, env=env
    )
    assert made.returncode == 0, made.stderr
    # far more rows than a pipe buffers: the writer meets the closed pipe mid-output
    query = "SELECT range AS id, repeat('x', 100) AS pad FROM range(200000)"
    proc = subprocess.Popen(
        [*crawl, "sql", str(root), query, "--format", "csv"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # what `head -1` does after its line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0
    assert first.startswith(b"id")
    assert "Traceback" not in err and "BrokenPipeError" not in err, err

    # a command that writes, its stdout a pipe nobody reads any more
    read, write = os.pipe()
    os.close(read)
    try:
        gen = subprocess.run(
            [*crawl, "generation", str(root), "--if-work", "--engine", "embedded"],
            stdout=write,
            stderr=subprocess.PIPE,
            env=env,
            timeout=120,
        )
    finally:
        os.close(write)
    assert gen.returncode == BROKEN_PIPE == 141, gen.stderr
    assert b"Traceback" not in gen.stderr and b"BrokenPipeError" not in gen.stderr
