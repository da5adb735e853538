"""The pages of a generation: duplicates, links, next frontier (chispa), and update's work
on them (extraction of what the fetch did not, marks, frontier) on a tmp crawl root."""

from __future__ import annotations

import datetime as dt
import random
import shutil

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from crawllib.config import replace
from crawllib.content.hashing import content_hash, hamming64, lsh_bands, simhash64
from crawllib.core.urls import surt, url_key
from crawllib.stages import pages as pages_stage
from crawllib.stages import update as update_stage
from crawllib.stages.base import StageRun
from crawllib.store import generations, integrity, lease, tables
from crawllib.store.spark_schemas import CRAWLDB, EXTRACTED, EXTRACTED_TEXT, FETCHES, PAGES, TEXTS
from crawllib.testweb.content import article_html, paragraph
from crawllib.transforms.parse import (
    MARK_COLUMNS,
    extract_pages,
    key_collisions,
    links_table,
    lsh_band_columns,
    mark_exact_duplicates,
    mark_near_duplicates,
    next_frontier,
    texts_of,
)

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


def texts_df(spark, rows):
    return spark.createDataFrame([tuple(r.get(f) for f in TEXTS.fieldNames()) for r in rows], TEXTS)


def marks(spark, rows):
    return spark.createDataFrame(rows, "url_key long, duplicate_of long, duplicate_kind string")


def test_lsh_band_columns_are_hashing_lsh_bands(spark):
    values = [0, 1, -1, 2**63 - 1, -(2**63), 123456789123456789, -987654321987654321]
    ks = [0, 1, 3, 4, 7, 63]
    df = spark.createDataFrame([(v,) for v in values], "simhash long")
    rows = df.select("simhash", *[lsh_band_columns(k).alias(f"k{k}") for k in ks]).collect()
    for row in rows:
        for k in ks:
            assert [(b.band, b.value) for b in row[f"k{k}"]] == lsh_bands(row.simhash, k)


