"""The writer lease: one holder at a time, on a local file system and on an S3 API (a real
S3-compatible server on 127.0.0.1), expiry and takeover in fake time, a lost lease stops
writes."""

from __future__ import annotations

import multiprocessing
import os
import threading

import pytest

from crawllib import lease
from crawllib.config import load_config, replace
from crawllib.errors import LeaseHeld, LeaseLost
from crawllib.testing.s3 import moto_s3

TTL = 60.0


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def s3():
    """moto's S3 on 127.0.0.1 with a bucket (crawllib.testing.s3)."""
    with moto_s3("crawl-bucket") as cfg:
        yield cfg


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path):
    if request.param == "local":
        return lease.store_for(str(tmp_path / "crawl"), load_config())
    cfg = request.getfixturevalue("s3")
    return lease.store_for(f"s3a://crawl-bucket/{tmp_path.name}/crawl", cfg)


def test_stores_create_once_and_swap_only_from_the_version_read(store):
    assert store.read() is None
    etag = store.create(b"first")
    assert etag and store.read() == (b"first", etag)
    assert store.create(b"second") is None  # exclusive: the lease exists
    newer = store.swap(b"third", etag)
    assert newer and newer != etag and store.read() == (b"third", newer)
    assert store.swap(b"fourth", etag) is None  # stale version: refused
    assert store.read() == (b"third", newer)


def test_a_second_writer_is_refused_naming_the_holder(store):
    clock = Clock()
    held = lease.acquire(store, "crawl generation", TTL, clock)
    with pytest.raises(LeaseHeld) as refused:
        lease.acquire(store, "crawl seed", TTL, clock)
    message = str(refused.value)
    assert "`crawl generation`" in message and f"pid {os.getpid()}" in message
    assert "since 1970-01-12 13:46:40 UTC" in message and "expires at" in message
    held.release()
    again = lease.acquire(store, "crawl seed", TTL, clock)  # released: free
    assert again.holder.command == "crawl seed"


def test_an_expired_lease_is_taken_over_and_its_holder_learns_it_lost(store):
    clock = Clock()
    first = lease.acquire(store, "crawl generation", TTL, clock)
    clock.now += TTL / 3
    assert first.renew()  # renewal pushes the expiry
    clock.now += TTL - 1
    with pytest.raises(LeaseHeld):
        lease.acquire(store, "crawl generation", TTL, clock)  # renewed: not expired yet
    clock.now += 2  # the holder stalled past its lease
    second = lease.acquire(store, "crawl generation", TTL, clock)
    assert second.holder.token != first.holder.token
    assert not first.renew() and first.lost
    first.release()  # a lost lease releases nothing
    with pytest.raises(LeaseHeld):
        lease.acquire(store, "crawl run", TTL, clock)
    assert second.renew()


def test_racing_writers_get_one_lease(store):
    clock = Clock()
    old = lease.acquire(store, "crawl run", TTL, clock)
    clock.now += TTL + 1  # expired: every racer tries to take it over at once
    winners, refused = [], []
    barrier = threading.Barrier(8)

    def race() -> None:
        barrier.wait()
        try:
            winners.append(lease.acquire(store, "crawl run", TTL, clock))
        except LeaseHeld:
            refused.append(1)

    threads = [threading.Thread(target=race) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1 and len(refused) == 7
    assert not old.renew()


def _take(path: str, results) -> None:
    try:
        lease.acquire(lease.LocalStore(path), "crawl run", TTL)
        results.put("won")
    except LeaseHeld:
        results.put("refused")


def test_processes_racing_for_a_free_local_root_get_one_lease(tmp_path):
    path = str(tmp_path / "crawl" / lease.LEASE_NAME)
    results = multiprocessing.get_context("fork").Queue()
    procs = [
        multiprocessing.get_context("fork").Process(target=_take, args=(path, results))
        for _ in range(6)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    outcomes = sorted(results.get() for _ in procs)
    assert outcomes == ["refused"] * 5 + ["won"]


def test_hold_renews_releases_and_stops_writes_once_lost(tmp_path):
    root = str(tmp_path / "crawl")
    cfg = replace(load_config(), storage__lease_seconds=1.0)
    with lease.hold(root, "crawl generation", cfg) as held:
        lease.check_writable(root)
        expires = held.holder.expires_at
        threading.Event().wait(1.2)  # the thread renews every third of the lease
        assert held.holder.expires_at > expires and not held.lost
        # another process takes the lease over (as if this one had stalled)
        store = lease.store_for(root, cfg)
        data, etag = store.read()
        thief = lease.Holder.from_bytes(data)
        stolen = lease.Holder(
            "x", "crawl run", "elsewhere", 1, thief.started_at, thief.expires_at + 600
        )
        assert store.swap(stolen.to_bytes(), etag)
        threading.Event().wait(0.8)
        assert held.lost
        with pytest.raises(LeaseLost):
            lease.check_writable(root)
    lease.check_writable(root)  # no longer held by this process: nothing to check
    assert lease.Holder.from_bytes(store.read()[0]).command == "crawl run"  # not released


def test_a_garbled_lease_counts_as_free(tmp_path):
    store = lease.store_for(str(tmp_path / "crawl"), load_config())
    store.create(b"{not json")
    held = lease.acquire(store, "crawl init", TTL)
    assert lease.Holder.from_bytes(store.read()[0]) == held.holder
