"""`crawl sql` prints no value past sql.max_value_chars: a text or binary value is cut there,
a list after that many items, at any depth, and the cut says how much went (the writers'
rows: crawllib.core.output.capped_values; on the DuckDB engine in every format)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from crawllib import cli
from crawllib.core.output import capped_values


def test_long_texts_bytes_and_lists_are_cut_with_what_was_cut_said():
    rows = [("a" * 25, b"b" * 12, [1, 2, 3, 4, 5], {"k": "c" * 11, "n": 7}, 1234567, None)]
    assert list(capped_values(rows, 10)) == [
        (
            "a" * 10 + "…[15 more chars: sql.max_value_chars]",
            b"b" * 10 + "…[2 more bytes: sql.max_value_chars]".encode(),
            [1, 2, 3, 4, 5],
            {"k": "c" * 10 + "…[1 more chars: sql.max_value_chars]", "n": 7},
            1234567,
            None,
        )
    ]
    nested = [([["x" * 3] * 4, "short"],)]
    assert list(capped_values(nested, 3)) == [
        (
            [
                ["xxx", "xxx", "xxx", "…[1 more items: sql.max_value_chars]"],
                "sho…[2 more chars: sql.max_value_chars]",
            ],
        )
    ]


def test_values_within_the_cap_are_the_same_values():
    rows = [("a" * 10, b"b" * 10, list(range(10)))]
    assert list(capped_values(rows, 10)) == rows


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("sqlcaps") / "crawl")
    assert cli.main(["init", path, "--engine", "embedded"]) == 0
    return path


QUERY = "SELECT repeat('a', 250000) AS big, 'small' AS small, range(5) AS items"


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_crawl_sql_cuts_a_long_value_in_every_format(root, capsys, fmt):
    capsys.readouterr()
    argv = ["sql", root, QUERY, "--engine", "duckdb", "--format", fmt]
    rc = cli.main([*argv, "--set", "sql.max_value_chars=1000", "--set", "sql.max_seconds=60"])
    assert rc == 0
    out = capsys.readouterr().out
    if fmt == "json":
        row = json.loads(out)
        assert row == {
            "big": "a" * 1000 + "…[249,000 more chars: sql.max_value_chars]",
            "small": "small",
            "items": [0, 1, 2, 3, 4],
        }
    elif fmt == "csv":
        assert list(csv.reader(io.StringIO(out)))[1] == [
            "a" * 1000 + "…[249,000 more chars: sql.max_value_chars]",
            "small",
            "[0, 1, 2, 3, 4]",
        ]
    else:  # the table cuts cells at 60 characters anyway
        assert len(out) < 1000 and "small" in out
    capsys.readouterr()
    assert cli.main([*argv, "--set", "sql.max_seconds=60"]) == 0  # the default: 100,000
    assert ("a" * 100_000 + "…[150,000 more chars" in capsys.readouterr().out) == (fmt != "table")
