"""The generations table as `crawl status` and the scheduler read it: one state per stage run,
the same for both, also after `--force`; and the stage order the CLI enforces. Each test runs
on both engines (the ``db`` fixture): the ledger written and read by the engine, `crawl status`
reading it without one."""

from __future__ import annotations

import datetime as dt

import pytest

from crawllib import cli
from crawllib.core import stage_order
from crawllib.core.errors import StageOrderError
from crawllib.runs import orchestrator, runner, status
from crawllib.store import generations
from tests.conftest import test_config_overrides


def states_both_ways(db):
    """(gen, stage) -> state, as the scheduler reads it (on the engine) and as `crawl status`
    shows it (without one)."""
    scheduler = generations.stage_states(db)
    rows, _ = status.read_without_spark(db.root, db.cfg)
    return scheduler, {(gen, stage): state for gen, stage, state, *_ in rows}


def test_status_and_scheduler_agree_on_a_forced_rerun(db):
    t0 = dt.datetime(2026, 1, 1, 12, 0, 0)
    for i, stage in enumerate(("plan", "fetch")):
        start = t0 + dt.timedelta(minutes=i)
        generations.record(db, 0, stage, "running", start)
        generations.record(db, 0, stage, "done", start, {"urls": 3})
    scheduler, status = states_both_ways(db)
    assert scheduler == status == {(0, "plan"): "done", (0, "fetch"): "done"}

    # `crawl fetch --gen 0 --force` has started (or died) after the done row: not done
    generations.record(db, 0, "fetch", "running", dt.datetime.now(dt.UTC).replace(tzinfo=None))
    scheduler, status = states_both_ways(db)
    assert scheduler == status == {(0, "plan"): "done", (0, "fetch"): "running"}
    assert stage_order.due_gen(scheduler, "fetch") == 0
    with pytest.raises(StageOrderError, match="fetch of generation 0 is not done"):
        runner.should_run(scheduler, 0, "update")

    # the forced rerun fails: still not done, for both
    generations.record(db, 0, "fetch", "failed", dt.datetime.now(dt.UTC).replace(tzinfo=None))
    scheduler, status = states_both_ways(db)
    assert scheduler == status == {(0, "plan"): "done", (0, "fetch"): "failed"}


def test_a_stage_run_out_of_order_is_refused_with_one_line_and_exit_2(db, capsys):
    assert cli.main(["fetch", db.root, "--gen", "0", "--engine", db.engine]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "crawl fetch: cannot run fetch of generation 0: plan of generation 0 is not done"
    assert generations.stage_states(db) == {}  # nothing recorded, nothing run


def test_the_airflow_worker_resolves_the_generation_plan_resolves(db, tmp_path, capsys):
    """crawllib.runs.orchestrator (delta-rs, no engine) against the engine's side on a real
    root, and `crawl plan --if-work`, which records nothing when nothing is left to fetch."""
    root = db.root
    sets = ["--engine", db.engine, *[a for s in test_config_overrides() for a in ("--set", s)]]

    def engine_due() -> int:
        return stage_order.due_gen(generations.stage_states(db), "plan")

    assert orchestrator.due_generation(root) == engine_due() == 0
    assert cli.main(["plan", root, "--gen", "next", "--if-work", *sets]) == 0
    assert "nothing left to fetch" in capsys.readouterr().out
    assert generations.stage_states(db) == {}
    assert orchestrator.plan_chose_urls(root, 0) is False

    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.test/\n")
    assert cli.main(["seed", root, str(seeds), *sets]) == 0
    assert cli.main(["plan", root, "--gen", "next", "--if-work", *sets]) == 0
    assert orchestrator.plan_chose_urls(root, 0) is True
    assert orchestrator.due_generation(root) == engine_due() == 0
