"""The scheduling rules over the generations table's states: stage order, what is due
(`--gen next`, which the Airflow DAG uses), where seeds go, and the one rule that decides a
stage's state for `crawl status` and for the scheduler alike."""

from __future__ import annotations

import datetime as dt

import pytest

from crawllib.core.errors import StageOrderError
from crawllib.core.stage_order import (
    RunRow,
    due_gen,
    last_done,
    latest_of,
    next_gen,
    next_seed_gen,
    prerequisite,
)
from crawllib.runs.runner import should_run
from crawllib.store.maintain import skip_reason

T = dt.datetime(2026, 1, 1, 12, 0, 0)


def at(seconds: float) -> dt.datetime:
    return T + dt.timedelta(seconds=seconds)


def done(*gens: int, through: str = "update") -> dict[tuple[int, str], str]:
    """States of generations ``gens`` with every stage up to ``through`` done."""
    stages = ["plan", "fetch", "update"]
    return {(g, s): "done" for g in gens for s in stages[: stages.index(through) + 1]}


def test_prerequisites_chain_the_stages_and_the_generations():
    assert prerequisite(0, "plan") is None
    assert prerequisite(3, "plan") == (2, "update")
    assert prerequisite(3, "fetch") == (3, "plan")
    assert prerequisite(3, "update") == (3, "fetch")


def test_next_gen_is_the_first_unfinished_generation():
    assert next_gen({}) == 0
    assert next_gen(done(0, 1)) == 2
    assert next_gen({**done(0), **done(1, through="fetch")}) == 1
    # a generation whose update failed is still the one due
    assert next_gen({**done(0), **done(1, through="fetch"), (1, "update"): "failed"}) == 1
    # an older root's parse rows are no stage any more: update of 1 is what is missing
    assert next_gen({**done(0), **done(1, through="fetch"), (1, "parse"): "done"}) == 1
    # a started generation below a finished one (a forced rerun) comes first
    assert next_gen({**done(0, 2), (1, "plan"): "running"}) == 1


def test_maintain_every_k_runs_after_generations_that_are_multiples_of_k():
    assert last_done({}) is None
    assert skip_reason({}, 3) == "no generation has finished yet"
    # generation 6 is running: the latest finished one is 5
    states = {**done(0, 1, 2, 3, 4, 5), **done(6, through="fetch")}
    assert last_done(states) == 5
    assert skip_reason(states, 3) == ("the latest finished generation, 5, is not a multiple of 3")
    assert skip_reason(states, 5) is None and skip_reason(states, 1) is None
    assert skip_reason({**states, (6, "update"): "failed"}, 3) is not None
    assert skip_reason({**states, (6, "update"): "done"}, 3) is None
    assert skip_reason(done(0), 10) is None  # after generation 0, 10, 20, ...


def test_due_gen_gives_each_stage_the_generation_it_should_run():
    states = {**done(0, 1), **done(2, through="plan"), (2, "fetch"): "failed"}
    assert due_gen(states, "plan") == 2  # generation 2 is not finished
    assert due_gen(states, "plan") == 2
    assert due_gen(states, "fetch") == 2  # plan of 2 done, its fetch not
    assert due_gen(states, "update") == 1  # fetch of 2 not done: nothing new for update
    assert due_gen({}, "plan") == 0
    assert due_gen({}, "fetch") == 0  # nothing planned: run_stage refuses (stage order)
    # two generations ready for one stage: the lower first
    states = {**done(0), **done(1, through="plan"), (0, "fetch"): "running"}
    assert due_gen(states, "fetch") == 0


def test_should_run_skips_done_stages_refuses_out_of_order_and_names_the_missing_stage():
    states = done(0, through="plan")
    assert should_run(states, 0, "fetch")
    assert not should_run(states, 0, "plan")  # done: skipped
    assert should_run(done(0, through="fetch"), 0, "fetch", force=True)
    with pytest.raises(StageOrderError, match="cannot run update of generation 0: fetch of"):
        should_run(states, 0, "update")
    with pytest.raises(StageOrderError, match="update of generation 0 is not done"):
        should_run(states, 1, "plan")
    with pytest.raises(StageOrderError):
        should_run({}, 0, "fetch", force=True)  # force never skips the order
    with pytest.raises(ValueError, match="unknown stage 'crawl'"):
        should_run(states, 0, "crawl")
    # a plan forced after its fetch started would record a plan that is not the one fetched
    with pytest.raises(StageOrderError, match="plan of generation 0 again: its fetch has started"):
        should_run(done(0, through="fetch"), 0, "plan", force=True)
    assert should_run({**done(0), (1, "plan"): "failed"}, 1, "plan")


def test_new_seeds_join_the_first_generation_not_yet_planned():
    assert next_seed_gen({}) == 0
    assert next_seed_gen(done(0, through="plan")) == 1
    assert next_seed_gen({**done(0, 1), (2, "plan"): "failed"}) == 3


def run_rows(stage: str, *events: tuple[str, float, float | None]) -> list[RunRow]:
    return [
        RunRow(0, stage, state, at(start), None if end is None else at(end))
        for state, start, end in events
    ]


@pytest.mark.parametrize(
    ("events", "latest"),
    [
        # a run's own rows: running then done at the same instant (clock resolution)
        ([("running", 0, None), ("done", 0, 0)], "done"),
        ([("running", 0, None), ("done", 0, 5)], "done"),
        # --force: a rerun that is running (or crashed without a row) is not done
        ([("running", 0, None), ("done", 0, 5), ("running", 9, None)], "running"),
        ([("running", 0, None), ("done", 0, 5), ("running", 9, None), ("done", 9, 12)], "done"),
        # a failed run, then a rerun
        ([("running", 0, None), ("failed", 0, 3), ("running", 4, None)], "running"),
        ([("running", 0, None), ("failed", 0, 3), ("running", 4, None), ("done", 4, 8)], "done"),
    ],
)
def test_the_latest_row_decides_a_stage_state_whatever_the_row_order(events, latest):
    rows = run_rows("fetch", *events)
    assert latest_of(rows)[(0, "fetch")].state == latest
    assert latest_of(reversed(rows))[(0, "fetch")].state == latest
