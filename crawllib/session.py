"""The one place a SparkSession is built: Delta extension and catalog, jars, master, quiet logs.

Delta's jars come from Maven Central through Ivy, once, into ``spark.jars_cache``; after that the
session points ``spark.jars`` at the cached files, so no network is needed (and none is tried).
With ``spark.delta_jars = "provided"`` (EMR, where the cluster ships Delta) nothing is added.

The S3A file system (``s3a://`` crawl roots, seed files, WARC exports) is hadoop-aws with the
AWS SDK's S3 modules: fetched once, the same way, into ``jars_cache/s3-jars`` and put on
``spark.jars`` of every session this process starts itself (``spark.master`` set). Under
spark-submit (master empty) the JVM runs before this code, so they would come too late for
the driver: there ``--jars`` or the cluster (EMR's own S3 file system) brings them, and
``spark.s3_jars = "provided"`` says so.
"""

from __future__ import annotations

import fcntl
import glob
import logging
import os
import shutil
import sys
import tempfile
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


# hadoop-aws of Spark's own Hadoop (pyspark/jars/hadoop-client-api-*.jar). It asks for the AWS
# SDK's 500 MB bundle; the SDK modules S3A uses are enough (of a release before 2.30, whose
# default request checksums many S3-compatible stores reject), and Spark ships the rest.
HADOOP_VERSION = "3.4.1"
AWS_SDK_VERSION = "2.29.52"
S3_PACKAGES = (
    f"org.apache.hadoop:hadoop-aws:{HADOOP_VERSION}",
    f"software.amazon.awssdk:s3:{AWS_SDK_VERSION}",
    f"software.amazon.awssdk:s3-transfer-manager:{AWS_SDK_VERSION}",
)
S3_EXCLUDES = (
    "software.amazon.awssdk:bundle",
    "io.netty:*",
    "org.slf4j:*",
    "commons-codec:*",
    "commons-logging:*",
    "org.apache.httpcomponents:*",
)
S3_JARS_DIR = "s3-jars"
# In S3_JARS_DIR: the packages and excludes resolved, then the jar files, one a line.
S3_MANIFEST = "jars.txt"
# Settings of spark.conf that tell Ivy where to look (a mirror, a proxy's settings file).
_IVY_KEYS = ("spark.jars.repositories", "spark.jars.ivySettings")


def cached_jars(jars_cache: str) -> list[str] | None:
    """The cached Delta jars (full paths) if all are present, else None."""
    jar_dir = Path(os.path.expanduser(jars_cache)) / "jars"
    if not all((jar_dir / name).is_file() for name in _REQUIRED_JARS):
        return None
    return sorted(glob.glob(str(jar_dir / "*.jar")))


def _s3_manifest_head() -> list[str]:
    return [*S3_PACKAGES, *(f"exclude {e}" for e in S3_EXCLUDES)]


def cached_s3_jars(jars_cache: str) -> list[str] | None:
    """The cached S3A jars (full paths) if a fetch of :data:`S3_PACKAGES` completed, else None."""
    jar_dir = Path(os.path.expanduser(jars_cache)) / S3_JARS_DIR
    try:
        lines = (jar_dir / S3_MANIFEST).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return None
    head = _s3_manifest_head()
    jars = [jar_dir / name for name in lines[len(head) :]]
    if lines[: len(head)] != head or not jars or not all(j.is_file() for j in jars):
        return None
    return [str(j) for j in jars]


def adds_s3_jars(cfg: Config) -> bool:
    """Whether sessions of cfg get the S3A jars: ``download``, and this process starts Spark."""
    return cfg.spark.s3_jars == "download" and bool(cfg.spark.master)


