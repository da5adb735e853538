"""The generations table as `crawl status` and the scheduler read it: one state per stage run,
the same for both, also after `--force`; and the stage order the CLI enforces."""

from __future__ import annotations

import datetime as dt

import pytest

from crawllib import cli
from crawllib.core import stage_order
from crawllib.core.errors import StageOrderError
from crawllib.runs import orchestrator, runner, status_spark
from crawllib.store import generations
from tests.conftest import test_config_overrides


@pytest.fixture
def root(new_root):
    return new_root


def states_both_ways(spark, root):
    """(gen, stage) -> state, as the scheduler reads it and as `crawl status` shows it."""
    scheduler = generations.stage_states(spark, root)
    status = {
        (gen, stage): state for gen, stage, state, *_ in status_spark.status_rows(spark, root)
    }
    return scheduler, status


def test_status_and_scheduler_agree_on_a_forced_rerun(spark, root):
    t0 = dt.datetime(2026, 1, 1, 12, 0, 0)
    for i, stage in enumerate(("plan", "fetch")):
        start = t0 + dt.timedelta(minutes=i)
        generations.record(spark, root, 0, stage, "running", start)
        generations.record(spark, root, 0, stage, "done", start, {"urls": 3})
    scheduler, status = states_both_ways(spark, root)
    assert scheduler == status == {(0, "plan"): "done", (0, "fetch"): "done"}

    # `crawl fetch --gen 0 --force` has started (or died) after the done row: not done
    generations.record(
        spark, root, 0, "fetch", "running", dt.datetime.now(dt.UTC).replace(tzinfo=None)
    )
    scheduler, status = states_both_ways(spark, root)
    assert scheduler == status == {(0, "plan"): "done", (0, "fetch"): "running"}
    assert stage_order.due_gen(scheduler, "fetch") == 0
    with pytest.raises(StageOrderError, match="fetch of generation 0 is not done"):
        runner.should_run(scheduler, 0, "update")

    # the forced rerun fails: still not done, for both
    generations.record(
        spark, root, 0, "fetch", "failed", dt.datetime.now(dt.UTC).replace(tzinfo=None)
    )
    scheduler, status = states_both_ways(spark, root)
    assert scheduler == status == {(0, "plan"): "done", (0, "fetch"): "failed"}


def test_a_stage_run_out_of_order_is_refused_with_one_line_and_exit_2(spark, root, capsys):
    assert cli.main(["fetch", root, "--gen", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "crawl fetch: cannot run fetch of generation 0: plan of generation 0 is not done"
    assert generations.stage_states(spark, root) == {}  # nothing recorded, nothing run


def test_the_airflow_worker_resolves_the_generation_plan_resolves(spark, root, tmp_path, capsys):
    """crawllib.runs.orchestrator (delta-rs, no Spark) against the Spark side on a real root, and
    `crawl plan --if-work`, which records nothing when nothing is left to fetch."""
    sets = [a for s in test_config_overrides() for a in ("--set", s)]

    def spark_due() -> int:
        return stage_order.due_gen(generations.stage_states(spark, root), "plan")

    assert orchestrator.due_generation(root) == spark_due() == 0
    assert cli.main(["plan", root, "--gen", "next", "--if-work", *sets]) == 0
    assert "nothing left to fetch" in capsys.readouterr().out
    assert generations.stage_states(spark, root) == {}
    assert orchestrator.plan_chose_urls(root, 0) is False

    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.test/\n")
    assert cli.main(["seed", root, str(seeds), *sets]) == 0
    assert cli.main(["plan", root, "--gen", "next", "--if-work", *sets]) == 0
    assert orchestrator.plan_chose_urls(root, 0) is True
    assert orchestrator.due_generation(root) == spark_due() == 0
