"""The one exception type of :mod:`dlsched.graph`, so callers can catch bad models uniformly."""

from __future__ import annotations


class GraphError(ValueError):
    """A model could not be loaded or analysed; the message names the file, node and op."""
