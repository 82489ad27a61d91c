"""Loaded workloads, one per workload key, kept only while cells still need them."""

from __future__ import annotations

from collections import Counter

from dlsched.sweep.cell import Workload, load_workload, workload_key


class WorkloadCache:
    """Loads each distinct workload once and forgets it when its last cell has taken it.

    ``cells`` are the cells that will ask (each once); a workload that fails to load raises the
    same error for each of its cells without being loaded again."""

    def __init__(self, cells=()) -> None:
        self._left = Counter(workload_key(c.params) for c in cells)
        self._loaded: dict[str, Workload] = {}
        self._errors: dict[str, Exception] = {}
        self.loads = 0

    def get(self, cell) -> Workload:
        key = workload_key(cell.params)
        self._left[key] -= 1
        if key in self._errors:
            raise self._errors[key]
        if key not in self._loaded:
            try:
                self._loaded[key] = load_workload(cell.params)
            except Exception as exc:
                self._errors[key] = exc
                raise
            self.loads += 1
        workload = self._loaded[key]
        if self._left[key] <= 0:
            del self._loaded[key]
        return workload

    def drop(self, key: str) -> None:
        """Forget a workload now (the Dask engine has shipped it and needs it no more)."""
        self._loaded.pop(key, None)
