"""The ``crawl`` command: one sub-command per operation, over the same library the jobs use.

Every sub-command takes ``--config FILE`` (repeatable, later files win) and
``--set section.key=value`` (repeatable, wins over files). Errors of the user's input
(bad config, missing crawl root, bad seed file, a refused query, a crawl root another process
is writing) print one clear line and exit 2.

A command that writes holds the crawl root's writer lease (`crawllib.store.lease`) from before its
engine starts until it ends, so a second writer is refused at once. The commands that run
stages take ``--engine auto|embedded|spark`` (crawllib.runs.engines: auto is the embedded
engine on one machine, Spark on a cluster).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from crawllib.cli import terminal
from crawllib.config import Config, load_config
from crawllib.core import stage_order
from crawllib.core.errors import USER_ERRORS, BadRoot, ConfigError
from crawllib.core.output import capped_values
from crawllib.core.roots import normalize_root
from crawllib.core.vocab import Stage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from crawllib.store.db import Db

log = logging.getLogger("crawllib")


@dataclasses.dataclass(frozen=True)
class Command:
    help: str
    add_args: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, Config], int]
    writes: bool  # holds the crawl root's writer lease while it runs
    check: Callable[[argparse.Namespace], None] | None = None  # before the lease: user errors


COMMANDS: dict[str, Command] = {}


def command(
    name: str,
    help_text: str,
    add_args: Callable[[argparse.ArgumentParser], None],
    writes: bool = False,
    check: Callable[[argparse.Namespace], None] | None = None,
) -> Callable[[Callable[[argparse.Namespace, Config], int]], Callable[..., int]]:
    def register(fn: Callable[[argparse.Namespace, Config], int]) -> Callable[..., int]:
        COMMANDS[name] = Command(help_text, add_args, fn, writes, check)
        return fn

    return register


def _crawl_db(
    cfg: Config,
    root: str,
    engine: str = "auto",
    writes: bool = False,
    files: Sequence[str | None] = (),
    verified: bool = True,
) -> Db:
    """The crawl's tables at ROOT on ``engine`` (crawllib.runs.engines), once ROOT is known to
    be a crawl root (else a clear error). writes: the command will write, so first no table may
    have lost commits or have commits crawllib did not make (`crawllib.store.integrity`; not
    ``verified``: `accept-state`, which repairs that), then an older root's tables are brought
    up to date."""
    from crawllib.runs.engines import open_db
    from crawllib.store import integrity

    db = open_db(cfg, root, engine, files)
    db.require()
    if writes:
        if verified:
            integrity.check_root(db)
        db.init_tables()
    return db


def _crawl_session(
    cfg: Config,
    root: str,
    writes: bool = False,
    files: Sequence[str | None] = (),
    verified: bool = True,
) -> SparkSession:
    """A SparkSession for the commands that only Spark runs (export-warc, register, maintain,
    crawl sql on Spark): `_crawl_db` on Spark."""
    from crawllib.store.spark_db import SparkDb

    db = _crawl_db(cfg, root, "spark", writes, files, verified)
    assert isinstance(db, SparkDb)
    return db.spark


def _engine_arg(p: argparse.ArgumentParser) -> None:
    from crawllib.runs.engines import ENGINES

    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="auto",
        help="embedded: DuckDB over delta-rs in this process, no JVM; spark: a SparkSession "
        "(clusters); auto (default): embedded on a local spark.master, spark under "
        "spark-submit or on a cluster master",
    )


def _root(p: argparse.ArgumentParser) -> None:
    p.add_argument("root", help="crawl root: a local folder or s3a://bucket/prefix")


def _seed_args(p: argparse.ArgumentParser) -> None:
    _root(p)
    _engine_arg(p)
    p.add_argument(
        "file",
        help="text file (one URL a line, # comments) or CSV/Parquet with a url column; "
        "local or a URI (s3a://bucket/seeds.txt)",
    )


def _format_arg(p: argparse.ArgumentParser) -> None:
    """--format: how a command prints its rows (crawllib.core.output.WRITERS)."""
    p.add_argument(
        "--format",
        choices=["table", "json", "csv"],
        default="table",
        help="table (default), json (one object a line) or csv",
    )


def _sql_args(p: argparse.ArgumentParser) -> None:
    _root(p)
    p.add_argument("query", help='SQL over the crawl tables, e.g. "SELECT count(*) FROM frontier"')
    _format_arg(p)
    p.add_argument(
        "--limit",
        type=_row_limit,
        default=None,
        help="print at most this many rows (the table format's default: sql.table_rows)",
    )
    p.add_argument(
        "--engine",
        choices=["auto", "duckdb", "embedded", "spark"],
        default="auto",
        help="duckdb (or embedded): DuckDB over delta-rs, no JVM; spark: Spark SQL; auto "
        "(default): duckdb for a local root, else spark",
    )


def _init_args(p: argparse.ArgumentParser) -> None:
    _root(p)
    _engine_arg(p)


def _row_limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"--limit {text!r}: expected a number of rows >= 0")
    return value


class _TableCap:
    """The rows `crawl sql` prints: in the table format at most ``cap`` when no --limit was
    given (the table holds them to size its columns; whether more were left unread is known
    after), and in every format each value cut at sql.max_value_chars."""

    def __init__(self, args: argparse.Namespace, cfg: Config) -> None:
        self.cap = cfg.sql.table_rows if args.format == "table" and args.limit is None else None
        self.max_chars = cfg.sql.max_value_chars
        self.more = False

    def limit(self, limit: int | None) -> int | None:
        """The rows to read: one more than the cap, to know whether there are more."""
        return limit if self.cap is None else self.cap + 1

    def rows(self, rows: Iterator[tuple]) -> Iterator[tuple]:
        """``rows`` up to the cap, each value within sql.max_value_chars."""
        for n, row in enumerate(capped_values(rows, self.max_chars)):
            if self.cap is not None and n == self.cap:
                self.more = True
                return
            yield row

    def note(self) -> None:
        if self.more:
            print(
                f"(the first {self.cap} rows: sql.table_rows; more with --limit N, or all "
                "with --format csv|json)"
            )


@command("init", "create the crawl tables under ROOT (idempotent)", _init_args, writes=True)
def cmd_init(args: argparse.Namespace, cfg: Config) -> int:
    from crawllib.runs.engines import open_db
    from crawllib.store import integrity

    db = open_db(cfg, args.root, args.engine)
    integrity.check_root(db)  # an existing root's tables are upgraded
    created = db.init_tables(upgrade=True)
    root = normalize_root(args.root)
    if created:
        print(f"initialised crawl root {root}: created {', '.join(created)}")
    else:
        print(f"crawl root {root} already initialised; nothing to do")
    return 0


@command("seed", "add seed URLs to the frontier of the next generation", _seed_args, writes=True)
def cmd_seed(args: argparse.Namespace, cfg: Config) -> int:
    from crawllib.stages import seeding
    from crawllib.store import generations

    seeding.check_local(args.file)  # before the engine starts
    db = _crawl_db(cfg, args.root, args.engine, writes=True, files=[args.file])
    gen = stage_order.next_seed_gen(generations.stage_states(db))
    report = seeding.seed(db, args.file, cfg, gen)
    for r in report.rejected:
        text = r.text if len(r.text) <= 100 else r.text[:100] + f"... ({len(r.text)} chars)"
        print(f"{r.where}: invalid seed {text!r}: {r.reason}", file=sys.stderr)
    print(
        f"seeded generation {report.gen}: {report.read} read, {report.valid} valid, "
        f"{len(report.rejected)} invalid, {report.added} new "
        f"({report.valid - report.added} already known or repeated)"
    )
    return 0


@command("sql", "run a read-only query over the crawl tables (each visible by its name)", _sql_args)
def cmd_sql(args: argparse.Namespace, cfg: Config) -> int:
    from crawllib.core.output import WRITERS
    from crawllib.sql import duckdb_engine

    engine = "duckdb" if args.engine == "embedded" else args.engine
    if engine == "auto":
        local = args.root.startswith("file:") or "://" not in args.root
        engine = "duckdb" if local and duckdb_engine.available() else "spark"
    cap = _TableCap(args, cfg)
    if engine == "duckdb":
        stop = _end_sql if _running.get("process") else None
        columns, rows = duckdb_engine.run_query(
            args.root, args.query, cfg, cap.limit(args.limit), stop
        )
        WRITERS[args.format](columns, cap.rows(rows), sys.stdout)
        cap.note()
        return 0
    return _spark_sql(args, cfg, cap)


def _end_sql(reason: str) -> NoReturn:
    """Ends the `crawl` process from a watch thread, for a query that cannot be cancelled: one
    line and exit 2, as for any refused query."""
    print(f"crawl sql: {reason}", file=sys.stderr, flush=True)
    os._exit(2)


def _spark_sql(args: argparse.Namespace, cfg: Config, cap: _TableCap) -> int:
    from pyspark.sql.types import TimestampType

    from crawllib.core.errors import QueryRefused
    from crawllib.core.output import WRITERS
    from crawllib.sql.guard import failure, run_query, time_limit

    spark = _crawl_session(cfg, args.root)
    seconds = cfg.sql.max_seconds
    # A task that fails logs its stack trace from the JVM; the command says why in one line.
    spark.sparkContext.setLogLevel("OFF")
    stop = None
    if _running.get("process"):  # the `crawl` process itself, not a caller of main()

        def stop() -> None:
            _end_sql(
                f"the query ran longer than sql.max_seconds ({seconds:g} s) and was stopped (it "
                "was still being planned)"
            )

    with time_limit(spark, seconds, stop) as stopped:
        try:
            df = run_query(spark, args.root, args.query, cfg)
            limit = cap.limit(args.limit)
            if limit is not None:
                df = df.limit(limit)
            # PySpark gives timestamps in this machine's time zone, naive: they print in UTC,
            # as DuckDB's
            fields = df.schema.fields
            times = [i for i, f in enumerate(fields) if isinstance(f.dataType, TimestampType)]
            rows = (
                tuple(
                    v.astimezone(dt.UTC) if i in times and v is not None else v
                    for i, v in enumerate(r)
                )
                for r in df.toLocalIterator()
            )
            WRITERS[args.format](df.columns, cap.rows(rows), sys.stdout)
            cap.note()
        except QueryRefused:
            raise
        except Exception as exc:  # the query failed while it ran (a bad cast, say)
            if not type(exc).__module__.startswith(("pyspark", "py4j")):
                raise
            if stopped.is_set():
                raise QueryRefused(
                    f"the query ran longer than sql.max_seconds ({seconds:g} s) and was stopped"
                ) from None
            raise QueryRefused(f"the query failed: {failure(exc)}") from None
        finally:
            spark.sparkContext.setLogLevel(cfg.spark.log_level)
    return 0


def _stage_args(p: argparse.ArgumentParser) -> None:
    _root(p)
    _engine_arg(p)
    p.add_argument(
        "--gen", type=_gen_arg, required=True, help="generation number, or 'next' (the one due)"
    )
    p.add_argument("--force", action="store_true", help="rerun even if already done (idempotent)")


def _gen_arg(text: str) -> int | str:
    if text == "next":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--gen {text!r}: expected a generation number or 'next'"
        ) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"--gen {text!r}: generations start at 0")
    return value


def _plan_args(p: argparse.ArgumentParser) -> None:
    _stage_args(p)
    p.add_argument(
        "--if-work",
        action="store_true",
        help="record nothing and exit 0 when the generation has not started and planning it "
        "would choose nothing (the crawl is complete; `crawl run` stops there too)",
    )


def _waits_line(db: Db, args: argparse.Namespace, cfg: Config) -> str:
    """What the URLs not due now wait for (crawllib.runs.runner.describe_waits)."""
    from crawllib.runs import runner
    from crawllib.stages import plan

    waiting = plan.waits(db, cfg, args.gen)
    return runner.describe_waits(waiting, plan.clock_now(cfg))


def _stage_command(command_name: str) -> Callable[..., int]:
    # `crawl parse` is update, extracting every page again with --force (no refetch)
    stage = Stage.UPDATE if command_name == Stage.PARSE else command_name
    reextract_on_force = command_name == Stage.PARSE

    def run(args: argparse.Namespace, cfg: Config) -> int:
        from crawllib.runs import runner
        from crawllib.store import generations

        db = _crawl_db(cfg, args.root, args.engine, writes=True)
        ledger = generations.read_ledger(db)
        if args.gen == "next":
            args.gen = stage_order.due_gen(ledger.states, stage)
        if_work = getattr(args, "if_work", False)
        if if_work and runner.nothing_left(db, cfg, args.gen, ledger.states):
            print(f"generation {args.gen} plan: nothing planned; {_waits_line(db, args, cfg)}")
            return 0
        result = runner.run_stage(
            db,
            cfg,
            args.gen,
            stage,
            force=args.force,
            ledger=ledger,
            if_work=if_work,
            reextract=reextract_on_force and args.force,
        )
        if if_work and (args.gen, stage) not in ledger.states:
            print(f"generation {args.gen} plan: nothing planned; {_waits_line(db, args, cfg)}")
            return 0
        if result is None:
            print(f"generation {args.gen} {stage}: already done; nothing to do (--force reruns it)")
        else:
            print(f"generation {args.gen} {stage}: done: {result}")
        return 0

    return run


for _stage, _help in (
    ("plan", "plan generation N: frontier -> fetch list (anti-joins, depth, caps, budgets)"),
    ("fetch", "fetch generation N's fetch list (polite, robots.txt, in slices)"),
    (
        "update",
        "update from generation N's fetch: texts and duplicates, the next frontier, crawldb "
        "(states, retries, redirects, shorter paths)",
    ),
    (
        "parse",
        "update generation N, and with --force extract its pages again from the raw pages "
        "(no refetch) and rewrite its texts, links and duplicate marks",
    ),
):
    add_args = _plan_args if _stage == "plan" else _stage_args
    command(_stage, _help, add_args, writes=True)(_stage_command(_stage))


def _generation_args(p: argparse.ArgumentParser) -> None:
    _root(p)
    _engine_arg(p)
    p.add_argument(
        "--gen",
        type=_gen_arg,
        default="next",
        help="generation number, or 'next' (the default): the next one due",
    )
    p.add_argument(
        "--if-work",
        action="store_true",
        help="when the generation has not started and planning it would choose nothing, "
        "record nothing, say what the URLs wait for and exit 0 (one spark-submit per "
        "generation from a scheduler: a run with nothing due costs one plan query)",
    )


@command("generation", "run all three stages of one generation", _generation_args, writes=True)
def cmd_generation(args: argparse.Namespace, cfg: Config) -> int:
    from crawllib.runs import runner
    from crawllib.store import generations

    db = _crawl_db(cfg, args.root, args.engine, writes=True)
    ledger = generations.read_ledger(db)
    if args.gen == "next":
        args.gen = stage_order.next_gen(ledger.states)
    if args.if_work and runner.nothing_left(db, cfg, args.gen, ledger.states):
        print(f"generation {args.gen}: nothing planned; {_waits_line(db, args, cfg)}")
        return 0
    gen = runner.run_generation(db, cfg, args.gen, ledger=ledger, if_work=args.if_work)
    if gen is None:
        print(f"generation {args.gen}: nothing planned; {_waits_line(db, args, cfg)}")
    else:
        print(f"generation {gen}: done")
    return 0


def _run_args(p: argparse.ArgumentParser) -> None:
    _root(p)
    _engine_arg(p)
    p.add_argument("--seeds", default=None, help="seed file (idempotent: known URLs are skipped)")
    p.add_argument(
        "--generations",
        type=int,
        default=None,
        help="stop once this many generations are done (default: when nothing is due now)",
    )
    p.add_argument(
        "--wait",
        action="store_true",
        help="when nothing is due now, sleep until the first URL waiting (a retry, a "
        "Retry-After, a cool-down, a revisit) is due, and go on: a continuous crawl",
    )


@command("run", "init if needed, seed, then run generations", _run_args, writes=True)
def cmd_run(args: argparse.Namespace, cfg: Config) -> int:
    from crawllib.runs import runner
    from crawllib.runs.engines import open_db
    from crawllib.stages import seeding

    if args.seeds:
        seeding.check_local(args.seeds)  # before the engine: a JVM's start is no way to learn it
    db = open_db(cfg, args.root, args.engine, [args.seeds])
    idle: list[str] = []
    try:
        ran = runner.run_crawl(
            db, cfg, args.seeds, args.generations, wait=args.wait, on_idle=idle.append
        )
        failed = _failures_line(db, ran) if ran else None
    finally:
        db.close()
    if ran:
        print(f"ran generation{'s' if len(ran) > 1 else ''} {', '.join(map(str, ran))}")
    if failed:
        print(failed)
    elif args.generations is not None and not idle:
        print(
            f"nothing to do: the crawl at {args.root} already has its {args.generations} generations"
        )
    if idle:
        print(idle[-1])
    return 0


def _failures_line(db: Any, gens: Sequence[int]) -> str | None:
    """What the generations ``gens`` did not fetch, by kind: "2 URLs not fetched: error dns 2"
    (URLs, each counted under its last outcome); None when every URL was fetched."""
    from crawllib.core.vocab import Outcome

    failing = ", ".join(
        f"'{o}'"
        for o in (Outcome.ERROR, Outcome.BLOCKED, Outcome.HTTP_ERROR, Outcome.ROBOTS_DENIED)
    )
    latest = (
        "SELECT url_key, max_by(outcome, fetched_at) AS outcome, "
        "max_by(coalesce(error_kind, CAST(http_status AS STRING)), fetched_at) AS kind "
        f"FROM {{fetches}} WHERE gen IN ({', '.join(map(str, gens))}) GROUP BY url_key"
    )
    rows = db.collect(
        db.sql(
            f"SELECT outcome, kind, count(*) AS n FROM ({latest}) WHERE outcome IN ({failing}) "
            "GROUP BY outcome, kind ORDER BY n DESC, outcome, kind",
            fetches=db.table(
                "fetches",
                columns=["gen", "url_key", "outcome", "error_kind", "http_status", "fetched_at"],
            ),
        )
    )
    if not rows:
        return None
    total = sum(int(r["n"]) for r in rows)
    kinds = ", ".join(
        f"{r['outcome']}{' ' + r['kind'] if r['kind'] else ''} {r['n']}" for r in rows
    )
    return f"{total} URL{'s' if total != 1 else ''} not fetched: {kinds} (crawl sql ROOT \"SELECT * FROM fetches WHERE outcome <> 'ok'\" for each)"


def _status_args(p: argparse.ArgumentParser) -> None:
    _root(p)
    _format_arg(p)


@command("status", "print each generation's stages: state, time, counts, items/s", _status_args)
def cmd_status(args: argparse.Namespace, cfg: Config) -> int:
    from crawllib.core.output import WRITERS
    from crawllib.runs import status

    rows, fresh = status.read_without_spark(args.root, cfg)  # no JVM: read with delta-rs
    if args.format == "json":
        WRITERS["json"](status.JSON_COLUMNS, rows, sys.stdout)
    else:
        WRITERS[args.format](status.COLUMNS, status.printable(rows), sys.stdout)
    footer = status.freshness_line(*fresh)
    if args.format == "table" and footer:
        print(footer)
    return 0


def _maintain_args(p: argparse.ArgumentParser) -> None:
    _root(p)
    _format_arg(p)
    p.add_argument(
        "--every",
        type=_every_arg,
        default=None,
        metavar="K",
        help="only when the latest finished generation is a multiple of K, else say so and "
        "exit 0 (for schedulers)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="list the partitions it would compact and the files it would delete; write "
        "nothing (and take no lease)",
    )


def _every_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"--every {text!r}: expected a number of generations >= 1")
    return value


@command(
    "maintain",
    "table upkeep between generations: compact partitions of many small files, delete files "
    "no recent version uses (VACUUM), checkpoint",
    _maintain_args,
    writes=True,
)
def cmd_maintain(args: argparse.Namespace, cfg: Config) -> int:
    from crawllib.core.output import WRITERS
    from crawllib.store import generations, maintain

    db = _crawl_db(cfg, args.root, "spark", writes=not args.dry_run)
    spark = db.spark  # type: ignore[attr-defined]
    ledger = generations.read_ledger(db)
    skipped = maintain.skip_reason(ledger.states, args.every) if args.every else None
    if skipped:
        if args.format == "table":
            print(f"maintain skipped: {skipped}")
        else:
            WRITERS[args.format](("skipped", "every"), [(skipped, args.every)], sys.stdout)
        return 0
    if args.dry_run:
        planned = maintain.plan(spark, args.root, cfg)
        rows = [dataclasses.astuple(p) for p in planned]
        WRITERS[args.format](maintain.PLAN_COLUMNS, rows, sys.stdout)
        if args.format == "table":
            print(maintain.plan_summary(planned))
        return 0
    done = maintain.maintain(db, cfg, ledger)  # type: ignore[arg-type]
    WRITERS[args.format](maintain.COLUMNS, [dataclasses.astuple(u) for u in done], sys.stdout)
    if args.format == "table":
        print(maintain.summary(done))
    return 0


def _register_args(p: argparse.ArgumentParser) -> None:
    _root(p)
    p.add_argument("--database", required=True, help="the catalog database to register into")
    p.add_argument(
        "--replace",
        action="store_true",
        help="point entries registered at another location (another crawl) to this root",
    )
    _format_arg(p)


@command(
    "register",
    "register the crawl's tables (external Delta tables) and views in the session's catalog "
    "(a Hive metastore, Glue on EMR) as DATABASE.<table> (idempotent)",
    _register_args,
)
def cmd_register(args: argparse.Namespace, cfg: Config) -> int:
    from crawllib.core.output import WRITERS
    from crawllib.sql import register

    register.check_database(args.database)  # before a JVM starts
    spark = _crawl_session(cfg, args.root)
    done = register.register(spark, args.root, cfg, args.database, replace=args.replace)
    WRITERS[args.format](register.COLUMNS, [dataclasses.astuple(e) for e in done], sys.stdout)
    if args.format == "table":
        print(f"registered in {args.database}: {register.summary(done)}")
    return 0


def _config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["show"], help="show: print the effective configuration")


@command(
    "config",
    "show the effective configuration (defaults < --config files < --set); secret "
    "spark.conf values (keys, tokens, passwords) are masked",
    _config_args,
)
def cmd_config(args: argparse.Namespace, cfg: Config) -> int:
    from crawllib.config import config_toml

    sys.stdout.write(config_toml(cfg, masked=True))
    return 0


def _export_warc_args(p: argparse.ArgumentParser) -> None:
    _root(p)
    p.add_argument("--gen", type=int, required=True, help="generation whose pages are exported")
    p.add_argument(
        "out_dir",
        nargs="?",
        default=None,
        help="folder for crawl-gen{N}-{partition:05d}-{seq:03d}.warc.gz files: local, or an S3 "
        "URI (s3a://bucket/warc); default gen=N in warc.archive_root (ROOT/warc)",
    )
    p.add_argument(
        "--max-file-bytes", type=int, default=None, help="start a new file past this size (1 GB)"
    )


@command(
    "export-warc",
    "write generation N's pages as WARC 1.1 files (request, response, metadata records) from "
    "the executors, and their rows of the warc_index table",
    _export_warc_args,
    writes=True,
)
def cmd_export_warc(args: argparse.Namespace, cfg: Config) -> int:
    from crawllib.stages import export

    # an older root gains warc_index
    spark = _crawl_session(cfg, args.root, writes=True, files=[args.out_dir])
    result = export.export_warc(spark, args.root, cfg, args.gen, args.out_dir, args.max_file_bytes)
    if not result.files:
        print(f"generation {args.gen} has no pages; no WARC file written")
        return 0
    for f in result.files:
        kinds = " ".join(f"{k}={n}" for k, n in f.records.items())
        print(f"wrote {f.path}: {f.total_records} records ({kinds}), {f.size} bytes")
    records = sum(f.total_records for f in result.files)
    skipped = f" ({result.pages - result.written} without url, status or time skipped)"
    print(
        f"exported generation {args.gen}: {result.written} pages, {records} records "
        f"in {len(result.files)} file{'s' if len(result.files) > 1 else ''}"
        + (skipped if result.written < result.pages else "")
    )
    print(f"indexed {result.written} captures in table warc_index (gen = {args.gen})")
    return 0


def _export_text_args(p: argparse.ArgumentParser) -> None:
    from crawllib.store.shards import FORMATS, SHARD_DOCS

    _root(p)
    p.add_argument("out", help="folder for the part-* files: local, or an S3 URI")
    p.add_argument(
        "--format",
        choices=list(FORMATS),
        default="parquet",
        help="parquet (default), jsonl (gzip JSON Lines) or wet (WARC conversion records)",
    )
    _engine_arg(p)
    p.add_argument(
        "--gen",
        type=_gens_arg,
        default=None,
        metavar="GENS",
        help="generations: N, A-B or a list (1,3,5-7); default all. Of each URL the latest "
        "text among them",
    )
    p.add_argument(
        "--language",
        type=_languages_arg,
        action="extend",
        default=[],
        metavar="CODES",
        help="keep texts in these languages (ISO 639 codes, repeatable or en,de): "
        "language_detected, else the declared language",
    )
    p.add_argument(
        "--where",
        default=None,
        metavar="PREDICATE",
        help='an SQL expression over texts columns, e.g. "quality.gopher_words >= 50"',
    )
    p.add_argument(
        "--one-per-cluster",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep only the first copy of each exact or near duplicate cluster "
        "(duplicate_of IS NULL; default on)",
    )
    p.add_argument(
        "--include-reserved",
        action="store_true",
        help="keep pages that reserve their text (tdm_reserved, robots noai or noindex)",
    )
    p.add_argument(
        "--shard-docs",
        type=int,
        default=SHARD_DOCS,
        metavar="N",
        help=f"documents per file at most (default {SHARD_DOCS})",
    )


def _gens_arg(text: str) -> list[int]:
    gens: set[int] = set()
    for piece in text.split(","):
        low, _, high = piece.strip().partition("-")
        try:
            first, last = int(low), int(high or low)
        except ValueError:
            first, last = -1, -1
        if first < 0 or last < first:
            raise argparse.ArgumentTypeError(
                f"--gen {text!r}: expected generations N, A-B or a list of them (1,3,5-7)"
            )
        gens.update(range(first, last + 1))
    return sorted(gens)


def _languages_arg(text: str) -> list[str]:
    codes = [c.strip().lower() for c in text.split(",") if c.strip()]
    if not codes or not all(re.fullmatch(r"[a-z]{2,3}", c) for c in codes):
        raise argparse.ArgumentTypeError(
            f"--language {text!r}: expected ISO 639 codes (en, de or en,de)"
        )
    return codes


def _check_export_text(args: argparse.Namespace) -> None:
    from crawllib.sql.functions import ALLOWED_FUNCTIONS
    from crawllib.transforms.text_export import check_predicate

    if args.where is not None:  # before an engine starts
        refused = [
            f for f in check_predicate(args.where).other_functions if f not in ALLOWED_FUNCTIONS
        ]
        if refused:
            raise ValueError(
                f"--where {args.where!r}: {', '.join(refused)}: not a function a query may call "
                "(crawl sql's allow-list)"
            )
    if args.shard_docs < 1:
        raise ValueError(f"--shard-docs {args.shard_docs}: expected a number of documents >= 1")


@command(
    "export-text",
    "write the crawl's texts as a training set's documents (text, id, metadata) to OUT in "
    "shards: Parquet, gzip JSON Lines or WET; filters for generations, languages, a predicate "
    "over texts columns, one per duplicate cluster; reserved pages left out",
    _export_text_args,
    check=_check_export_text,
)
def cmd_export_text(args: argparse.Namespace, cfg: Config) -> int:
    from crawllib.stages import text_export

    filters = text_export.Filters(
        args.gen, args.language, args.where, args.one_per_cluster, args.include_reserved
    )
    db = _crawl_db(cfg, args.root, args.engine, files=[args.out])
    try:
        shards = text_export.export_text(db, args.out, args.format, filters, args.shard_docs)
    finally:
        db.close()
    for s in shards:
        print(f"wrote {s.name}: {s.docs} documents, {s.size} bytes")
    docs = sum(s.docs for s in shards)
    print(
        f"exported {docs} document{'s' if docs != 1 else ''} in {len(shards)} "
        f"{args.format} file{'s' if len(shards) != 1 else ''} to {args.out}"
    )
    return 0


def _demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--root",
        default=".crawl/demo",
        help="crawl root, emptied each run: a new or empty folder, or one a demo made",
    )
    p.add_argument(
        "--generations", type=int, default=3, help="generations the demo crawls (default 3)"
    )
    p.add_argument("--hosts", type=int, default=12, help="regular hosts in the test web")
    _engine_arg(p)


def _check_demo_root(args: argparse.Namespace) -> None:
    from crawllib.cli.demo import check_demo_root

    check_demo_root(args.root)


@command(
    "demo",
    "crawl the built-in test web on 127.0.0.1 and show the results",
    _demo_args,
    writes=True,
    check=_check_demo_root,
)
def cmd_demo(args: argparse.Namespace, cfg: Config) -> int:
    from crawllib.cli.demo import run_demo
    from crawllib.core import progress

    if progress.bars_shown() and not args.verbose:
        logging.getLogger("crawllib").setLevel(logging.WARNING)  # the bars tell the story
    return run_demo(cfg, args.root, args.generations, args.hosts, engine=args.engine)


@command(
    "accept-state",
    "accept the tables' current versions as the crawl's state (after a lost log file or a "
    "restore stopped a stage); then rerun with --force what is gone",
    _init_args,
    writes=True,
)
def cmd_accept_state(args: argparse.Namespace, cfg: Config) -> int:
    from crawllib.store import integrity

    db = _crawl_db(cfg, args.root, args.engine, writes=True, verified=False)
    versions = integrity.accept_state(db)
    print("accepted table versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="crawl",
        description=__doc__.splitlines()[0].replace("``", ""),
        epilog="Exit status: 0 done, 2 a user error (one line on stderr), 1 anything else; "
        "when the reader of its output stops early, 0 for a command that reads, 141 for one "
        "that writes.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    _output_args(parser, argparse.SUPPRESS)  # before the sub-command: -q, -v, --log-format
    parser.set_defaults(quiet=False, verbose=False, log_format="text")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, cmd in COMMANDS.items():
        p = sub.add_parser(name, help=cmd.help, description=cmd.help)
        cmd.add_args(p)
        _output_args(p, argparse.SUPPRESS)  # ... and after it
        if cmd.writes:
            p.add_argument(
                "--wait-for-lease",
                type=float,
                default=0.0,
                metavar="SECONDS",
                help="when another command holds the crawl root's writer lease, try again "
                "until it is free or this time has passed (default 0: exit 2 at once)",
            )
        p.add_argument(
            "--config",
            action="append",
            default=[],
            metavar="FILE",
            help="TOML file over the defaults (repeatable)",
        )
        p.add_argument(
            "--set",
            action="append",
            default=[],
            dest="overrides",
            metavar="KEY=VALUE",
            help="override one setting, e.g. --set crawl.max_depth=2 (repeatable)",
        )
        p.add_argument(
            "--now",
            default=None,
            metavar="TIME",
            help="the crawl's clock for revisits, ISO 8601 (same as --set crawl.now=TIME)",
        )
    return parser


def _output_args(p: argparse.ArgumentParser, default: str) -> None:
    """-q, -v and --log-format; ``default`` SUPPRESS, so that the sub-command's parser keeps
    what was given before the sub-command unless given again after it."""
    loud = p.add_mutually_exclusive_group()
    loud.add_argument(
        "-q", "--quiet", action="store_true", default=default, help="warnings and errors only"
    )
    loud.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=default,
        help="log details, and Spark's and Ivy's output",
    )
    p.add_argument(
        "--log-format",
        choices=terminal.LOG_FORMATS,
        default=default,
        help="text (default; progress bars on a terminal) or json (one object a line)",
    )


# A command whose reader went away (`crawl sql ... | head -1`) ends quietly: with status 0 when
# printing was its work (it printed what its reader took), as a process killed by SIGPIPE does
# (128 + 13) when it writes the crawl root: its work may be unfinished and a scheduler must not
# take it as done.
BROKEN_PIPE = 141
_running: dict[str, Any] = {}


def console() -> int:
    """The `crawl` executable: `main`, in a process of its own (a query that cannot be
    cancelled may end it: crawl sql on Spark)."""
    _running["process"] = True
    return main()


def main(argv: Sequence[str] | None = None) -> int:
    """The `crawl` command: its exit status (0 done, 2 an error of the input or of the crawl
    root, 1 anything else; when stdout's reader closed it, 0 for a command that only reads and
    BROKEN_PIPE for one that writes)."""
    _running.pop("command", None)
    try:
        status = _main(argv)
        sys.stdout.flush()  # inside the try: a closed pipe shows at the flush
        return status
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at /dev/null so that flush is quiet
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        cmd = _running.get("command")
        return BROKEN_PIPE if cmd is None or cmd.writes else 0


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # argparse fills an optional positional (export-warc's OUT_DIR) with its default together
    # with the positional before it, so one given after options comes back unrecognised.
    if len(extra) == 1 and not extra[0].startswith("-") and getattr(args, "out_dir", "") is None:
        args.out_dir = extra[0]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.quiet and args.verbose:
        parser.error("-q and -v exclude each other")
    terminal.configure(-1 if args.quiet else 1 if args.verbose else 0, args.log_format)
    try:
        now = [f"crawl.now={args.now}"] if args.now is not None else []
        cfg = load_config(args.config, [*args.overrides, *now])
    except ConfigError as exc:
        print(f"crawl: configuration error: {exc}", file=sys.stderr)
        return 2
    cmd = COMMANDS[args.command]
    _running["command"] = cmd
    try:
        if getattr(args, "root", None):
            check_root(args.root, cmd.writes and not getattr(args, "dry_run", False))
        if cmd.check is not None:
            cmd.check(args)
        if not cmd.writes or getattr(args, "dry_run", False):
            return cmd.run(args, cfg)
        return _run_holding_lease(cmd, args, cfg)
    except (FileNotFoundError, ValueError, *USER_ERRORS) as exc:
        if type(exc).__module__.startswith(("pyspark", "py4j")):
            raise
        print(f"crawl {args.command}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        raise  # stdout's reader went away: main() ends quietly
    except OSError as exc:  # storage the command cannot reach (delta-rs, boto3, the disk)
        where = getattr(args, "root", None)
        print(
            f"crawl {args.command}: storage error{f' at {where}' if where else ''}: "
            f"{_one_line(exc)}",
            file=sys.stderr,
        )
        return 2


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _one_line(exc: BaseException) -> str:
    """An error's message on one line: a multi-line one (delta-rs's chain of causes, coloured)
    as its first line and its last, the root cause."""
    lines = [line.strip(" \u21b3") for line in _ANSI.sub("", str(exc)).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    return lines[0] if len(lines) == 1 else f"{lines[0]}: {lines[-1]}"


LEASE_RETRY_SECONDS = 15.0


def _run_holding_lease(cmd: Command, args: argparse.Namespace, cfg: Config) -> int:
    """Run cmd holding the root's writer lease; while another command holds it, try again every
    LEASE_RETRY_SECONDS for up to ``--wait-for-lease`` seconds (a scheduler's retry without a
    new task: an EMR step), then LeaseHeld."""
    import contextlib
    import time

    from crawllib.core.errors import LeaseHeld
    from crawllib.store import lease

    deadline = time.monotonic() + args.wait_for_lease
    while True:
        with contextlib.ExitStack() as held:
            try:
                held.enter_context(lease.hold(args.root, _command_line(args), cfg))
            except LeaseHeld as exc:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise
                log.warning("%s; trying again for up to %.0f s", exc, left)
                time.sleep(min(LEASE_RETRY_SECONDS, left))
                continue
            return cmd.run(args, cfg)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("crawllib")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def check_root(root: str, writes: bool) -> None:
    """BadRoot unless a local ``root`` can be a crawl root: not a file, and for a command
    that writes, a folder (or the nearest existing parent of one to be made) this user may
    write. Roots on object stores (scheme://) are left to the store."""
    if "://" in root:
        return
    path = os.path.abspath(root)
    if os.path.exists(path) and not os.path.isdir(path):
        raise BadRoot(f"{root} is a file, not a folder: a crawl root is a folder")
    if not writes:
        return
    existing = path
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise BadRoot(f"{root}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise BadRoot(f"{root}: this user may not write in {existing}")


def _command_line(args: argparse.Namespace) -> str:
    """What the lease names as its holder: the command and its generation, if one."""
    gen = getattr(args, "gen", None)
    return f"crawl {args.command}" + (f" --gen {gen}" if gen not in (None, "next") else "")
