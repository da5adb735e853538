"""Politeness slots in fake time: exact gaps, jitter, Crawl-delay (never shortened), backoff,
Retry-After in full, the state a slot leaves for the next slice and starts from.

A slot reads and sleeps on its clock; here a :class:`FakeClock` whose sleep advances virtual
seconds at once, so every gap is checked exactly and no test waits. The engine tests
(test_fetch_politeness.py) show the same rules on the wire, with lower bounds only.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from crawllib.config import Config, load_config, replace
from crawllib.core.vocab import Outcome
from crawllib.engine.client import Fetched
from crawllib.engine.engine import _Run
from crawllib.engine.slots import Slot

TINY = 1e-9  # float rounding of sums of virtual seconds


class FakeClock:
    """Virtual monotonic seconds; ``sleep`` advances them at once and never suspends."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.slept: list[float] = []

    def time(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def done(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that must finish without suspending (no real wait, no event loop)."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise AssertionError("the slot waited on something other than its clock")


def politeness(**changes: Any):
    base = {"politeness__jitter": 0.0}
    base.update({f"politeness__{k}": v for k, v in changes.items()})
    return replace(load_config(), **base).politeness


def slot_of(clock: FakeClock, seed: int | None = 1, **changes: Any) -> Slot:
    return Slot.from_config("h", politeness(**changes), seed=seed, clock=clock)


def turn(slot: Slot, clock: FakeClock, deadline: float = math.inf) -> float:
    """Take the slot's next turn; the virtual time it starts."""
    assert done(slot.wait_turn(deadline))
    return clock.now


def gaps_of(starts: list[float]) -> list[float]:
    return [b - a for a, b in zip(starts, starts[1:], strict=False)]


def with_run(cfg: Config, scenario: Callable[[_Run], Any]) -> Any:
    """``scenario(run)`` with the state of an engine call (its rules; no request made), on a
    running event loop; its result."""

    async def go() -> Any:
        run = _Run(cfg, (), lambda record: None, time.time)
        try:
            return scenario(run)
        finally:
            await run.resolver.close()

    return asyncio.run(go())


def test_slot_delay_crawl_delay_and_backoff():
    slot = Slot.from_config("h", politeness(default_delay=0.5, max_crawl_delay=4.0))
    slot.set_crawl_delay(0.1)
    assert slot.delay == 0.5
    slot.set_crawl_delay(10)
    assert (slot.delay, slot.refused, slot.delay_source) == (10.0, True, "crawl_delay")
    slot.crawl_delay = 0.0
    for status, delay in [(500, 1.0), (503, 2.0), (429, 4.0), (500, 4.0), (200, 0.5), (404, 0.5)]:
        slot.record_status(status)
        assert slot.delay == delay


def test_turns_are_spaced_by_the_delay_plus_at_most_the_jitter():
    clock = FakeClock()
    slot = slot_of(clock, default_delay=0.25, jitter=0.2)
    first = clock.now
    starts = [turn(slot, clock) for _ in range(200)]
    assert starts[0] == first  # the first turn is at once
    gaps = gaps_of(starts)
    assert all(0.25 - TINY <= g <= 0.25 * 1.2 + TINY for g in gaps), (min(gaps), max(gaps))
    assert max(gaps) - min(gaps) > 0.25 * 0.2 * 0.5  # jitter is drawn per gap, not fixed
    assert sum(clock.slept) == pytest.approx(starts[-1] - first)  # time passed only in sleeps
    assert slot.requests == 200


def test_a_turn_past_the_deadline_is_refused_at_once():
    clock = FakeClock()
    slot = slot_of(clock, default_delay=0.1, jitter=0.5)
    starts = [turn(slot, clock, clock.now + 10) for _ in range(4)]
    assert all(0.1 - TINY <= g <= 0.15 + TINY for g in gaps_of(starts))
    slot.push_back(5)
    before = (clock.now, slot.last_start, slot.requests)
    assert not done(slot.wait_turn(clock.now + 1))  # would start after the deadline
    assert (clock.now, slot.last_start, slot.requests) == before  # no wait, nothing claimed
    assert turn(slot, clock, clock.now + 10) == pytest.approx(before[0] + 5)


def test_crawl_delay_is_never_shortened():
    # (Crawl-delay, gap; None: the slot is refused, its URLs deferred)
    for crawl_delay, gap in [(60, None), (0.45, None), (0.2, 0.2), (0.05, 0.1), (None, 0.1)]:
        clock = FakeClock()
        slot = slot_of(clock, default_delay=0.1, max_crawl_delay=0.3)
        slot.set_crawl_delay(crawl_delay)
        assert slot.refused == (gap is None), crawl_delay
        if gap is not None:
            starts = [turn(slot, clock) for _ in range(4)]
            assert gaps_of(starts) == pytest.approx([gap] * 3), crawl_delay
    # honoured in full when asked to
    clock = FakeClock()
    slot = slot_of(clock, default_delay=0.1, max_crawl_delay=0.3, honor_long_crawl_delay=True)
    slot.set_crawl_delay(60)
    assert not slot.refused
    assert gaps_of([turn(slot, clock) for _ in range(3)]) == pytest.approx([60, 60])


def test_each_5xx_doubles_the_next_gap_until_an_answer_resets_it():
    clock = FakeClock()
    slot = slot_of(clock, default_delay=0.1)
    starts = []
    for status in [404, 500, 500, 500, 500, 200, 200]:  # robots.txt, 4 failures, 2 pages
        starts.append(turn(slot, clock))
        slot.record_status(status)
    assert gaps_of(starts) == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 0.1])


