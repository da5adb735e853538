"""What a user sees in the terminal: `crawl run` on the test web, on a pseudo-terminal as an
operator runs it, prints the crawler's own lines and its progress bars, and nothing else: on
the embedded engine (the default on one machine) nothing of its worker processes' and no JVM
started; on Spark nothing of Spark's or Ivy's, even when Ivy resolves the Delta jars on the way
(a fresh jars cache, resolved from the Ivy cache `make install` filled, so without network);
`-v` shows them."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import shutil
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from crawllib.config import load_config
from crawllib.testweb import WebSpec, serve_in_thread
from tests.conftest import test_config_overrides

pytestmark = [pytest.mark.e2e, pytest.mark.smoke]

# What Spark, the JVM and Ivy print, and what a worker process's Python would (its logging's
# default format, a traceback), none of it the crawler's.
FOREIGN = re.compile(
    r"WARN |INFO |log4j|NativeCodeLoader|SPARK_LOCAL_IP|loopback address|Setting default log "
    r"level|setLogLevel|incubator modules|Ivy|:: resolving|:: retrieving|found io\.delta|"
    r"artifacts copied|confs: \[|\| +conf +\||py4j|^(DEBUG|INFO|WARNING|ERROR|CRITICAL):|Traceback"
)
LINE = re.compile(r"^\d\d:\d\d:\d\d ")  # the crawler's: HH:MM:SS message


@pytest.fixture(scope="module")
def web():
    with serve_in_thread(WebSpec(seed=5, hosts=3, pages_per_host=6, special=False)) as w:
        yield w


def fresh_jars_cache(folder: Path) -> Path:
    """A jars cache without jars, holding a copy of the Ivy cache the configured one has, so
    that a session resolves the Delta jars with Ivy (and its report) but without network."""
    ivy_cache = Path(os.path.expanduser(load_config().spark.jars_cache)) / "cache"
    assert (ivy_cache / "io.delta").is_dir(), f"no Ivy cache at {ivy_cache}: run make install"
    shutil.copytree(ivy_cache, folder / "cache")
    return folder


def crawl_args(web, work: Path) -> list[str]:
    config = work / "net.toml"
    lines = ["[network]", "resolve_only = true", "[network.resolve]"]
    lines += [f'"{h}" = "{t}"' for h, t in web.resolve.items()]
    config.write_text("\n".join(lines) + "\n")
    sets = [
        *test_config_overrides(),
        "crawl.max_depth=1",
        "politeness.default_delay=0.1",
        f"spark.jars_cache={fresh_jars_cache(work / 'jars')}",
    ]
    return ["--config", str(config), *[a for s in sets for a in ("--set", s)]]


def on_a_terminal(argv: list[str], columns: int = 120) -> tuple[int, str]:
    """Run argv on a pseudo-terminal of ``columns``; its exit status and everything it printed
    (stdout and stderr: the terminal's screen, carriage returns included)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: argv on the terminal
        os.execv(argv[0], argv)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    out = bytearray()
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), out.decode("utf-8", errors="replace")


# None: no --engine, so auto, which is the embedded engine on a local master
@pytest.mark.parametrize("engine", [None, "spark"], ids=["auto", "spark"])
def test_crawl_run_on_a_terminal_prints_its_own_lines_and_bars_only(web, tmp_path, engine):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("\n".join(web.seeds()) + "\n")
    root = tmp_path / "crawl"
    argv = [sys.executable, "-m", "crawllib.cli", "run", str(root), "--seeds", str(seeds)]
    if engine is not None:
        argv += ["--engine", engine]
    status, screen = on_a_terminal([*argv, "--generations", "1", *crawl_args(web, tmp_path)])
    assert status == 0, screen[-3000:]
    if engine == "spark":
        assert (tmp_path / "jars" / "jars").is_dir()  # Ivy did resolve the Delta jars
    else:
        assert not (tmp_path / "jars" / "jars").exists()  # no JVM: nothing resolved
    # Bars redraw with carriage returns and cursor moves; each redraw is a line here.
    lines = [line.strip() for line in re.split(r"[\r\n]|\x1b\[A", screen) if line.strip()]
    assert lines, "nothing printed"
    foreign = [line for line in lines if FOREIGN.search(line)]
    assert foreign == [], "Spark's, Ivy's or a worker's output reached the terminal"
    bars = [line for line in lines if not LINE.match(line)]
    logged = [line for line in lines if LINE.match(line)]
    assert "ran generation 0" in bars  # the command's result, on stdout
    done = [b for b in bars if re.match(r"fetch gen 0: 100%\|.*\| (\d+)/\1 \[", b)]
    # the slice's bar: its rate (tqdm writes s/URLs below one a second) and figures
    assert done and re.search(r"(URLs/s|s/URLs), pages=", done[-1])
    assert any(re.match(r"gen 0: 100%\|.*\| 3/3 \[.*(stages/s|s/stages)", b) for b in bars)
    assert any(re.match(r"gen 0: +33%\|.*\| 1/3 \[\d\d:\d\d<\d\d:\d\d", b) for b in bars)  # ETA
    # Stage results: one line of their non-zero counts, no dataclass repr.
    assert any(re.search(r" plan gen 0: candidates 3, planned 3, hosts 3", x) for x in logged)
    assert not any("Result(" in line for line in lines)
    assert any(f"({engine or 'embedded'} engine)" in line for line in logged), logged


def test_verbose_shows_spark_and_ivy(tmp_path):
    jars = fresh_jars_cache(tmp_path / "jars")
    argv = [sys.executable, "-m", "crawllib.cli", "-v", "init", str(tmp_path / "crawl")]
    argv += ["--engine", "spark"]  # the embedded engine starts no JVM
    sets = [*test_config_overrides(), f"spark.jars_cache={jars}"]
    done = subprocess.run(
        [*argv, *[a for s in sets for a in ("--set", s)]],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "initialised crawl root" in done.stdout
    jvm = [line for line in done.stderr.splitlines() if " DEBUG crawllib.jvm: " in line]
    assert any(":: resolving dependencies ::" in line for line in jvm)  # Ivy's report
    assert any("found io.delta#delta-spark" in line for line in jvm)
