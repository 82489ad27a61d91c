"""The ``dlsched`` command line: a thin layer over the library."""
