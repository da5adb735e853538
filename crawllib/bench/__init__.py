"""Benchmarks: ``python -m crawllib.bench <name>``; each module has a ``bench()`` function."""
