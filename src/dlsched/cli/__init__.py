"""The ``dlsched`` command line: a thin layer over the library."""

from dlsched.cli import timing as _timing  # noqa: F401  (starts the clock of --timings first)
