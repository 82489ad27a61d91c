"""Helios (SC'21) scenarios beyond QSSF's fidelity runs: Cluster Energy Saving on a replayed trace."""
