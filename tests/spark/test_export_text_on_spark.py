"""crawl export-text on Spark: the same root as tests/unit/test_export_text.py, its documents
written by Spark's tasks (Arrow batches, one partition per --shard-docs documents), read back
with datatrove's readers and warcio: the same documents as the embedded engine writes, in
files of at most --shard-docs each."""

from __future__ import annotations

import os

import pyarrow.parquet as pq
import pytest
from warcio.archiveiterator import ArchiveIterator

from crawllib.cli import main
from tests.conftest import test_config_overrides
from tests.unit.test_export_text import (
    DEFAULT,
    LONG_EN,
    fetch_time,
    jsonl_docs,
    key,
    make_root,
    parquet_docs,
    url,
)


@pytest.fixture(scope="module")
def root(template_root, tmp_path_factory) -> str:
    return make_root(template_root, tmp_path_factory)


def export(root_path: str, out, *args: str) -> int:
    overrides = [a for o in test_config_overrides() for a in ("--set", o)]
    return main(["export-text", root_path, str(out), "--engine", "spark", *args, *overrides])


def test_spark_tasks_write_the_same_documents_in_bounded_shards(root, spark, tmp_path):
    out = tmp_path / "out"
    assert export(root, out, "--shard-docs", "2") == 0
    names = sorted(os.listdir(out))
    # 5 documents: 3 tasks, each its own files of at most 2
    assert names and all(n.startswith("part-") and n.endswith(".parquet") for n in names)
    counts = [pq.read_metadata(out / n).num_rows for n in names]
    assert sum(counts) == 5 and max(counts) <= 2
    docs = parquet_docs(out)
    assert set(docs) == DEFAULT
    a = docs[f"1/{key('a')}"]
    assert a.text == LONG_EN
    assert a.metadata["date"] == fetch_time("a").strftime("%Y-%m-%dT%H:%M:%SZ")
    assert a.metadata["cluster"] == key("a") and a.metadata["quality"]["gopher_words"] > 50

    assert export(root, out, "--format", "jsonl", "--language", "de") == 0
    assert [n.endswith(".jsonl.gz") for n in os.listdir(out)] == [True]  # parquet files gone
    assert set(jsonl_docs(out)) == {f"1/{key('c')}"}

    assert export(root, out, "--format", "wet", "--where", "quality.gopher_words >= 50") == 0
    uris = []
    for name in sorted(os.listdir(out)):
        with open(out / name, "rb") as f:
            for r in ArchiveIterator(f, check_digests="raise"):
                if r.rec_type == "conversion":
                    uris.append(r.rec_headers.get_header("WARC-Target-URI"))
    assert sorted(uris) == sorted(url(n) for n in ("a", "c", "noarchive", "old"))
