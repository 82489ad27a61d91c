"""Checks a command makes before it starts working: outputs it can write, sizes that fit in memory.

Finding out after a ten-minute simulation that ``--out`` names a file, or after the machine has
started swapping that ``--jobs`` asked for a terabyte, wastes the user's time; these checks
raise ``ValueError`` (one ``error:`` line through ``clear_errors``) before anything runs.
"""

from __future__ import annotations

import os
from pathlib import Path

# Peak memory per job measured with /usr/bin/time on the built-in workload (100,000 and 400,000
# jobs; the slope between the two): `trace generate` ~1.1 KB, `simulate` ~2.0 KB (jobs, the
# event heap and the per-job results). Rounded up, plus the interpreter and libraries.
BYTES_PER_JOB = {"generate": 1_200, "simulate": 2_200}
BASE_BYTES = 300 * 2**20
USABLE_SHARE = 0.8  # of the memory available now: leave room for the rest of the machine


def available_memory() -> int:
    """Bytes of memory available now (MemAvailable on Linux, else physical memory)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 2**63 - 1  # unknown: do not refuse


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} PiB"


def check_job_count(jobs: int, what: str = "simulate", option: str = "--jobs",
                    available: int | None = None) -> None:
    """Refuse a job count below 1, or one whose estimated peak memory exceeds what is available."""
    if jobs < 1:
        raise ValueError(f"{option} must be >= 1, got {jobs}")
    per_job = BYTES_PER_JOB[what]
    need = BASE_BYTES + jobs * per_job
    have = available_memory() if available is None else available
    limit = int(have * USABLE_SHARE)
    if need > limit:
        most = max(1, (limit - BASE_BYTES) // per_job)
        raise ValueError(f"{option} {jobs:,}: would need about {_human(need)} of memory (~{per_job:,} bytes "
                         f"a job), more than the {_human(limit)} this machine can spare; use at most "
                         f"{most:,} jobs")


def check_machines(machines: int, option: str = "--machines") -> None:
    """Refuse a machine count below 1 or above the cluster file's limit, before a cluster of them
    is built (``bench placement --machines 100000000000`` ran until it was killed)."""
    from dlsched.traces.cluster_file import MAX_NODES

    if not 1 <= machines <= MAX_NODES:
        raise ValueError(f"{option} must be 1 to {MAX_NODES:,} (the limit, as for a cluster file), got {machines:,}")


def _nearest_existing(path: Path) -> Path:
    for parent in [path, *path.parents]:
        if parent.exists():
            return parent
    return Path(".")


def check_out_dir(path: Path, option: str = "--out") -> None:
    """``path`` can be used as an output directory (existing or creatable, writable)."""
    if path.exists() and not path.is_dir():
        raise ValueError(f"{option} {path}: exists and is not a directory")
    _check_creatable(path, option)


def check_out_file(path: Path, option: str = "output") -> None:
    """``path`` can be written as a file (not a directory; its folder existing or creatable, writable).

    A missing folder is made now: the command writes the file after its work, and a writer that
    assumes the folder exists would otherwise fail then (``--markdown no-such-dir/x.md`` did, after
    14 s of simulation)."""
    if path.is_dir():
        raise ValueError(f"{option} {path}: is a directory, not a file")
    _check_creatable(path, option)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"{option} {path}: cannot make its folder {path.parent}: {exc.strerror or exc}") from None


MAX_SEED = 2**32 - 1   # numpy's and the built-in workload's seeds are 32-bit


def check_seed(seed: int, option: str = "--seed") -> None:
    """A seed the built-in workload generator accepts (naming the option, not numpy's message)."""
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"{option} {seed}: want a whole number from 0 to {MAX_SEED:,}")


def _check_creatable(path: Path, option: str) -> None:
    base = _nearest_existing(path)
    if base != path and not base.is_dir():
        raise ValueError(f"{option} {path}: {base} is a file, so no directory can be created under it")
    folder = path if base == path else base
    if not os.access(folder, os.W_OK):
        raise ValueError(f"{option} {path}: {folder} is not writable")
