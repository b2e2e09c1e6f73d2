"""Benchmarks are off in the default test run (testpaths = tests). CI runs a smoke of
them with ``--benchmark-disable`` (each body once); measure with
``pytest benches --benchmark-only``."""
