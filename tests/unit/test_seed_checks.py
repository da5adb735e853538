"""A bad seed file is refused before any engine starts (issue 51: a missing seed file took
2 min 4 s to say so on Spark, a CSV without a `url` column 1 min 12 s). Run with `--engine
spark` and no java on PATH: the answer comes before a JVM could start."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from crawllib import cli
from tests.spark.test_status import without_java  # the one way the suite hides java

REPO = Path(__file__).resolve().parents[2]


def crawl(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "crawllib.cli", *argv],
        capture_output=True,
        text=True,
        env={**without_java(), "PYTHONPATH": str(REPO)},
        timeout=120,
    )


@pytest.fixture
def root(tmp_path) -> str:
    path = str(tmp_path / "crawl")
    assert cli.main(["init", path, "--engine", "embedded"]) == 0
    return path


def test_a_missing_seed_file_is_one_line_before_the_engine(root, tmp_path):
    missing = str(tmp_path / "nope.txt")
    for argv in (["run", root, "--seeds", missing], ["seed", root, missing]):
        done = crawl(*argv, "--engine", "spark")
        assert done.returncode == 2, done.stderr[-2000:]
        assert done.stderr == f"crawl {argv[0]}: seed file {missing} does not exist\n"


def test_a_seed_table_without_a_url_column_is_one_line_before_the_engine(root, tmp_path):
    csv = tmp_path / "seeds.csv"
    csv.write_text("link,label\nhttp://a.site3.net/,a\n")
    parquet = tmp_path / "seeds.parquet"
    pq.write_table(pa.table({"address": ["http://a.site3.net/"]}), parquet)
    for path, columns in ((csv, "link, label"), (parquet, "address")):
        done = crawl("seed", root, str(path), "--engine", "spark")
        assert done.returncode == 2, done.stderr[-2000:]
        assert done.stderr == (
            f"crawl seed: seed table {path} has no 'url' column (columns: {columns})\n"
        )


def test_a_byte_order_mark_does_not_spoil_the_first_seed(root, tmp_path, capsys):
    """Issue 49: a seed file saved with a UTF-8 byte-order mark (Windows editors) had its first
    URL counted invalid."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_bytes("\ufeffhttp://a.example.org/\nhttp://b.example.org/\n".encode())
    assert cli.main(["seed", root, str(seeds), "--engine", "embedded"]) == 0
    assert "2 read, 2 valid, 0 invalid, 2 new" in capsys.readouterr().out
