"""Entry points the simulator and the CLI call: detect a trace's format and load it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from dlsched.traces._table import open_text
from dlsched.traces.model import Trace, TraceError
from dlsched.traces.pipeline import LoadOptions, TimeArg, gc_paused
from dlsched.traces.registry import formats, get_format
from dlsched.traces.release import release_freed_memory

PARQUET_SUFFIXES = (".parquet", ".pq")


def _header(path: Path) -> list[str]:
    """Lower-cased fields of the first non-comment line ("" for unreadable files)."""
    try:
        with open_text(str(path)) as fh:
            for line in fh:
                if not line.startswith("#"):
                    return [f.strip().lower() for f in line.strip().split(",")]
    except TraceError:  # a damaged .gz: say so rather than "cannot detect the format"
        raise
    except (OSError, UnicodeDecodeError, ValueError):
        return []
    return []


def _refuse_unreadable(path: Path) -> None:
    """A clearer reason than "cannot detect the format" for empty, binary or comment-only files."""
    if path.stat().st_size == 0:
        raise TraceError(str(path), "the file is empty")
    try:
        with open_text(str(path)) as fh:
            text = fh.read(65536)
    except TraceError:
        raise
    except (UnicodeDecodeError, OSError, ValueError):
        raise TraceError(str(path), "not a text (CSV) file, nor gzip'd CSV; Parquet files need a .parquet "
                                    "suffix") from None
    if "\x00" in text:
        raise TraceError(str(path), "not a text (CSV) file (it holds NUL bytes)")
    if not text.strip():
        raise TraceError(str(path), "the file holds no data (only blank lines)")
    if all(not line.strip() or line.startswith("#") for line in text.splitlines()):
        raise TraceError(str(path), "the file holds only '#' comment lines, no CSV header")


def detect_format(path: str | Path) -> str:
    """Name of the registered format that recognises ``path`` (directory, suffix or CSV header)."""
    path = Path(path)
    if not path.exists():
        raise TraceError(str(path), "no such file or directory")
    known = formats()
    header = [] if path.is_dir() or path.suffix.lower() in PARQUET_SUFFIXES else _header(path)
    for name, fmt in known.items():
        if fmt.sniff(header, path):
            return name
    if not any(header) and path.is_file() and path.suffix.lower() not in PARQUET_SUFFIXES:
        _refuse_unreadable(path)
    shown = ",".join(header[:12]) if header else "(no CSV header)"
    raise TraceError(str(path), f"cannot detect the trace format from header {shown!r}; known formats: "
                                f"{', '.join(known)} (name it with --trace-format)")


def load_trace(path: str | Path, fmt: str = "auto", *, start: TimeArg = None, end: TimeArg = None,
               vcs: Iterable[str] | Mapping[str, int] | None = None, skip_invalid: bool = False,
               origin: TimeArg = None, include_cpu_jobs: bool = False,
               format_options: Mapping[str, object] | None = None,
               vcs_reason: str = "VC not in config") -> Trace:
    """Load any supported trace into the canonical :class:`Trace`.

    ``start``/``end`` bound the submit time, both inclusive: wall-clock strings/datetimes, or
    seconds for traces with relative times. ``vcs`` keeps only these VCs (a VC-size dict works).
    Invalid rows raise :class:`TraceError` naming file, line and column unless ``skip_invalid``;
    then they are counted in ``trace.report.skipped``. Rows left out by the filters are counted
    in ``trace.report.filtered``. ``origin`` overrides time 0 (default: the first kept job's
    submit time for wall-clock traces, the stored origin for the canonical format).
    ``format_options`` passes format-specific settings (e.g. ``{"vc_column": "gpu_type"}`` for PAI).
    ``vcs_reason`` names the rows ``vcs`` leaves out in the report (where the VC list came from).
    """
    path = Path(path)
    if not path.exists():
        raise TraceError(str(path), "no such file or directory")
    name = detect_format(path) if fmt in ("auto", "", None) else fmt
    loader = get_format(name, path)
    opts = LoadOptions(start=start, end=end,
                       vcs=None if vcs is None else frozenset(str(v) for v in vcs),
                       skip_invalid=skip_invalid, origin=origin, include_cpu_jobs=include_cpu_jobs,
                       format_options=dict(format_options or {}), vcs_reason=vcs_reason)
    with gc_paused():
        trace = loader.load(path, opts)
    if not trace.name:
        trace.name = path.name
    release_freed_memory(len(trace.jobs))
    return trace
