"""Build what a Spark cluster needs to run crawllib into ``dist/`` (``make dist``).

Out (in ``--out``, default ``dist/``; earlier artifacts are replaced):

* ``crawllib-<version>-py3-none-any.whl`` - the package, for ``pip install`` on a gateway or
  in an image;
* ``crawllib.zip`` - the ``crawllib`` package alone, for ``spark-submit --py-files``
  (deterministic: sorted entries, fixed timestamps and modes, no ``__pycache__``);
* ``requirements.txt`` - the runtime dependencies as ``requirements.lock`` pins them (every
  package, transitive ones included), without pyspark, py4j and delta-spark: the cluster
  provides Spark and Delta at its own versions (the ranges in pyproject match EMR's), and a
  second pip-installed pyspark on the nodes would shadow the cluster's;
* ``bootstrap.sh`` - the EMR bootstrap action ``deploy/emr/bootstrap.sh``: Python 3.11, the
  dist folder in ``/opt/crawllib`` and the packed environment unpacked in ``/opt/crawllib/env``
  on every node; its argument is the S3 prefix the dist folder was uploaded to;
* with ``--env``: ``crawllib-env.tar.gz`` - a virtual environment holding ``requirements.txt``,
  packed for ``spark.archives`` (``--archives crawllib-env.tar.gz#environment`` with
  ``spark.pyspark.python=./environment/bin/python``): nodes need the Python 3.11 interpreter
  it links to (``--env-python``, default ``/usr/bin/python3.11``) and nothing from PyPI.

Needs Python 3.11 and pip (the wheel is built in a scratch copy of the sources, so stale
``build/`` folders never leak into it). ``python tools/build_dist.py [--out DIR] [--env]``.

``python tools/build_dist.py --lock [--upgrade]`` writes ``requirements.lock``: pip resolves
the ranges of pyproject's ``dependencies`` (for this Python and platform), keeping the versions
the lock pins while they fit (``--upgrade``: the newest that fit), and the lock pins every
package of the result. `make install` installs the project with the lock as constraints.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "crawllib"
# What the cluster's Spark brings (py4j comes with Spark's Python).
CLUSTER_PROVIDED = {"pyspark", "py4j", "delta-spark"}
LOCK = REPO / "requirements.lock"
ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # the earliest date a zip entry can hold
SOURCE_DATE_EPOCH = "315532800"  # 1980-01-01: fixed wheel timestamps (honoured by bdist_wheel)

BOOTSTRAP = REPO / "deploy" / "emr" / "bootstrap.sh"
ENV_ARCHIVE = f"{PACKAGE}-env.tar.gz"
# Where the packed environment's bin/python points: AL2023's python3.11 package (the bootstrap
# installs it when the release lacks it).
ENV_PYTHON = "/usr/bin/python3.11"
ENV_CACHE = Path(os.path.expanduser("~/.cache/crawllib/env"))


def package_files(root: Path = REPO) -> Iterator[tuple[Path, str]]:
    """(file, archive name) of every file of the package, sorted; no caches, bytecode or
    hidden files."""
    for path in sorted((root / PACKAGE).rglob("*")):
        rel = path.relative_to(root)
        hidden = any(part.startswith(".") or part == "__pycache__" for part in rel.parts)
        if path.is_dir() or hidden or path.suffix in (".pyc", ".pyo"):
            continue
        yield path, rel.as_posix()


def write_zip(src: Path, out: Path) -> Path:
    """``crawllib.zip`` with the package at its root: the same bytes for the same sources."""
    target = out / f"{PACKAGE}.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, name in package_files(src):
            info = zipfile.ZipInfo(name, date_time=ZIP_DATE)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, path.read_bytes())
    return target


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked(lock: Path = LOCK) -> dict[str, str]:
    """The lock's pins: canonical name -> version."""
    pins = {}
    for line in lock.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            if not sep:
                raise SystemExit(f"build_dist: {lock}: {line!r} is not pinned (name==version)")
            pins[canonical(name)] = version.strip()
    return pins


