"""crawl export-text on the embedded engine: a root's texts rows written as a training set's
documents (Parquet, gzip JSON Lines, WET) and read back with datatrove's readers and warcio:
the filters, the reserved pages left out, one per cluster, the shards' bounds, the schema.
tests/spark/test_export_text_on_spark.py runs the same export on Spark."""

from __future__ import annotations

import datetime as dt
import glob
import gzip
import os

import pyarrow.parquet as pq
import pytest
from datatrove.pipeline.readers import JsonlReader, ParquetReader
from warcio.archiveiterator import ArchiveIterator

from crawllib.cli import main
from crawllib.config import load_config
from crawllib.content.quality import quality_signals
from crawllib.core import urls
from crawllib.store import lease
from crawllib.store.schemas import PAGES, TEXTS
from crawllib.transforms.text_export import check_predicate
from tests.rows import rel

UTC = dt.UTC
T0 = dt.datetime(2026, 5, 6, 7, 8, 9, 250000, tzinfo=UTC)
LONG_EN = " ".join(
    f"The river near town number {i} is wide and the people who live there like to walk "
    "along it in the evening."
    for i in range(12)
)
SHORT_EN = "A short note about the weather today."
GERMAN = " ".join(
    f"Der Fluss bei der Stadt Nummer {i} ist breit und die Leute gehen gern am Abend dort "
    "spazieren."
    for i in range(12)
)


def url(name: str) -> str:
    return f"http://site{name}.test/{name}"


def key(name: str) -> int:
    return urls.url_key(url(name))


# name -> the texts row's own columns (gen 1 unless said); every one has a page row
DOCS: dict[str, dict] = {
    "a": {"text": LONG_EN, "language_detected": "en"},
    "b": {"text": LONG_EN, "language_detected": "en", "duplicate_kind": "exact", "dup": "a"},
    "c": {"text": GERMAN, "language": "de", "language_detected": "de"},
    "short": {"text": SHORT_EN, "language": "en", "language_detected": None},
    "tdm": {"text": LONG_EN + " tdm", "tdm_reserved": True, "directives": ["noai"]},
    "noai": {"text": LONG_EN + " noai", "tdm_reserved": None, "directives": ["noai"]},
    "noarchive": {"text": LONG_EN + " noarchive", "directives": ["noarchive"]},
    "failed": {"text": None, "error": "ValueError: no main text"},
    "empty": {"text": ""},
    "soft": {"text": "Page not found", "duplicate_kind": "soft_404", "dup": "probe"},
    # pages that say they are no document (crawllib.content.nondocument)
    "gone": {"text": "Sorry, this page does not exist.", "non_document": "soft_404"},
    "parked": {"text": LONG_EN + " parked", "non_document": "parked"},
    # revisited: gen 2 holds its latest text
    "old": {"text": LONG_EN + " first version", "language_detected": "en"},
    "old@2": {"text": LONG_EN + " second version", "language_detected": "en"},
}
# the ids a default export writes
DEFAULT = {"1/" + str(key(n)) for n in ("a", "c", "short", "noarchive")} | {f"2/{key('old')}"}


def texts_row(name: str, cols: dict) -> dict:
    base = name.split("@")[0]
    gen = int(name.split("@")[1]) if "@" in name else 1
    text = cols.get("text")
    return {
        "gen": gen,
        "slice": 0,
        "url_key": key(base),
        "url": url(base),
        "host": urls.host_of(url(base)),
        "text": text,
        "text_chars": len(text or ""),
        "language": cols.get("language", "en"),
        "language_detected": cols.get("language_detected"),
        "duplicate_of": key(cols["dup"]) if "dup" in cols else None,
        "duplicate_kind": cols.get("duplicate_kind"),
        "error": cols.get("error"),
        "directives": cols.get("directives", []),
        "tdm_reserved": cols.get("tdm_reserved", False),
        "quality": quality_signals(text) if text else None,
        "non_document": cols.get("non_document"),
    }


def fetch_time(name: str) -> dt.datetime:
    return T0 + dt.timedelta(minutes=list(DOCS).index(name))


@pytest.fixture(scope="module")
def root(template_root, tmp_path_factory) -> str:
    return make_root(template_root, tmp_path_factory)


def make_root(template_root, tmp_path_factory) -> str:
    """A crawl root holding DOCS in texts and their pages."""
    import shutil

    from crawllib.store.embedded import EmbeddedDb

    path = str(tmp_path_factory.mktemp("export_text") / "crawl")
    shutil.copytree(template_root, path)
    cfg = load_config()
    texts = [texts_row(n, c) for n, c in DOCS.items()]
    pages = [
        {
            "gen": t["gen"],
            "slice": 0,
            "url_key": t["url_key"],
            "url": t["url"],
            "host": t["host"],
            "fetched_at": fetch_time(n),
            "http_status": 200,
        }
        for n, t in zip(DOCS, texts, strict=True)
    ]
    with lease.hold(path, "pytest", cfg):
        db = EmbeddedDb(path, cfg)
        db.append(rel(db, TEXTS, texts), "texts")
        db.append(rel(db, PAGES, pages), "pages")
        db.close()
    return path


