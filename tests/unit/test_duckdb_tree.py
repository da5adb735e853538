"""What a DuckDB query reads, from its syntax tree: the crawl's relations it names, refusals of
anything else, and the columns it may use (all of them whenever a column could go unnamed)."""

from __future__ import annotations

import pytest

from crawllib.core.errors import QueryRefused

duckdb = pytest.importorskip("duckdb")

from crawllib.sql.duckdb_tree import columns_used, relations_read, syntax_tree  # noqa: E402


@pytest.fixture(scope="module")
def con():
    return duckdb.connect()


def reads(con, query: str) -> tuple[set[str], bool]:
    return relations_read(con, syntax_tree(con, query))


def columns(con, query: str) -> frozenset[str] | None:
    names, _ = reads(con, query)
    return columns_used(con, syntax_tree(con, query), sorted(names))


def test_relations_views_and_ctes(con):
    assert reads(con, "SELECT url FROM texts t JOIN pages USING (url_key)") == (
        {"texts", "pages"},
        False,
    )
    assert reads(con, "SELECT * FROM text_history")[0] == {"text_history", "texts", "pages"}
    assert reads(con, "WITH s AS (SELECT url FROM frontier) SELECT * FROM s")[0] == {"frontier"}
    assert reads(con, "SHOW TABLES") == (set(), True)
    assert reads(con, "DESCRIBE crawldb") == ({"crawldb"}, False)


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("SELECT * FROM '/etc/passwd'", "/etc/passwd is not a table of this crawl"),
        ("SELECT * FROM main.texts", "main.texts is not a table"),
        ("SELECT * FROM texts AT (VERSION => 1)", "time travel runs with --engine spark"),
        ("SELECT * FROM crawldb WHERE url IN (SELECT url FROM secrets)", "secrets is not a"),
    ],
)
def test_other_relations_are_refused(con, query, says):
    with pytest.raises(QueryRefused, match=says):
        reads(con, query)


def test_the_columns_a_query_names(con):
    used = columns(con, "SELECT host, count_if(outcome = 'ok') AS n FROM fetches GROUP BY host")
    assert used is not None and {"host", "outcome"} <= used and "body_bytes" not in used
    used = columns(con, "SELECT a.url FROM texts a JOIN links b ON a.url_key = b.src_key")
    assert used is not None and {"url", "url_key", "src_key"} <= used and "text" not in used
    # a view's own * passes through what the query reads of it, plus what the view needs
    used = columns(con, "SELECT url FROM latest_texts")
    assert used is not None and {"url", "url_key", "gen", "slice"} <= used
    assert "text" not in used


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM texts",
        "SELECT t.* FROM texts t",
        "SELECT COLUMNS('.*_key') FROM texts",
        "SELECT t FROM texts t",
        "SELECT to_json(texts) FROM texts",
        "SELECT count(*) FROM texts NATURAL JOIN pages",
        "DESCRIBE texts",
        "SUMMARIZE texts",
        "FROM texts",
    ],
)
def test_every_column_when_one_could_go_unnamed(con, query):
    assert columns(con, query) is None