def runtime_requirements(lock: Path = LOCK) -> list[str]:
    """Every package the lock pins, minus what the cluster provides."""
    return [f"{n}=={v}" for n, v in sorted(locked(lock).items()) if n not in CLUSTER_PROVIDED]


def write_requirements(out: Path) -> Path:
    target = out / "requirements.txt"
    header = [
        "# crawllib runtime dependencies, as requirements.lock pins them (tools/build_dist.py).",
        "# pyspark, py4j and delta-spark are left out: the cluster provides Spark and Delta (the",
        "# Delta jar also holds the `delta` Python module), and a pip-installed pyspark would",
        "# shadow the cluster's.",
    ]
    target.write_text("\n".join(header + runtime_requirements()) + "\n")
    return target


def write_lock(upgrade: bool = False, lock: Path = LOCK) -> Path:
    """Resolve pyproject's dependencies with pip (no install) and pin the result in ``lock``."""
    import json

    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    with tempfile.TemporaryDirectory(prefix="crawllib-lock-") as tmp:
        report = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet"]
        cmd += ["--ignore-installed", "--disable-pip-version-check", "--report", str(report)]
        if lock.is_file() and not upgrade:
            cmd += ["--constraint", str(lock)]
        subprocess.run([*cmd, *deps], check=True)
        resolved = json.loads(report.read_text())["install"]
    pins = sorted((canonical(p["metadata"]["name"]), p["metadata"]["version"]) for p in resolved)
    header = [
        "# Every package crawllib's runtime dependencies resolve to, pinned: what `make install`",
        "# installs (as constraints) and the packed environment of `make dist` holds (less",
        f"# {', '.join(sorted(CLUSTER_PROVIDED))}). Python {sys.version_info.major}."
        f"{sys.version_info.minor}, {sysconfig.get_platform()}. Written by",
        "# `python tools/build_dist.py --lock [--upgrade]` from pyproject's ranges; do not edit.",
    ]
    lock.write_text("\n".join([*header, *(f"{n}=={v}" for n, v in pins)]) + "\n")
    return lock


def write_bootstrap(out: Path) -> Path:
    target = out / "bootstrap.sh"
    target.write_text(BOOTSTRAP.read_text())
    target.chmod(0o755)
    return target


def _tar_info(name: str, kind: bytes = tarfile.REGTYPE, mode: int = 0o644) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = kind, mode, 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def pack_env(site_packages: Path, python: str, target: Path) -> None:
    """Write ``target``, a virtual environment as a tar.gz: ``pyvenv.cfg`` naming ``python``'s
    folder as home, ``bin/python`` (and ``python3``, ``python3.11``) a link to ``python``, and
    ``lib/python3.11/site-packages`` from ``site_packages``. Sorted entries, fixed times, owners
    and modes: the same bytes for the same packages.

    venv-pack does the same for an existing venv, but its ``--python-prefix`` (0.2.0) turns
    ``bin/python3.11`` into ``<prefix>/bin/python3.113.11``; so the venv is written here.
    """
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    cfg = f"home = {os.path.dirname(python)}\ninclude-system-site-packages = false\n"
    with open(target, "wb") as raw:
        with gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as gz:
            with tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar:
                data = cfg.encode()
                info = _tar_info("pyvenv.cfg")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                link = _tar_info("bin/python", tarfile.SYMTYPE, 0o777)
                link.linkname = python
                tar.addfile(link)
                for alias in ("python3", version):
                    link = _tar_info(f"bin/{alias}", tarfile.SYMTYPE, 0o777)
                    link.linkname = "python"
                    tar.addfile(link)
                for path in sorted(site_packages.rglob("*")):
                    rel = path.relative_to(site_packages)
                    if path.is_dir() or rel.parts[0] == "bin" or "__pycache__" in rel.parts:
                        continue
                    mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
                    info = _tar_info(f"lib/{version}/site-packages/{rel.as_posix()}", mode=mode)
                    info.size = path.stat().st_size
                    with open(path, "rb") as f:
                        tar.addfile(info, f)


