"""The memory benchmark of the fetch stage, on each engine: a page bigger than
fetch.max_body_bytes and a gzip bomb are cut at the limits, a Python worker's peak stays
bounded by those limits, and its extraction process's by the page's cut size."""

from __future__ import annotations

import pytest

from benchmarks.memory import bench_memory, markdown_table
from crawllib.config import load_config
from crawllib.testweb import WebSpec

MIB = 2**20
BODY = 8 * MIB  # more than fetch.max_body_bytes (5 MB)
HOSTS = 3
EXTRACTION_FACTOR = 128
EXTRACTION_REST = 160 * MIB
IMPORTS = 96 * MIB


@pytest.mark.e2e
def test_fetch_stage_memory_is_bounded_by_the_fetch_limits(bench_engine, tmp_path):
    (row,) = bench_memory(
        str(tmp_path), body_sizes=(BODY,), regular_hosts=HOSTS, engine=bench_engine
    )

    assert row["engine"] == bench_engine
    assert row["hwm_reset"], "peaks must cover the fetch stage only"
    # the engine's workers (Spark's Python workers, or the embedded engine's worker
    # processes) and, on Spark, its JVM
    roles = ("driver_peak", "worker_peak", "workers_sum_peak")
    for key in (*roles, "jvm_peak") if bench_engine == "spark" else roles:
        assert row[key] > 0, f"{key}: the sampler found no such process"
    limits = row["max_body_bytes"] + row["max_decompressed_bytes"]
    assert row["worker_peak"] < WebSpec().bomb_bytes / 2
    # The bomb is inflated in 1 MiB steps into one buffer of max_decompressed_bytes (asked for
    # the whole cap at once, zlib would hold copies of it). 32 MiB: the worker's own buffers
    # (the big page's body and its copies: aiohttp's reads, the pipe to its extraction
    # process, the result rows). IMPORTS: a worker forked for the stage starts from PySpark's
    # daemon and imports the fetch's modules (aiohttp, crawllib) during it. The embedded
    # engine's workers start with the stage: their start is a ready worker's RSS (a fresh
    # interpreter with what it preloads, benchmarks.memory.idle_worker_rss), never nothing.
    assert row["worker_start"] > 0
    assert row["worker_peak"] - row["worker_start"] < limits + 32 * MIB + IMPORTS
    # The big page is extracted in the task's extraction process (a Python of its own, about
    # EXTRACTION_REST at rest), cut at parse.max_html_bytes: its decoded text, lxml tree and
    # trafilatura's copies take up to EXTRACTION_FACTOR times that (a text-dense page is the
    # worst case: about 100 times measured); extract.max_memory_mb would stop it past that.
    cfg = load_config()
    extraction = EXTRACTION_REST + EXTRACTION_FACTOR * cfg.parse.max_html_bytes
    assert EXTRACTION_REST / 2 < row["extraction_peak"] < extraction
    assert extraction < cfg.extract.max_memory_mb * MIB

    big, bomb = row["big_fetch"], row["bomb_fetch"]
    assert (big["outcome"], big["is_truncated"]) == ("ok", True)
    assert big["body_bytes"] == row["max_body_bytes"]
    assert (bomb["outcome"], bomb["error_kind"]) == ("error", "decompressed_too_large")
    assert row["pages"] == HOSTS + 1  # the home pages and big.html; not the bomb

    table = markdown_table([row]).splitlines()
    assert table[0].startswith(f"{bench_engine} engine;")
    assert table[-1].startswith(f"| {BODY // MIB} |") and "decompressed_too_large" in table[-1]
