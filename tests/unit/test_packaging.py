"""The package as others install it: compatible ranges in pyproject, the versions tested pinned
in requirements.lock (what `make install` and the packed environment hold), the wheel's
metadata and files (LICENSE, py.typed, the JVM's log4j2 file, and no benchmark or test code, in
the wheel as in crawllib.zip), and docs (the README and docs/)
that install it from dist/, never from an index by its bare name."""

from __future__ import annotations

import re
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

from packaging.requirements import Requirement

from tools import build_dist

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def test_runtime_dependencies_are_ranges_and_the_lock_pins_one_version_in_each():
    pins = build_dist.locked()
    requirements = [Requirement(dep) for dep in PROJECT["dependencies"]]
    assert requirements
    for req in requirements:
        assert not any(s.operator == "==" for s in req.specifier), f"{req} is pinned"
        assert req.specifier, f"{req} has no range"
        assert pins[build_dist.canonical(req.name)] in req.specifier, req


def test_the_packed_environment_is_the_lock_without_what_the_cluster_brings():
    wanted = build_dist.runtime_requirements()
    names = {build_dist.canonical(line.split("==")[0]) for line in wanted}
    assert not names & build_dist.CLUSTER_PROVIDED
    assert {"aiohttp", "trafilatura", "tqdm", "boto3", "yarl"} <= names
    assert len(wanted) == len(build_dist.locked()) - len(build_dist.CLUSTER_PROVIDED)


def test_python_versions_are_pysparks_from_crawllibs_floor():
    assert PROJECT["requires-python"] == ">=3.11"
    versions = [c for c in PROJECT["classifiers"] if c.startswith("Programming Language")]
    assert {f"Programming Language :: Python :: 3.{m}" for m in (11, 12, 13)} <= set(versions)


def test_the_wheel_holds_the_license_type_information_and_the_log4j_file(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    build_dist.copy_sources(src)
    wheel = build_dist.build_wheel(src, tmp_path)
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(whl.read(info).decode())
    assert {"crawllib/py.typed", "crawllib/store/log4j2.properties"} <= names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["Requires-Python"] == ">=3.11"
    requires = metadata.get_all("Requires-Dist")
    assert requires and not any("==" in r for r in requires if "extra ==" not in r)
    assert (REPO / "LICENSE").read_text().lstrip().startswith("Apache License")


def test_the_wheel_and_the_zip_hold_only_what_a_crawl_runs(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    build_dist.copy_sources(src)
    with zipfile.ZipFile(build_dist.build_wheel(src, tmp_path)) as whl:
        in_wheel = [n for n in whl.namelist() if ".dist-info/" not in n]
    with zipfile.ZipFile(build_dist.write_zip(src, tmp_path)) as zf:
        in_zip = zf.namelist()
    for names in (in_wheel, in_zip):
        assert "crawllib/engine/engine.py" in names
        assert "crawllib/testweb/site.py" in names  # `crawl demo` crawls it
        assert all(n.startswith("crawllib/") for n in names), names
        test_code = [n for n in names if "bench" in n or "moto" in n or n.endswith("/s3.py")]
        assert test_code == []
        code = "\n".join(src.joinpath(n).read_text() for n in names if n.endswith(".py"))
        assert "import moto" not in code and "from moto" not in code


def test_docs_install_the_wheel_from_dist_never_by_name_from_an_index():
    docs = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]
    text = "\n".join(path.read_text() for path in docs)  # the wheel's installs are in docs/
    installs = re.findall(r"pip install[^\n`]*", text)
    assert installs
    by_name = [line for line in installs if re.search(r"\s'?crawllib(\[[a-z,]+\])?'?(\s|$)", line)]
    assert by_name == []
    assert re.search(r"pip install '?dist/crawllib-[^ ]*\.whl(\[sql\])?'?", text)
