"""Handing the memory a large trace's loading freed back to the operating system.

Reading a trace builds temporaries -- the file's bytes, pyarrow's columns, numpy arrays and lists
per block of jobs -- that are freed once the jobs exist, but not returned: pyarrow's allocator
keeps its pages for reuse, and glibc's heap keeps the freed arrays below its (by then raised)
mmap threshold. The simulation that follows allocates mostly small Python objects in pymalloc's
own arenas, which reuse neither, so the freed memory stayed in the process's resident set to the
end of the run (measured on 340,000 jobs: 96 MiB, ~300 bytes a job). Returning it costs a few
milliseconds, so it is done only after traces of :data:`MIN_JOBS` jobs or more, where loading
took far longer (and the ``ctypes`` import it needs costs nothing noticeable).
"""

from __future__ import annotations

import sys

MIN_JOBS = 100_000  # below this the freed memory is a few MiB: not worth the ctypes import


def release_freed_memory(jobs: int) -> None:
    """Return freed heap memory to the OS after loading ``jobs`` jobs (no-op below MIN_JOBS or
    where the C library has no ``malloc_trim``, e.g. musl or macOS)."""
    if jobs < MIN_JOBS:
        return
    arrow = sys.modules.get("pyarrow")
    if arrow is not None:
        arrow.default_memory_pool().release_unused()
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return
    trim(0)
