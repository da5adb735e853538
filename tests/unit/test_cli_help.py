"""`crawl --help` and each sub-command's help say what every option does, in plain text
(issue 51: `--format` and `demo --generations` had no help, the top-level help showed RST's
``crawl``), and log lines count in the singular too ("1 slice", not "1 slices")."""

from __future__ import annotations

import argparse

from crawllib.cli import build_parser
from crawllib.core.output import plural


def test_every_option_of_every_command_says_what_it_does():
    parser = build_parser()
    assert "``" not in (parser.description or "") and "``" not in (parser.epilog or "")
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    silent = [
        f"{name} {'/'.join(action.option_strings)}"
        for name, sub in commands.choices.items()
        for action in sub._actions
        if action.option_strings
        and not isinstance(action, argparse._HelpAction)
        and not action.help
    ]
    assert silent == []


def test_counts_in_lines_are_singular_for_one():
    assert plural(1, "slice") == "1 slice"
    assert plural(3, "slice") == "3 slices"
    assert plural(0, "task") == "0 tasks"
    assert plural(12000, "URL") == "12,000 URLs"
