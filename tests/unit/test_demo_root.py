"""`crawl demo` empties its --root, so it takes only a folder it made (issue 37: `--root ~`
emptied the home folder): refused before anything is written to it."""

from __future__ import annotations

import os

import pytest

from crawllib.cli import main
from crawllib.cli.demo import MARKER, SEEDS_LINE, check_demo_root
from crawllib.core.errors import BadRoot


def test_a_folder_the_demo_did_not_make_is_refused_before_anything_is_written(tmp_path, capsys):
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("years of work\n")
    (home / ".ssh").mkdir()
    assert main(["demo", "--root", str(home)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"crawl demo: {home} is not a folder `crawl demo` made (no {MARKER}")
    assert len(err.strip().splitlines()) == 1
    assert sorted(os.listdir(home)) == [".ssh", "thesis.tex"]  # no lease either


def test_new_empty_and_demo_folders_are_taken(tmp_path):
    check_demo_root(str(tmp_path / "new"))
    (tmp_path / "empty").mkdir()
    check_demo_root(str(tmp_path / "empty"))
    made = tmp_path / "made"
    made.mkdir()
    (made / MARKER).write_text("")
    (made / "crawldb").mkdir()
    check_demo_root(str(made))
    older = tmp_path / "older"  # a demo root of a crawllib without the marker
    (older / "crawldb").mkdir(parents=True)
    (older / "seeds.txt").write_text(SEEDS_LINE + "\nhttp://a.test/\n")
    check_demo_root(str(older))
    (older / "seeds.txt").write_text("my own seeds\n")
    with pytest.raises(BadRoot):
        check_demo_root(str(older))
