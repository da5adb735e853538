"""What `crawl` prints on stderr: global -q, -v and --log-format (before or after the
sub-command), the line formats, and a stage's result as one line of its non-zero counts."""

from __future__ import annotations

import io
import json
import logging

import pytest

from crawllib.cli import build_parser, terminal
from crawllib.core import progress
from crawllib.core.output import counts_line
from crawllib.stages.plan import PlanResult


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def restore_logging():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    crawllib_level = logging.getLogger("crawllib").level
    yield
    progress.use_plain_lines()
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.getLogger("crawllib").setLevel(crawllib_level)


@pytest.mark.parametrize(
    ("argv", "quiet", "verbose", "log_format"),
    [
        (["status", "r"], False, False, "text"),
        (["-q", "status", "r"], True, False, "text"),
        (["-v", "status", "r"], False, True, "text"),
        (["status", "r", "-v"], False, True, "text"),  # after the sub-command, as before
        (["--log-format", "json", "-v", "run", "r"], False, True, "json"),
        (["-v", "run", "r", "--log-format", "json"], False, True, "json"),
    ],
)
def test_output_options_work_before_and_after_the_sub_command(argv, quiet, verbose, log_format):
    args = build_parser().parse_args(argv)
    assert (args.quiet, args.verbose, args.log_format) == (quiet, verbose, log_format)


def test_quiet_and_verbose_exclude_each_other(capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["status", "r", "-q", "-v"])
    assert exit_.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_default_lines_are_the_crawlers_own_with_the_time():
    out = io.StringIO()
    terminal.configure(0, stream=out)
    logging.getLogger("crawllib.stages.plan").info("plan gen 0: %s", PlanResult.nothing())
    logging.getLogger("crawllib.jvm").debug("WARN NativeCodeLoader: Unable to load")
    logging.getLogger("py4j.clientserver").info("Received command c on object id p0")
    logging.getLogger("crawllib.store.lease").warning("took over the lease")
    lines = out.getvalue().splitlines()
    assert [line[9:] for line in lines] == [
        "plan gen 0: nothing",
        "WARNING took over the lease",
    ]
    assert all(line[2] == line[5] == ":" for line in lines)  # HH:MM:SS first


def test_verbose_shows_the_jvm_and_the_logger():
    out = io.StringIO()
    terminal.configure(1, stream=out)
    logging.getLogger("crawllib.jvm").debug(":: resolving dependencies ::")
    assert "DEBUG crawllib.jvm: :: resolving dependencies ::" in out.getvalue()


def test_quiet_shows_warnings_only_and_no_bars():
    out = FakeTty()
    terminal.configure(-1, stream=out)
    logging.getLogger("crawllib.runs.runner").info("gen 0 plan: started")
    progress.report("fetch gen 0", 1, 2)
    logging.getLogger("crawllib.store.lease").warning("held")
    assert not progress.bars_shown()
    assert out.getvalue().endswith("WARNING held\n") and "started" not in out.getvalue()


def test_json_lines_keep_a_progress_reports_figures():
    out = FakeTty()  # a terminal, but JSON: no bars
    terminal.configure(0, "json", stream=out)
    progress.report("fetch gen 2", 3, 4, pages=12)
    logging.getLogger("crawllib.x").info("done")
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["logger"] == "crawllib.core.progress" and first["level"] == "INFO"
    assert first["progress"] == {"stage": "fetch gen 2", "done": 3, "total": 4, "pages": 12}
    assert second["message"] == "done" and second["time"].endswith("+00:00")


def test_a_stage_result_is_one_line_of_its_non_zero_counts():
    result = PlanResult(**{**PlanResult.nothing().as_counts(), "planned": 39, "hosts": 12})
    assert str(result) == "planned 39, hosts 12"
    assert "PlanResult(" in repr(result)  # the repr stays for debugging
    assert counts_line({"pages": 0}) == "nothing"
    assert counts_line({"pages_per_s": 2.345, "urls": 1_234_567}) == "pages_per_s 2.3, urls 1234567"
