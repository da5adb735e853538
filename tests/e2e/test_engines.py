"""Two engines, one crawl: the embedded engine and Spark crawl the same web to the same tables,
generation by generation, and a crawl that switches engine between generations ends where
either engine alone ends.

The web has links across hosts at every depth, a redirect chain, duplicates, pages that fail
and a robots.txt that denies; the crawl's clock is fixed, so revisits and retries fall alike.
Tables are compared row by row, without the columns that hold the time of a run or a
measurement of it (fetch times, timestamps, response times)."""

from __future__ import annotations

import collections
import math

import pytest

from crawllib import config as config_mod
from crawllib.runs import runner
from crawllib.store import lease
from crawllib.store.schemas import TABLES, T
from crawllib.testweb import WebSpec, serve_in_thread, special
from tests.conftest import open_db

pytestmark = pytest.mark.e2e

GENERATIONS = 4
# Columns a run fills with its own time or a measurement of it, not a decision.
VOLATILE = {"fetch_ms", "response_seconds", "adaptive_delay", "headers"}  # headers: Date
# Tables a stage run writes its own bookkeeping to: compared apart (generations: the stages
# done), or not at all (warc_index: no export runs here).
SKIPPED = {"generations", "warc_index"}


def _spec() -> WebSpec:
    # Two hosts answer differently to any two crawls, whatever the engine: sessiontrap.net
    # draws a fresh session id per request (its bodies and hashes differ), and how much of
    # gzipbomb.org's body is read before the cap stops it depends on how the network chunks
    # it. Every other special host answers both crawls alike.
    unlike = {"sessiontrap.net", "gzipbomb.org"}
    hosts = tuple(h for h in special.SPECIAL_HOSTS if h not in unlike)
    return WebSpec(
        seed=5, hosts=4, pages_per_host=12, special=True, special_hosts=hosts, slow_seconds=0.2
    )


def _config(spark_cfg, web):
    return config_mod.replace(
        spark_cfg,
        network__resolve=web.resolve,
        politeness__default_delay=0.05,
        crawl__max_depth=2,
        crawl__now="2027-01-15T08:00:00Z",
        fetch__total_timeout=3.0,
        fetch__max_attempts=2,
        robots__retry_seconds=3600.0,
        storage__fetch_slices=2,
        # links followed within their page's slot only: across hosts, which page's link is
        # followed first is a matter of timing (its source, a depth a later generation lowers)
        fetch__follow_other_hosts=False,
    )


def _comparable(value):
    if isinstance(value, float):
        return round(value, 6) if math.isfinite(value) else str(value)
    if isinstance(value, list):
        return tuple(_comparable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _comparable(v)) for k, v in value.items()))
    return value


def snapshot(root: str, cfg) -> dict[str, collections.Counter]:
    """Every table's rows (a multiset), without the volatile and timestamp columns. Read with
    delta-rs whichever engine wrote them: the same reader for both sides of a comparison, and
    a fifth of the time Spark takes to collect every table (2.3 s warm, 12 s cold)."""
    from crawllib.store.embedded import EmbeddedDb

    out = {}
    db = EmbeddedDb(root, cfg)
    try:
        for name, (schema, _) in TABLES.items():
            if name in SKIPPED or not db.exists(name):
                continue
            kept = [f.name for f in schema.fields if f.type != T and f.name not in VOLATILE]
            rows = db.collect(db.table(name, columns=kept))
            out[name] = collections.Counter(tuple(_comparable(r[c]) for c in kept) for r in rows)
    finally:
        db.close()
    return out


def _stages_done(db) -> set[tuple[int, str]]:
    from crawllib.store import generations

    return {k for k, state in generations.stage_states(db).items() if state == "done"}


def _crawl(request, engines, root, cfg, seeds):
    """Run generation after generation, each on the next engine of ``engines`` (cycled), until
    nothing is due; the snapshot after each generation."""
    snapshots = []
    with lease.hold(root, "pytest engines", cfg):
        for gen in range(GENERATIONS):
            engine = engines[gen % len(engines)]
            db = open_db(request, engine, root, cfg)
            try:
                ran = runner.run_crawl(
                    db, cfg, seeds if gen == 0 else None, generations_wanted=gen + 1
                )
                if not ran and gen > 0:
                    break
                snapshots.append((engine, snapshot(root, cfg), _stages_done(db)))
            finally:
                db.close()
    return snapshots


def _diff(a: collections.Counter, b: collections.Counter) -> str:
    return f"only in the first: {list((a - b).items())[:3]}; only in the second: {list((b - a).items())[:3]}"


def _crawl_fresh_web(request, engines, root, spark_cfg, tmp_path):
    """One crawl of a web served afresh for it: flaky.net and ratelimit.com count requests,
    so a second crawl of the same server would meet them in another state."""
    seeds = tmp_path / "seeds.txt"
    with serve_in_thread(_spec()) as web:
        cfg = _config(spark_cfg, web)
        seeds.write_text("\n".join(web.seeds()) + "\n")
        return _crawl(request, engines, root, cfg, str(seeds))


def test_both_engines_crawl_the_same_web_to_the_same_tables(request, spark_cfg, tmp_path):
    runs = {
        engine: _crawl_fresh_web(request, [engine], str(tmp_path / engine), spark_cfg, tmp_path)
        for engine in ("embedded", "spark")
    }
    embedded, spark = runs["embedded"], runs["spark"]
    assert len(embedded) >= 3, "the web needs several generations"
    assert len(embedded) == len(spark)
    for gen, ((_, a, done_a), (_, b, done_b)) in enumerate(zip(embedded, spark, strict=True)):
        assert done_a == done_b
        assert a.keys() == b.keys()
        assert sum(a["fetches"].values()) > 0
        for name in a:
            assert a[name] == b[name], f"gen {gen}, table {name}: {_diff(a[name], b[name])}"


def test_a_crawl_may_switch_engines_between_generations(request, spark_cfg, tmp_path):
    alone = _crawl_fresh_web(request, ["embedded"], str(tmp_path / "alone"), spark_cfg, tmp_path)
    mixed = _crawl_fresh_web(
        request, ["spark", "embedded"], str(tmp_path / "mixed"), spark_cfg, tmp_path
    )
    assert [engine for engine, *_ in mixed][:2] == ["spark", "embedded"]
    assert len(mixed) == len(alone)
    final_alone, final_mixed = alone[-1][1], mixed[-1][1]
    assert sum(final_alone["crawldb"].values()) > 0
    for name in final_alone:
        assert final_alone[name] == final_mixed[name], (
            f"{name}: {_diff(final_alone[name], final_mixed[name])}"
        )