def export(root: str, out, *args: str) -> int:
    return main(["export-text", root, str(out), "--engine", "embedded", *args])


def parquet_docs(out) -> dict:
    """id -> datatrove Document, read by datatrove's ParquetReader."""
    docs = {d.id: d for d in ParquetReader(str(out), glob_pattern="*.parquet").run()}
    assert docs, "no documents read"
    return docs


def jsonl_docs(out) -> dict:
    docs = {d.id: d for d in JsonlReader(str(out), glob_pattern="*.jsonl.gz").run()}
    assert docs, "no documents read"
    return docs


def test_parquet_export_keeps_the_latest_text_of_each_url_one_per_cluster_unreserved(
    root, tmp_path, capsys
):
    out = tmp_path / "out"
    assert export(root, out) == 0
    assert sorted(os.listdir(out)) == ["part-00000.parquet"]
    docs = parquet_docs(out)
    assert set(docs) == DEFAULT
    a = docs[f"1/{key('a')}"]
    assert a.text == LONG_EN
    meta = a.metadata
    assert meta["url"] == url("a")
    assert meta["date"] == fetch_time("a").strftime("%Y-%m-%dT%H:%M:%SZ")
    assert meta["language"] == "en" and meta["language_detected"] == "en"
    assert meta["quality"]["gopher_words"] == quality_signals(LONG_EN)["gopher_words"]
    assert meta["quality"]["fineweb_line_punct_ratio"] == pytest.approx(
        quality_signals(LONG_EN)["fineweb_line_punct_ratio"]
    )
    assert meta["cluster"] == key("a") and meta["tdm_reserved"] is False
    # no language detected: the declared one
    assert docs[f"1/{key('short')}"].metadata["language"] == "en"
    assert docs[f"1/{key('short')}"].metadata["language_detected"] is None
    assert docs[f"2/{key('old')}"].text.endswith("second version")
    schema = pq.read_schema(out / "part-00000.parquet")
    assert schema.names == ["text", "id", "metadata"]
    assert [f.name for f in schema.field("metadata").type] == [
        "url", "date", "language", "language_detected", "quality", "cluster", "tdm_reserved",
        "gen", "url_key",
    ]  # fmt: skip
    assert "exported 5 documents in 1 parquet file" in capsys.readouterr().out


def test_reserved_pages_and_copies_only_when_asked(root, tmp_path):
    out = tmp_path / "out"
    assert export(root, out, "--include-reserved", "--no-one-per-cluster") == 0
    docs = parquet_docs(out)
    extra = {f"1/{key(n)}" for n in ("tdm", "noai", "b")}
    # never a failed, empty or soft-404 text, nor a page that is no document
    assert set(docs) == DEFAULT | extra
    assert docs[f"1/{key('tdm')}"].metadata["tdm_reserved"] is True
    assert docs[f"1/{key('b')}"].metadata["cluster"] == key("a")
    assert export(root, out, "--include-reserved") == 0
    assert set(parquet_docs(out)) == DEFAULT | {f"1/{key(n)}" for n in ("tdm", "noai")}


def test_jsonl_export_with_generation_language_and_predicate_filters(root, tmp_path):
    out = tmp_path / "out"
    assert export(root, out, "--format", "jsonl", "--gen", "1") == 0
    assert sorted(os.listdir(out)) == ["part-00000.jsonl.gz"]
    docs = jsonl_docs(out)
    # generation 1 only: the revisited URL's first version
    assert set(docs) == DEFAULT - {f"2/{key('old')}"} | {f"1/{key('old')}"}
    assert docs[f"1/{key('old')}"].text.endswith("first version")
    assert docs[f"1/{key('a')}"].metadata["quality"]["gopher_stop_words"] >= 2

    assert export(root, out, "--format", "jsonl", "--language", "de") == 0
    assert set(jsonl_docs(out)) == {f"1/{key('c')}"}
    assert export(root, out, "--format", "jsonl", "--language", "en,fr", "--gen", "2-3") == 0
    assert set(jsonl_docs(out)) == {f"2/{key('old')}"}
    where = "quality.gopher_words >= 50 AND language_detected = 'en'"
    assert export(root, out, "--format", "jsonl", "--where", where) == 0
    assert set(jsonl_docs(out)) == {f"1/{key('a')}", f"2/{key('old')}"}


