"""``python -m crawllib.bench <benchmark> [options]``: run one benchmark and print its figures.

Each benchmark is a module of this package with ``add_arguments(parser)`` and ``main(args)``;
add one by adding its name to BENCHMARKS.
"""

from __future__ import annotations

import argparse
import importlib
import logging

BENCHMARKS = {
    "fetch": "crawllib.bench.fetch",
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m crawllib.bench", description=__doc__)
    commands = parser.add_subparsers(dest="benchmark", required=True)
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
