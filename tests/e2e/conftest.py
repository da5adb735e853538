"""The end-to-end crawl shared by the e2e tests: regular and special hosts of the test web,
crawled over enough generations for redirect chains and retries to settle, once on each engine
(``e2e_crawl`` is parametrized: every test that takes it runs on the embedded engine's crawl
and on Spark's)."""

from __future__ import annotations

import pytest

from crawllib import config as config_mod
from crawllib.runs import runner
from crawllib.store import lease
from crawllib.testweb import WebSpec, serve_in_thread
from tests.conftest import ENGINES, open_db

MAX_DEPTH = 2
DELAY = 0.2
GENERATIONS = 6  # depth 2, a 3-hop redirect chain and two retries all settle within 6


@pytest.fixture(scope="session", params=ENGINES)
def e2e_crawl(request, spark_cfg, tmp_path_factory):
    engine = request.param
    spec = WebSpec(
        seed=3, hosts=6, pages_per_host=20, special=True, slow_seconds=0.5, big_body_bytes=8 << 20
    )
    root = str(tmp_path_factory.mktemp(f"e2e-{engine}") / "crawl")
    with serve_in_thread(spec) as web:
        cfg = config_mod.replace(
            spark_cfg,
            network__resolve=web.resolve,
            politeness__default_delay=DELAY,
            crawl__max_depth=MAX_DEPTH,
            fetch__total_timeout=5.0,
            fetch__max_body_bytes=1_000_000,
            storage__fetch_slices=2,
            fetch__max_attempts=3,
            # robots5xx.net's URLs wait for its robots.txt: an hour, so no later run plans them
            robots__retry_seconds=3600.0,
            fetch__soft404_probe=True,
        )
        seeds = tmp_path_factory.mktemp("seeds") / "seeds.txt"
        seeds.write_text("\n".join(web.seeds()) + "\n")
        # No cap: the crawl runs until nothing is left within MAX_DEPTH, retries included.
        with lease.hold(root, "pytest e2e", cfg):
            db = open_db(request, engine, root, cfg)
            try:
                ran = runner.run_crawl(db, cfg, str(seeds))
            finally:
                db.close()
        log = list(web.log)
        expected = web.expected_fetches(MAX_DEPTH)
        attempts = web.expected_attempts(MAX_DEPTH)
    return {
        "engine": engine,
        "root": root,
        "cfg": cfg,
        "ran": ran,
        "log": log,
        "expected": expected,
        "attempts": attempts,
        "web": web,
    }
