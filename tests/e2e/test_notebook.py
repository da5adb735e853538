"""The analyst notebook and the analysts' queries (docs/tables.md), run on a real crawl of the
built-in test web.

The notebook runs in its own kernel (the venv's Python, through a kernelspec made in a
temporary folder by tools/execute_notebook.py, so no Jupyter setup is needed) which starts its
own SparkSession on the crawl root.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from crawllib import cli
from tools.execute_notebook import execute

pytestmark = [pytest.mark.e2e, pytest.mark.smoke]  # in the fast tier: CI runs it

PROJECT = Path(__file__).resolve().parents[2]
NOTEBOOK = PROJECT / "notebooks" / "crawl_overview.ipynb"
TABLES_DOC = PROJECT / "docs" / "tables.md"  # the analysts' document, moved out of README.md
CELL_TIMEOUT = 300


@pytest.fixture(scope="module")
def crawl_root(e2e_crawl):
    """The shared end-to-end crawl (tests/e2e/conftest.py): regular and special hosts."""
    return e2e_crawl["root"]


@pytest.fixture(scope="module")
def executed(crawl_root, tmp_path_factory):
    """The notebook after running every cell with the crawl as its CRAWL_ROOT parameter, on
    DuckDB (its default engine)."""
    import nbformat

    nb = execute(crawl_root, NOTEBOOK, CELL_TIMEOUT)
    nbformat.write(nb, tmp_path_factory.mktemp("executed") / NOTEBOOK.name)
    return nb


SECTIONS = [
    "## Crawl progress per generation",
    "## HTTP status mix",
    "## Top hosts by pages",
    "## Errors and robots.txt denials",
    "## Domains",
    "## Content types",
    "## Languages",
    "## Duplicate share",
    "## Revisits",
    "## Text length distribution",
    "## Freshness",
    "## Link in-degree",
    "## Sample texts",
]


def crawl_sql(capsys, root: str, *args: str) -> tuple[int, str]:
    """Run `crawl sql ROOT ...` in this process (DuckDB: a local root); rc and stdout."""
    capsys.readouterr()
    rc = cli.main(["sql", root, *args])
    return rc, capsys.readouterr().out


def outputs(cell, kind: str) -> list:
    return [o for o in cell.get("outputs", []) if kind in o.get("data", {})]


def text_of(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.output_type == "stream")


def test_every_cell_runs_and_every_section_plots(executed):
    errors = [o for c in executed.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, errors
    first = executed.cells[0]
    assert first.cell_type == "code" and "parameters" in first.metadata.get("tags", [])
    # Each "## section" is a markdown heading followed by its query-and-plot cell.
    sections = [
        (cell.source.splitlines()[0], executed.cells[i + 1])
        for i, cell in enumerate(executed.cells)
        if cell.cell_type == "markdown" and cell.source.startswith("## ")
    ]
    assert [heading for heading, _ in sections] == SECTIONS
    for heading, cell in sections:
        assert cell.cell_type == "code" and "query(" in cell.source, heading
        if heading != "## Sample texts":
            assert outputs(cell, "image/png"), f"{heading}: no plot"
        assert outputs(cell, "text/html"), f"{heading}: no result table"
    setup = next(c for c in executed.cells if c.source.startswith("from pathlib"))
    assert text_of(setup).startswith("crawl root: ") and "(duckdb)" in text_of(setup)


def section_table(executed, heading: str) -> str:
    cells = executed.cells
    at = next(i for i, c in enumerate(cells) if c.source.startswith(heading))
    return outputs(cells[at + 1], "text/plain")[0].data["text/plain"]


def test_link_plots_leave_out_what_is_never_fetched(executed, crawl_root, capsys):
    rc, out = crawl_sql(
        capsys,
        crawl_root,
        "SELECT DISTINCT l.dst_url FROM links l JOIN crawldb c ON c.url_key = l.dst_key "
        "WHERE c.status = 'blocked'",
        "--format",
        "json",
    )
    blocked = [json.loads(line)["dst_url"] for line in out.splitlines()]
    assert rc == 0 and blocked, "the test web links to no blocked address"
    table = section_table(executed, "## Link in-degree")
    assert "http" in table
    assert not [url for url in blocked if url in table]
    assert "169.254." not in table and "192.168." not in table


def test_languages_domains_content_types_and_samples(executed):
    assert "en" in section_table(executed, "## Languages").split()
    assert "text/html" in section_table(executed, "## Content types")
    assert ".net" in section_table(executed, "## Domains")
    samples = next(c for c in executed.cells if "samples = query(" in c.source)
    assert "characters)" in text_of(samples)


def test_the_committed_notebook_takes_its_root_from_the_environment(tmp_path):
    """Issue 51: the committed notebook held an injected-parameters cell (CRAWL_ROOT =
    '.crawl/demo') that won over `CRAWL_ROOT=... jupyter execute`; without a crawl there it
    failed deep in a query. Run as an analyst runs it, nbclient's `jupyter execute`, on a root
    that is not the demo's."""
    import os
    import subprocess
    import sys

    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    assert not [c for c in cells if "injected-parameters" in c["metadata"].get("tags", [])]
    root = tmp_path / "other"
    assert cli.main(["init", str(root), "--engine", "embedded"]) == 0
    jupyter = str(Path(sys.executable).parent / "jupyter")

    def run(crawl_root: Path, out: Path) -> subprocess.CompletedProcess:
        return subprocess.run(
            [jupyter, "execute", f"--output={out}", NOTEBOOK.name],
            cwd=NOTEBOOK.parent,
            env={**os.environ, "CRAWL_ROOT": str(crawl_root)},
            capture_output=True,
            text=True,
            timeout=600,
        )

    done = run(root, tmp_path / "out.ipynb")
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"crawl root: {root} (duckdb)" in (tmp_path / "out.ipynb").read_text()
    missing = run(tmp_path / "none", tmp_path / "none.ipynb")
    assert missing.returncode != 0
    assert f"no crawl root at {tmp_path / 'none'}: run `crawl demo`" in missing.stderr


