"""The one place a SparkSession is built: Delta extension and catalog, jars, master, quiet logs.

Delta's jars come from Maven Central through Ivy, once, into ``spark.jars_cache``; after that the
session points ``spark.jars`` at the cached files, so no network is needed (and none is tried).
With ``spark.delta_jars = "provided"`` (EMR, where the cluster ships Delta) nothing is added.

The S3A file system (``s3a://`` crawl roots, seed files, WARC exports) is hadoop-aws with the
AWS SDK's S3 modules: fetched once, the same way, into ``jars_cache/s3-jars`` and put on
``spark.jars`` of a session this process starts itself (``spark.master`` set) when a URI it is
given, ``crawl.exclude_file`` or an ``fs.s3a`` setting of ``spark.conf`` needs them
(:func:`needs_s3`). Under spark-submit (master empty) the JVM runs before this code, so they
would come too late for the driver: there ``--jars`` or the cluster (EMR's own S3 file system)
brings them, and ``spark.s3_jars = "provided"`` says so.

Quiet: a JVM this process starts gets ``log4j2.properties`` (warnings and errors, without the
start-up notices) and its output, Ivy's resolution report included, goes to the logger
``crawllib.jvm`` at DEBUG level, which the terminal shows only with ``crawl -v``.
"""

from __future__ import annotations

import fcntl
import glob
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING

from crawllib.config import is_secret, mask_value

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from crawllib.config import Config

log = logging.getLogger(__name__)
# The output of the JVMs this process starts: DEBUG, so only `crawl -v` shows it.
jvm_log = logging.getLogger("crawllib.jvm")
LOG4J2 = Path(__file__).with_name("log4j2.properties")
QUIET_LOG4J = f"-Dlog4j2.configurationFile={LOG4J2.as_uri()}"

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


S3_SCHEMES = ("s3a://", "s3://", "s3n://")


def needs_s3(cfg: Config, uris: Sequence[str | None] = ()) -> bool:
    """Whether a session for ``uris`` (the crawl root, a seed file, an export folder) reads or
    writes S3: one of them or ``crawl.exclude_file`` is an S3 URI, or ``spark.conf`` sets an
    ``fs.s3a`` key."""
    named = [*uris, cfg.crawl.exclude_file]
    return any(u and u.startswith(S3_SCHEMES) for u in named) or any(
        ".fs.s3a." in str(key) for key in cfg.spark.conf
    )


def adds_s3_jars(cfg: Config, uris: Sequence[str | None] = ()) -> bool:
    """Whether a session of cfg for ``uris`` gets the S3A jars: ``download``, this process
    starts Spark, and S3 is needed (:func:`needs_s3`)."""
    return cfg.spark.s3_jars == "download" and bool(cfg.spark.master) and needs_s3(cfg, uris)


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
    with _fetch_lock(cache, S3_JARS_DIR):
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


def fetch_delta_jars(cfg: Config) -> list[str]:
    """The cached Delta jars, fetched from Maven Central first (into ``jars_cache/jars``, as
    Ivy lays them out) if they are not cached. Raises RuntimeError if the fetch fails."""
    cache = Path(os.path.expanduser(cfg.spark.jars_cache))
    jars = cached_jars(str(cache))
    if jars:
        return jars
    with _fetch_lock(cache, "jars"):
        if not cached_jars(str(cache)):
            log.warning("fetching the Delta jars %s into %s (once)", DELTA_PACKAGE, cache)
            _resolve_packages((DELTA_PACKAGE,), (), str(cache), cfg)
    jars = cached_jars(str(cache))
    if not jars:
        raise RuntimeError(f"the Delta jars were not cached under {cache / 'jars'}")
    return jars


