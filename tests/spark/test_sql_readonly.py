"""`crawl sql --engine spark` reads, never writes: statements that write, read files by path or
call into the JVM are refused with one line and exit 2, and the tables are unchanged; a query
that fails while it runs is one line and exit 2 too, never a stack trace. The functions a query
may call are an allow-list, checked on the analysed plan. (The DuckDB engine's refusals:
tests/spark/test_sql_engines.py.)"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from crawllib import cli
from crawllib.config import config_toml, make_config
from crawllib.sql.guard import ALLOWED_FUNCTIONS
from crawllib.stages.seeding import seed
from crawllib.store import integrity, lease
from crawllib.store.spark_db import SparkDb

SPARK = ["--engine", "spark"]


@pytest.fixture(scope="module")
def root(spark, spark_cfg, template_root, tmp_path_factory):
    import shutil

    path = str(tmp_path_factory.mktemp("sql") / "crawl")
    shutil.copytree(template_root, path)
    seeds = tmp_path_factory.mktemp("seeds") / "seeds.txt"
    seeds.write_text("http://a.site1.net/\nhttp://b.site2.org/x\n")
    with lease.hold(path, "pytest", spark_cfg):
        seed(SparkDb(spark, path, spark_cfg), str(seeds), spark_cfg, 0)
    return path


@pytest.fixture(scope="module")
def secret(spark):
    """A relation of the session that is not the crawl's: what a catalog table of another
    database, or another temp view, would be."""
    spark.createDataFrame([("s3cret",)], "value string").createOrReplaceTempView("secret")
    yield "s3cret"
    spark.catalog.dropTempView("secret")


def state(spark, root):
    """Every table's Delta version: any change of a table is a new version."""
    return integrity.current_versions(SparkDb(spark, root, make_config()))


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
        # issue 37: a function named through IDENTIFIER() is resolved after a name check
        (
            "SELECT IDENTIFIER('reflect')('java.lang.System', 'getenv', 'HOME') AS v",
            "IDENTIFIER() is not allowed",
        ),
        (
            "SELECT IDENTIFIER('java_method')('java.io.File', 'createTempFile', 'x', 'y')",
            "IDENTIFIER() is not allowed",
        ),
        ("SELECT IDENTIFIER('url') FROM crawldb", "IDENTIFIER() is not allowed"),
        ("SELECT * FROM IDENTIFIER('crawldb')", "IDENTIFIER() is not allowed"),
        # ... and a WINDOW definition, which the plan keeps in a map of its own
        (
            "SELECT count(*) OVER w AS n FROM range(1) WINDOW w AS (PARTITION BY coalesce("
            "CAST(raise_error((SELECT max(value) FROM text.`/etc/hostname`)) AS STRING), 'k'))",
            "text./etc/hostname is not a table of this crawl",
        ),
        (
            "SELECT count(*) OVER w AS n FROM range(1) WINDOW w AS "
            "(PARTITION BY reflect('java.lang.System', 'getenv', 'HOME'))",
            "function reflect() is not allowed",
        ),
        # options that name a file (Hadoop file systems: file:, s3a:, http:)
        (
            "SELECT from_xml('<a><b>1</b></a>', 'b INT', map('rowValidationXSDPath', "
            "'/etc/hostname'))",
            "option 'rowValidationXSDPath' of from_xml() is not allowed",
        ),
        (
            "SELECT schema_of_xml('<a/>', map('rowValidationXSDPath', "
            "'http://169.254.169.254/latest/meta-data/'))",
            "option 'rowValidationXSDPath' of schema_of_xml() is not allowed",
        ),
        (
            "SELECT from_xml('<a/>', 'b INT', str_to_map('rowValidationXSDPath:/etc/hostname'))",
            "options of from_xml() must be map('key', 'value', ...) of literals",
        ),
        (
            "SELECT from_xml('<a/>', 'b INT', map(concat('rowValidation', 'XSDPath'), '/x'))",
            "options of from_xml() must be map('key', 'value', ...) of literals",
        ),
        # an allow-list: functions not on it are refused, whatever they do
        ("SELECT current_user()", "function current_user() is not allowed"),
        ("SELECT input_file_name() FROM crawldb", "function input_file_name() is not allowed"),
        ("SELECT default.my_udf(1)", "function default.my_udf() is not allowed"),
        ("SELECT upper(reflect('java.lang.System', 'exit', 0))", "reflect() is not allowed"),
        ("SELECT transform(array(1), x -> java_method('a', 'b'))", "java_method() is not allowed"),
        (
            "SELECT url FROM crawldb WHERE EXISTS (SELECT try_reflect('java.lang.System', "
            "'getenv', 'HOME'))",
            "function try_reflect() is not allowed",
        ),
        # analysis must not run a subquery: time travel evaluates its timestamp
        (
            "SELECT * FROM crawldb TIMESTAMP AS OF (SELECT max(fetched_at) FROM fetches)",
            "time travel takes a constant",
        ),
        ("EXPLAIN SELECT reflect('java.lang.System', 'exit', 0)", "reflect() is not allowed"),
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


