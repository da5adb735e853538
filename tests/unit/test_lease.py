"""The writer lease: one holder at a time, on a local file system and on an S3 API (moto's
server on 127.0.0.1); expiry judged by the store's clock, never the holders'; a holder that
cannot renew stops writing at 2/3 of its lease; a dead holder on this machine is taken over at
once; takeover racing renewal; the ledger's version carried from holder to holder.

Local tests run in fake time (the store's clock and each holder's are fakes); on S3 the clock
is the server's, so those tests wait a few seconds of a short lease."""

from __future__ import annotations

import logging
import multiprocessing
import os
import subprocess
import sys
import threading
import time

import pytest

from crawllib.config import load_config, replace
from crawllib.core.errors import LeaseHeld, LeaseLost, LeaseNotHeld
from crawllib.store import lease
from crawllib.testweb.stores import Breakable
from tests.s3server import moto_s3

TTL = 60.0


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def s3():
    """moto's S3 on 127.0.0.1 with a bucket (tests.s3server)."""
    with moto_s3("crawl-bucket") as cfg:
        yield cfg


def local_store(tmp_path, clock=None) -> lease.LocalStore:
    return lease.LocalStore(str(tmp_path / "crawl" / lease.LEASE_NAME), clock)


def s3_store(cfg, tmp_path) -> lease.Store:
    return lease.store_for(f"s3a://crawl-bucket/{tmp_path.name}/crawl", cfg)


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path):
    if request.param == "local":
        return local_store(tmp_path)
    return s3_store(request.getfixturevalue("s3"), tmp_path)


def test_stores_create_once_and_swap_only_from_the_version_read(store):
    assert store.read() is None
    etag = store.create(b"first")
    read = store.read()
    assert etag and (read.data, read.etag) == (b"first", etag)
    assert -2 < read.age < 30  # just written, by the store's clock
    assert store.create(b"second") is None  # exclusive: the lease exists
    newer = store.swap(b"third", etag)
    assert newer and newer != etag and store.read()[:2] == (b"third", newer)
    assert store.swap(b"fourth", etag) is None  # stale version: refused
    assert store.read()[:2] == (b"third", newer)


def test_on_s3_a_lease_read_just_after_its_write_is_never_a_second_old(s3, tmp_path):
    """Date and Last-Modified have whole seconds: a read 0.1 s after a write across a second's
    boundary differs by one. The age read is the least it can be, so a lease renewed just now
    never looks expired (with TTL 1 s it did: a takeover won against a renewal)."""
    store = s3_store(s3, tmp_path)
    etag = store.create(b"0")
    for i in range(1, 4):
        time.sleep(1.9 - time.time() % 1.0)  # written at 0.9 s past a second (this clock's)
        etag = store.swap(str(i).encode(), etag)
        time.sleep(0.2)  # read in the next second
        read = store.read()
        assert read.data == str(i).encode() and read.age == 0.0, (i, read.age)


def test_a_second_writer_is_refused_naming_the_holder(store):
    clock = Clock()
    held = lease.acquire(store, "crawl generation", TTL, clock, clock)
    with pytest.raises(LeaseHeld) as refused:
        lease.acquire(store, "crawl seed", TTL, clock, clock)
    message = str(refused.value)
    assert "`crawl generation`" in message and f"pid {os.getpid()}" in message
    assert "since 1970-01-12 13:46:40 UTC" in message and "expires at" in message
    held.release()
    again = lease.acquire(store, "crawl seed", TTL, clock, clock)  # released: free
    assert again.holder.command == "crawl seed"


def test_an_expired_lease_is_taken_over_and_its_holder_learns_it_lost(tmp_path):
    clock = Clock()
    store = local_store(tmp_path, clock)
    first = lease.acquire(store, "crawl generation", TTL, clock, clock)
    clock.now += TTL / 3
    assert first.renew()  # renewal pushes the expiry
    clock.now += TTL - 1
    with pytest.raises(LeaseHeld):
        lease.acquire(store, "crawl generation", TTL, clock, clock)  # renewed: not expired yet
    clock.now += 2  # the holder stalled past its lease
    second = lease.acquire(store, "crawl generation", TTL, clock, clock)
    assert second.holder.token != first.holder.token
    assert not first.renew() and first.lost
    with pytest.raises(LeaseLost, match="taken over"):
        first.check()
    first.release()  # a lost lease releases nothing
    with pytest.raises(LeaseHeld):
        lease.acquire(store, "crawl run", TTL, clock, clock)
    assert second.renew()


