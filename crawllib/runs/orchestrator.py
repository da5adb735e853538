"""What an orchestrator's worker needs to know of a crawl, without Spark: the generation due and
whether its plan chose anything. Reads the ``generations`` table with delta-rs (the ``sql``
extra of the wheel ``make dist`` builds; DuckDB reads the stream as for `crawl sql`) and applies the rules of crawllib.core.stage_order, so the answer is
the one ``--gen next`` gives the plan stage (`crawl plan ROOT --gen next`).

The Airflow DAGs (jobs/airflow/crawl_dags.py) resolve the generation once per run with
:func:`due_generation` and hand the number to every stage; :func:`plan_chose_urls` decides
whether the run goes on after plan.
"""

from __future__ import annotations

import argparse
import sys

from crawllib.config import Config, make_config
from crawllib.core.errors import EngineUnavailable
from crawllib.core.stage_order import RunRow, States, latest_of, next_gen
from crawllib.core.vocab import Stage, StageState
from crawllib.sql import duckdb_engine


def read_rows(root: str, cfg: Config | None = None) -> list[RunRow]:
    """Every row of the root's generations table at its current version. FileNotFoundError
    when ``root`` holds no generations table (no crawl root, or not initialised yet);
    EngineUnavailable without the ``sql`` extra."""
    if not duckdb_engine.available():
        raise EngineUnavailable(duckdb_engine.MISSING)
    from deltalake import DeltaTable

    location, options = duckdb_engine.table_location(root, cfg or make_config())
    uri = f"{location}/generations"
    if not DeltaTable.is_deltatable(uri, options or None):
        raise FileNotFoundError(f"{root}: no generations table (not a crawl root?)")
    con = duckdb_engine.connect()
    con.register("generations", duckdb_engine.DeltaScan(uri, options, None))
    result = con.execute("SELECT * FROM generations")
    names = [column[0] for column in result.description or ()]
    rows = [dict(zip(names, values, strict=True)) for values in result.fetchall()]
    return [RunRow.of(r) for r in rows]


def states_of(rows: list[RunRow]) -> States:
    return {key: row.state for key, row in latest_of(rows).items()}


def due_generation(root: str, cfg: Config | None = None) -> int:
    """The generation a run of all three stages works on now: the one ``--gen next`` gives plan
    (crawllib.core.stage_order.next_gen): the first started and not finished, else the one after the last
    finished; 0 on a crawl root no stage has run on yet."""
    return next_gen(states_of(read_rows(root, cfg)))


def plan_chose_urls(root: str, gen: int, cfg: Config | None = None) -> bool:
    """Whether fetch and update of ``gen`` have anything to do after its plan task: True
    when plan of ``gen`` is done (even with 0 URLs planned: the generation must finish for the
    next one to be planned), False when it is not, which `crawl plan --if-work` leaves so when
    nothing is due now or it plans nothing (it records no run then)."""
    latest = latest_of(read_rows(root, cfg)).get((gen, Stage.PLAN))
    return latest is not None and latest.state == StageState.DONE


NOTHING_TO_FETCH = 99  # exit status of `planned` when plan recorded no run: the DAG skips on it


def main(argv: list[str] | None = None) -> int:
    """``python -m crawllib.runs.orchestrator due ROOT [--gen next|N]`` prints the generation the run
    works on (N as given); ``... planned ROOT GEN`` exits 0 when plan of GEN is done, else
    NOTHING_TO_FETCH. ``--config FILE`` (repeatable) only for the S3 settings of spark.conf.
    The number is the last line printed (Airflow's BashOperator pushes it to XCom). A root
    that is not a crawl root, or a bad config file, is one line on stderr and exit 2."""
    import logging

    from crawllib.config import load_config

    parser = argparse.ArgumentParser(prog="python -m crawllib.runs.orchestrator")
    parser.add_argument("command", choices=("due", "planned"))
    parser.add_argument("root")
    parser.add_argument("gen", nargs="?", type=int, help="planned: the generation")
    parser.add_argument("--gen", dest="given", default="next", help="due: 'next' or a number")
    parser.add_argument("--config", action="append", default=[], metavar="FILE")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        return _run(parser, args, load_config(args.config))
    except (FileNotFoundError, ValueError) as exc:  # ConfigError is a ValueError
        # one line for the task's log, exit 2 as `crawl` gives for a bad input or root
        print(f"{parser.prog} {args.command}: {exc}", file=sys.stderr)
        return 2


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace, cfg: Config) -> int:
    if args.command == "due":
        if args.given != "next":
            gen = int(args.given)
            if gen < 0:
                parser.error(f"--gen {args.given!r}: generations start at 0")
            print(gen)
            return 0
        print(due_generation(args.root, cfg))
        return 0
    if args.gen is None:
        parser.error("planned: the generation is missing")
    if plan_chose_urls(args.root, args.gen, cfg):
        print(f"generation {args.gen}: plan done; fetch and update follow")
        return 0
    print(f"generation {args.gen}: plan recorded no run (nothing left to fetch); the run ends")
    return NOTHING_TO_FETCH


if __name__ == "__main__":
    sys.exit(main())
