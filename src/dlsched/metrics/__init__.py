"""Metrics: observers of state changes (time-weighted levels) and per-job summaries."""
