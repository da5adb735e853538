"""The pages of a generation: duplicates, links, next frontier (the rules' SQL), and
update's work on them (extraction of what the fetch did not, marks, frontier) on a tmp crawl
root; on both engines."""

from __future__ import annotations

import datetime as dt
import random
import shutil

import pytest

from crawllib.config import replace
from crawllib.content.hashing import content_hash, hamming64, lsh_bands, simhash64
from crawllib.content.quality import quality_signals
from crawllib.core.urls import surt, url_key
from crawllib.engine.partition import EXTRACTED_PAGE, ExtractTask
from crawllib.stages import pages as pages_stage
from crawllib.stages import update as update_stage
from crawllib.stages.base import StageRun
from crawllib.store import generations, integrity, lease
from crawllib.store.schemas import CRAWLDB, FETCHES, PAGES, TEXTS, L, S, struct_of
from crawllib.testweb.content import article_html, paragraph
from crawllib.transforms import parse
from crawllib.transforms.parse import (
    MARK_COLUMNS,
    key_collisions,
    links_table,
    mark_exact_duplicates,
    mark_near_duplicates,
    next_frontier,
    texts_of,
)
from crawllib.transforms.sqltext import names
from tests.conftest import open_db
from tests.rows import by, rel, run

MIN_CHARS = 200


def long_text(seed: int, words: int = 1000) -> str:
    rng = random.Random(seed)
    out: list[str] = []
    while sum(len(p.split()) for p in out) < words:
        out.append(paragraph(rng))
    return "\n".join(out)


