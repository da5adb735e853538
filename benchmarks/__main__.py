"""``python -m benchmarks``: the whole suite (see benchmarks.suite), or
``python -m benchmarks <benchmark> [options]`` for one benchmark.

Each benchmark is a module of this package with ``add_arguments(parser)`` and ``main(args)``;
add one by adding its name to BENCHMARKS.
"""

from __future__ import annotations

import argparse
import importlib
import logging

from benchmarks import suite

BENCHMARKS = {
    "cost": "benchmarks.cost",
    "fetch": "benchmarks.fetch",
    "memory": "benchmarks.memory",
    "recrawl": "benchmarks.recrawl",
    "priority": "benchmarks.priority",
    "scale": "benchmarks.scale",
    "shared": "benchmarks.shared",
    "sql": "benchmarks.sql",
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    suite.add_arguments(parser)
    parser.set_defaults(module=suite)
    commands = parser.add_subparsers(dest="benchmark")
    for name, module_name in BENCHMARKS.items():
        module = importlib.import_module(module_name)
        sub = commands.add_parser(name, help=(module.__doc__ or "").strip().splitlines()[0])
        module.add_arguments(sub)
        sub.set_defaults(module=module)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args.module.main(args)


if __name__ == "__main__":
    main()