def test_shards_hold_at_most_shard_docs_and_a_rerun_replaces_them(root, tmp_path, capsys):
    out = tmp_path / "out"
    assert export(root, out, "--format", "jsonl", "--shard-docs", "2") == 0
    names = sorted(os.listdir(out))
    assert names == ["part-00000.jsonl.gz", "part-00001.jsonl.gz", "part-00002.jsonl.gz"]
    counts = []
    for name in names:
        with gzip.open(out / name, "rt", encoding="utf-8") as f:
            counts.append(sum(1 for _ in f))
    assert counts == [2, 2, 1]
    assert set(jsonl_docs(out)) == DEFAULT
    # a rerun in another format: the earlier files go, so a reader of OUT sees this export
    assert export(root, out, "--shard-docs", "4") == 0
    assert sorted(os.listdir(out)) == ["part-00000.parquet", "part-00001.parquet"]
    assert [pq.read_metadata(out / n).num_rows for n in sorted(os.listdir(out))] == [4, 1]
    assert set(parquet_docs(out)) == DEFAULT
    assert "part-00001.parquet: 1 documents" in capsys.readouterr().out


def test_wet_export_is_warc_conversion_records_warcio_reads(root, tmp_path):
    out = tmp_path / "out"
    assert export(root, out, "--format", "wet", "--shard-docs", "3") == 0
    files = sorted(glob.glob(str(out / "*.warc.wet.gz")))
    assert [os.path.basename(f) for f in files] == [
        "part-00000.warc.wet.gz",
        "part-00001.warc.wet.gz",
    ]
    by_url = {}
    for path in files:
        with open(path, "rb") as f:
            records = list(ArchiveIterator(f, check_digests="raise"))
            kinds = [r.rec_type for r in records]
        assert kinds[0] == "warcinfo" and set(kinds[1:]) == {"conversion"}
        assert len(kinds) - 1 <= 3
        with open(path, "rb") as f:
            for r in ArchiveIterator(f, check_digests="raise"):
                if r.rec_type != "conversion":
                    continue
                h = r.rec_headers
                assert h.protocol == "WARC/1.0"
                assert h.get_header("Content-Type") == "text/plain"
                assert h.get_header("WARC-Block-Digest").startswith("sha1:")
                assert h.get_header("WARC-Record-ID").startswith("<urn:uuid:")
                assert h.get_header("WARC-Refers-To") is None  # no WARC record id known
                by_url[h.get_header("WARC-Target-URI")] = (
                    h.get_header("WARC-Date"),
                    h.get_header("WARC-Identified-Content-Language"),
                    r.content_stream().read().decode("utf-8"),
                )
    assert set(by_url) == {url(n) for n in ("a", "c", "short", "noarchive", "old")}
    assert by_url[url("a")] == (
        fetch_time("a").strftime("%Y-%m-%dT%H:%M:%SZ"),
        "en",
        LONG_EN,
    )
    assert by_url[url("old")][2].endswith("second version")
    assert by_url[url("c")][1] == "de"


@pytest.mark.parametrize(
    ("predicate", "says"),
    [
        ("quality.gopher_words > 1; DROP TABLE texts", "2 statements"),
        ("url_key IN (SELECT url_key FROM pages)", "not a query"),
        ("(SELECT count(*) FROM pages) > 0", "not a query"),
        ("body LIKE '%x%'", "body is not a column of texts"),
        ("gen = {pages}", "'{name}' is not SQL"),
        ("gen >>>", "cannot parse"),
        ("reflect('java.lang.Thread', 'sleep', 100000) IS NULL", "reflect: not a function"),
        ("java_method('java.lang.System', 'exit', 3) = 0", "java_method: not a function"),
    ],
)
def test_a_predicate_that_is_no_expression_over_texts_is_refused(
    root, tmp_path, capsys, predicate, says
):
    if "not a function" not in says:
        with pytest.raises(ValueError, match="--where"):
            check_predicate(predicate)
    assert export(root, tmp_path / "out", "--where", predicate) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_a_predicate_the_engine_cannot_run_is_one_line(root, tmp_path, capsys):
    assert export(root, tmp_path / "out", "--where", "no_such_function(text) > 1") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("crawl export-text: --where") and len(err.splitlines()) == 1


@pytest.mark.parametrize("args", [["--gen", "3-1"], ["--gen", "x"], ["--language", "english"]])
def test_bad_options_are_usage_errors(root, tmp_path, capsys, args):
    with pytest.raises(SystemExit) as stop:  # argparse's own: usage and one line
        export(root, tmp_path / "out", *args)
    assert stop.value.code == 2
    assert f"{args[0]} {args[1]!r}: expected" in capsys.readouterr().err