def write_env(out: Path, requirements: Path, python: str = ENV_PYTHON) -> Path:
    """``crawllib-env.tar.gz`` with ``requirements`` installed for this interpreter's Python
    version and platform (pip from PyPI, or pip's configured index), cached in ENV_CACHE
    under a key of the requirements, the interpreter it links to, the Python version and the
    platform."""
    if sys.version_info[:2] != (3, 11):
        raise SystemExit("build_dist --env: run it with Python 3.11 (the cluster's Python)")
    key_text = "\n".join(
        [requirements.read_text(), python, sys.implementation.cache_tag, sysconfig.get_platform()]
    )
    key = hashlib.sha256(key_text.encode()).hexdigest()[:16]
    cached = ENV_CACHE / f"{PACKAGE}-env-{key}.tar.gz"
    if not cached.is_file():
        ENV_CACHE.mkdir(parents=True, exist_ok=True)
        # built beside the cache entry, so that the rename into it is atomic
        with tempfile.TemporaryDirectory(prefix="building-", dir=ENV_CACHE) as tmp:
            site = Path(tmp) / "site-packages"
            pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile"]
            pip += ["--disable-pip-version-check", "--target", str(site)]
            subprocess.run([*pip, "-r", str(requirements)], check=True)
            partial = Path(tmp) / ENV_ARCHIVE
            pack_env(site, python, partial)
            partial.replace(cached)  # complete or absent: an interrupted build leaves none
    target = out / ENV_ARCHIVE
    shutil.copyfile(cached, target)
    return target


def copy_sources(src: Path) -> None:
    """Snapshot pyproject, README, LICENSE and the package: the wheel and the zip hold one code."""
    for path, name in [
        *((REPO / n, n) for n in ("pyproject.toml", "README.md", "LICENSE")),
        *package_files(),
    ]:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, src / name)


def build_wheel(src: Path, out: Path) -> Path:
    """``pip wheel --no-deps`` of the snapshot (fixed timestamps via SOURCE_DATE_EPOCH)."""
    env = {**os.environ, "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH}
    cmd = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out)]
    subprocess.run([*cmd, str(src)], check=True, env=env)
    wheels = sorted(out.glob(f"{PACKAGE}-*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"build_dist: expected one wheel in {out}, found {wheels}")
    return wheels[0]


def build(out: Path, env: bool = False, env_python: str = ENV_PYTHON) -> list[Path]:
    """Write the four artifacts into ``out`` (replacing earlier ones), and the packed
    environment with ``env``; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob(f"{PACKAGE}-*.whl"), out / f"{PACKAGE}.zip", out / ENV_ARCHIVE]:
        old.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="crawllib-build-") as tmp:
        src = Path(tmp)
        copy_sources(src)
        built = [build_wheel(src, out), write_zip(src, out)]
    built += [write_requirements(out), write_bootstrap(out)]
    if env:
        built.append(write_env(out, out / "requirements.txt", env_python))
    return built


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "dist", help="output folder")
    parser.add_argument("--env", action="store_true", help=f"also build {ENV_ARCHIVE}")
    parser.add_argument(
        "--lock", action="store_true", help=f"write {LOCK.name} from pyproject's ranges, only"
    )
    parser.add_argument(
        "--upgrade", action="store_true", help="--lock: the newest versions the ranges allow"
    )
    parser.add_argument(
        "--env-python",
        default=ENV_PYTHON,
        help="the Python 3.11 the packed environment runs on the nodes (default %(default)s)",
    )
    args = parser.parse_args(argv)
    if args.lock:
        print(write_lock(args.upgrade))
        return 0
    for path in build(args.out.resolve(), args.env, args.env_python):
        print(f"{path}  ({path.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