def test_expiry_is_the_stores_clock_not_the_holders(tmp_path):
    """Two holders whose clocks are an hour off, one each way: the lease they write says
    expires_at by their clock, and neither decides anything."""
    server = Clock()
    store = local_store(tmp_path, server)
    ahead = Clock(server.now + 3600)
    fast = lease.acquire(store, "crawl run", TTL, ahead, ahead)
    assert fast.holder.expires_at == server.now + 3600 + TTL  # its word, an hour too late
    server.now += TTL + 1
    taker = Clock(server.now)
    assert lease.acquire(store, "crawl run", TTL, taker, taker)  # expired by the store's clock
    assert not fast.renew() and fast.lost

    behind = Clock(server.now - 3600)
    slow = lease.acquire(local_store(tmp_path / "b", server), "crawl run", TTL, behind, behind)
    assert slow.holder.expires_at < taker.now  # its word: long expired
    with pytest.raises(LeaseHeld):  # but the store wrote it just now
        lease.acquire(local_store(tmp_path / "b", server), "crawl run", TTL, taker, taker)


def test_on_s3_expiry_is_the_servers_clock(s3, tmp_path):
    """On S3 the age of the lease is its LastModified against the Date of the same answer: a
    holder whose clock is an hour ahead or behind decides nothing."""
    ttl = 2.0
    ahead = Clock(time.time() + 3600)
    holder = lease.acquire(s3_store(s3, tmp_path / "a"), "crawl run", ttl, ahead)
    with pytest.raises(LeaseHeld):
        lease.acquire(s3_store(s3, tmp_path / "a"), "crawl run", ttl)
    time.sleep(ttl + 1.5)  # Date and LastModified have whole seconds
    taken = lease.acquire(s3_store(s3, tmp_path / "a"), "crawl run", ttl)
    assert taken.holder.token != holder.holder.token and not holder.renew()

    behind = Clock(time.time() - 3600)
    slow = lease.acquire(s3_store(s3, tmp_path / "b"), "crawl run", 30.0, behind)
    assert slow.holder.expires_at < time.time()  # its word: long expired
    with pytest.raises(LeaseHeld):
        lease.acquire(s3_store(s3, tmp_path / "b"), "crawl run", 30.0)


def test_a_writer_that_cannot_renew_stops_at_two_thirds_of_its_lease(tmp_path):
    clock = Clock()
    store = Breakable(local_store(tmp_path, clock))
    held = lease.acquire(store, "crawl generation", TTL, clock, clock)
    renewer = lease.Renewer(held)
    watched = []
    held.watch(lambda: watched.append(clock.now))
    store.broken = True  # an expired token, a denied PUT, throttling ...
    clock.now += TTL / 3
    renewer.tick()  # fails, retried sooner
    assert held.unwritable() is None and watched == []
    clock.now += TTL / 12
    renewer.tick()
    held.check()
    clock.now += TTL / 3 - TTL / 12  # 2/3 of the lease without a renewal
    renewer.tick()
    with pytest.raises(LeaseLost) as stopped:
        held.check()
    assert "could not renew its writer lease for 40 s (2/3 of its 60 s; OSError: the store" in str(
        stopped.value
    )
    assert watched == [clock.now]  # the writes in flight are cancelled
    # nobody could take it over before it expires: a renewal that gets through resumes it
    store.broken = False
    clock.now += TTL / 12
    renewer.tick()
    assert held.unwritable() is None and not held.lost


def test_a_renewal_whose_answer_was_lost_is_not_a_lost_lease(store):
    clock = Clock()
    breakable = Breakable(store)
    held = lease.acquire(breakable, "crawl run", TTL, clock, clock)
    breakable.lose_answer = True
    with pytest.raises(TimeoutError):
        held.renew()  # it landed: the etag held is stale now
    assert held.renew() and not held.lost  # the lease still names this holder: adopted
    assert lease.Holder.from_bytes(store.read().data).serial == held.holder.serial


