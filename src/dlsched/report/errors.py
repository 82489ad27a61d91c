"""The one error the report raises for bad input, so the CLI can print it without a traceback."""

from __future__ import annotations


class ReportError(Exception):
    """An input directory or file is missing or malformed; the message names the file."""