@pytest.mark.parametrize("columns", ["texts", "marks"])
def test_exact_and_near_duplicates_first_copy_wins(spark, spark_cfg, columns):
    """Marking needs MARK_COLUMNS only (the stage never moves the text through its joins);
    either way the marks are the same and the input's columns come out."""
    k = spark_cfg.parse.near_dup_distance
    story, other, third = long_text(1), long_text(2), long_text(3)
    edited = one_word_changed(story)
    assert hamming64(simhash64(story), simhash64(edited)) <= k  # one word in 1000: near
    assert hamming64(simhash64(story), simhash64(other)) > 3 * k  # unrelated: far
    short = "A short note. " * 5
    short_edit = short.replace("note", "memo", 1)
    prior = texts_df(
        spark,
        [
            text_row(1, 50, story),  # the first copy of the story
            text_row(1, 60, other),
            text_row(1, 80, short),
            text_row(1, 81, short_edit),
        ],
    )
    new = texts_df(
        spark,
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
    if columns == "marks":
        new = new.select(*MARK_COLUMNS)
    out = new.transform(mark_exact_duplicates, prior).transform(
        mark_near_duplicates, prior, k, MIN_CHARS
    )
    assert out.columns == new.columns
    if columns == "texts":
        assert out.schema == TEXTS
    expected = marks(
        spark,
        [
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
        ],
    )
    assert_df_equality(
        out.select("url_key", "duplicate_of", "duplicate_kind"),
        expected,
        ignore_row_order=True,
        ignore_nullable=True,
    )


def extracted_df(spark, pages):
    """pages: [(url_key, url, depth, [(dst_url, anchor), ...])] -> extract_pages' output."""
    schema = "gen int, slice int, url_key long, url string, host string, depth int, " + ", ".join(
        f"{f.name} {f.dataType.simpleString()}" for f in EXTRACTED.fields
    )
    rows = [
        (
            0,
            1,
            key,
            url,
            "a.test",
            depth,
            *([None] * (len(EXTRACTED_TEXT) + 1)),  # the text's fields and error
            [],  # directives
            False,  # tdm_reserved
            None,  # canonical_url
            [(d, url_key(d), "b.test", a) for d, a in links],
        )
        for key, url, depth, links in pages
    ]
    return spark.createDataFrame(rows, schema)


def test_links_table_and_next_frontier_goes_one_deeper(spark):
    x, y, z, old = (f"http://b.test/{n}" for n in ("x", "y", "z", "old"))
    extracted = extracted_df(
        spark,
        [
            (1, "http://a.test/1", 0, [(x, "first"), (y, "Y"), (old, "old")]),
            (2, "http://a.test/2", 2, [(x, "from two"), (z, "Z")]),
            (3, "http://a.test/3", 1, [(z, "Z3")]),
        ],
    )
    links = links_table(extracted)
    kx, ky, kz = url_key(x), url_key(y), url_key(z)
    expected = spark.createDataFrame(
        [
            (0, 1, 1, "http://a.test/1", kx, x, "b.test", "first"),
            (0, 1, 1, "http://a.test/1", ky, y, "b.test", "Y"),
            (0, 1, 1, "http://a.test/1", url_key(old), old, "b.test", "old"),
            (0, 1, 2, "http://a.test/2", kx, x, "b.test", "from two"),
            (0, 1, 2, "http://a.test/2", kz, z, "b.test", "Z"),
            (0, 1, 3, "http://a.test/3", kz, z, "b.test", "Z3"),
        ],
        "gen int, slice int, src_key long, src_url string, dst_key long, dst_url string, "
        "dst_host string, anchor string",
    )
    assert_df_equality(links, expected, ignore_row_order=True, ignore_nullable=True)

    pages = extracted.select("url_key", "depth")
    known = [(url_key(old), old, 1), (ky, y, 3)]  # y is known deeper than the link puts it
    crawldb = spark.createDataFrame(known, "url_key long, url string, depth int")
    frontier = next_frontier(links, pages, crawldb, 0)
    assert frontier.where(F.col("discovered_at").isNull()).count() == 0
    expected = spark.createDataFrame(
        [
            (1, x, kx, "b.test", "b.test", 1, "http://a.test/1", "link"),
            (1, y, ky, "b.test", "b.test", 1, "http://a.test/1", "link"),
            (1, z, kz, "b.test", "b.test", 2, "http://a.test/3", "link"),
        ],
        "gen int, url string, url_key long, host string, domain string, depth int, "
        "source_url string, reason string",
    )
    assert_df_equality(
        frontier.drop("discovered_at", "score", "redirects"),
        expected,
        ignore_row_order=True,
        ignore_nullable=True,
    )


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
def crawl_root(spark, new_root):
    root = new_root
    rows = page_rows(gen=3)
    pages = spark.createDataFrame(
        [tuple(r.get(f) for f in PAGES.fieldNames()) for r in rows], PAGES
    ).withColumn("fetched_at", F.current_timestamp())
    tables.append(pages, root, "pages")
    # the fetch's rows of those pages (update reads what the fetch did from them)
    fetches = spark.createDataFrame(
        [tuple({**r, "outcome": "ok"}.get(f) for f in FETCHES.fieldNames()) for r in rows],
        FETCHES,
    ).withColumn("fetched_at", F.current_timestamp())
    tables.append(fetches, root, "fetches")
    known = [r["url"] for r in rows]
    crawldb = spark.createDataFrame(
        [(url_key(u), u, "site.test", "fetched") for u in known],
        "url_key long, url string, host string, status string",
    )
    tables.append(
        crawldb.select(
            [
                F.col(c) if c in crawldb.columns else F.lit(None).alias(c)
                for c in CRAWLDB.fieldNames()
            ]
        ),
        root,
        "crawldb",
    )
    # fetch 3 is done: its row records the tables' versions (an update rerun reads crawldb's)
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    versions = integrity.current_versions(spark, root)
    generations.record(spark, root, 3, "fetch", "done", now, versions=versions)
    return root


def snapshot(spark, root):
    def rows(name, order, drop=()):
        return [
            r.asDict() for r in tables.read(spark, root, name).drop(*drop).orderBy(*order).collect()
        ]

    return (
        rows("texts", ["gen", "url_key"]),
        rows("links", ["gen", "src_key", "dst_key"]),
        rows("frontier", ["gen", "url_key"], drop=["discovered_at"]),
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
    spark, spark_cfg, crawl_root, template_root
):
    counts = update_stage.run(StageRun(spark, crawl_root, spark_cfg, 3, first=True))
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
    texts, links, frontier = snapshot(spark, crawl_root)
    by_url = {t["url"]: t for t in texts}
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
    again = update_stage.run(StageRun(spark, crawl_root, spark_cfg, 3))
    assert page_counts(again) == {**page_counts(counts), "extracted": 0}
    assert snapshot(spark, crawl_root) == (texts, links, frontier)
    # re-extraction (`crawl parse --force`) extracts every page from the stored raw pages,
    # to the same rows
    forced = update_stage.run(StageRun(spark, crawl_root, spark_cfg, 3, force=True, reextract=True))
    assert page_counts(forced) == page_counts(counts)
    assert snapshot(spark, crawl_root) == (texts, links, frontier)

    # The same pages extracted by the fetch (its texts rows unmarked, its links rows, per
    # slice): parse extracts nothing and ends with the same tables.
    other = crawl_root + "-fetch-extracted"
    shutil.copytree(template_root, other)
    with lease.hold(other, "pytest", spark_cfg):
        for name in ("pages", "fetches"):
            tables.append(tables.read(spark, crawl_root, name), other, name)
        tables.append(
            tables.read(spark, crawl_root, "crawldb")
            .select("url_key", "url", "host", F.lit("queued").alias("status"))
            .select(
                [
                    F.col(c) if c in ("url_key", "url", "host", "status") else F.lit(None).alias(c)
                    for c in CRAWLDB.fieldNames()
                ]
            ),
            other,
            "crawldb",
        )
        extracted = extract_pages(tables.read(spark, other, "pages"), spark_cfg)
        tables.append(texts_of(extracted), other, "texts")
        tables.append(links_table(extracted), other, "links")
        fetched = update_stage.run(StageRun(spark, other, spark_cfg, 3, first=True))
    assert page_counts(fetched) == {**page_counts(counts), "extracted": 0}
    assert snapshot(spark, other) == (texts, links, frontier)


def test_duplicate_marks_outlive_the_texts_write_without_rereading_it(spark, spark_cfg, crawl_root):
    # The marks are read by three writer threads while one of them replaces texts of the
    # generation: they must not be recomputed from (or name) the texts table.
    run = StageRun(spark, crawl_root, spark_cfg, 3)
    texts = texts_of(extract_pages(tables.read(spark, crawl_root, "pages"), spark_cfg))
    marks = pages_stage.duplicate_marks(run, texts)
    plan = marks._jdf.queryExecution().analyzed().toString()
    assert "Relation" not in plan and "LogicalRDD" in plan
    before = sorted(r.asDict().items() for r in marks.collect())
    assert len(before) == 1  # a.html, an exact copy of copy.html
    tables.append(texts, crawl_root, "texts")  # a new version of the table the marks came from
    assert sorted(r.asDict().items() for r in marks.collect()) == before


def test_key_collisions_are_targets_a_known_url_has_the_key_of(spark):
    """A target whose url_key a known URL has under another URL is a collision (the anti-join
    would take it as known); the same URL under its own key, or a new key, is not."""
    k_same, k_forged, k_new = url_key("http://a.org/"), url_key("http://b.org/x"), 12345
    targets = spark.createDataFrame(
        [
            (k_same, "http://a.org/"),  # known, same URL
            (k_forged, "http://b.org/x"),  # known key, another URL: a collision
            (k_forged, "http://b.org/x"),  # linked twice: one pair
            (k_new, "http://c.org/"),  # unknown key
        ],
        "dst_key long, dst_url string",
    )
    known = spark.createDataFrame(
        [(k_same, "http://a.org/"), (k_forged, "http://elsewhere.net/y")],
        "url_key long, url string",
    )
    got = [r.asDict() for r in key_collisions(targets, known).collect()]
    assert got == [
        {"dst_key": k_forged, "dst_url": "http://b.org/x", "known_url": "http://elsewhere.net/y"}
    ]


def test_a_page_past_extract_max_seconds_is_a_row_with_extract_timeout(spark, spark_cfg):
    """issue 37: a page that stalls extraction stalls the task no more; it is an error row and
    the other pages of the partition are extracted (the UDF's child process is killed)."""
    rows = page_rows(gen=3)
    slow = dict(
        rows[0], url="http://site.test/slow.html", url_key=url_key("http://site.test/slow.html")
    )
    slow["body"] = b"<p>Words of a long article, paragraph after paragraph. </p>" * 120_000
    cfg = replace(spark_cfg, extract__max_seconds=1.0, parse__max_html_bytes=16 << 20)
    pages = spark.createDataFrame(
        [tuple(r.get(f) for f in PAGES.fieldNames()) for r in [*rows, slow]], PAGES
    ).coalesce(1)  # one task: the slow page and the others in one Python worker
    extracted = {r["url"]: r for r in extract_pages(pages, cfg).collect()}
    assert extracted["http://site.test/slow.html"]["error"].startswith("extract_timeout: ")
    assert extracted["http://site.test/slow.html"]["text"] is None
    assert extracted["http://site.test/a.html"]["error"] is None, extracted[
        "http://site.test/a.html"
    ]
    assert extracted["http://site.test/a.html"]["title"].startswith("First story")
    assert extracted["http://site.test/b.html"]["error"] is None
