"""`crawl sql`'s table format holds what it prints (to size its columns), so without --limit it
reads at most sql.table_rows rows and says there are more; csv and json stream every row;
--limit takes a number of rows >= 0. On the DuckDB engine, no JVM (the Spark engine's:
tests/spark/test_sql_readonly.py). One value that DuckDB's limits miss (built outside its
memory limit, between its interruptions) ends the process, in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crawllib import cli

REPO = str(Path(__file__).resolve().parents[2])

HUGE = "SELECT range AS id, 'x' AS pad FROM range(1000000000000)"


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("sqlbounds") / "crawl")
    assert cli.main(["init", path, "--engine", "embedded"]) == 0
    return path


def sql(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = cli.main(["sql", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_the_table_of_a_query_without_end_prints_its_first_rows_and_says_there_are_more(
    root, capsys
):
    rc, out, err = sql(
        capsys, root, HUGE, "--set", "sql.table_rows=5", "--set", "sql.max_seconds=60"
    )
    assert rc == 0, err
    lines = out.splitlines()
    assert [line.split("|")[1].strip() for line in lines[3:8]] == ["0", "1", "2", "3", "4"]
    assert "(5 rows)" in out
    assert lines[-1].startswith("(the first 5 rows: sql.table_rows; more with --limit N")


def test_a_query_within_the_cap_says_nothing_more(root, capsys):
    rc, out, _ = sql(capsys, root, "SELECT range AS id FROM range(5)", "--set", "sql.table_rows=5")
    assert rc == 0 and "(5 rows)" in out and "the first" not in out


def test_limit_and_the_streaming_formats_pass_the_cap(root, capsys):
    rc, out, _ = sql(capsys, root, HUGE, "--limit", "12", "--set", "sql.table_rows=5")
    assert rc == 0 and "(12 rows)" in out and "the first" not in out
    rc, out, _ = sql(
        capsys, root, HUGE, "--limit", "12", "--format", "json", "--set", "sql.table_rows=5"
    )
    assert rc == 0 and [json.loads(line)["id"] for line in out.splitlines()] == list(range(12))


@pytest.mark.parametrize("bad", ["-1", "ten"])
def test_a_limit_that_is_no_number_of_rows_is_refused(root, capsys, bad):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["sql", root, "SELECT 1", "--limit", bad])
    assert exit_.value.code == 2
    assert "expected a number of rows >= 0" in capsys.readouterr().err


# Runs a command and prints its exit status, peak resident memory (KiB) and seconds. A process
# inherits its parent's peak (Linux carries the memory high-water mark across fork and exec),
# so the command is started from this small process, not from pytest's.
MEASURE = """
import os, subprocess, sys, time
started = time.monotonic()
child = subprocess.Popen(sys.argv[1:])
_, status, usage = os.wait4(child.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss, time.monotonic() - started)
"""


def crawl_sql_process(root: str, query: str, *settings: str) -> tuple[int, str, float, float]:
    """`crawl sql` in a process of its own (its limits may end it): its exit status, stderr,
    peak resident memory in MiB and seconds taken."""
    command = [sys.executable, "-m", "crawllib.cli", "sql", root, query, "--engine", "duckdb"]
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, *command, *(a for s in settings for a in ("--set", s))],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": REPO},
        check=True,
    )
    rc, peak_kib, seconds = done.stdout.split()
    return int(rc), done.stderr, int(peak_kib) / 1024, float(seconds)


def test_one_huge_value_is_stopped_past_the_memory_limit(root):
    # DuckDB's memory limit covers its buffer manager, not one value: unwatched, this query
    # takes 11 s and 2 GB and exits 0
    rc, err, peak_mib, seconds = crawl_sql_process(
        root, "SELECT length(repeat('a', 1000000000))", "sql.max_memory=100MB"
    )
    assert rc == 2
    assert err == (
        "crawl sql: the query needed more memory than sql.max_memory (100MB) allows (one value "
        "or the rows outside DuckDB's memory limit: the process grew past 256 MiB) and was "
        "stopped\n"
    )
    assert peak_mib < 700 and seconds < 30  # a shared CPU slows the growth, not the stop


def test_one_slow_value_is_stopped_soon_after_the_time_limit(root):
    # an interrupt is seen between chunks of rows, not while one value is built: unwatched,
    # this query takes 20 s under a 1 s limit
    rc, err, peak_mib, seconds = crawl_sql_process(
        root, "SELECT length(lpad('a', 600000000, 'b'))", "sql.max_seconds=1"
    )
    assert rc == 2
    assert err == "crawl sql: the query ran longer than sql.max_seconds (1 s) and was stopped\n"
    assert seconds < 10 and peak_mib < 1000
