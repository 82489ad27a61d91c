"""Trace ingestion: loaders for public trace schemas, all converting to dlsched's canonical format.

Entry points: :func:`load_trace` (any registered format, ``fmt="auto"`` detects it),
:func:`detect_format`, :func:`load_vc_config` (VC -> nodes) and :func:`write_canonical`.
"""

from dlsched.traces.api import detect_format, load_trace
from dlsched.traces.canonical import write_canonical
from dlsched.traces.model import CANONICAL_COLUMNS, LoadReport, Trace, TraceError
from dlsched.traces.registry import TraceFormat, formats, register
from dlsched.traces.vc import load_vc_config

__all__ = ["CANONICAL_COLUMNS", "LoadReport", "Trace", "TraceError", "TraceFormat", "detect_format",
           "formats", "load_trace", "load_vc_config", "register", "write_canonical"]