def one_word_changed(text: str) -> str:
    words = text.split(" ")
    words[len(words) // 2] = "changed"
    return " ".join(words)


def text_row(gen: int, key: int, text: str | None, error: str | None = None) -> dict:
    has_text = bool(text) and error is None
    return {
        "gen": gen,
        "url_key": key,
        "url": f"http://h.test/{key}",
        "host": "h.test",
        "title": None,
        "text": text,
        "language": None,
        "text_chars": len(text) if text is not None else None,
        "content_hash": content_hash(text) if has_text else None,
        "simhash": simhash64(text) if has_text else None,
        "duplicate_of": None,
        "duplicate_kind": None,
        "error": error,
    }


def test_lsh_band_columns_are_hashing_lsh_bands(db):
    values = [0, 1, -1, 2**63 - 1, -(2**63), 123456789123456789, -987654321987654321]
    hashes = rel(db, struct_of(("simhash", L)), [{"simhash": v} for v in values])
    for k in [0, 1, 3, 4, 7, 63]:
        bands = parse.lsh_bands(k)
        columns = ", ".join(f"{value} AS b{band}" for band, value in bands)
        rows = run(db, f"SELECT simhash, {columns} FROM {{h}}", h=hashes)
        assert sorted(r["simhash"] for r in rows) == sorted(values)
        for row in rows:
            got = [(band, row[f"b{band}"]) for band, _ in bands]
            assert got == lsh_bands(row["simhash"], k), (k, row["simhash"])


@pytest.mark.parametrize("columns", ["texts", "marks"])
def test_exact_and_near_duplicates_first_copy_wins(db, spark_cfg, columns):
    """Marking needs MARK_COLUMNS only (the stage never moves the text through its joins);
    either way the marks are the same and the input's columns come out."""
    k = spark_cfg.parse.near_dup_distance
    story, other, third = long_text(1), long_text(2), long_text(3)
    edited = one_word_changed(story)
    assert hamming64(simhash64(story), simhash64(edited)) <= k  # one word in 1000: near
    assert hamming64(simhash64(story), simhash64(other)) > 3 * k  # unrelated: far
    short = "A short note. " * 5
    short_edit = short.replace("note", "memo", 1)
    prior = rel(
        db,
        TEXTS,
        [
            text_row(1, 50, story),  # the first copy of the story
            text_row(1, 60, other),
            text_row(1, 80, short),
            text_row(1, 81, short_edit),
        ],
    )
    new = rel(
        db,
        TEXTS,
        [
            text_row(2, 10, story),  # lower key, later generation: a copy of 50
            text_row(2, 20, edited),  # near copy: of 50 (gen 1), not of 10
            text_row(2, 50, story),  # 50 fetched again: its own first copy
            text_row(2, 30, third),  # unrelated
            text_row(2, 5, third),  # same generation, lower key: the first copy
            text_row(2, 70, short),  # short texts still have exact duplicates
            text_row(2, 71, short_edit.replace("A short", "One short")),  # but no near ones
            text_row(2, 100, None, error="ExtractError: empty body"),
            text_row(2, 110, ""),
            text_row(2, 120, ""),
        ],
    )
    wanted = TEXTS.names if columns == "texts" else MARK_COLUMNS
    if columns == "marks":
        new = db.sql(f"SELECT {names(MARK_COLUMNS)} FROM {{t}}", t=new)
    exact = db.sql(mark_exact_duplicates(wanted), texts_new=new, texts_prior=prior)
    out = db.sql(mark_near_duplicates(wanted, k, MIN_CHARS), texts_new=exact, texts_prior=prior)
    assert db.columns(out) == list(wanted)
    rows = db.collect(out)
    assert {(r["url_key"], r["duplicate_of"], r["duplicate_kind"]) for r in rows} == {
        (10, 50, "exact"),
        (20, 50, "near"),
        (50, None, None),
        (30, 5, "exact"),
        (5, None, None),
        (70, 80, "exact"),
        (71, None, None),
        (100, None, None),
        (110, None, None),
        (120, None, None),
    }
    assert len(rows) == 10
    if columns == "texts":  # the other columns come out as they went in
        texts = by(rows)
        assert texts[20]["text"] == edited and texts[100]["error"] == "ExtractError: empty body"


def test_clusters_follow_copies_of_copies_across_generations(db):
    """Each copy's cluster is the first copy at the end of its chain: through earlier
    generations' clusters (and, in rows written before the column, their duplicate_of), and
    through the generation's own copies up to CLUSTER_PASSES deep."""
    old = {**text_row(1, 53, "x"), "duplicate_of": 50, "duplicate_kind": "exact"}  # no cluster
    prior_rows = [
        {**text_row(1, 50, "a"), "cluster": 50},
        {**text_row(1, 51, "b"), "duplicate_of": 50, "duplicate_kind": "near", "cluster": 50},
        old,
        {**text_row(1, 54, "c")},  # a first copy written before the column
        {**text_row(1, 60, "d"), "duplicate_of": 50, "duplicate_kind": "near", "cluster": 50},
    ]
    marks = {  # gen 2: url_key -> duplicate_of, and the cluster it must get
        10: (51, 50),  # an exact copy of a near copy: the near copy's cluster
        11: (53, 50),  # a copy of a row without a cluster: that row's duplicate_of
        12: (54, 54),  # a copy of a first copy without a cluster: the first copy
        20: (21, 21),  # a copy of a page of this generation that is a first copy now
        22: (23, 50),  # a copy of a copy in this generation, whose chain goes to gen 1
        24: (25, 50),  # three copies deep in this generation
        25: (26, 50),
        26: (51, 50),
        30: (99, 99),  # a page naming a canonical URL not fetched yet
        40: (60, 60),  # 60 was a copy in gen 1 and is a first copy in gen 2: this gen wins
        23: (51, 50),
    }
    prior = rel(db, TEXTS, prior_rows)
    mark_rows = rel(
        db,
        struct_of(("url_key", L), ("duplicate_of", L), ("duplicate_kind", S)),
        [
            {"url_key": k, "duplicate_of": of, "duplicate_kind": "exact"}
            for k, (of, _) in marks.items()
        ],
    )
    gen_keys = rel(db, struct_of(("url_key", L)), [{"url_key": k} for k in [*marks, 21, 60]])
    steps = db.sql(parse.cluster_steps(), marks=mark_rows, texts_prior=prior, texts_gen=gen_keys)
    rows = db.collect(db.sql(parse.cluster_chains(), steps=steps))
    assert {r["url_key"]: (r["duplicate_of"], r["cluster"]) for r in rows} == marks
    # a first copy is its own cluster; a copy gets its mark's
    texts = rel(db, TEXTS, [text_row(2, k, "t") for k in [*marks, 21, 60]])
    marked = by(db.collect(db.sql(parse.with_duplicate_marks(), texts=texts, marks=steps)))
    assert marked[21]["cluster"] == 21 and marked[60]["cluster"] == 60
    assert marked[10]["cluster"] == 50 and marked[10]["duplicate_of"] == 51


def extracted_rows(db, pages):
    """pages: [(url_key, url, depth, [(dst_url, anchor), ...])] -> extracted pages (what
    ExtractTask yields), as a relation."""
    return rel(
        db,
        EXTRACTED_PAGE,
        [
            {
                "gen": 0,
                "slice": 1,
                "url_key": key,
                "url": url,
                "host": "a.test",
                "depth": depth,
                "directives": [],
                "tdm_reserved": False,
                "links": [
                    {"dst_url": d, "dst_key": url_key(d), "dst_host": "b.test", "anchor": a}
                    for d, a in links
                ],
            }
            for key, url, depth, links in pages
        ],
    )


def test_links_table_and_next_frontier_goes_one_deeper(db):
    x, y, z, old = (f"http://b.test/{n}" for n in ("x", "y", "z", "old"))
    extracted = extracted_rows(
        db,
        [
            (1, "http://a.test/1", 0, [(x, "first"), (y, "Y"), (old, "old")]),
            (2, "http://a.test/2", 2, [(x, "from two"), (z, "Z")]),
            (3, "http://a.test/3", 1, [(z, "Z3")]),
        ],
    )
    links = db.keep(db.sql(links_table(), extracted=extracted))
    kx, ky, kz = url_key(x), url_key(y), url_key(z)
    columns = ("gen", "slice", "src_key", "src_url", "dst_key", "dst_url", "dst_host", "anchor")
    assert db.columns(links) == list(columns)
    assert sorted(tuple(r.values()) for r in db.collect(links)) == sorted(
        [
            (0, 1, 1, "http://a.test/1", kx, x, "b.test", "first"),
            (0, 1, 1, "http://a.test/1", ky, y, "b.test", "Y"),
            (0, 1, 1, "http://a.test/1", url_key(old), old, "b.test", "old"),
            (0, 1, 2, "http://a.test/2", kx, x, "b.test", "from two"),
            (0, 1, 2, "http://a.test/2", kz, z, "b.test", "Z"),
            (0, 1, 3, "http://a.test/3", kz, z, "b.test", "Z3"),
        ]
    )

    pages = db.sql("SELECT url_key, depth FROM {e}", e=extracted)
    known = rel(
        db,
        struct_of(("url_key", L), ("url", S), ("depth", PAGES["depth"].type)),
        # y is known deeper than the link puts it
        [{"url_key": url_key(old), "url": old, "depth": 1}, {"url_key": ky, "url": y, "depth": 3}],
    )
    frontier = run(db, next_frontier(0), links=links, pages=pages, known=known)
    assert frontier and all(f["discovered_at"] is not None for f in frontier)
    shown = ("gen", "url", "url_key", "host", "domain", "depth", "source_url", "reason")
    assert sorted(tuple(f[c] for c in shown) for f in frontier) == sorted(
        [
            (1, x, kx, "b.test", "b.test", 1, "http://a.test/1", "link"),
            (1, y, ky, "b.test", "b.test", 1, "http://a.test/1", "link"),
            (1, z, kz, "b.test", "b.test", 2, "http://a.test/3", "link"),
        ]
    )
    db.drop(links)


def page_rows(gen: int) -> list[dict]:
    """A tiny site: two articles, a copy of the first, an empty body and a junk charset."""
    rng = random.Random(5)

    def article(title: str, links: list[tuple[str, str]]) -> bytes:
        return article_html(rng, "site.test", title, links).encode()

    first = article("First story", [("/b.html", "B"), ("http://new.test/n", "N")])
    pages = {
        "http://site.test/a.html": (0, first, None),
        "http://site.test/b.html": (1, article("Second story", [("/a.html", "A")]), "utf-8"),
        "http://site.test/copy.html": (1, first, "no-such-charset"),
        "http://site.test/empty.html": (1, b"", None),
    }
    return [
        {
            "gen": gen,
            "slice": 0,
            "url_key": url_key(url),
            "url": url,
            "host": "site.test",
            "domain": "site.test",
            "surt": surt(url),
            "depth": depth,
            "http_status": 200,
            "content_type": "text/html",
            "charset": charset,
            "headers": {},
            "body": body,
            "is_truncated": False,
            "content_hash": content_hash(body),
        }
        for url, (depth, body, charset) in pages.items()
    ]


@pytest.fixture
def crawl_db(db):
    """The tables of a fresh crawl root holding generation 3's fetched pages (not extracted)."""
    rows = page_rows(gen=3)
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    db.append(rel(db, PAGES, rows, fetched_at=now), "pages")
    # the fetch's rows of those pages (update reads what the fetch did from them)
    db.append(rel(db, FETCHES, rows, outcome="ok", fetched_at=now), "fetches")
    known = [{"url_key": r["url_key"], "url": r["url"], "host": "site.test"} for r in rows]
    db.append(rel(db, CRAWLDB, known, status="fetched"), "crawldb")
    # fetch 3 is done: its row records the tables' versions (an update rerun reads crawldb's)
    versions = integrity.current_versions(db)
    generations.record(db, 3, "fetch", "done", now, versions=versions)
    return db


def snapshot(db):
    def rows(name, order, drop=()):
        out = [{k: v for k, v in r.items() if k not in drop} for r in db.collect(db.table(name))]
        return sorted(out, key=lambda r: tuple(r[k] for k in order))

    return (
        rows("texts", ["gen", "url_key"]),
        rows("links", ["gen", "src_key", "dst_key"]),
        rows("frontier", ["gen", "url_key"], drop=["discovered_at"]),
    )


def extract(db, pages, cfg, partitions=None):
    """The extracted pages of ``pages`` (ExtractTask over the engine's partitions)."""
    return db.map_partitions(
        pages, ExtractTask(cfg), EXTRACTED_PAGE, partitions or db.parallelism()
    )


PAGE_COUNTS = (
    "pages",
    "extracted",
    "texts",
    "extract_errors",
    "exact_duplicates",
    "near_duplicates",
    "canonical_duplicates",
    "soft_404",
    "nofollow",
    "tdm_reserved",
    "links",
    "new_frontier",
    "trap_patterns",
    "alias_hosts",
    "key_collisions",
)


def page_counts(result) -> dict[str, int]:
    counts = result.as_counts()
    return {k: counts[k] for k in PAGE_COUNTS}


@pytest.mark.slow  # four update runs: the fast tier has the transforms' tests
def test_stage_writes_texts_links_frontier_and_is_idempotent(
    request, engine, spark_cfg, crawl_db, template_root
):
    db = crawl_db
    counts = update_stage.run(StageRun(db, spark_cfg, 3, first=True))
    assert page_counts(counts) == {
        "pages": 4,
        "extracted": 4,  # the fetch extracted none of these pages (they were written here)
        "texts": 3,
        "extract_errors": 1,
        "exact_duplicates": 1,
        "near_duplicates": 0,
        "canonical_duplicates": 0,
        "soft_404": 0,
        "nofollow": 0,
        "tdm_reserved": 0,
        "links": 8,  # a and its copy: /, b, new.test/n; b: /, a
        "new_frontier": 2,
        "trap_patterns": 0,
        "alias_hosts": 0,
        "key_collisions": 0,
    }
    assert counts.urls == 4 and (counts.fetched, counts.duplicate) == (3, 1)
    texts, links, frontier = snapshot(db)
    by_url = by(texts, "url")
    assert by_url["http://site.test/empty.html"]["error"] == "ExtractError: empty body"
    # Same generation: the lower url_key is the first copy (copy.html's, as it happens).
    assert url_key("http://site.test/copy.html") < url_key("http://site.test/a.html")
    assert by_url["http://site.test/a.html"]["duplicate_of"] == url_key(
        "http://site.test/copy.html"
    )
    assert by_url["http://site.test/copy.html"]["duplicate_of"] is None
    assert by_url["http://site.test/a.html"]["title"] == "First story | site.test"
    # a texts row carries its page's domain and SURT key; its language is its text's
    assert {(t["url"], t["domain"], t["surt"], t["language_detected"]) for t in texts} == {
        ("http://site.test/a.html", "site.test", "test,site)/a.html", "en"),
        ("http://site.test/b.html", "site.test", "test,site)/b.html", "en"),
        ("http://site.test/copy.html", "site.test", "test,site)/copy.html", "en"),
        ("http://site.test/empty.html", "site.test", "test,site)/empty.html", None),
    }
    # and its quality signals (crawllib.content.quality), computed when the page was extracted
    assert {t["url"]: t["quality"] for t in texts} == {
        t["url"]: quality_signals(t["text"]) for t in texts
    }
    assert by_url["http://site.test/b.html"]["quality"]["gopher_words"] > 0
    assert by_url["http://site.test/empty.html"]["quality"] is None
    assert {(link["src_url"], link["dst_url"]) for link in links} >= {
        ("http://site.test/a.html", "http://new.test/n"),
        ("http://site.test/b.html", "http://site.test/a.html"),
    }
    assert sorted((f["url"], f["gen"], f["depth"], f["source_url"]) for f in frontier) == [
        ("http://new.test/n", 4, 1, "http://site.test/a.html"),
        ("http://site.test/", 4, 1, "http://site.test/a.html"),
    ]
    assert {(f["host"], f["domain"], f["reason"]) for f in frontier} == {
        ("new.test", "new.test", "link"),
        ("site.test", "site.test", "link"),
    }
    # a rerun finds every page extracted: it marks again and writes the same rows
    again = update_stage.run(StageRun(db, spark_cfg, 3))
    assert page_counts(again) == {**page_counts(counts), "extracted": 0}
    assert snapshot(db) == (texts, links, frontier)
    # re-extraction (`crawl parse --force`) extracts every page from the stored raw pages,
    # to the same rows
    forced = update_stage.run(StageRun(db, spark_cfg, 3, force=True, reextract=True))
    assert page_counts(forced) == page_counts(counts)
    assert snapshot(db) == (texts, links, frontier)

    # The same pages extracted by the fetch (its texts rows unmarked, its links rows, per
    # slice): parse extracts nothing and ends with the same tables.
    other = db.root + "-fetch-extracted"
    shutil.copytree(template_root, other)
    with lease.hold(other, "pytest", spark_cfg):
        odb = open_db(request, engine, other, spark_cfg)
        try:
            for name, schema in (("pages", PAGES), ("fetches", FETCHES)):
                odb.append(rel(odb, schema, db.collect(db.table(name))), name)
            known = db.collect(db.table("crawldb", columns=["url_key", "url", "host"]))
            odb.append(rel(odb, CRAWLDB, known, status="queued"), "crawldb")
            extracted = extract(odb, odb.table("pages"), spark_cfg)
            odb.append(odb.sql(texts_of(), extracted=extracted), "texts")
            odb.append(odb.sql(links_table(), extracted=extracted), "links")
            fetched = update_stage.run(StageRun(odb, spark_cfg, 3, first=True))
            assert page_counts(fetched) == {**page_counts(counts), "extracted": 0}
            assert snapshot(odb) == (texts, links, frontier)
        finally:
            odb.close()


def test_duplicate_marks_outlive_the_texts_write_without_rereading_it(engine, spark_cfg, crawl_db):
    # The marks are read by three writer threads while one of them replaces texts of the
    # generation: they must not be recomputed from (or name) the texts table.
    db = crawl_db
    texts = db.keep(db.sql(texts_of(), extracted=extract(db, db.table("pages"), spark_cfg)))
    marks = pages_stage.duplicate_marks(StageRun(db, spark_cfg, 3), texts)
    if engine == "spark":
        plan = marks._jdf.queryExecution().analyzed().toString()
        assert "Relation" not in plan and "LogicalRDD" in plan
    else:  # a table of the engine's own database, not a view over a Delta table
        assert marks.type == "TABLE_RELATION"
    before = sorted(tuple(sorted(r.items())) for r in db.collect(marks))
    assert len(before) == 1  # a.html, an exact copy of copy.html
    db.append(texts, "texts")  # a new version of the table the marks came from
    assert sorted(tuple(sorted(r.items())) for r in db.collect(marks)) == before


def test_key_collisions_are_targets_a_known_url_has_the_key_of(db):
    """A target whose url_key a known URL has under another URL is a collision (the anti-join
    would take it as known); the same URL under its own key, or a new key, is not."""
    k_same, k_forged, k_new = url_key("http://a.org/"), url_key("http://b.org/x"), 12345
    targets = rel(
        db,
        struct_of(("dst_key", L), ("dst_url", S)),
        [
            {"dst_key": k_same, "dst_url": "http://a.org/"},  # known, same URL
            {"dst_key": k_forged, "dst_url": "http://b.org/x"},  # known key, another URL
            {"dst_key": k_forged, "dst_url": "http://b.org/x"},  # linked twice: one pair
            {"dst_key": k_new, "dst_url": "http://c.org/"},  # unknown key
        ],
    )
    known = rel(
        db,
        struct_of(("url_key", L), ("url", S)),
        [
            {"url_key": k_same, "url": "http://a.org/"},
            {"url_key": k_forged, "url": "http://elsewhere.net/y"},
        ],
    )
    assert run(db, key_collisions(), targets=targets, known=known) == [
        {"dst_key": k_forged, "dst_url": "http://b.org/x", "known_url": "http://elsewhere.net/y"}
    ]


def test_a_page_past_extract_max_seconds_is_a_row_with_extract_timeout(db, spark_cfg):
    """issue 37: a page that stalls extraction stalls the task no more; it is an error row and
    the other pages of the partition are extracted (the extraction's child process is
    killed)."""
    rows = page_rows(gen=3)
    slow = dict(
        rows[0], url="http://site.test/slow.html", url_key=url_key("http://site.test/slow.html")
    )
    slow["body"] = b"<p>Words of a long article, paragraph after paragraph. </p>" * 120_000
    cfg = replace(spark_cfg, extract__max_seconds=1.0, parse__max_html_bytes=16 << 20)
    pages = rel(db, PAGES, [*rows, slow])
    # one task: the slow page and the others in one worker
    extracted = by(db.collect(extract(db, pages, cfg, partitions=1)), "url")
    assert extracted["http://site.test/slow.html"]["error"].startswith("extract_timeout: ")
    assert extracted["http://site.test/slow.html"]["text"] is None
    assert extracted["http://site.test/a.html"]["error"] is None, extracted[
        "http://site.test/a.html"
    ]
    assert extracted["http://site.test/a.html"]["title"].startswith("First story")
    assert extracted["http://site.test/b.html"]["error"] is None
