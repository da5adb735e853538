"""``python -m crawllib.bench``: the whole suite (see crawllib.bench.suite), or
``python -m crawllib.bench <benchmark> [options]`` for one benchmark.

Each benchmark is a module of this package with ``add_arguments(parser)`` and ``main(args)``;
add one by adding its name to BENCHMARKS.
"""

from __future__ import annotations

import argparse
import importlib
import logging

from crawllib.bench import suite

BENCHMARKS = {
    "cost": "crawllib.bench.cost",
    "fetch": "crawllib.bench.fetch",
    "memory": "crawllib.bench.memory",
    "recrawl": "crawllib.bench.recrawl",
    "priority": "crawllib.bench.priority",
    "scale": "crawllib.bench.scale",
    "shared": "crawllib.bench.shared",
    "sql": "crawllib.bench.sql",
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m crawllib.bench", description=__doc__)
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
