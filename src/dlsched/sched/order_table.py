"""The policy table the reserving policies pick their queue order from.

``easy`` and ``conservative`` compose any registered non-preemptive queue order, named by
``--param order``. The table lives in ``dlsched.registry``, a layer above ``sched``; the registry
hands it down here when it is imported (``use``), so ``sched`` never imports the registry.
"""

from __future__ import annotations

from collections.abc import Mapping

_TABLE: Mapping[str, type] | None = None


def use(table: Mapping[str, type]) -> None:
    """Install the name -> policy class table (called once by ``dlsched.registry``)."""
    global _TABLE
    _TABLE = table


def policies() -> Mapping[str, type]:
    """The installed table; importing ``dlsched.registry`` installs it (every face builds policies
    through the registry, so it is there whenever a reserving policy is built or checked)."""
    if _TABLE is None:
        raise RuntimeError("the reserving policies read their queue order from dlsched.registry; import it first")
    return _TABLE
