"""Loaded workloads, one per workload key, kept only while cells still need them."""

from __future__ import annotations

from dlsched.sweep.cell import Workload, load_workload, workload_key


class WorkloadCache:
    """Loads each distinct workload once; ``release_unneeded`` drops those no pending cell uses."""

    def __init__(self) -> None:
        self._loaded: dict[str, Workload] = {}
        self._errors: dict[str, Exception] = {}
        self.loads = 0

    def get(self, cell) -> Workload:
        key = workload_key(cell.params)
        if key in self._errors:  # a workload that failed to load is not loaded again for each cell
            raise self._errors[key]
        if key not in self._loaded:
            try:
                self._loaded[key] = load_workload(cell.params)
            except Exception as exc:
                self._errors[key] = exc
                raise
            self.loads += 1
        return self._loaded[key]

    def release_unneeded(self, pending) -> None:
        needed = {workload_key(c.params) for c in pending}
        for key in [k for k in self._loaded if k not in needed]:
            del self._loaded[key]
