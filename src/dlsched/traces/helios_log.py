"""HeliosArtifact / Lucid simulator input log (``user,vc,jobname,gpu_num,state,submit_time,...``).

This is the layout the reference simulators read (e.g. the Philly reference run's
``input_cluster_log_helios_format.csv.gz``); ``job_id`` := ``jobname``. Fidelity conventions so
that the lead can match the reference job by job: VC ids stay strings (``6214e9`` is not a float),
times are naive (as if UTC: the reference must run with TZ=UTC), jobs with ``gpu_num`` 0 are
left out and counted, and with a window the origin is the first kept job's submit time -- the
reference filters GPU and VC first, then normalises to the first job at or after the start date
and keeps submit <= end. See ``/work/shared/traces/reference-simulators.md``.
"""

from __future__ import annotations

from pathlib import Path

from dlsched.traces.helios import load_helios_style
from dlsched.traces.registry import TraceFormat, register


def _sniff(header: list[str], path: Path) -> bool:
    return {"vc", "jobname", "gpu_num", "submit_time", "duration"} <= set(header) and "job_id" not in header


FORMAT = register(TraceFormat(
    name="helios-log",
    description="HeliosArtifact/Lucid simulator log (user,vc,jobname,gpu_num,state,submit_time,...,duration)",
    sniff=_sniff,
    load=lambda path, opts: load_helios_style(path, opts, "jobname", "helios-log"),
))
