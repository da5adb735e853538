"""The one place a SparkSession is built: Delta extension and catalog, jars, master, quiet logs.

Delta's jars come from Maven Central through Ivy, once, into ``spark.jars_cache``; after that the
session points ``spark.jars`` at the cached files, so no network is needed (and none is tried).
With ``spark.delta_jars = "provided"`` (EMR, where the cluster ships Delta) nothing is added.
"""

from __future__ import annotations

import glob
import logging
import os
import sys
from pathlib import Path

log = logging.getLogger(__name__)

DELTA_VERSION = "4.0.0"
SCALA_VERSION = "2.13"
DELTA_PACKAGE = f"io.delta:delta-spark_{SCALA_VERSION}:{DELTA_VERSION}"
# What the package brings: delta-spark, delta-storage and antlr4-runtime.
_REQUIRED_JARS = (
    f"io.delta_delta-spark_{SCALA_VERSION}-{DELTA_VERSION}.jar",
    f"io.delta_delta-storage-{DELTA_VERSION}.jar",
)


def cached_jars(jars_cache: str) -> list[str] | None:
    """The cached Delta jars (full paths) if all are present, else None."""
    jar_dir = Path(os.path.expanduser(jars_cache)) / "jars"
    if not all((jar_dir / name).is_file() for name in _REQUIRED_JARS):
        return None
    return sorted(glob.glob(str(jar_dir / "*.jar")))


def spark_conf(cfg: Config) -> dict[str, str]:
    """Every Spark setting the crawler needs, from the config (no side effects)."""
    s = cfg.spark
    conf = {
        "spark.app.name": s.app_name,
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        # Two copies of a fetch task would hit the same hosts twice.
        "spark.speculation": "false",
        "spark.ui.enabled": "true" if s.ui else "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(s.shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.databricks.delta.schema.autoMerge.enabled": "false",
        # Table folders are created by the crawler; spare the tiny-file checkpoint noise.
        "spark.databricks.delta.checkpointInterval": "20",
    }
    if s.master:
        conf["spark.master"] = s.master
        if s.master.startswith("local"):
            # Workers run the driver's interpreter (the project's venv).
            conf["spark.pyspark.python"] = sys.executable
            conf["spark.pyspark.driver.python"] = sys.executable
            # Delta rebuilds table state with a shuffle; 50 partitions only cost time on one machine.
            conf["spark.databricks.delta.snapshotPartitions"] = "2"
            # VACUUM lists a table's folders in this many tasks (default 10000): on one machine
            # their scheduling is nearly the whole cost of `crawl maintain`.
            conf["spark.sql.sources.parallelPartitionDiscovery.parallelism"] = "2"
    if s.delta_jars == "download":
        jars = cached_jars(s.jars_cache)
        if jars:
            conf["spark.jars"] = ",".join(jars)
        else:
            conf["spark.jars.packages"] = DELTA_PACKAGE
            conf["spark.jars.ivy"] = os.path.expanduser(s.jars_cache)
    conf.update({str(k): str(v) for k, v in s.conf.items()})
    return conf


def get_spark(cfg: Config):
    """Build (or return the running) SparkSession configured from cfg."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    conf = spark_conf(cfg)
    if cfg.spark.master.startswith("local"):
        # PySpark starts Python workers with $PYSPARK_PYTHON (else "python3" from PATH); the
        # spark.pyspark.python conf only reaches spark-submit. Workers need this venv.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if "spark.jars.packages" in conf:
        log.warning("fetching Delta jars %s into %s (once)", DELTA_PACKAGE, conf["spark.jars.ivy"])
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(cfg.spark.log_level)
    return spark


def fetch_jars(cfg: Config) -> list[str]:
    """Make sure the Delta jars are cached (downloading them once); return their paths."""
    jars = cached_jars(cfg.spark.jars_cache)
    if jars or cfg.spark.delta_jars != "download":
        return jars or []
    spark = get_spark(cfg)
    spark.range(1).count()
    spark.stop()
    jars = cached_jars(cfg.spark.jars_cache)
    if not jars:
        raise RuntimeError(f"Delta jars were not cached under {cfg.spark.jars_cache}")
    return jars


if __name__ == "__main__":
    from crawllib.config import Config, load_config

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for path in fetch_jars(load_config()):
        print(path)