def test_shard_docs_below_one_is_refused(root, tmp_path, capsys):
    assert export(root, tmp_path / "out", "--shard-docs", "0") == 2
    assert "--shard-docs 0: expected a number of documents >= 1" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_predicate_names_what_it_reads():
    read = check_predicate(
        "quality.gopher_words >= 50 AND lower(url) LIKE 'x' AND rlike(text, 'a')"
    )
    assert read.columns == ["quality", "text", "url"]
    assert read.other_functions == []
    assert check_predicate("try_reflect('a', 'b') IS NULL").other_functions == ["try_reflect"]


def test_a_text_without_a_fetch_time_is_written_with_a_null_date_or_the_files_time(tmp_path):
    import pyarrow as pa

    from crawllib.store.shards import ShardWriter, write_batches

    batch = pa.RecordBatch.from_pylist(
        [
            {
                "text": "Hello world.",
                "gen": 4,
                "url_key": -5,
                "url": "http://x.test/",
                "fetched_us": None,
                "language": "en",
                "language_detected": None,
                "quality": None,
                "cluster": -5,
                "tdm_reserved": False,
            }
        ],
        schema=pa.schema(
            [
                ("text", pa.string()),
                ("gen", pa.int32()),
                ("url_key", pa.int64()),
                ("url", pa.string()),
                ("fetched_us", pa.int64()),
                ("language", pa.string()),
                ("language_detected", pa.string()),
                ("quality", pa.struct([("gopher_words", pa.int32())])),
                ("cluster", pa.int64()),
                ("tdm_reserved", pa.bool_()),
            ]
        ),
    )
    shards = write_batches([batch], ShardWriter(str(tmp_path / "p"), "parquet", None))
    assert [(s.name, s.docs) for s in shards] == [("part-00000.parquet", 1)]
    doc = parquet_docs(tmp_path / "p")["4/-5"]
    assert doc.metadata["date"] is None and doc.text == "Hello world."
    before = dt.datetime.now(UTC).replace(microsecond=0)
    write_batches([batch], ShardWriter(str(tmp_path / "w"), "wet", 7))
    with open(tmp_path / "w" / "part-00007-00000.warc.wet.gz", "rb") as f:
        records = list(ArchiveIterator(f, check_digests="raise"))
    assert [r.rec_type for r in records] == ["warcinfo", "conversion"]
    date = records[1].rec_headers.get_header("WARC-Date")
    assert dt.datetime.strptime(date, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) >= before


def test_hugging_face_datasets_loads_the_parquet_and_json_lines_shards(root, tmp_path, monkeypatch):
    """The export's documents as the datasets library loads them (offline, its cache in the
    test's folder): the same ids, texts and metadata from either format."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    import datasets

    loaded = {}
    for fmt, builder, pattern in (
        ("parquet", "parquet", "*.parquet"),
        ("jsonl", "json", "*.jsonl.gz"),
    ):
        out = tmp_path / fmt
        assert export(root, out, "--format", fmt) == 0
        ds = datasets.load_dataset(
            builder,
            data_files=str(out / pattern),
            split="train",
            cache_dir=str(tmp_path / "hf" / fmt),
        )
        assert {"text", "id", "metadata"} <= set(ds.column_names)
        loaded[fmt] = {row["id"]: row for row in ds}
    assert set(loaded["parquet"]) == set(loaded["jsonl"]) == DEFAULT
    a = loaded["parquet"][f"1/{key('a')}"]
    assert a["text"] == LONG_EN and a["metadata"]["url"] == url("a")
    assert (
        a["metadata"]["cluster"]
        == key("a")
        == loaded["jsonl"][f"1/{key('a')}"]["metadata"]["cluster"]
    )
    assert a["metadata"]["quality"]["gopher_words"] == quality_signals(LONG_EN)["gopher_words"]


def test_fastwarc_reads_the_wet_files(root, tmp_path):
    from fastwarc.warc import ArchiveIterator as FastIterator
    from fastwarc.warc import WarcRecordType

    out = tmp_path / "out"
    assert export(root, out, "--format", "wet") == 0
    texts = {}
    for path in sorted(glob.glob(str(out / "*.warc.wet.gz"))):
        with open(path, "rb") as f:
            for record in FastIterator(f, record_types=WarcRecordType.conversion):
                assert record.verify_block_digest()
                texts[record.headers["WARC-Target-URI"]] = record.reader.read().decode("utf-8")
    assert set(texts) == {url(n) for n in ("a", "c", "short", "noarchive", "old")}
    assert texts[url("a")] == LONG_EN and texts[url("old")].endswith("second version")
