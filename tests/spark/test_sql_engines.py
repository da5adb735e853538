"""`crawl sql`'s two engines give the same answers: DuckDB over delta-rs (no JVM) and Spark SQL,
on a real crawl of the test web with revisits, whose crawldb carries deletion vectors from
update's MERGEs. The DuckDB engine refuses what the Spark engine refuses, in one line, exit 2.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.sql import documented_queries
from crawllib import cli
from crawllib import config as config_mod
from crawllib.core.vocab import TABLE_NAMES
from crawllib.runs import runner
from crawllib.sql import duckdb_engine
from crawllib.store import lease
from crawllib.store.spark_db import SparkDb
from crawllib.store.spark_schemas import TABLES
from crawllib.testweb import WebSpec, serve_in_thread

pytestmark = pytest.mark.skipif(not duckdb_engine.available(), reason="the sql extra is missing")

PROJECT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def root(spark, spark_cfg, tmp_path_factory):
    """Two generations of two hosts (the first may follow both whole), then a generation three
    days later that revisits some of their pages: texts and pages hold two versions of those
    URLs."""
    path = str(tmp_path_factory.mktemp("engines") / "crawl")
    with serve_in_thread(WebSpec(seed=7, hosts=2, pages_per_host=6, special=False)) as web:
        cfg = config_mod.replace(
            spark_cfg,
            network__resolve=web.resolve,
            politeness__default_delay=0.05,
            crawl__max_depth=1,
        )
        seeds = tmp_path_factory.mktemp("seeds") / "seeds.txt"
        seeds.write_text("\n".join(web.seeds()) + "\n")
        with lease.hold(path, "pytest", cfg):
            runner.run_crawl(SparkDb(spark, path, cfg), cfg, str(seeds), 2)
            # two revisits per host: update's MERGE replaces a few of crawldb's rows, which
            # stay in their files, marked deleted in deletion vectors
            later = dt.datetime.now(dt.UTC) + dt.timedelta(days=3)
            revisit = config_mod.replace(
                cfg, crawl__now=later.isoformat(), generate__max_per_host=2
            )
            runner.run_generation(SparkDb(spark, path, revisit), revisit)
    return path


def crawl_sql(capsys, root: str, query: str, *options: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = cli.main(["sql", root, query, *options])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def answer(capsys, root: str, engine: str, query: str, *options: str) -> list[dict]:
    rc, out, err = crawl_sql(capsys, root, query, "--format", "json", *options, "--engine", engine)
    assert rc == 0, (engine, query, err)
    return [json.loads(line) for line in out.splitlines()]


def same_answers(capsys, root: str, query: str, *options: str, ties: bool = False) -> list[dict]:
    """Both engines' rows, in the same order; ``ties``: the query's ORDER BY leaves ties,
    which either engine may give in any order (compared as sets)."""
    duck = answer(capsys, root, "duckdb", query, *options)
    spark = answer(capsys, root, "spark", query, *options)
    if ties or "ORDER BY" not in query.upper():
        duck, spark = (sorted(rows, key=json.dumps) for rows in (duck, spark))
    assert duck == spark, query
    return duck


def test_the_catalog_names_every_table():
    assert TABLE_NAMES == tuple(TABLES)


def test_documented_queries_give_the_same_answers(root, capsys):
    queries = documented_queries()
    assert len(queries) >= 9  # README, crawling.md (traps), tables.md (Analysts), emr.md (S3)
    answered = 0
    for query, _ in queries:  # their --format aside: answers are compared as JSON
        answered += bool(same_answers(capsys, root, query))
    assert answered >= len(queries) - 1  # traps: this crawl has none
    held = "SELECT slot, delay_source, not_before_reason, not_before FROM hosts WHERE not_before > now()"
    same_answers(capsys, root, held)


def test_the_views_and_every_table(root, capsys):
    history = same_answers(
        capsys, root, "SELECT url, gen, fetched_at, changed FROM text_history ORDER BY url, gen"
    )
    # the revisits stored a second version (their generation: 1 or 2, as the first crawl
    # followed the two hosts in one generation or two)
    versions = collections.Counter(r["url"] for r in history)
    assert 0 in {r["gen"] for r in history} and max(versions.values()) >= 2
    assert any(r["changed"] is not None for r in history)
    latest = same_answers(capsys, root, "SELECT url, gen FROM latest_texts ORDER BY url")
    assert len(latest) == len({r["url"] for r in history})
    same_answers(
        capsys,
        root,
        "SELECT url_key, title, text FROM latest_pages p JOIN texts USING (url_key, gen) ORDER BY 1",
    )
    for name in TABLE_NAMES:
        same_answers(capsys, root, f"SELECT count(*) AS n FROM {name}")
    same_answers(capsys, root, "SELECT * FROM generations ORDER BY gen, stage, state, started_at")


def test_nulls_sort_as_in_spark(root, capsys):
    for order in ("", " DESC"):
        rows = same_answers(
            capsys, root, f"SELECT http_status, url FROM fetches ORDER BY http_status{order}, url"
        )
        assert rows[0 if order else -1]["http_status"] is not None
        assert rows[-1 if order else 0]["http_status"] is None  # robots_denied: no request


def test_rows_a_merge_deleted_do_not_appear(root, capsys):
    """Update's MERGEs mark the crawldb rows they replace in deletion vectors, not by
    rewriting files: a reader that ignored them would show each updated URL twice."""
    from deltalake import DeltaTable

    crawldb = DeltaTable(os.path.join(root, "crawldb"))
    assert "deletionVectors" in (crawldb.protocol().reader_features or [])
    vectors = crawldb.deletion_vectors().read_all().column("selection_vector").to_pylist()
    deleted = sum(keep.count(False) for keep in vectors)
    assert deleted > 0
    rows = same_answers(
        capsys,
        root,
        "SELECT url_key, url, status, attempts, first_gen, last_gen, fetched_at, next_fetch_at, "
        "visits_changed, visits_unchanged FROM crawldb ORDER BY url_key",
    )
    assert len(rows) == len({r["url_key"] for r in rows})
    assert max(r["last_gen"] or 0 for r in rows) >= 1  # the revisits' MERGE


def test_every_format_prints_the_same(root, capsys):
    query = (
        "SELECT gen, outcome, http_status, count(*) AS urls FROM fetches GROUP BY ALL ORDER BY ALL"
    )
    for fmt in ("table", "json", "csv"):
        outs = [
            crawl_sql(capsys, root, query, "--format", fmt, "--engine", engine)[1]
            for engine in ("duckdb", "spark")
        ]
        assert outs[0] == outs[1] and outs[0].strip(), fmt
    rc, out, _ = crawl_sql(capsys, root, query, "--limit", "2", "--format", "json")
    assert rc == 0 and len(out.splitlines()) == 2


def files_of(root: str) -> list[tuple[str, int]]:
    return sorted(
        (os.path.join(d, f), os.path.getsize(os.path.join(d, f)))
        for d, _, names in os.walk(root)
        for f in names
    )


@pytest.mark.parametrize(
    ("statement", "says"),
    [
        ("DELETE FROM crawldb", "refused: DELETE"),
        ("UPDATE crawldb SET status = 'gone'", "refused: UPDATE"),
        ("INSERT INTO frontier SELECT * FROM frontier", "refused: INSERT"),
        ("MERGE INTO crawldb USING crawldb s ON true WHEN MATCHED THEN DELETE", "refused: MERGE"),
        ("DROP TABLE crawldb", "refused: DROP"),
        ("CREATE TABLE x AS SELECT * FROM crawldb", "refused: CREATE"),
        ("COPY crawldb TO '/tmp/crawldb.csv'", "refused: COPY"),
        ("ATTACH '/tmp/x.duckdb'", "refused: ATTACH"),
        ("SET threads = 1", "refused: SET"),
        ("INSTALL delta", "refused: LOAD"),
        ("PRAGMA version", "refused: PRAGMA"),
        ("EXPLAIN ANALYZE DELETE FROM crawldb", "refused: EXPLAIN"),
        ("SELECT 1; DELETE FROM crawldb", "one query at a time"),
        ("SELECT * FROM read_csv('/etc/passwd')", "file system operations are disabled"),
        ("SELECT * FROM '/etc/passwd'", "is not a table of this crawl"),
        ("SELECT * FROM delta_scan('/tmp')", "delta_scan"),
        ("SELECT * FROM sys", "sys is not a table of this crawl"),  # no Python variables
        ("SELEKT 1", "cannot parse the query"),
        ("SELECT no_such_column FROM crawldb", "no_such_column"),
    ],
)
def test_duckdb_refuses_in_one_line(root, capsys, statement, says):
    before = files_of(root)
    rc, out, err = crawl_sql(capsys, root, statement, "--engine", "duckdb")
    assert rc == 2
    assert err.startswith("crawl sql: ") and err.count("\n") == 1, err
    assert says in err
    assert out == ""
    assert files_of(root) == before


@pytest.fixture(scope="module")
def s3_root(root):
    """The crawl root copied into a bucket of a moto S3 server on 127.0.0.1, in a process of its
    own (delta-rs's requests would block a server thread of this one); the root's URI and the
    settings that point the s3a keys at the server."""
    import socket

    import boto3

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        region_name="us-east-1",
    )
    try:
        for _ in range(100):
            try:
                s3.create_bucket(Bucket="crawl-bucket")
                break
            except Exception:  # not listening yet
                time.sleep(0.1)
        for folder, _, names in os.walk(root):
            for name in names:
                path = os.path.join(folder, name)
                s3.upload_file(path, "crawl-bucket", "c/" + os.path.relpath(path, root))
        conf = (
            f'spark.conf={{"spark.hadoop.fs.s3a.endpoint" = "{endpoint}", '
            '"spark.hadoop.fs.s3a.access.key" = "test", '
            '"spark.hadoop.fs.s3a.secret.key" = "test", '
            '"spark.hadoop.fs.s3a.endpoint.region" = "us-east-1", '
            '"spark.hadoop.fs.s3a.path.style.access" = "true"}'
        )
        yield "s3a://crawl-bucket/c", ["--set", conf]
    finally:
        server.terminate()
        server.wait()


def test_duckdb_reads_an_s3_root(root, s3_root, capsys):
    uri, settings = s3_root
    for query in (
        "SELECT url_key, status, last_gen FROM crawldb ORDER BY url_key",
        "SELECT url, gen, title FROM latest_texts ORDER BY url",
    ):
        local = answer(capsys, root, "duckdb", query)
        assert answer(capsys, uri, "duckdb", query, *settings) == local and local
    rc, _, err = crawl_sql(
        capsys,
        "s3a://crawl-bucket/none",
        "SELECT 1 AS x FROM crawldb",
        "--engine",
        "duckdb",
        *settings,
    )
    assert rc == 2 and "s3a://crawl-bucket/none is not a crawl root" in err


def test_duckdb_needs_no_jvm(root):
    """In a fresh process the default engine answers without importing pyspark."""
    code = (
        "import sys; from crawllib.cli import main; "
        f"rc = main(['sql', {root!r}, 'SELECT count(*) AS n FROM texts', '--format', 'json']); "
        "assert 'pyspark' not in sys.modules; sys.exit(rc)"
    )
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["n"] > 0


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_a_query_past_sql_max_seconds_stops_in_one_line(root, capsys, engine):
    rc, out, err = crawl_sql(
        capsys,
        root,
        "SELECT count(*) FROM range(10000000000000)",
        "--engine",
        engine,
        "--set",
        "sql.max_seconds=1",
    )
    assert rc == 2 and out == ""
    assert err == "crawl sql: the query ran longer than sql.max_seconds (1 s) and was stopped\n"


def test_duckdb_stops_a_query_past_sql_max_memory(root, capsys):
    rc, out, err = crawl_sql(
        capsys,
        root,
        "SELECT max(len(l)) FROM (SELECT list(range) AS l FROM range(100000000))",
        "--engine",
        "duckdb",
        "--set",
        "sql.max_memory=100MB",
    )
    assert rc == 2 and out == ""
    assert (
        err.startswith("crawl sql: the query failed: Out of Memory Error") and err.count("\n") == 1
    )


def test_range_1e13_is_one_line_on_duckdb(root, capsys):
    """The issue's query: DuckDB's range takes no DOUBLE, a binder error."""
    rc, out, err = crawl_sql(capsys, root, "SELECT count(*) FROM range(1e13)", "--engine", "duckdb")
    assert rc == 2 and err.startswith("crawl sql: ") and err.count("\n") == 1, err


# Two of Common Crawl's published example queries (cc-index-table, src/sql/examples/cc-index/:
# count-by-tld-page-host-domain.sql and get-records-of-domain.sql), with this crawl's name for
# theirs and a domain of the test web: the table is the view ccindex (Athena's
# "ccindex"."ccindex" is a database and a table, which Spark's default dialect reads as text).
CC_COUNT_BY_TLD = """-- page/host/domain count per TLD
SELECT COUNT(*) AS n_pages,
       url_host_tld AS tld,
       COUNT(DISTINCT url_host_name) AS n_hosts,
       COUNT(DISTINCT url_host_registered_domain) AS n_domains
FROM ccindex
WHERE crawl = 'crawl'
  AND subset = 'warc'
GROUP BY  url_host_tld
ORDER BY  n_pages DESC"""
CC_RECORDS_OF_DOMAIN = """-- export WARC record specs (file, offset, length)
--  - of a single domain
--  - limited to 1000 records
SELECT url,
       warc_filename,
       warc_record_offset,
       warc_record_length
FROM ccindex
WHERE crawl = 'crawl'
  AND subset = 'warc'
  AND url_host_registered_domain = '{domain}'
LIMIT 1000"""


def test_the_capture_index_answers_common_crawls_example_queries(spark, spark_cfg, root, capsys):
    from warcio.archiveiterator import ArchiveIterator

    from crawllib.stages import export

    columns = same_answers(capsys, root, "SELECT * FROM ccindex ORDER BY gen, url_key")
    assert columns and all(r["crawl"] == "crawl" for r in columns)
    assert all(r["warc_filename"] is None for r in columns)  # null until exported
    page = next(r for r in columns if r["subset"] == "warc" and r["url_path"] != "/")
    host = page["url_host_name"]
    assert page["url"].startswith(f"{page['url_protocol']}://{host}")
    assert page["url_host_tld"] == host.rsplit(".", 1)[1]
    assert page["url_host_registered_domain"] == host  # the test web's hosts are domains
    assert (page["fetch_status"], page["content_mime_type"]) == (200, "text/html")
    assert page["url_surtkey"].startswith(",".join(reversed(host.split("."))) + ")/")
    pages = same_answers(capsys, root, "SELECT count(*) AS n FROM pages")[0]["n"]
    answered = "SELECT count(*) AS n FROM fetches WHERE http_status BETWEEN 200 AND 299"
    assert (
        sum(r["subset"] == "warc" for r in columns) == same_answers(capsys, root, answered)[0]["n"]
    )
    assert all(r["fetch_status"] // 100 != 2 for r in columns if r["subset"] != "warc")

    with lease.hold(root, "pytest", spark_cfg):
        export.export_warc(spark, root, spark_cfg, 0, None, None)
    by_tld = same_answers(capsys, root, CC_COUNT_BY_TLD, ties=True)  # tlds of as many pages
    tlds = {r["url_host_tld"] for r in columns if r["subset"] == "warc"}
    assert {r["tld"] for r in by_tld} == tlds and sum(r["n_pages"] for r in by_tld) == pages
    domain = page["url_host_registered_domain"]
    records = same_answers(capsys, root, CC_RECORDS_OF_DOMAIN.format(domain=domain))
    exported = [r for r in records if r["warc_filename"] is not None]  # generation 0's
    assert exported and len(records) > len(exported)  # generations 1 and 2 not exported
    first = exported[0]
    assert first["warc_filename"].startswith("gen=0/crawl-gen0-")  # relative to ROOT/warc
    location = same_answers(
        capsys, root, f"SELECT warc_location FROM ccindex WHERE url = '{first['url']}' AND gen = 0"
    )[0]["warc_location"]
    assert location == f"{root}/warc/{first['warc_filename']}"
    with open(location, "rb") as warc:
        warc.seek(first["warc_record_offset"])
        record = next(iter(ArchiveIterator(warc)))
    assert record.rec_headers.get_header("WARC-Target-URI") == first["url"]
    assert record.rec_type == "response"