def test_racing_writers_get_one_lease(tmp_path):
    clock = Clock()
    store = local_store(tmp_path, clock)
    old = lease.acquire(store, "crawl run", TTL, clock, clock)
    clock.now += TTL + 1  # expired: every racer tries to take it over at once
    winners, refused = [], []
    barrier = threading.Barrier(8)

    def race() -> None:
        barrier.wait()
        try:
            winners.append(lease.acquire(store, "crawl run", TTL, clock, clock))
        except LeaseHeld:
            refused.append(1)

    threads = [threading.Thread(target=race) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1 and len(refused) == 7
    assert not old.renew()


def race_takeover_and_renewal(holder: lease.Lease, take) -> tuple[bool, bool]:
    """The holder renews while another writer takes over its expired lease, at once: (the
    renewal got through, the takeover did)."""
    barrier = threading.Barrier(2)
    outcome = {}

    def renew() -> None:
        barrier.wait()
        outcome["renewed"] = holder.renew()

    def takeover() -> None:
        barrier.wait()
        try:
            outcome["taken"] = take()
        except LeaseHeld:
            outcome["taken"] = None

    threads = [threading.Thread(target=renew), threading.Thread(target=takeover)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcome["renewed"], outcome["taken"] is not None


def test_a_takeover_racing_a_renewal_leaves_one_holder(tmp_path):
    seen = set()
    for i in range(40):
        clock = Clock()
        store = local_store(tmp_path / str(i), clock)
        holder = lease.acquire(store, "crawl run", TTL, clock, clock)
        clock.now += TTL  # expired just now: the renewal and a takeover both start
        renewed, taken = race_takeover_and_renewal(
            holder, lambda s=store, c=clock: lease.acquire(s, "crawl run", TTL, c, c)
        )
        assert renewed != taken, (renewed, taken)
        assert holder.lost == taken
        seen.add(renewed)
    assert seen == {True, False} or len(seen) == 1  # whichever wins, never both


def test_on_s3_a_takeover_racing_a_renewal_leaves_one_holder(s3, tmp_path):
    for i in range(3):
        store = s3_store(s3, tmp_path / str(i))
        holder = lease.acquire(store, "crawl run", 1.0)
        time.sleep(2.2)  # expired by the server's clock
        renewed, taken = race_takeover_and_renewal(
            holder, lambda s=store: lease.acquire(s, "crawl run", 1.0)
        )
        assert renewed != taken and holder.lost == taken


def _hold_and_die(path: str, ready) -> None:
    lease.acquire(lease.LocalStore(path), "crawl run", TTL)
    ready.set()
    time.sleep(600)


def test_a_lease_whose_process_died_on_this_machine_is_taken_over_at_once(tmp_path, caplog):
    path = str(tmp_path / "crawl" / lease.LEASE_NAME)
    context = multiprocessing.get_context("fork")
    ready = context.Event()
    proc = context.Process(target=_hold_and_die, args=(path, ready))
    proc.start()
    assert ready.wait(60)
    with pytest.raises(LeaseHeld):  # alive: held
        lease.acquire(lease.LocalStore(path), "crawl run", TTL)
    os.kill(proc.pid, 9)  # kill -9, an OOM kill: no release
    proc.join()
    with caplog.at_level(logging.WARNING, logger="crawllib.store.lease"):
        taken = lease.acquire(lease.LocalStore(path), "crawl run", TTL)
    assert taken.holder.pid == os.getpid()
    assert f"its process (pid {proc.pid} on " in caplog.text and "is gone" in caplog.text


HOLD_AND_START = """
import subprocess, sys, time
from crawllib.store import lease
lease.acquire(lease.LocalStore(sys.argv[1]), "crawl run", 60.0)
# what a Spark JVM is to its crawl: a process it started, which outlives it for a while
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(float(%s))" % sys.argv[2]])
print(child.pid, flush=True)
time.sleep(600)
"""


def _holder_with_a_child(path: str, child_seconds: float) -> tuple[subprocess.Popen, int]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_AND_START, path, str(child_seconds)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert holder.stdout is not None
    return holder, int(holder.stdout.readline())


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_dead_holders_processes_hold_the_lease_until_they_are_gone(tmp_path, caplog):
    """Issue 49: the lease named the Python process, while the dead writer's JVM, which makes
    the Delta commits, can live on for seconds: a takeover waits for the processes the holder
    started."""
    path = str(tmp_path / "crawl" / lease.LEASE_NAME)
    os.makedirs(os.path.dirname(path))
    holder, child = _holder_with_a_child(path, 3.0)
    os.kill(holder.pid, 9)
    holder.wait()
    assert _alive(child)
    with caplog.at_level(logging.WARNING, logger="crawllib.store.lease"):
        taken = lease.acquire(lease.LocalStore(path), "crawl run", TTL)
    assert not _alive(child)  # taken only once the child was gone
    assert taken.holder.pid == os.getpid() and "is gone" in caplog.text


def test_a_dead_holders_process_that_lives_on_keeps_the_lease(tmp_path, monkeypatch):
    monkeypatch.setattr(lease, "SURVIVOR_WAIT_SECONDS", 1.0)
    path = str(tmp_path / "crawl" / lease.LEASE_NAME)
    os.makedirs(os.path.dirname(path))
    holder, child = _holder_with_a_child(path, 120.0)
    try:
        os.kill(holder.pid, 9)
        holder.wait()
        with pytest.raises(LeaseHeld):
            lease.acquire(lease.LocalStore(path), "crawl run", TTL)
    finally:
        os.kill(child, 9)
    while _alive(child):
        time.sleep(0.05)
    assert lease.acquire(lease.LocalStore(path), "crawl run", TTL).holder.pid == os.getpid()


def test_a_live_pid_is_another_process_when_it_started_at_another_time(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        identity = lease.process_identity(sleeper.pid)
        assert identity is not None
        # the same pid, the same start: that process holds it
        held_by_sleeper = local_store(tmp_path / "alive")
        now = time.time()
        holder = lease.Holder(
            "s" * 32, "crawl run", os.uname().nodename, sleeper.pid, now, now + TTL, ttl=TTL,
            process=identity,
        )  # fmt: skip
        held_by_sleeper.create(holder.to_bytes())
        with pytest.raises(LeaseHeld):
            lease.acquire(held_by_sleeper, "crawl run", TTL)
        # the same pid started at another time: the pid was reused, the holder is gone
        reused = local_store(tmp_path / "reused")
        boot_and_namespace, _, start = identity.rpartition("/")
        other = lease.Holder(
            "r" * 32, "crawl run", os.uname().nodename, sleeper.pid, now, now + TTL, ttl=TTL,
            process=f"{boot_and_namespace}/{int(start) - 1}",
        )  # fmt: skip
        reused.create(other.to_bytes())
        assert lease.acquire(reused, "crawl run", TTL).holder.pid == os.getpid()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_on_another_machine_only_expiry_decides(tmp_path):
    clock = Clock()
    store = local_store(tmp_path, clock)
    now = clock.now
    elsewhere = lease.Holder(
        "e" * 32, "crawl run", "another-host", 999_999, now, now + TTL, ttl=TTL,
        process="other-boot/pid:[1]/42",
    )  # fmt: skip
    store.create(elsewhere.to_bytes())
    with pytest.raises(LeaseHeld):  # its pid means nothing here
        lease.acquire(store, "crawl run", TTL, clock, clock)
    clock.now += TTL
    assert lease.acquire(store, "crawl run", TTL, clock, clock).holder.pid == os.getpid()


def test_a_lease_copied_with_its_root_does_not_hold_the_copy(tmp_path):
    """A lease naming this very process, but none of the leases it holds (a root copied while
    held, a hold that ended without releasing), is free."""
    clock = Clock()
    original = lease.acquire(local_store(tmp_path / "a", clock), "crawl run", TTL, clock, clock)
    # a process this one started since (its JVM, a worker): its own, no dead holder's survivor
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        copy = local_store(tmp_path / "b", clock)
        copy.create(original.holder.to_bytes())
        with pytest.raises(LeaseHeld):  # the original's own lease: held
            lease.acquire(local_store(tmp_path / "a", clock), "crawl run", TTL, clock, clock)
        assert lease.acquire(copy, "crawl run", TTL, clock, clock).holder.token != (
            original.holder.token
        )
    finally:
        child.kill()
        child.wait()


def _take(path: str, results, done) -> None:
    try:
        lease.acquire(lease.LocalStore(path), "crawl run", TTL)
        results.put("won")
    except LeaseHeld:
        results.put("refused")
    done.wait(60)  # alive until all have tried: a dead holder's lease is free


def test_processes_racing_for_a_free_local_root_get_one_lease(tmp_path):
    path = str(tmp_path / "crawl" / lease.LEASE_NAME)
    context = multiprocessing.get_context("fork")
    results, done = context.Queue(), context.Event()
    procs = [context.Process(target=_take, args=(path, results, done)) for _ in range(6)]
    for p in procs:
        p.start()
    outcomes = sorted(results.get(timeout=60) for _ in procs)
    done.set()
    for p in procs:
        p.join()
    assert outcomes == ["refused"] * 5 + ["won"]


def test_hold_renews_releases_and_stops_writes_once_lost(tmp_path):
    root = str(tmp_path / "crawl")
    cfg = replace(load_config(), storage__lease_seconds=1.0)
    with lease.hold(root, "crawl generation", cfg) as held:
        lease.check_writable(root)
        serial = held.holder.serial
        threading.Event().wait(1.2)  # the thread renews every third of the lease
        assert held.holder.serial > serial and not held.lost
        # another process takes the lease over (as if this one had stalled)
        store = lease.store_for(root, cfg)
        current = store.read()
        thief = lease.Holder.from_bytes(current.data)
        stolen = lease.Holder("x", "crawl run", "elsewhere", 1, thief.started_at, 0.0, ttl=600)
        assert store.swap(stolen.to_bytes(), current.etag)
        threading.Event().wait(0.8)
        assert held.lost
        with pytest.raises(LeaseLost):
            lease.check_writable(root)
    with pytest.raises(LeaseNotHeld, match="holds no writer lease"):
        lease.check_writable(root)  # no longer held by this process
    assert lease.Holder.from_bytes(store.read().data).command == "crawl run"  # not released


def test_hold_is_reentrant_and_a_write_needs_it(tmp_path):
    root = str(tmp_path / "crawl")
    cfg = load_config()
    with pytest.raises(LeaseNotHeld):
        lease.check_writable(root)
    with lease.hold(root, "notebook", cfg) as outer:
        with lease.hold(root, "crawl generation", cfg) as inner:  # a command inside
            assert inner is outer
        assert lease.check_writable(root) is outer  # the inner block released nothing
    with pytest.raises(LeaseNotHeld):
        lease.check_writable(root)
    assert lease.Holder.from_bytes(lease.store_for(root, cfg).read().data).released_at


def test_a_hold_whose_renewals_fail_stops_writing():
    """On moto's S3: the server goes away (a network cut), renewals fail, and after 2/3 of
    the lease the holder may not write."""
    with moto_s3("cut") as cfg:
        cfg = replace(cfg, storage__lease_seconds=1.5)
        root = "s3a://cut/crawl"
        with lease.hold(root, "crawl generation", cfg) as held:
            lease.check_writable(root)
            server_gone = lease.store_for(root, replace(cfg, spark__conf={
                **cfg.spark.conf, "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9"
            }))  # fmt: skip
            held.store = server_gone  # where its renewals go now: nothing listens
            time.sleep(1.3)
            with pytest.raises(LeaseLost, match="could not renew"):
                lease.check_writable(root)
            held.store = lease.store_for(root, cfg)  # nobody took it over: it resumes
            deadline = time.monotonic() + 30
            while held.unwritable() and time.monotonic() < deadline:
                time.sleep(0.1)
            lease.check_writable(root)


def test_the_ledger_version_goes_from_holder_to_holder(store):
    clock = Clock()
    first = lease.acquire(store, "crawl generation", TTL, clock, clock)
    first.record_ledger(41)
    first.record_ledger(42)
    first.release()
    second = lease.acquire(store, "crawl generation", TTL, clock, clock)
    assert second.holder.ledger == 42


def test_a_garbled_lease_counts_as_free(tmp_path):
    store = local_store(tmp_path)
    store.create(b"{not json")
    held = lease.acquire(store, "crawl init", TTL)
    assert lease.Holder.from_bytes(store.read().data) == held.holder