@contextmanager
def _fetch_lock(cache: Path, name: str) -> Iterator[None]:
    """One fetch of ``name`` at a time in ``cache``: the others wait, then reuse its result."""
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f"{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _resolve_packages(
    packages: tuple[str, ...], excludes: tuple[str, ...], ivy_home: str, cfg: Config
) -> None:
    """Resolve Maven packages and their dependencies, less ``excludes``, into ``ivy_home/jars`` by
    starting a JVM the way PySpark does (spark-submit resolves ``spark.jars.packages``), then
    stopping it. Ivy's report goes to ``crawllib.jvm`` (DEBUG). Raises RuntimeError, with the
    report's last lines, when the JVM does not start."""
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
    if LOG4J2.is_file():
        conf.set("spark.driver.extraJavaOptions", QUIET_LOG4J)
    for key in _IVY_KEYS:
        if key in cfg.spark.conf:
            conf.set(key, str(cfg.spark.conf[key]))
    with tempfile.TemporaryFile() as report:
        try:
            gateway = launch_gateway(
                conf, popen_kwargs={"stdout": report, "stderr": subprocess.STDOUT}
            )
        except Exception as exc:  # PySparkRuntimeError: the JVM exited before it was ready
            lines = _logged(report)
            tail = "; ".join(line.strip() for line in lines[-3:])
            raise RuntimeError(
                f"could not fetch {', '.join(packages)} from Maven Central ({tail or exc}); "
                "without network bring the jars yourself: spark.delta_jars and spark.s3_jars "
                '= "provided" (run `crawl -v ...` for Ivy\'s whole report)'
            ) from exc
        gateway.shutdown()
        gateway.proc.stdin.close()  # the JVM exits when its stdin closes
        gateway.proc.wait()
        _logged(report)


def _logged(report: IO[bytes]) -> list[str]:
    """The lines a JVM wrote to ``report``, each also logged to ``crawllib.jvm``."""
    report.seek(0)
    lines = report.read().decode("utf-8", errors="replace").splitlines()
    for line in lines:
        jvm_log.debug("%s", line)
    return [line for line in lines if line.strip()]


def _forward(stream: IO[bytes]) -> None:
    """Log each line a running JVM writes to ``crawllib.jvm`` until it closes its output."""
    for raw in iter(stream.readline, b""):
        jvm_log.debug("%s", raw.decode("utf-8", errors="replace").rstrip())


