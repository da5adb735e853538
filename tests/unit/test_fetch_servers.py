"""Two levels of politeness in fake time (politeness.key = ip): an address's slot and the hosts
inside it, and the adaptive delay that follows a server's response times.

Each host keeps its own Retry-After, backoff and Crawl-delay; the address spaces its requests by
its rule (default_delay / hosts queued, at least min_address_delay) and backs off only on
evidence about the server. The engine's choice of the next host (``_Run._next``) is checked on
the same fake clock. The same rules on the wire: test_fetch_addresses.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from crawllib.config import load_config, replace
from crawllib.core.vocab import Outcome
from crawllib.engine.client import Fetched
from crawllib.engine.engine import _Run
from crawllib.engine.servers import Server
from crawllib.engine.slots import Slot
from tests.unit.test_fetch_slots import FakeClock, done, gaps_of, politeness, turn, with_run


def server_of(clock: FakeClock, hosts: int = 2, rows: int = 5, **changes: Any) -> Server:
    """An address with ``hosts`` hosts h0, h1 ... of ``rows`` queued URLs each."""
    p = politeness(**{"default_delay": 1.0, "min_address_delay": 0.1, **changes})
    server = Server.from_config("10.0.0.1", p, seed=1, clock=clock)
    for i in range(hosts):
        member = server.member(f"h{i}", p, seed=i)
        member.rows.extend({"url": f"http://h{i}/{n}", "url_key": n} for n in range(rows))
    return server


def take(slot: Slot, clock: FakeClock) -> float:
    """A turn of ``slot`` for its next queued URL (popped, as the engine pops it)."""
    slot.rows.popleft()
    slot.busy = True
    start = turn(slot, clock)
    slot.busy = False
    return start


def test_the_address_rule_divides_the_host_delay_by_the_hosts_queued():
    clock = FakeClock()
    server = server_of(clock, hosts=4, rows=3, min_address_delay=0.1)
    h0, h1, h2, h3 = server.members.values()
    assert (server.queued, server.delay, server.delay_source) == (4, 0.25, "address")
    starts = [take(h, clock) for h in (h0, h1, h2, h3)]
    assert gaps_of(starts) == pytest.approx([0.25, 0.25, 0.25])
    # each host waits for its own delay too: h0 is free 1 s after its first request
    assert take(h0, clock) == pytest.approx(starts[0] + 1.0)
    # bounded below: ten hosts queued would be 0.1 s, min_address_delay 0.2 keeps 0.2
    assert server_of(FakeClock(), hosts=10, min_address_delay=0.2).delay == 0.2
    # one site alone on its address is crawled at the per-host pace
    alone = server_of(FakeClock(), hosts=1)
    assert alone.delay == 1.0
    # a fixed address_delay replaces the rule
    assert server_of(FakeClock(), hosts=4, address_delay=0.7).delay == 0.7


def test_the_rule_follows_the_hosts_left_and_keeps_the_last_for_the_record():
    clock = FakeClock()
    server = server_of(clock, hosts=2, rows=1, min_address_delay=0.0)
    h0, h1 = server.members.values()
    assert server.delay == 0.5
    t0 = take(h0, clock)  # h0 had one URL, being fetched: still queued while it is
    t1 = take(h1, clock)  # h1 is the only host left: its own pace, the address's too
    assert t1 - t0 == pytest.approx(0.5)
    assert server.queued == 0
    assert server.state(1e9)["delay"] == 1.0  # the rule when the last request was claimed


def test_a_host_held_by_its_retry_after_waits_alone():
    clock = FakeClock()
    server = server_of(clock, hosts=2, rows=4, min_address_delay=0.0)
    busy, plain = server.members.values()
    take(busy, clock)
    busy.record_status(429)
    busy.push_back(3600.0)
    assert (busy.wait_cause(), plain.wait_cause()) == ("retry_after", None)
    starts = [take(plain, clock) for _ in range(3)]
    assert gaps_of(starts) == pytest.approx([1.0, 1.0])  # its own pace, not an hour
    assert busy.earliest_start() >= clock.now + 3500
    assert server.failures == 0  # one host's 429 says nothing about the server


def test_each_host_keeps_its_own_crawl_delay_and_backoff():
    clock = FakeClock()
    server = server_of(clock, hosts=2, rows=6, min_address_delay=0.0)
    slow, plain = server.members.values()
    slow.set_crawl_delay(60)
    slow.honor_long_crawl_delay = True
    t0 = take(slow, clock)
    plain_starts = [take(plain, clock) for _ in range(4)]
    assert gaps_of(plain_starts) == pytest.approx([1.0] * 3)
    assert take(slow, clock) == pytest.approx(t0 + 60)
    failing = server_of(FakeClock(), hosts=3).members["h0"]
    failing.record_status(503)
    failing.record_status(503)
    assert (failing.delay, failing.delay_source) == (4.0, "backoff")
    assert failing.server is not None and failing.server.failures == 0


def test_the_address_backs_off_when_most_of_its_hosts_fail_together():
    clock = FakeClock()
    server = server_of(clock, hosts=4, min_address_delay=0.25)
    h0, h1, h2, h3 = server.members.values()
    h0.record_status(200)
    h1.record_status(503)
    assert server.failures == 0  # one host of two
    h2.record_status(503)
    assert server.failures == 1  # two of three: more than half
    assert server.delay_source == "backoff" and server.delay == pytest.approx(0.5)
    h3.record_status(500)
    assert server.failures == 2
    h1.record_status(200)  # two of four fail: not more than half, the address is well again
    assert (server.failures, server.delay_source) == (0, "address")


def test_connection_failures_cool_the_address_down_a_name_only_its_host():
    clock = FakeClock()
    server = server_of(clock, hosts=3, down_cooldown_seconds=60.0)
    h0, h1, h2 = server.members.values()
    assert not h0.record_down(3, "dns")  # a name that does not resolve is one host's
    assert (h0.down, server.down) == (1, 0)
    assert [h.record_down(3, "connect") for h in (h0, h1, h2)] == [False, False, True]
    assert server.down == 3 and h1.down == 0
    for host in (h0, h1, h2):  # every host on it waits for the cool-down
        assert host.wait_cause() == "down"
        assert host.earliest_start() == pytest.approx(clock.now + 60)
    h2.record_status(200)  # an answer: the server is up
    assert (server.down, server.down_until) == (0, None)


def test_the_adaptive_delay_follows_the_moving_average_of_response_times():
    clock = FakeClock()
    slot = Slot.from_config(
        "h", politeness(default_delay=1.0, response_factor=4.0, max_delay=30.0), clock=clock
    )
    assert (slot.adaptive_delay, slot.delay) == (None, 1.0)
    slot.record_response(0.05)  # a fast server: the default delay stays
    assert slot.adaptive_delay == pytest.approx(0.2)
    assert (slot.delay, slot.delay_source) == (1.0, "default")
    for _ in range(10):  # 3 s answers: the average moves to them, the delay with it
        slot.record_response(3.0)
    assert slot.response_time == pytest.approx(3.0, abs=0.1)
    assert slot.delay == pytest.approx(12.0, abs=0.4) and slot.delay_source == "adaptive"
    starts = [turn(slot, clock), turn(slot, clock)]
    assert gaps_of(starts) == pytest.approx([slot.delay])
    slot.record_response(100.0)  # up to max_delay, never more for the response time alone
    assert slot.delay == 30.0
    slot.set_crawl_delay(45)  # a Crawl-delay above it still holds in full
    assert (slot.delay, slot.delay_source) == (45.0, "crawl_delay")
    off = Slot.from_config("h", politeness(adaptive=False), clock=clock)
    off.record_response(3.0)
    assert (off.adaptive_delay, off.delay) == (None, off.default_delay)


def test_an_address_adapts_to_every_host_it_serves():
    clock = FakeClock()
    server = server_of(clock, hosts=2, min_address_delay=0.1, response_factor=4.0)
    h0, h1 = server.members.values()
    for _ in range(8):
        h0.record_response(0.5)
        h1.record_response(0.01)
    assert server.response_time is not None
    assert 0.1 < server.response_time < 0.4  # between its hosts' answers: both count
    assert server.delay == pytest.approx(4 * server.response_time) and server.delay > 0.5
    assert server.delay_source == "adaptive"
    assert (h0.delay_source, h1.delay_source) == ("adaptive", "default")  # 2 s and 0.04 s


def test_state_round_trip_keeps_the_response_time_and_the_address():
    wall = 1_700_000_000.0
    clock = FakeClock()
    server = server_of(clock, hosts=2, response_factor=4.0)
    h0 = server.members["h0"]
    take(h0, clock)
    h0.record_response(2.0)
    host, address = h0.state(wall), server.state(wall)
    assert (host["kind"], host["address"], host["slot"]) == ("host", "10.0.0.1", "h0")
    assert (host["response_seconds"], host["adaptive_delay"], host["delay"]) == (2.0, 8.0, 8.0)
    assert host["delay_source"] == "adaptive"
    assert (address["kind"], address["address"], address["slot"]) == (
        "address",
        "10.0.0.1",
        "10.0.0.1",
    )
    assert address["response_seconds"] == 2.0
    assert address["last_request_at"] == pytest.approx(wall)
    again = Slot.from_config("h0", politeness(response_factor=4.0), clock=FakeClock())
    again.restore(host, wall + 1.0)
    assert again.response_time == 2.0 and again.delay == 8.0


def test_the_engine_takes_the_host_free_soonest_and_a_held_one_at_once():
    cfg = replace(
        load_config(),
        politeness__key="ip",
        politeness__default_delay=1.0,
        politeness__min_address_delay=0.1,
        politeness__jitter=0.0,
        fetch__slice_grace_seconds=5.0,
    )

    def scenario(run: _Run) -> list[Any]:
        clock = FakeClock()
        run.clock, run.slice_end = clock, clock.now + 10
        server = Server.from_config("10.0.0.1", cfg.politeness, clock=clock)
        members = []
        for host in ("a", "b", "c"):
            member = server.member(host, cfg.politeness)
            member.rows.extend({"url": f"http://{host}/{n}", "url_key": n} for n in range(3))
            members.append(member)
        a, b, c = members
        out: list[Any] = []
        for _ in range(3):  # none asked yet: in order, each the least recently asked
            chosen = run._next(members)
            assert chosen is not None
            out.append(chosen.key)
            take(chosen, clock)
        a.push_back(3600.0)  # past the slice's end: a's URLs are deferred at once
        out.append(run._next(members).key)  # type: ignore[union-attr]
        out.append(run._held(a))
        a.rows = type(a.rows)()  # the engine deferred them
        out.append(run._next(members).key)  # type: ignore[union-attr]  b, asked first
        b.rows = type(b.rows)()
        c.rows = type(c.rows)()
        out.append(run._next(members))  # nothing left
        return out

    assert with_run(cfg, scenario) == ["a", "b", "c", "a", "retry_after", "b", None]


def test_a_wait_the_address_imposes_past_the_slice_end_defers_with_its_cause():
    cfg = replace(load_config(), politeness__default_delay=1.0, politeness__jitter=0.0)

    def scenario(run: _Run) -> list[str | None]:
        clock = FakeClock()
        run.clock, run.slice_end = clock, clock.now + 5
        server = server_of(clock, hosts=3, jitter=0.0)
        h0, h1, h2 = server.members.values()
        out = []
        take(h0, clock)
        for _ in range(20):
            server.record_response(3.0)  # a slow server: 12 s between its requests
        out += [run._held(h1), h1.wait_cause()]
        server.response_time = None
        got = Fetched(Outcome.ERROR, error_kind="connect")
        for host in (h0, h1, h2):
            run._after(host, got)
        out += [run._held(h2)]
        return out

    assert with_run(cfg, scenario) == ["adaptive", "adaptive", "host_unreachable"]


def test_turns_claim_the_host_and_the_address_together():
    clock = FakeClock()
    server = server_of(clock, hosts=2, rows=2, min_address_delay=0.0, jitter=0.0)
    h0, h1 = server.members.values()
    t0 = take(h0, clock)
    assert server.last_start == t0 and server.requests == 1
    clock.now += 0.05  # connect and TLS
    h0.sent()
    assert server.last_start == pytest.approx(t0 + 0.05)
    assert not done(h1.wait_turn(clock.now + 0.1))  # the address's next turn is later
    assert take(h1, clock) == pytest.approx(t0 + 0.05 + 0.5)
