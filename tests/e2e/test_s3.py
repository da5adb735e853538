"""A crawl on S3: the crawl root, the seed file and the WARC export are ``s3a://`` URIs on an
S3-compatible server on 127.0.0.1 (moto), reached through the S3A settings of the config file,
by `crawl` commands in their own processes, as an operator runs them. The crawl runs on each
engine (the embedded engine's delta-rs takes its S3 options from the same S3A settings:
crawllib.store.deltars.s3_options), each into a bucket of its own; the WARC export is Spark's
on both roots. Checked through the S3 API (boto3), not through the crawler."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawllib.config import config_toml, load_config, replace
from crawllib.core.urls import normalize_url
from crawllib.store import lease
from crawllib.testweb import WebSpec, serve_in_thread
from tests.conftest import ENGINES, test_config_overrides
from tests.s3server import s3_server

pytestmark = [pytest.mark.e2e, pytest.mark.smoke]  # in the fast tier: CI runs it
MAX_DEPTH = 1  # generation 0 fetches every page (the fetch follows same-host links)
GENERATIONS = 2  # pages are due again seconds after a visit: generation 1 revisits them


@pytest.fixture(scope="module")
def s3a():
    """A moto S3 server on 127.0.0.1; the S3A settings that reach it (any key is accepted)."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request otherwise
    server = s3_server()
    server.start()
    host, port = server.get_host_and_port()
    yield {
        "spark.hadoop.fs.s3a.endpoint": f"http://{host}:{port}",
        "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.access.key": "test",
        "spark.hadoop.fs.s3a.secret.key": "test",
    }
    server.stop()


def crawl(work: Path, *argv: str) -> subprocess.CompletedProcess:
    """`crawl ARGV` with work/crawl.toml, in work."""
    config = str(work / "crawl.toml")
    done = subprocess.run(
        [sys.executable, "-m", "crawllib.cli", *argv, "--config", config],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        trace = [line for line in done.stderr.splitlines() if not line.startswith("\tat ")]
        pytest.fail(f"crawl {argv[0]}: exit {done.returncode}\n" + "\n".join(trace)[-6000:])
    return done


@pytest.fixture(scope="module", params=ENGINES)
def on_s3(request, s3a, tmp_path_factory):
    """`crawl run` (on the engine of the param) from S3 seeds into an S3 root, then `crawl
    export-warc` of generation 0 to S3: their outputs, the S3 client, the pages expected."""
    engine = request.param
    bucket = f"crawl-{engine}"
    root, seeds_uri, warc = (f"s3a://{bucket}/{k}" for k in ("root", "seeds.txt", "warc"))
    work = tmp_path_factory.mktemp(f"s3-{engine}")
    with serve_in_thread(WebSpec(seed=11, hosts=3, pages_per_host=6, special=False)) as web:
        base = load_config(overrides=test_config_overrides())
        cfg = replace(
            base,
            spark__conf={**base.spark.conf, **s3a},
            network__resolve=web.resolve,
            crawl__max_depth=MAX_DEPTH,
            politeness__default_delay=0.1,
            storage__fetch_slices=1,
            recrawl__default_interval_hours=0.001,
        )
        (work / "crawl.toml").write_text(config_toml(cfg))
        client = lease.s3_client(cfg)  # the lease's client, configured from the same keys
        client.create_bucket(Bucket=bucket)
        seeds = ["# home pages", *web.seeds(), "mailto:someone@example.com"]
        client.put_object(Bucket=bucket, Key="seeds.txt", Body="\n".join(seeds).encode())
        run = crawl(
            work,
            "run",
            root,
            "--engine",
            engine,
            "--seeds",
            seeds_uri,
            "--generations",
            str(GENERATIONS),
        )
        expected = web.expected_fetches(MAX_DEPTH)
    export = crawl(work, "export-warc", root, "--gen", "0", warc)
    index = crawl(
        work,
        "sql",
        root,
        "SELECT url, warc_filename, warc_record_offset, warc_record_length FROM warc_index",
        "--engine",
        "duckdb",
        "--format",
        "json",
    )
    return {
        "engine": engine,
        "bucket": bucket,
        "seeds": seeds_uri,
        "warc": warc,
        "index": [json.loads(line) for line in index.stdout.splitlines() if line.startswith("{")],
        "run": run,
        "export": export,
        "client": client,
        "expected": {normalize_url(u) for u in expected},
        "work": work,
    }


def keys(on_s3, prefix: str) -> list[str]:
    paginator = on_s3["client"].get_paginator("list_objects_v2")
    pages = paginator.paginate(Bucket=on_s3["bucket"], Prefix=prefix)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def test_the_crawl_reads_its_seeds_from_s3_and_writes_its_tables_there(on_s3):
    assert "ran generations 0, 1" in on_s3["run"].stdout
    # a text seed file, read line by line: the invalid line is reported with its number
    assert f"{on_s3['seeds']}:5: invalid seed 'mailto:someone@example.com'" in on_s3["run"].stderr
    stored = keys(on_s3, "root/")
    assert "root/pages/_delta_log/00000000000000000000.json" in stored
    # pages of both generations (1 revisited 0), the crawl's state, the writer lease
    partitions = {k.split("/")[2] for k in stored if k.startswith("root/pages/gen=")}
    assert partitions == {"gen=0", "gen=1"}
    assert any(k.startswith("root/crawldb/") and k.endswith(".parquet") for k in stored)
    assert "root/_writer.lease" in stored
    # nothing took a URI for a local path
    assert not [p for p in on_s3["work"].iterdir() if p.name.startswith("s3")]
    # the engine asked for ran the stages
    assert f"({on_s3['engine']} engine)" in on_s3["run"].stderr


def test_the_warc_export_reads_the_pages_table_on_s3_and_writes_to_s3(on_s3):
    # written by the executor's task, uploaded with boto3
    assert keys(on_s3, "warc/") == ["warc/crawl-gen0-00000-000.warc.gz"]
    assert f"wrote {on_s3['warc']}/crawl-gen0-00000-000.warc.gz" in on_s3["export"].stdout
    got = on_s3["client"].get_object(
        Bucket=on_s3["bucket"], Key="warc/crawl-gen0-00000-000.warc.gz"
    )
    records = list(ArchiveIterator(io.BytesIO(got["Body"].read()), check_digests="raise"))
    assert records[0].rec_type == "warcinfo"
    assert {r.rec_type for r in records} == {"warcinfo", "request", "response", "metadata"}
    responses = [
        normalize_url(r.rec_headers.get_header("WARC-Target-URI"))
        for r in records
        if r.rec_type == "response"
    ]
    assert sorted(responses) == sorted(on_s3["expected"])  # every page, once


def test_the_warc_index_on_s3_locates_each_response_by_a_range_request(on_s3):
    index = on_s3["index"]
    assert sorted(normalize_url(r["url"]) for r in index) == sorted(on_s3["expected"])
    for row in index:
        assert row["warc_filename"] == f"{on_s3['warc']}/crawl-gen0-00000-000.warc.gz"
        start, length = row["warc_record_offset"], row["warc_record_length"]
        got = on_s3["client"].get_object(
            Bucket=on_s3["bucket"],
            Key="warc/crawl-gen0-00000-000.warc.gz",
            Range=f"bytes={start}-{start + length - 1}",
        )
        records = list(ArchiveIterator(io.BytesIO(got["Body"].read()), check_digests="raise"))
        assert [(r.rec_type, r.rec_headers.get_header("WARC-Target-URI")) for r in records] == [
            ("response", row["url"])
        ]
