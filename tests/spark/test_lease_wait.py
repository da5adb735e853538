"""`--wait-for-lease`: a command that finds the crawl root's writer lease held tries again until
the holder lets go (what an EMR step does instead of a retry of its task), or exits 2 with the
holder's name once the time is over. On both engines."""

from __future__ import annotations

import threading

from crawllib import cli
from crawllib.store import lease


def another_writer(root, cfg, command):
    """The lease of another writer: taken for ``command`` outside this process's holds (which
    a command this process runs would share), as another process would."""
    return lease.acquire(lease.store_for(root, cfg), command, cfg.storage.lease_seconds)


def test_a_writer_waits_for_the_lease_then_runs(
    engine, spark_cfg, unheld_root, capsys, monkeypatch
):
    monkeypatch.setattr(cli, "LEASE_RETRY_SECONDS", 0.2)
    other = another_writer(unheld_root, spark_cfg, "crawl generation --gen 3")
    try:
        # without waiting: refused at once, naming the holder
        assert cli.main(["init", unheld_root, "--engine", engine]) == 2
        assert "being written by `crawl generation --gen 3`" in capsys.readouterr().err
        # waiting: refused until the holder lets go, then it runs
        threading.Timer(1.0, other.release).start()
        assert cli.main(["init", unheld_root, "--engine", engine, "--wait-for-lease", "30"]) == 0
        captured = capsys.readouterr()
        assert "already initialised" in captured.out
    finally:
        other.release()


def test_the_wait_ends_with_exit_2(engine, spark_cfg, unheld_root, capsys, monkeypatch):
    monkeypatch.setattr(cli, "LEASE_RETRY_SECONDS", 0.2)
    other = another_writer(unheld_root, spark_cfg, "crawl fetch --gen 1")
    try:
        assert cli.main(["init", unheld_root, "--engine", engine, "--wait-for-lease", "0.5"]) == 2
    finally:
        other.release()
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("crawl init: the crawl root is being written by `crawl fetch")
