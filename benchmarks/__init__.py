"""Benchmarks: ``python -m benchmarks <name>``; each module has a ``bench()`` function."""
