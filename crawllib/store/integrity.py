"""Tables that cannot silently change behind the crawl's back.

After a stage commits, the Delta version of every table (but ``generations``, which holds the
record, and ``warc_index``) is stored with the stage's ``done`` row. Before anything writes
(a stage, `crawl seed`, `crawl run`, `crawl maintain`, ...), `verify` compares each table with
the latest record:

- a table *behind* it lost commits (its newest log file deleted, a partial copy, a manual
  restore): working on would refetch what was fetched and duplicate rows (TableBehind);
- a table *ahead* of it is fine when every commit after the recorded version is crawllib's
  (a stage that crashed after some of its commits, `crawl maintain`): each commit's Delta
  ``userMetadata`` says so (`crawllib.store.tables.COMMIT_TAG`). A commit that is not (a DELETE or
  RESTORE outside the crawl, another program's write) stops the writer (TableChanged). With
  no record yet, every commit of every table must be crawllib's.

The ledger protects itself: every commit to ``generations`` is recorded in the writer lease
(`crawllib.store.lease.record_ledger`, carried from holder to holder), so a lost newest commit of
the ledger is a table behind like any other, and commits after it are checked the same way.

Either error names the table, the versions and the repair, and nothing is written.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping

from crawllib.core import stage_order
from crawllib.core.errors import TableBehind, TableChanged
from crawllib.core.vocab import ACCEPT_STATE, StageState
from crawllib.store import generations, lease
from crawllib.store.db import LEDGER, Db, table_path, written_by_crawllib
from crawllib.store.schemas import TABLES

log = logging.getLogger(__name__)

# The tables whose versions are recorded: generations holds the record itself; warc_index is
# written by `crawl export-warc`, outside the stages, and no stage reads it.
CHECKED = tuple(name for name in TABLES if name not in ("generations", "warc_index"))
ACCEPT = (
    "accept the tables as they are with `crawl accept-state ROOT` (then rerun with --force "
    "the stages whose output is gone)"
)


def current_versions(db: Db) -> dict[str, int]:
    """table -> its latest Delta version, from each table's log (a listing, no Spark job)."""
    return {name: db.version_of(name) for name in CHECKED}


def behind(current: Mapping[str, int], recorded: Mapping[str, int]) -> dict[str, tuple[int, int]]:
    """table -> (current, recorded) for every table older than its record."""
    return {
        name: (current[name], version)
        for name, version in recorded.items()
        if name in current and current[name] < version
    }


def foreign_commits(db: Db, name: str, after: int, upto: int) -> list[tuple[int, str]]:
    """(version, operation) of each commit of table ``name`` after version ``after`` up to
    ``upto`` whose userMetadata does not say crawllib made it (read from the log's commit
    files, no Spark job). A commit whose file is gone (log cleanup) counts as foreign."""
    if upto <= after:
        return []
    seen = db.commits(name, after)
    return [
        (version, seen[version][0] if version in seen else "unknown: its log file is gone")
        for version in range(after + 1, upto + 1)
        if version not in seen or not written_by_crawllib(seen[version][1])
    ]


def verify(db: Db, recorded: Mapping[str, int], recorded_by: str) -> dict[str, int]:
    """The current versions, or TableBehind if a table is older than ``recorded`` (what
    ``recorded_by``, e.g. "gen 3 fetch", recorded after its commits) or the ledger is older
    than its last commit, or TableChanged if a table has commits after the record (after
    version -1 when nothing is recorded yet) that crawllib did not make."""
    current = current_versions(db)
    lost = behind(current, recorded)
    if lost:
        name, (now, then) = sorted(lost.items())[0]
        more = f" (also: {', '.join(sorted(lost)[1:])})" if len(lost) > 1 else ""
        raise TableBehind(
            f"table {name} is at version {now}, but {recorded_by} recorded version {then} "
            f"after committing to it{more}: commits are missing (a deleted log file, a partial "
            f"copy or a restore). Nothing was written. Restore the table to version {then} "
            f"or later (Delta RESTORE, or the lost _delta_log files from a backup), or {ACCEPT}"
        )
    ledger = lease.ledger_version(db.root)
    ledger_now = db.version_of(LEDGER)
    if ledger is not None and ledger_now < ledger:
        raise TableBehind(
            f"table {LEDGER} is at version {ledger_now}, but this crawl's last commit "
            f"to it made version {ledger} (as its writer lease records): the record of the "
            f"stage runs lost commits, and a stage would run again as if it never had. "
            f"Nothing was written. Restore its lost _delta_log files from a backup, or {ACCEPT}"
        )
    bases = dict(recorded) if recorded else dict.fromkeys(CHECKED, -1)
    if ledger is not None:
        bases[LEDGER] = ledger
        current = {**current, LEDGER: ledger_now}
    for name in sorted(bases):
        if name not in current:
            continue
        foreign = foreign_commits(db, name, bases[name], current[name])
        if foreign:
            base = bases[name]
            since = f"version {base}, which {recorded_by} recorded" if recorded else "its start"
            if name == LEDGER:
                since = f"version {base}, this crawl's last commit to it"
            listed = ", ".join(f"{v} ({op})" for v, op in foreign[:5])
            raise TableChanged(
                f"table {name} has commits crawllib did not make after {since}: version "
                f"{listed}{' ...' if len(foreign) > 5 else ''} (another writer, a DELETE or "
                f"RESTORE outside the crawl). Nothing was written. If the change is wanted, "
                f"accept the tables as they are with `crawl accept-state ROOT`; if not, undo it "
                f"(RESTORE TABLE delta.`{table_path(db.root, name)}` TO VERSION AS OF "
                f"{max(base, 0)}), then accept"
            )
    return {name: version for name, version in current.items() if name in CHECKED}


def check_root(db: Db) -> None:
    """`verify` against the latest record of the generations table, for a command that is
    about to write (seed, init, export-warc, run); nothing to check on a root without one."""
    if not db.exists(LEDGER):
        return
    ledger = generations.read_ledger(db)
    verify(db, ledger.versions, ledger.recorded_by)


def accept_state(db: Db) -> dict[str, int]:
    """Record the tables' current versions as the crawl's state (after a lost log file or a
    restore that `verify` stopped a stage on); return them. The stages whose output
    is gone have to be rerun with force: this records, it repairs nothing."""
    ledger = generations.read_ledger(db)
    versions = current_versions(db)
    gen = stage_order.next_gen(ledger.states)
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    generations.record(db, gen, ACCEPT_STATE, StageState.DONE, now, versions=versions)
    log.warning("accepted the tables as they are: %s (was: %s)", versions, ledger.versions)
    return versions
