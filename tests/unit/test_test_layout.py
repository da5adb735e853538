"""The test tree itself: pytest imports a test file in a folder without ``__init__.py`` under its
bare file name, so two such files with one name make the whole run stop at collection ("import
file mismatch"), which a run of one folder does not show."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_test_files_outside_packages_have_unique_names():
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        if not (path.parent / "__init__.py").is_file():
            by_name[path.name].append(str(path.relative_to(TESTS)))
    assert by_name, "no test file found outside a package"
    clashes = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert not clashes, f"rename one of each: {clashes}"
