"""`crawl sql --engine spark` reads, never writes: statements that write, read files by path or
call into the JVM are refused with one line and exit 2, and the tables are unchanged. (The
DuckDB engine's refusals: tests/spark/test_sql_engines.py.)"""

from __future__ import annotations

import pytest

from crawllib import cli, integrity
from crawllib.seeding import seed

SPARK = ["--engine", "spark"]


@pytest.fixture(scope="module")
def root(spark, spark_cfg, template_root, tmp_path_factory):
    import shutil

    path = str(tmp_path_factory.mktemp("sql") / "crawl")
    shutil.copytree(template_root, path)
    seeds = tmp_path_factory.mktemp("seeds") / "seeds.txt"
    seeds.write_text("http://a.site1.net/\nhttp://b.site2.org/x\n")
    seed(spark, path, str(seeds), spark_cfg, 0)
    return path


def state(spark, root):
    """Every table's Delta version: any change of a table is a new version."""
    return integrity.current_versions(spark, root)


@pytest.mark.parametrize(
    ("statement", "says"),
    [
        ("DELETE FROM crawldb", "refused: DeleteFromTable"),
        ("UPDATE crawldb SET status = 'gone'", "refused: UpdateTable"),
        ("INSERT INTO frontier SELECT * FROM frontier", "refused: InsertIntoStatement"),
        (
            "MERGE INTO crawldb t USING crawldb s ON t.url_key = s.url_key "
            "WHEN MATCHED THEN DELETE",
            "refused: MergeIntoTable",
        ),
        ("DROP TABLE crawldb", "refused: DropTable"),
        ("CREATE TABLE x AS SELECT * FROM crawldb", "refused: CreateTableAsSelect"),
        ("ALTER TABLE crawldb ADD COLUMNS (x int)", "refused: AddColumns"),
        ("TRUNCATE TABLE crawldb", "refused: TruncateTable"),
        ("SET spark.sql.shuffle.partitions = 1", "refused: SetCommand"),
        ("CACHE TABLE crawldb", "refused: CacheTable"),
        ("EXECUTE IMMEDIATE 'DELETE FROM crawldb'", "refused: ExecuteImmediateQuery"),
        ("EXPLAIN DELETE FROM crawldb", "refused: DeleteFromTable"),
        ("SELECT * FROM text.`/etc/hostname`", "text./etc/hostname is not a table of this crawl"),
        ("SELECT * FROM csv.`/etc/passwd`", "is not a table of this crawl"),
        ("SELECT * FROM delta.`/tmp/elsewhere/crawldb`", "is not a table of this crawl"),
        (
            "SELECT url FROM crawldb WHERE url IN (SELECT value FROM text.`/etc/hostname`)",
            "is not a table of this crawl",
        ),
        ("WITH x AS (SELECT * FROM json.`/etc`) SELECT * FROM x", "is not a table of this crawl"),
        ("SELECT reflect('java.lang.System', 'exit', 0)", "function reflect() is not allowed"),
        ("SELECT java_method('java.lang.System', 'exit', 0)", "java_method() is not allowed"),
        ("SELECT 1; DELETE FROM crawldb", "cannot parse the query"),
    ],
)
def test_statements_that_write_or_read_outside_the_crawl_are_refused(
    spark, root, capsys, statement, says
):
    before = state(spark, root)
    assert cli.main(["sql", root, statement, *SPARK]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("crawl sql: ") and "\n" not in err, err
    assert says in err
    assert captured.out == ""
    assert state(spark, root) == before


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT status, count(*) AS n FROM crawldb GROUP BY status",
        "WITH s AS (SELECT url FROM frontier) SELECT count(*) FROM s",
        "SELECT url FROM crawldb WHERE url_key IN (SELECT url_key FROM frontier) ORDER BY url",
        "SHOW TABLES",
        "DESCRIBE crawldb",
        "EXPLAIN SELECT * FROM texts",
        "SELECT count(*) FROM delta.`{root}/crawldb` VERSION AS OF 0",
        "DESCRIBE HISTORY delta.`{root}/crawldb`",
        "SELECT * FROM range(3)",
        "VALUES (1, 'a')",
    ],
)
def test_queries_run(spark, root, capsys, statement):
    before = state(spark, root)
    assert cli.main(["sql", root, statement.format(root=root), "--format", "json", *SPARK]) == 0
    assert capsys.readouterr().out.strip()
    assert state(spark, root) == before


def test_a_query_spark_cannot_analyse_is_one_line_too(root, capsys):
    assert cli.main(["sql", root, "SELECT no_such_column FROM crawldb", *SPARK]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("crawl sql: ") and "no_such_column" in err and "\n" not in err
