"""Parameter sweeps: a YAML grid/list of ``simulate`` runs, resumable, on local processes or Dask.

``spec`` reads and validates the YAML into cells; ``cell`` loads workloads and runs one cell;
``engine_local`` / ``engine_dask`` run cells; ``store`` owns the sweep directory and
``results.parquet``; ``stats`` gives means, 95 % confidence intervals and baseline ratios.
See docs/sweeps.md.
"""
