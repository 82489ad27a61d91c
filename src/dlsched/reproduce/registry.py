"""Every paper result ``dlsched reproduce`` knows: name -> reproduction (one line each).

Adding one = a module with a
:class:`~dlsched.reproduce.base.Reproduction` subclass + one line here + its test.
"""

from __future__ import annotations

from dlsched.reproduce.backfill import Backfill, BackfillPhilly
from dlsched.reproduce.base import Reproduction
from dlsched.reproduce.helios_fidelity import HeliosFidelity
from dlsched.reproduce.helios_qssf_builtin import HeliosQSSFBuiltin
from dlsched.reproduce.helios_qssf_philly import HeliosQSSFPhilly
from dlsched.reproduce.helios_table5 import HeliosTable5
from dlsched.reproduce.interference import Interference
from dlsched.reproduce.queues import QueuesBorrowing
from dlsched.reproduce.sharing import ColocationOracle, CoScheML, HorusTable6, HorusTable7
from dlsched.reproduce.topology import TopoScenario1, TopoScenario2, TopoTable1

REPRODUCTIONS: dict[str, Reproduction] = {r.name: r for r in (
    HeliosFidelity(),
    HeliosQSSFBuiltin(),
    HeliosQSSFPhilly(),
    HeliosTable5(),
    TopoTable1(),
    TopoScenario1(),
    TopoScenario2(),
    QueuesBorrowing(),
    HorusTable6(),
    HorusTable7(),
    CoScheML(),
    ColocationOracle(),
    Interference(),
    Backfill(),
    BackfillPhilly(),
)}
