"""Seeding: a file of URLs -> frontier rows of the next generation to plan, and crawldb rows.

Input: a text file (one URL a line, ``#`` comments, blank lines ignored) or a CSV/Parquet path
with a ``url`` column, local or at a URI (``s3a://bucket/seeds.txt``). Every URL is normalised; invalid ones are reported with their line (or
row) number and reason and the valid ones still land. Seeding is idempotent: URLs already in
crawldb, or already in the target generation of the frontier, are not added again.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import os
import re
from collections.abc import Iterable, Iterator
from urllib.parse import urlsplit

from crawllib.config import Config
from crawllib.core.urls import (
    InvalidURL,
    host_of,
    normalize_url,
    registered_domain,
    url_extension,
    url_key,
)
from crawllib.core.vocab import FrontierReason
from crawllib.policy.netsafety import host_problem
from crawllib.store.db import Db
from crawllib.store.filestore import folder_at
from crawllib.store.schemas import FRONTIER, select_list
from crawllib.transforms.depth import unknown_or_shallower
from crawllib.transforms.lookup import rows_of
from crawllib.transforms.plan import queued_rows
from crawllib.transforms.sqltext import lit

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Rejected:
    where: str  # "FILE:LINE" for a text file, "FILE row N" for a CSV/Parquet table
    text: str
    reason: str


@dataclasses.dataclass
class SeedReport:
    gen: int
    read: int = 0
    valid: int = 0
    added: int = 0
    rejected: list[Rejected] = dataclasses.field(default_factory=list)


def check_url(text: str, cfg: Config) -> tuple[str | None, str | None]:
    """(normalised URL, None) or (None, reason) for one candidate URL."""
    try:
        url = normalize_url(text)
    except InvalidURL as exc:
        return None, str(exc)
    if len(url) > cfg.crawl.max_url_length:
        return None, f"longer than crawl.max_url_length ({len(url)} > {cfg.crawl.max_url_length})"
    ext = url_extension(url)
    if ext and ext in cfg.crawl.skip_extensions:
        return None, f"extension .{ext} is in crawl.skip_extensions"
    host = urlsplit(url).hostname or ""
    # what fetch would refuse before any request (network.resolve's names are trusted there)
    if host not in {h.lower().strip("[]").rstrip(".") for h in cfg.network.resolve}:
        problem = host_problem(host, cfg.network.allow_private)
        if problem:
            return None, f"fetch would block it ({problem}; see network.allow_private)"
    if any(label.startswith("-") or label.endswith("-") for label in host.split(".")):
        return None, "invalid host name (a label starts or ends with '-')"
    return url, None


def read_text_seeds(db: Db, path: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of every non-blank, non-comment line of a local or URI text file."""
    lines = db.read_file(path).decode("utf-8", errors="replace").lstrip("\ufeff").splitlines()
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if text and not text.startswith("#"):
            yield number, text


def _table_files(db: Db, path: str) -> list[tuple[str, bytes]]:
    """(name, bytes) of a seed table: one file, or the data files of a folder (Spark's part
    files), in name order."""
    if db.is_file(path):
        return [(path, db.read_file(path))]
    if not _is_uri(path) and os.path.isdir(_local(path)):
        names = sorted(n for n in os.listdir(_local(path)) if not n.startswith(("_", ".")))
        return [(n, db.read_file(os.path.join(_local(path), n))) for n in names]
    folder = folder_at(path, db.cfg)
    names = sorted(n for n in folder.sizes() if not n.startswith(("_", ".")))
    return [(n, folder.read(n) or b"") for n in names]


def read_table_seeds(db: Db, path: str) -> Iterator[tuple[int, str]]:
    """(row number, url) from a CSV (with header) or Parquet path with a ``url`` column: a
    file, or a folder of them."""
    import pyarrow.csv
    import pyarrow.parquet

    number = 0
    for name, data in _table_files(db, path):
        if name.endswith(".csv") or path.endswith(".csv"):
            table = pyarrow.csv.read_csv(io.BytesIO(data))
        else:
            table = pyarrow.parquet.read_table(io.BytesIO(data))
        if "url" not in table.column_names:
            raise ValueError(
                f"seed table {path} has no 'url' column (columns: {', '.join(table.column_names)})"
            )
        for value in table.column("url").to_pylist():
            number += 1
            yield number, str(value or "").strip()


def is_text_file(db: Db, path: str) -> bool:
    """A file (not a folder of part files) that is neither CSV nor Parquet."""
    if path.endswith((".csv", ".parquet")):
        return False
    return db.is_file(path)


def exists(db: Db, path: str) -> bool:
    if not _is_uri(path):
        return os.path.exists(_local(path))
    return db.is_file(path) or bool(folder_at(path, db.cfg).sizes())


def _is_uri(path: str) -> bool:
    return "://" in path and not path.startswith("file:")


def _local(path: str) -> str:
    """A local path, given as such or as a ``file:`` URI."""
    return re.sub(r"^file:(//)?", "", path)