def test_retry_after_pushes_the_next_turn():
    clock = FakeClock()
    slot = slot_of(clock, default_delay=0.1)
    t0 = turn(slot, clock)
    slot.push_back(0.6)
    t1 = turn(slot, clock)
    slot.push_back(0.0)  # a Retry-After date in the past: the delay alone
    t2 = turn(slot, clock)
    assert [t1 - t0, t2 - t1] == pytest.approx([0.6, 0.1])


def test_the_gap_counts_from_when_the_request_left():
    clock = FakeClock()
    slot = slot_of(clock, default_delay=0.1)
    t0 = turn(slot, clock)
    clock.now += 0.05  # DNS, connect, TLS
    slot.sent()
    assert turn(slot, clock) == pytest.approx(t0 + 0.05 + 0.1)


def test_the_engine_honours_retry_after_in_full_and_defers_past_the_cap():
    cfg = replace(
        load_config(),
        politeness__default_delay=0.1,
        politeness__jitter=0.0,
        fetch__retry_after_cap=0.6,
    )

    def scenario(run: _Run) -> list[Any]:
        out = []
        for retry_after in (3600.0, 0.4, None):
            clock = FakeClock()
            slot = Slot.from_config("h", cfg.politeness, clock=clock)
            run.clock, run.slice_end = clock, clock.now + 100
            t0 = turn(slot, clock)
            got = Fetched(Outcome.HTTP_ERROR, http_status=503, retry_after=retry_after)
            run._after(slot, got)
            held = run._held(slot)
            out.append(held)
            if held is None:
                out += [turn(slot, clock) - t0, slot.delay]
            else:  # nothing shortened: the wait is the whole Retry-After
                out.append(slot.earliest_start() - t0)
        return out

    # 3600 s: above the cap, deferred (not sped up); 0.4 s: waited; none: the doubled delay
    assert with_run(cfg, scenario) == pytest.approx(
        ["retry_after", 3600.0, None, 0.4, 0.2, None, 0.2, 0.2]
    )


def test_a_wait_past_the_slice_end_defers_with_its_cause():
    cfg = replace(load_config(), politeness__default_delay=1.0, politeness__jitter=0.0)

    def scenario(run: _Run) -> list[str | None]:
        clock = FakeClock()
        run.clock, run.slice_end = clock, clock.now + 5
        slot = Slot.from_config("h", cfg.politeness, clock=clock)
        out = [run._held(slot)]  # nothing yet
        turn(slot, clock)
        out.append(run._held(slot))  # the default delay never defers
        slot.failures = 3  # 8 s after the last request: past the slice end
        out.append(run._held(slot))
        slot.failures = 0
        slot.set_crawl_delay(20)
        out.append(run._held(slot))
        slot.crawl_delay = 0
        slot.record_down(1)  # a cool-down
        out.append(run._held(slot))
        return out

    assert with_run(cfg, scenario) == [None, None, "backoff", "crawl_delay", "host_unreachable"]


def test_state_round_trip_spaces_the_next_call_from_the_last_request():
    wall = 1_700_000_000.0
    first = FakeClock(start=50.0)
    slot = slot_of(first, default_delay=2.0)
    turn(slot, first)
    slot.record_status(503)  # backoff level 1: 4 s
    slot.push_back(30.0)
    first.now += 1.0
    state = slot.state(wall)
    assert state["last_request_at"] == pytest.approx(wall - 1.0)
    assert (state["delay"], state["delay_source"], state["http_failures"]) == (4.0, "backoff", 1)
    assert state["not_before"] == pytest.approx(wall + 29.0)
    assert state["not_before_reason"] == "retry_after"

    # the next slice, 10 s later in wall time, on another clock: Retry-After still ahead
    later = FakeClock(start=7000.0)
    again = slot_of(later, default_delay=2.0)
    again.restore(state, wall + 10.0)
    assert again.failures == 1
    assert turn(again, later) == pytest.approx(7000.0 + 19.0)

    # once it has passed: the backoff delay from the last request decides
    gone = FakeClock(start=10.0)
    third = slot_of(gone, default_delay=2.0)
    third.restore({**state, "not_before": None}, wall + 2.0)
    assert turn(third, gone) == pytest.approx(10.0 + 1.0)  # 4 s after the request 3 s ago

    # a retried task: every slot counts as having requested just now
    retried = FakeClock(start=10.0)
    fourth = slot_of(retried, default_delay=2.0)
    fourth.restore({"slot": "h"}, wall, just_requested=True)
    assert turn(fourth, retried) == pytest.approx(12.0)


def test_a_down_slot_cools_down_longer_each_time():
    clock = FakeClock()
    slot = slot_of(clock, default_delay=0.1, down_cooldown_seconds=60.0)
    assert [slot.record_down(3) for _ in range(3)] == [False, False, True]
    assert slot.earliest_start() == pytest.approx(clock.now + 60)
    assert slot.wait_cause() == "down"
    clock.now += 61
    assert slot.record_down(3)  # the first request after the cool-down fails too
    assert slot.earliest_start() == pytest.approx(clock.now + 120)
    slot.record_status(200)  # an answer: up again
    assert (slot.down, slot.down_until) == (0, None)