def test_the_committed_outputs_hold_no_machine_path():
    text = NOTEBOOK.read_text(encoding="utf-8")
    assert '"outputs": [\n' in text and "image/png" in text  # committed with its outputs
    for path in ("/tmp/", "/work/", "/home/", "/root/", "/Users/", str(PROJECT)):
        assert path not in text, path


def test_the_notebook_runs_on_spark_too(executed, crawl_root):
    """ENGINE = "spark": the same queries on Spark SQL give the same totals."""
    nb = execute(crawl_root, NOTEBOOK, CELL_TIMEOUT, parameters={"ENGINE": "spark"})
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, errors
    progress = [
        text_of(next(c for c in book.cells if "progress = query(" in c.source))
        for book in (nb, executed)
    ]
    assert progress[0] == progress[1] and "total:" in progress[0]


def test_progress_totals_equal_crawl_sql(executed, crawl_root, e2e_crawl, capsys):
    rc, out = crawl_sql(
        capsys,
        crawl_root,
        "SELECT (SELECT count(*) FROM fetchlist) AS planned, "
        "(SELECT count_if(source_url IS NOT NULL) FROM fetches) AS followed, "
        "(SELECT count_if(outcome = 'ok') FROM fetches) AS fetched, "
        "(SELECT count_if(outcome = 'robots_denied') FROM fetches) AS denied",
        "--format",
        "json",
    )
    assert rc == 0
    expected = json.loads(out)
    assert expected["fetched"] > 0 and expected["followed"] > 0
    assert expected["planned"] + expected["followed"] >= expected["fetched"]
    progress = next(c for c in executed.cells if "progress = query(" in c.source)
    total_line = text_of(progress).split("total:")[1].splitlines()[0]
    totals = {name: int(n) for name, n in re.findall(r"(\w+) (\d+)", total_line)}
    assert {k: totals[k] for k in expected} == expected
    table = outputs(progress, "text/plain")[0].data["text/plain"]
    generations = len(e2e_crawl["ran"])
    first_block = table.split("\n\n")[0].splitlines()  # pandas wraps wide tables in blocks
    assert table.split()[:2] == ["gen", "planned"] and len(first_block) == 1 + generations


def readme_queries() -> list[list[str]]:
    """The `crawl sql $ROOT ...` commands of the Analysts section of docs/tables.md (the README
    links to it), as argument lists."""
    text = TABLES_DOC.read_text(encoding="utf-8")
    section = text.split("\n## Analysts", 1)[1].split("\n## ", 1)[0]
    block = next(b for b in re.findall(r"```bash\n(.*?)```", section, re.S) if "crawl sql" in b)
    words = shlex.split(block, comments=True)
    starts = [i for i, w in enumerate(words) if w == "crawl" and words[i + 1 : i + 2] == ["sql"]]
    return [words[i + 2 : j] for i, j in zip(starts, [*starts[1:], len(words)], strict=True)]


def test_readme_queries_run_on_a_real_crawl(crawl_root, capsys):
    queries = readme_queries()
    assert len(queries) == 8
    for args in queries:
        assert args[0] == "$ROOT", args
        rc, out = crawl_sql(capsys, crawl_root, *args[1:])
        assert rc == 0, args
        assert out.strip() and "(0 rows)" not in out, f"no rows: {args[1]}"


def test_every_table_reads_alike_with_delta_rs_polars_and_duckdb(crawl_root, capsys):
    """Issue 51: the tools analysts use read every table, crawldb's deletion vectors (written by
    Spark's MERGEs) applied: delta-rs into pandas (crawllib.store.deltars.read_table: delta-rs's
    own to_pandas() refuses deletion vectors, docs/tables.md says so), polars, and DuckDB
    (`crawl sql`)."""
    import polars as pl
    import pyarrow as pa
    from deltalake import DeltaTable

    from crawllib.core.vocab import TABLE_NAMES
    from crawllib.store.deltars import read_table

    for name in TABLE_NAMES:
        path = f"{crawl_root}/{name}"
        frame = read_table(crawl_root, name).to_pandas()
        assert pa.table(DeltaTable(path).scan()).num_rows == len(frame), name
        polar = pl.read_delta(path)
        capsys.readouterr()
        assert (
            cli.main(["sql", crawl_root, f"SELECT count(*) AS n FROM {name}", "--format", "json"])
            == 0
        )
        counted = json.loads(capsys.readouterr().out)["n"]
        assert len(frame) == polar.height == counted, name
        assert list(frame.columns) == polar.columns, name
    keys = pa.table(DeltaTable(f"{crawl_root}/crawldb").scan(columns=["url_key"])).column(0)
    assert len(keys) == len(set(keys.to_pylist())) > 0  # one row a URL: replaced rows deleted