def check_local(path: str) -> None:
    """Before any engine starts (a JVM takes seconds to minutes): a local seed file that does
    not exist, or a local CSV or Parquet file without a ``url`` column, is refused at once
    (FileNotFoundError, ValueError). Files behind a URI are checked when read."""
    if _is_uri(path):
        return
    local = _local(path)
    if not os.path.exists(local):
        raise FileNotFoundError(f"seed file {path} does not exist")
    if not os.path.isfile(local):
        return  # a folder of part files: read by the engine
    columns: list[str] | None = None
    if local.endswith(".csv"):
        import pyarrow.csv

        with open(local, "rb") as fh:
            head = fh.read(1 << 16)
        first = head.split(b"\n", 1)[0] + b"\n"
        columns = pyarrow.csv.read_csv(io.BytesIO(first)).column_names if first.strip() else []
    elif local.endswith(".parquet"):
        import pyarrow.parquet

        columns = list(pyarrow.parquet.read_schema(local).names)
    if columns is not None and "url" not in columns:
        raise ValueError(f"seed table {path} has no 'url' column (columns: {', '.join(columns)})")


def seed(db: Db, path: str, cfg: Config, gen: int) -> SeedReport:
    """Normalise, dedup and write seeds as frontier rows of ``gen`` plus queued crawldb rows."""
    if not exists(db, path):
        raise FileNotFoundError(f"seed file {path} does not exist")
    text_file = is_text_file(db, path)
    lines: Iterable[tuple[int, str]] = (
        read_text_seeds(db, path) if text_file else read_table_seeds(db, path)
    )
    report = SeedReport(gen=gen)
    rows: dict[int, dict[str, object]] = {}
    for number, text in lines:
        report.read += 1
        url, reason = check_url(text, cfg)
        if url is None:
            where = f"{path}:{number}" if text_file else f"{path} row {number}"
            report.rejected.append(Rejected(where, text, reason or "invalid"))
            continue
        report.valid += 1
        host = host_of(url)
        key = url_key(url)
        rows.setdefault(
            key,
            {
                "gen": gen,
                "url": url,
                "url_key": key,
                "host": host,
                "domain": registered_domain(host),
            },
        )
    if not rows:
        return report
    given = db.rows(rows.values(), FRONTIER)
    # Seeds crawldb holds deeper than 0 are offered depth 0 (plan lowers it) but not queued.
    crawldb = db.table("crawldb", columns=["url_key", "depth"])
    seeds = db.keep(
        db.sql(
            unknown_or_shallower("{given}", "{crawldb}", "url_key", "0"),
            given=given,
            crawldb=crawldb,
        )
    )
    new = db.sql(
        "SELECT s.* FROM {seeds} s LEFT ANTI JOIN (" + rows_of("{crawldb}", "{seeds}") + ") k "
        "ON s.url_key = k.url_key",
        seeds=seeds,
        crawldb=crawldb,
    )
    counts = db.one_row(
        db.sql(
            "SELECT (SELECT count(*) FROM {seeds}) AS seeds, (SELECT count(*) FROM {new}) AS added",
            seeds=seeds,
            new=new,
        )
    )
    report.added = int(counts["added"])
    if not counts["seeds"]:
        db.drop(seeds)
        return report
    frontier = db.sql(
        "SELECT "
        + select_list(
            FRONTIER,
            gen=lit(gen),
            depth="0",
            source_url="NULL",
            reason=lit(FrontierReason.SEED),
            discovered_at="current_timestamp()",
            score=lit(float(cfg.generate.seed_score)),
            redirects="NULL",
        )
        + " FROM {seeds}",
        seeds=seeds,
    )
    frontier = db.keep(frontier)
    # Frontier first, crawldb second: a crash in between leaves URLs that a rerun seeds again,
    # and the anti-join on the seed rows of gen keeps them from being queued twice. Two
    # appends, not MERGEs (a MERGE costs several appends): the URLs are new to crawldb (or
    # offers of depth 0), and the frontier gets only the seed rows it does not hold (a URL a
    # link already queued keeps its link row beside its seed row; plan takes the shallower).
    queued = db.table(
        "frontier", f"gen = {gen} AND reason = '{FrontierReason.SEED}'", columns=["url_key"]
    )
    db.append(
        db.sql(
            "SELECT f.* FROM {frontier} f LEFT ANTI JOIN {queued} q ON f.url_key = q.url_key",
            frontier=frontier,
            queued=queued,
        ),
        "frontier",
    )
    if report.added:
        fresh = db.sql(
            "SELECT f.* FROM {frontier} f LEFT SEMI JOIN {new} n ON f.url_key = n.url_key",
            frontier=frontier,
            new=new,
        )
        db.append(db.sql(queued_rows(gen), frontier=fresh), "crawldb")
    db.drop(frontier)
    db.drop(seeds)
    return report
