"""Trace ingestion: loaders for public trace schemas, all converting to dlsched's canonical format."""

from dlsched.traces.model import CANONICAL_COLUMNS, LoadReport, Trace, TraceError

__all__ = ["CANONICAL_COLUMNS", "LoadReport", "Trace", "TraceError"]