def fetch_s3_jars(cfg: Config) -> list[str]:
    """The cached S3A jars, fetched from Maven Central first if they are not cached.

    Spark resolves packages only when its JVM starts, so a JVM of its own resolves them
    (into a temporary Ivy home) while this process's session, if any, keeps its jars.
    Raises RuntimeError if the fetch fails.
    """
    cache = Path(os.path.expanduser(cfg.spark.jars_cache))
    jars = cached_s3_jars(str(cache))
    if jars:
        return jars
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f"{S3_JARS_DIR}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one fetch at a time; the others reuse its result
        jars = cached_s3_jars(str(cache))
        if jars:
            return jars
        log.warning("fetching the S3A jars %s into %s (once)", ", ".join(S3_PACKAGES), cache)
        with tempfile.TemporaryDirectory(prefix="s3-ivy-", dir=cache) as ivy_home:
            _resolve_packages(S3_PACKAGES, S3_EXCLUDES, ivy_home, cfg)
            resolved = sorted(p.name for p in (Path(ivy_home) / "jars").glob("*.jar"))
            target = cache / S3_JARS_DIR
            shutil.rmtree(target, ignore_errors=True)
            shutil.move(Path(ivy_home) / "jars", target)
        manifest = "".join(f"{line}\n" for line in [*_s3_manifest_head(), *resolved])
        # written last: a fetch cut short leaves no manifest, and the next one starts over
        (target / S3_MANIFEST).write_text(manifest, encoding="utf-8")
    jars = cached_s3_jars(str(cache))
    if not jars:
        raise RuntimeError(f"the S3A jars were not cached under {cache / S3_JARS_DIR}")
    return jars


def _resolve_packages(
    packages: tuple[str, ...], excludes: tuple[str, ...], ivy_home: str, cfg: Config
) -> None:
    """Resolve Maven packages and their dependencies, less ``excludes``, into ``ivy_home/jars`` by
    starting a JVM the way PySpark does (spark-submit resolves ``spark.jars.packages``), then
    stopping it. Raises RuntimeError when the JVM does not start (Ivy's report is on stderr)."""
    from pyspark import SparkConf
    from pyspark.java_gateway import launch_gateway

    if "PYSPARK_GATEWAY_PORT" in os.environ:  # launch_gateway would reuse spark-submit's JVM
        raise RuntimeError(
            "under spark-submit the S3A jars cannot be fetched: pass them with --jars and set "
            'spark.s3_jars = "provided"'
        )
    conf = SparkConf(loadDefaults=False)
    conf.set("spark.jars.packages", ",".join(packages))
    conf.set("spark.jars.excludes", ",".join(excludes))
    conf.set("spark.jars.ivy", ivy_home)
    for key in _IVY_KEYS:
        if key in cfg.spark.conf:
            conf.set(key, str(cfg.spark.conf[key]))
    try:
        gateway = launch_gateway(conf)
    except Exception as exc:  # PySparkRuntimeError: the JVM exited before it was ready
        raise RuntimeError(
            f"could not fetch {', '.join(packages)} from Maven Central ({exc}); without "
            'network set spark.s3_jars = "provided" and bring hadoop-aws yourself'
        ) from exc
    gateway.shutdown()
    gateway.proc.stdin.close()  # the JVM exits when its stdin closes
    gateway.proc.wait()


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
    jars: list[str] = []
    if s.delta_jars == "download":
        delta = cached_jars(s.jars_cache)
        if delta:
            jars += delta
        else:
            conf["spark.jars.packages"] = DELTA_PACKAGE
            conf["spark.jars.ivy"] = os.path.expanduser(s.jars_cache)
    if adds_s3_jars(cfg):
        jars += cached_s3_jars(s.jars_cache) or []  # get_spark fetches them first
    if jars:
        conf["spark.jars"] = ",".join(jars)
    conf.update({str(k): str(v) for k, v in s.conf.items()})
    return conf


def get_spark(cfg: Config):
    """Build (or return the running) SparkSession configured from cfg."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if adds_s3_jars(cfg):
        fetch_s3_jars(cfg)
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
    """Make sure the jars sessions of cfg add are cached (downloading them once, `make
    install`): Delta's, and the S3A jars; return their paths."""
    s3 = fetch_s3_jars(cfg) if adds_s3_jars(cfg) else []
    jars = cached_jars(cfg.spark.jars_cache)
    if jars or cfg.spark.delta_jars != "download":
        return (jars or []) + s3
    spark = get_spark(cfg)
    spark.range(1).count()
    spark.stop()
    jars = cached_jars(cfg.spark.jars_cache)
    if not jars:
        raise RuntimeError(f"Delta jars were not cached under {cfg.spark.jars_cache}")
    return jars + s3


if __name__ == "__main__":
    from crawllib.config import Config, load_config

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for path in fetch_jars(load_config()):
        print(path)