def spark_conf(cfg: Config, uris: Sequence[str | None] = ()) -> dict[str, str]:
    """Every Spark setting the crawler needs for a session over ``uris`` (the crawl root, files
    it reads or writes: :func:`needs_s3`), from the config; no side effects. The jars are the
    cached ones (:func:`get_spark` fetches them first)."""
    s = cfg.spark
    conf = {
        "spark.app.name": s.app_name,
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.ui.enabled": "true" if s.ui else "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(s.shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.databricks.delta.schema.autoMerge.enabled": "false",
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
            # Adaptive execution re-plans at each shuffle, one more Spark job per shuffle stage:
            # a third of a small generation's jobs, for partitions one machine does not need
            # coalesced (bench cost: measure 4c). spark.conf turns it back on.
            conf["spark.sql.adaptive.enabled"] = "false"
            # Each join Spark chooses to broadcast is a Spark job of its own (a quarter of a
            # small generation's jobs: 187 -> 142, bench cost); on one machine a sort-merge
            # join inside the query's own job is as quick. The joins the crawler broadcasts on
            # purpose (crawllib.transforms.lookup) say so with a hint, which still holds.
            conf["spark.sql.autoBroadcastJoinThreshold"] = "-1"
            # Whole-stage code generation compiles Java for every query, then the JIT compiles
            # that: on one machine's inputs it costs more than it saves (a 6,000-page crawl:
            # 154 -> 120 s without it; a small generation's update: 104 -> 21 s). C1-only JIT
            # was measured too and lost (154 -> 185 s), so the JIT keeps its defaults.
            conf["spark.sql.codegen.wholeStage"] = "false"
        if LOG4J2.is_file():  # not when crawllib runs from a zip (--py-files)
            conf["spark.driver.extraJavaOptions"] = QUIET_LOG4J
    jars: list[str] = []
    if s.delta_jars == "download":
        jars += cached_jars(s.jars_cache) or []
    if adds_s3_jars(cfg, uris):
        jars += cached_s3_jars(s.jars_cache) or []
    if jars:
        conf["spark.jars"] = ",".join(jars)
    for key, value in s.conf.items():
        if key == "spark.driver.extraJavaOptions" and key in conf:
            conf[key] = f"{conf[key]} {value}"  # theirs after ours: a later -D wins
        else:
            conf[str(key)] = str(value)
    # Last, so nothing turns it on (the config refuses it too): a speculative copy of a fetch
    # task is a second fetcher of the same hosts.
    conf[SPECULATION] = "false"
    return conf


SPECULATION = "spark.speculation"


def check_no_speculation(spark: SparkSession) -> None:
    """Raise ConfigError if the session's SparkContext runs speculative copies of tasks (a
    session made before the crawler's, with it on: Spark cannot turn it off while it runs)."""
    from crawllib.core.errors import ConfigError

    value = spark.sparkContext.getConf().get(SPECULATION, "false") or "false"
    if value.strip().lower() != "false":
        raise ConfigError(
            f"the running Spark session has {SPECULATION} = {value}: a speculative copy of a "
            "fetch task is a second fetcher of the same hosts. Start the crawler in a session "
            f"without it ({SPECULATION} = false)"
        )


def get_spark(cfg: Config, uris: Sequence[str | None] = ()) -> SparkSession:
    """Build (or return the running) SparkSession configured from cfg, for ``uris`` (the crawl
    root and the files the command reads or writes: they decide whether S3A is needed).
    Fetches the jars it adds first, once."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        check_no_speculation(active)
        return active
    if cfg.spark.delta_jars == "download":
        fetch_delta_jars(cfg)
    if adds_s3_jars(cfg, uris):
        fetch_s3_jars(cfg)
    conf = spark_conf(cfg, uris)
    if cfg.spark.master.startswith("local"):
        # PySpark starts Python workers with $PYSPARK_PYTHON (else "python3" from PATH); the
        # spark.pyspark.python conf only reaches spark-submit. Workers need this venv.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if cfg.spark.master:
        _start_jvm(conf)
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    check_no_speculation(spark)  # getOrCreate may have found a context started without ours
    spark.sparkContext.setLogLevel(cfg.spark.log_level)
    return spark


def launch_conf(conf: dict[str, str]) -> dict[str, str]:
    """The settings the JVM is launched with, as ``--conf k=v`` on its command line, which any
    local user reads (``ps``, ``/proc/PID/cmdline``): all but the secret ones (an S3 secret key,
    a password: `crawllib.config.is_secret`). Those reach the SparkContext through the session
    builder, inside the process, before anything reads them. A JVM option can only go on the
    command line: one that holds a secret (``-D...secret.key=``) is warned about."""
    out = {k: v for k, v in conf.items() if not is_secret(k)}
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        if key in out and mask_value(out[key]) != out[key]:
            log.warning(
                "%s holds a secret, which the JVM's command line shows to every local user: "
                "set it as a spark.hadoop.* key instead",
                key,
            )
    return out


def _start_jvm(conf: dict[str, str]) -> None:
    """Start the JVM of the session to come, as PySpark would, but with its output (stdout and
    stderr) forwarded to ``crawllib.jvm``; nothing when one runs already (an earlier session
    of this process, or spark-submit's)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    gateway = launch_gateway(
        SparkConf(loadDefaults=False).setAll(list(launch_conf(conf).items())),
        popen_kwargs={"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT},
    )
    threading.Thread(
        target=_forward, args=(gateway.proc.stdout,), name="jvm-output", daemon=True
    ).start()
    # What SparkContext._ensure_initialized does with a gateway it launches itself.
    SparkContext._gateway = gateway
    SparkContext._jvm = gateway.jvm


def fetch_jars(cfg: Config, s3: bool = False) -> list[str]:
    """Make sure the jars sessions of cfg add are cached (downloading them once, `make
    install`): Delta's, and with ``s3`` the S3A jars; return their paths."""
    jars = fetch_delta_jars(cfg) if cfg.spark.delta_jars == "download" else []
    if s3 and cfg.spark.s3_jars == "download":
        jars += fetch_s3_jars(cfg)
    return jars


if __name__ == "__main__":
    import argparse

    from crawllib.config import load_config

    parser = argparse.ArgumentParser(
        prog="python -m crawllib.store.session", description="fetch the jars sessions add, once"
    )
    parser.add_argument("--s3", action="store_true", help="the S3A jars too (s3a:// roots)")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for path in fetch_jars(load_config(), s3=parser.parse_args().s3):
        print(path)
