"""A crawl root on storage the command cannot reach is one line and exit 2, not delta-rs's
stack trace with its coloured chain of causes (issue 49): an S3 endpoint on 127.0.0.1 where
nothing listens, read by the commands that need no JVM."""

from __future__ import annotations

import socket

import pytest

from crawllib import cli


@pytest.fixture
def closed_endpoint(tmp_path):
    with socket.socket() as held:  # bound, never listening: connections are refused
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        config = tmp_path / "s3.toml"
        config.write_text(
            "[spark.conf]\n"
            f'"spark.hadoop.fs.s3a.endpoint" = "http://127.0.0.1:{port}"\n'
            '"spark.hadoop.fs.s3a.endpoint.region" = "us-east-1"\n'
            '"spark.hadoop.fs.s3a.path.style.access" = "true"\n'
            '"spark.hadoop.fs.s3a.access.key" = "A"\n'
            '"spark.hadoop.fs.s3a.secret.key" = "B"\n'
        )
        yield str(config)


@pytest.mark.parametrize(
    "argv",
    [
        ["sql", "s3a://bucket/crawl", "SELECT count(*) FROM crawldb", "--engine", "duckdb"],
        ["status", "s3a://bucket/crawl"],
    ],
)
def test_an_unreachable_root_is_one_line(closed_endpoint, capsys, argv):
    assert cli.main([*argv, "--config", closed_endpoint]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "\x1b" not in err, err
    assert err.startswith(f"crawl {argv[0]}: storage error at s3a://bucket/crawl: ")
    assert "Connection refused" in err
