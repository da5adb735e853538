"""Shared fixtures (one SparkSession per test session: it takes seconds to start) and the test
tiers.

Tiers, by folder: tests/unit (pure code, no SparkSession), tests/spark (a shared session,
tables under tmp_path) and tests/bench (the benchmarks' code, on small inputs) form the fast tier, ``make check`` (``pytest -m "not slow"``); tests/e2e,
tests/airflow and tests/cluster, and any test marked ``e2e`` elsewhere, are ``slow``, except
those marked ``smoke``, which the fast tier keeps: tests/e2e/test_crawl.py (one whole crawl of
the test web), test_notebook.py (the analyst notebook re-executed on that crawl) and
test_s3.py (a crawl and WARC export on an ``s3a://`` root on a local S3 server).

``make test`` (what CI runs) runs every test, in parallel over pytest-xdist workers
(``--dist loadfile``): each worker has its own SparkSession, and a test file runs whole in one
worker, so its module fixtures are built once; the files that share a session fixture
(``SHARED``) run in the same worker (``pytest_xdist_make_scheduler``). ``make check`` is the fast tier alone.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crawllib.config import load_config

TESTS = Path(__file__).resolve().parent
SLOW_FOLDERS = ("e2e", "airflow", "cluster")
# Files whose tests share a session-scoped fixture: one xdist worker runs them all (the e2e
# crawl of tests/e2e/conftest.py is made once).
SHARED = {"tests/e2e/test_notebook.py": "tests/e2e/test_crawl.py"}
# The test JVMs' JIT and collector: C1 only, one collecting thread (test_config_overrides).
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def test_config_overrides() -> list[str]:
    """Settings every test crawl uses: small Spark, no DNS ever leaves the machine."""
    return [
        # two cores; a failed task is tried once more, as a cluster would (test_hosts.py
        # kills a fetch task's worker and checks the retry's politeness)
        "spark.master=local[2,2]",
        "spark.shuffle_partitions=2",
        "spark.ui=false",
        "spark.log_level=ERROR",
        "network.resolve_only=true",
        "storage.min_slice_urls=1",  # tiny test crawls still commit in several slices
        "storage.min_slice_seconds=0",
        # the test web's truth counts every page: a mirror's copies keep their links
        "parse.follow_duplicate_links=true",
        # ... and fetches every page of the mirror (tests/e2e/test_aliases.py does not)
        'aliases.allow=["mirror.net"]',
        # a soft-404 probe is one more request per host: the tests that count requests are
        # about something else (tests/e2e/test_crawl.py turns it on)
        "fetch.soft404_probe=false",
        # a failed URL is due again at once (the next generation): the crawls settle quickly
        "fetch.retry_backoff_seconds=0",
        # the adaptive delay would follow the load of the machine, not of the test web (on
        # loopback a response time is mostly waiting for a core): the tests about it turn it on
        "politeness.adaptive=false",
        # Tiny test tables: compiling generated code costs more than it saves, and so does
        # re-planning at each shuffle (AQE) and pruning partitions at run time (crawls keep
        # all three): the Spark tests take about a third less time without them. The JVM's
        # JIT stops at C1 and collects with one thread: a test's JVM compiles much and runs
        # little, three workers share two cores (six Spark test files over 3 workers: 278 s
        # -> 229 s C1-only -> 210 s with the serial collector too). A crawl keeps both JIT
        # tiers (C1-only lost on a 6,000-page crawl, crawllib.store.session). The executors of
        # tests/cluster's standalone cluster take the same (a local master has none).
        'spark.conf={"spark.sql.codegen.wholeStage" = "false", '
        '"spark.sql.codegen.factoryMode" = "NO_CODEGEN", '
        '"spark.sql.adaptive.enabled" = "false", '
        '"spark.sql.optimizer.dynamicPartitionPruning.enabled" = "false", '
        f'"spark.driver.extraJavaOptions" = "{TEST_JVM_OPTIONS}", '
        f'"spark.executor.extraJavaOptions" = "{TEST_JVM_OPTIONS}"}}',
    ]


test_config_overrides.__test__ = False  # not a test


@pytest.fixture(scope="session")
def spark_cfg():
    return load_config(overrides=test_config_overrides())


@pytest.fixture(scope="session")
def spark(spark_cfg):
    from crawllib.store.session import get_spark

    session = get_spark(spark_cfg)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def template_root(spark_cfg, tmp_path_factory):
    """An initialised, empty crawl root, made once (with the embedded engine: no JVM): tests
    copy it (`new_root`) instead of creating the tables each time. Its writer lease is
    released: a copy is free."""
    from crawllib.store import lease
    from crawllib.store.embedded import EmbeddedDb

    root = str(tmp_path_factory.mktemp("template") / "crawl")
    with lease.hold(root, "pytest template_root", spark_cfg):
        db = EmbeddedDb(root, spark_cfg)
        db.init_tables()
        db.close()
    return root


ENGINES = ("embedded", "spark")


def open_db(request, engine: str, root: str, cfg):
    """The tables at ``root`` on ``engine`` (the session's SparkSession for spark)."""
    if engine == "spark":
        from crawllib.store.spark_db import SparkDb

        return SparkDb(request.getfixturevalue("spark"), root, cfg)
    from crawllib.store.embedded import EmbeddedDb

    return EmbeddedDb(root, cfg)


@pytest.fixture(params=ENGINES)
def engine(request) -> str:
    """Each engine in turn: a test that takes it runs once on the embedded engine and once on
    Spark, and must see the same."""
    return request.param


@pytest.fixture
def db(request, engine, new_root, spark_cfg):
    """The tables of a fresh crawl root (`new_root`, its lease held) on ``engine``."""
    opened = open_db(request, engine, new_root, spark_cfg)
    yield opened
    opened.close()


@pytest.fixture
def unheld_root(template_root, tmp_path):
    """A fresh, initialised, empty crawl root of this test, ``tmp_path/crawl``, whose writer
    lease nobody holds (for `crawl` processes the test starts)."""
    root = tmp_path / "crawl"
    shutil.copytree(template_root, root)
    return str(root)


@pytest.fixture
def new_root(unheld_root, spark_cfg):
    """A fresh, initialised, empty crawl root of this test, ``tmp_path/crawl``, whose writer
    lease this process holds for the test, as a program that writes must
    (`crawllib.store.lease.hold`); the crawl commands the test runs in this process hold it again."""
    from crawllib.store import lease

    with lease.hold(unheld_root, "pytest", spark_cfg):
        yield unheld_root


# The order xdist hands out test files (the longest first, so that none starts last): these
# files, then by folder.
FIRST = ("tests/cluster/test_standalone.py", "tests/e2e/test_crash.py")
FOLDER_ORDER = ("cluster", "e2e", "airflow", "spark", "bench", "unit")


def pytest_collection_modifyitems(config, items):
    def rank(item) -> tuple[int, int]:
        where = Path(item.path).resolve().relative_to(TESTS.parent).as_posix()
        folder = Path(item.path).resolve().relative_to(TESTS).parts[0]
        first = FIRST.index(where) if where in FIRST else len(FIRST)
        return first, FOLDER_ORDER.index(folder) if folder in FOLDER_ORDER else len(FOLDER_ORDER)

    items.sort(key=rank)  # stable: a file's tests keep their order
    for item in items:
        folder = Path(item.path).resolve().relative_to(TESTS).parts[0]
        if folder == "spark" or "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
        slow = folder in SLOW_FOLDERS or item.get_closest_marker("e2e")
        if slow and not item.get_closest_marker("smoke"):
            item.add_marker(pytest.mark.slow)


def pytest_xdist_make_scheduler(config, log):
    """Whole files to a worker, as ``--dist loadfile``, with the ``SHARED`` files together."""
    from xdist.scheduler import LoadFileScheduling

    config.option.loadscopereorder = False  # the collection's order (above), not file sizes

    class SharedFileScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return SHARED.get(scope, scope)

    return SharedFileScheduling(config, log)
