"""Which engine runs a command, and the crawl root's tables on it (crawllib.store.db).

``--engine auto`` (the default) takes the embedded engine (DuckDB over delta-rs, worker
processes: no JVM) on one machine, and Spark on a cluster: when ``spark.master`` is not a local
one (``yarn``, ``spark://...``, ``k8s://...``, or empty: the cluster's own, as EMR's profile
has it) or when the process runs under ``spark-submit`` (the JVM started it). ``embedded`` and
``spark`` choose one. Both read and write the same tables, so a crawl may move between them at
any generation.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from crawllib.config import Config
from crawllib.core.errors import ConfigError
from crawllib.store.db import Db

ENGINES = ("auto", "embedded", "spark")


def under_spark_submit() -> bool:
    """Whether this process was started by spark-submit (its JVM gave it a gateway)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def choose(engine: str, cfg: Config) -> str:
    """``embedded`` or ``spark`` for the ``--engine`` word (module docstring)."""
    if engine not in ENGINES:
        raise ConfigError(f"--engine {engine!r}: expected one of {', '.join(ENGINES)}")
    if engine != "auto":
        return engine
    master = cfg.spark.master or ""
    if under_spark_submit() or not master.startswith("local"):
        return "spark"
    return "embedded"


def open_db(cfg: Config, root: str, engine: str = "auto", files: Sequence[str | None] = ()) -> Db:
    """The crawl root's tables on the engine ``engine`` chooses: a SparkSession with Delta
    (started, or the running one, with the jars ``root`` and ``files`` need), or an embedded
    engine of this process. Close it when done (Db.close)."""
    if choose(engine, cfg) == "spark":
        from crawllib.store.session import get_spark
        from crawllib.store.spark_db import SparkDb

        return SparkDb(get_spark(cfg, [root, *files]), root, cfg)
    from crawllib.store.embedded import EmbeddedDb

    return EmbeddedDb(root, cfg)
