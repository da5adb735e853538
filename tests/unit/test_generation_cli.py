"""`crawl generation --if-work` (what one spark-submit per generation runs from Airflow): on
a root with nothing due it records nothing and says what the URLs wait for; with URLs due it
runs the three stages of the generation due. On the embedded engine (no JVM)."""

from __future__ import annotations

from crawllib import cli
from crawllib.store import generations
from crawllib.store.embedded import EmbeddedDb
from tests.conftest import test_config_overrides

SETS = [a for s in test_config_overrides() for a in ("--set", s)]


def stages_done(root: str, cfg) -> dict:
    db = EmbeddedDb(root, cfg)
    try:
        return generations.stage_states(db)
    finally:
        db.close()


def test_generation_if_work_runs_only_what_is_due(tmp_path, capsys, spark_cfg):
    root = str(tmp_path / "crawl")
    assert cli.main(["init", root, "--engine", "embedded", *SETS]) == 0
    args = ["generation", root, "--engine", "embedded", "--if-work", *SETS]
    assert cli.main(args) == 0
    assert "generation 0: nothing planned; nothing left to fetch" in capsys.readouterr().out
    assert stages_done(root, spark_cfg) == {}

    seeds = tmp_path / "seeds.txt"
    # no name resolves here (network.resolve_only): the fetch records a DNS failure
    seeds.write_text("http://a.site3.net/\n")
    assert cli.main(["seed", root, str(seeds), "--engine", "embedded", *SETS]) == 0
    assert cli.main(args) == 0
    assert "generation 0: done" in capsys.readouterr().out
    assert stages_done(root, spark_cfg) == {
        (0, "plan"): "done",
        (0, "fetch"): "done",
        (0, "update"): "done",
    }
    # a number names the generation; a finished one is not run again
    assert cli.main([*args[:2], "--gen", "0", *args[2:]]) == 0
    assert stages_done(root, spark_cfg)[(0, "update")] == "done"


def test_a_crawl_whose_urls_failed_says_why_when_it_ends(tmp_path, capsys):
    """Issue 51: `crawl run` on two seeds that failed DNS logged `error=2`; the cause showed only
    through SQL. Its last lines name the failures by kind."""
    root = str(tmp_path / "crawl")
    seeds = tmp_path / "seeds.txt"
    # no name resolves here (network.resolve_only): both fail DNS, every time they are tried
    seeds.write_text("http://a.site3.net/\nhttp://b.site4.org/x\n")
    argv = ["run", root, "--seeds", str(seeds), "--generations", "1", "--engine", "embedded"]
    assert cli.main([*argv, *SETS]) == 0
    out = capsys.readouterr().out
    assert "ran generation 0" in out
    assert "2 URLs not fetched: error dns 2 (crawl sql ROOT" in out