def test_the_table_format_reads_at_most_table_rows_rows_without_limit(root, capsys):
    query = "SELECT id FROM range(1000000000000)"
    assert cli.main(["sql", root, query, *SPARK, "--set", "sql.table_rows=3"]) == 0
    out = capsys.readouterr().out
    assert "(3 rows)" in out and "| 2  |" in out and "| 3  |" not in out
    assert out.splitlines()[-1].startswith("(the first 3 rows: sql.table_rows; more with")


def test_a_query_spark_cannot_analyse_is_one_line_too(root, capsys):
    assert cli.main(["sql", root, "SELECT no_such_column FROM crawldb", *SPARK]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("crawl sql: ") and "no_such_column" in err and "\n" not in err


@pytest.mark.parametrize(
    ("statement", "says"),
    [
        ("SELECT raise_error('boom')", "boom"),
        ("SELECT assert_true(count(*) > 100) FROM crawldb", "is not true"),
        ("SELECT CAST(url AS INT) FROM crawldb", "CAST"),
        ("SELECT 1 / 0", "DIVIDE_BY_ZERO"),
    ],
)
def test_a_query_that_fails_while_it_runs_is_one_line_and_exit_2(root, capsys, statement, says):
    assert cli.main(["sql", root, statement, *SPARK]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("crawl sql: the query failed: ") and "\n" not in err, err
    assert says in err and "Traceback" not in captured.err


def test_the_command_prints_one_line_and_no_stack_trace_of_the_jvm(root, spark_cfg, tmp_path):
    """What an operator sees: stderr of a `crawl sql` process whose query fails in a task
    (Spark logs a task's failure with its stack trace unless told not to)."""
    config = tmp_path / "test.toml"
    config.write_text(config_toml(spark_cfg))
    statement = "SELECT raise_error(concat('boom ', url)) FROM crawldb"
    done = subprocess.run(
        [sys.executable, "-m", "crawllib.cli", "sql", root, statement, "--config", str(config),
         *SPARK],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    # before the query: the JVM's start (its log profile, the log level), never a failure
    assert lines[-1].startswith("crawl sql: the query failed: ") and "boom http://" in lines[-1]
    assert not [line for line in lines if line.startswith("\tat ") or "Exception" in line]


def test_the_time_limit_covers_work_on_the_driver_that_is_no_job(root, spark_cfg, tmp_path):
    """Issue 49: a constant expression is folded on the driver while the query is planned, where
    no job can be cancelled: this one backtracks for minutes (a shorter one ran past 240 s
    under a 5 s limit). The `crawl` process ends itself once the limit and guard.hard_stop_after passed."""
    from crawllib.sql.guard import hard_stop_after

    config = tmp_path / "test.toml"
    config.write_text(config_toml(spark_cfg))
    statement = "SELECT repeat('a', 3000) RLIKE '^(.*a){4}b' AS hit"
    seconds = 3
    done = subprocess.run(
        [sys.executable, "-m", "crawllib.cli", "sql", root, statement, "--config", str(config),
         "--set", f"sql.max_seconds={seconds}", *SPARK],
        capture_output=True, text=True, timeout=300 + seconds + hard_stop_after(seconds),
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    last = [line for line in done.stderr.splitlines() if line.strip()][-1]
    # stopped by the process ending itself ("(it was still being planned)"), or, on a machine
    # where the folding reached a job first, by the job's cancellation: either way, one line
    assert last.startswith(
        "crawl sql: the query ran longer than sql.max_seconds (3 s) and was stopped"
    ), last
    assert "Traceback" not in done.stderr


def test_a_cte_does_not_hide_a_relation_of_the_same_name(spark, root, capsys, secret):
    """A CTE's own body cannot see it: there its name is the catalog's relation, which is not
    the crawl's (issue 37: CTE names were one flat set, without scope)."""
    for statement in (
        "WITH secret AS (SELECT * FROM secret) SELECT * FROM secret",
        "WITH a AS (SELECT 1 AS x), secret AS (SELECT * FROM secret) SELECT * FROM a",
        "SELECT * FROM (WITH secret AS (SELECT 1 AS v) SELECT * FROM secret) JOIN secret",
        "WITH s AS (SELECT * FROM crawldb) SELECT * FROM s, (WITH s AS (SELECT * FROM secret) "
        "SELECT * FROM s)",
    ):
        assert cli.main(["sql", root, statement, *SPARK]) == 2, statement
        captured = capsys.readouterr()
        assert "secret is not a table of this crawl" in captured.err, (statement, captured.err)
        assert secret not in captured.out + captured.err
    # a CTE's name is its own in the CTEs after it and in the query
    ok = "WITH secret AS (SELECT 'mine' AS v), b AS (SELECT * FROM secret) SELECT * FROM b"
    assert cli.main(["sql", root, ok, "--format", "csv", *SPARK]) == 0
    assert capsys.readouterr().out.split() == ["v", "mine"]


def options_call(name: str, params: list[str]) -> str:
    """A call of function ``name`` with a value for each of its ``params``: a path (or a class
    name) for each, options that name files for an options parameter."""
    files = "map('rowValidationXSDPath', '/etc/hostname', 'avroSchemaUrl', 'file:///etc/hostname')"
    args = [files if "option" in p.lower() else "'/etc/hostname'" for p in params]
    return f"SELECT {name}({', '.join(args)})"


def path_or_class_functions(spark) -> dict[str, list[str]]:
    """Spark's functions (its function registry: signatures and descriptions) that take a file
    path, a class, a method or options (which may name files), or tell of files -> their
    parameters."""
    registry = spark._jsparkSession.sessionState().functionRegistry()
    identifier = spark._jvm.org.apache.spark.sql.catalyst.FunctionIdentifier
    found = {}
    ids = registry.listFunction().iterator()
    while ids.hasNext():
        name = ids.next().funcName()
        info = registry.lookupFunction(identifier(name))
        if not info.isDefined():
            continue
        usage = info.get().getUsage() or ""
        signature = re.search(rf"{re.escape(name)}\(([^)]*)\)", usage)
        params = re.findall(r"[A-Za-z_]\w*", signature.group(1)) if signature else []
        # a path of a file (descFilePath), not a JSON path
        named = any(re.search(r"file|class|method|jar|option", p, re.I) for p in params)
        told = re.search(r"\b(files?|class(es)?|jars?)\b", usage.split(". ")[0], re.I)
        if named or told:
            found[name] = params
    return found


def test_functions_that_take_a_path_or_a_class_are_refused(spark, root, capsys):
    found = path_or_class_functions(spark)
    # what the registry says today: the JVM callers, files, XML/JSON/CSV/Avro/Protobuf options
    assert {"reflect", "java_method", "try_reflect", "from_xml", "from_protobuf"} <= set(found)
    assert {"input_file_name", "from_avro", "to_protobuf", "from_json", "from_csv"} <= set(found)
    before = state(spark, root)
    for name, params in sorted(found.items()):
        statement = options_call(name, params)
        assert cli.main(["sql", root, statement, *SPARK]) == 2, statement
        err = capsys.readouterr().err.strip()
        assert err.startswith("crawl sql: ") and "\n" not in err, err
        assert "is not allowed" in err, (statement, err)
    assert state(spark, root) == before


def test_the_allow_list_names_only_functions_spark_has(spark):
    registry = spark._jsparkSession.sessionState().functionRegistry()
    identifier = spark._jvm.org.apache.spark.sql.catalyst.FunctionIdentifier
    unknown = [f for f in ALLOWED_FUNCTIONS if not registry.functionExists(identifier(f))]
    assert len(ALLOWED_FUNCTIONS) > 400 and unknown == []
    assert not {"reflect", "java_method", "try_reflect", "from_avro", "from_protobuf"} & set(
        ALLOWED_FUNCTIONS
    )


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT host, count(*) AS n, max(length(url)) AS longest, collect_set(status) AS s "
        "FROM crawldb GROUP BY host",
        "SELECT url, row_number() OVER w AS r, lag(url) OVER w AS p FROM crawldb "
        "WINDOW w AS (PARTITION BY host ORDER BY url)",
        "SELECT transform(array(1, 2), x -> x + 1) AS t, filter(array(1, 2), x -> x > 1) AS f",
        "SELECT parse_url(url, 'HOST') AS h, regexp_extract(url, 'https?://([^/]+)', 1) AS r, "
        "date_format(current_timestamp(), 'yyyy') AS y FROM crawldb",
        "SELECT from_json('{\"a\": 1}', 'a INT', map('mode', 'PERMISSIVE')).a AS a",
        "SELECT from_xml('<a><b>1</b></a>', 'b INT') AS x, xpath_string('<a>b</a>', 'a') AS y",
        "SELECT get_json_object('{\"a\": 2}', '$.a') AS a, CASE WHEN 1 IN (1, 2) THEN "
        "'yes' END AS b, 2 BETWEEN 1 AND 3 AS c, 'x' LIKE 'x%' AS d",
        "SELECT count(*) AS n FROM latest_texts",
        "SELECT count(*) AS n, max(changed) AS c FROM text_history",
        "SELECT * FROM freshness",
        "SELECT explode(sequence(1, 3)) AS n",
        "SELECT n FROM range(3) LATERAL VIEW explode(array(1)) t AS n",
        "SELECT url FROM crawldb WHERE url_key IN (SELECT url_key FROM frontier) "
        "AND EXISTS (SELECT 1 FROM frontier)",
        "DESCRIBE QUERY SELECT url FROM crawldb",
    ],
)
def test_queries_with_allowed_functions_run(spark, root, capsys, statement):
    assert cli.main(["sql", root, statement, "--format", "json", *SPARK]) == 0, (
        capsys.readouterr().err
    )
    assert capsys.readouterr().out.strip()
