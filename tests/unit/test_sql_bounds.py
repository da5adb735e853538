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
import time
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


def crawl_sql_process(root: str, query: str, *settings: str) -> tuple[int, str, float, float]:
    """`crawl sql` in a process of its own (its limits may end it): its exit status, stderr,
    peak resident memory in MiB and seconds taken."""
    started = time.monotonic()
    child = subprocess.Popen(
        [sys.executable, "-m", "crawllib.cli", "sql", root, query, "--engine", "duckdb"]
        + [arg for s in settings for arg in ("--set", s)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": REPO},
    )
    assert child.stderr is not None
    err = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode, err, usage.ru_maxrss / 1024, time.monotonic() - started


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
    assert peak_mib < 700 and seconds < 8


def test_one_slow_value_is_stopped_soon_after_the_time_limit(root):
    # an interrupt is seen between chunks of rows, not while one value is built: unwatched,
    # this query takes 10 s under a 1 s limit
    rc, err, peak_mib, seconds = crawl_sql_process(
        root, "SELECT length(lpad('a', 300000000, 'b'))", "sql.max_seconds=1"
    )
    assert rc == 2
    assert err == "crawl sql: the query ran longer than sql.max_seconds (1 s) and was stopped\n"
    assert seconds < 6
