"""Energy and money saved by powered-off nodes, following the Helios paper's estimate (§4.3.3).

The paper takes 800 W for an idle DGX-1 (NVIDIA BMC, sum of all PSU inputs) and assumes the
cooling infrastructure uses twice the servers' energy [Dayarathna et al. 2016], i.e. a facility
factor of 3. With Table 5's 79.5 DRS nodes over the four Helios clusters this gives
79.5 × 0.8 kW × 8760 h × 3 ≈ 1.67 GWh a year ("over 1.65 million kWh"). The paper quotes no
electricity price; the default here is an assumption to be overridden.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

HOURS_PER_YEAR = 8760.0


@dataclass(frozen=True, slots=True)
class EnergyModel:
    """Per-node idle power, facility (cooling) factor and electricity price."""

    idle_power_w: float = 800.0
    cooling_factor: float = 3.0
    price_per_kwh: float = 0.10
    currency: str = "USD"

    def __post_init__(self) -> None:
        if self.idle_power_w < 0 or self.cooling_factor < 1 or self.price_per_kwh < 0:
            raise ValueError("idle power and price must be >= 0 and the cooling factor >= 1")

    def savings(self, powered_off_node_hours: float, days: float) -> dict[str, float | str]:
        """kWh and cost saved over the replayed window and extrapolated to a year."""
        kwh = powered_off_node_hours * self.idle_power_w / 1000.0 * self.cooling_factor
        per_year = kwh * 365.0 / days if days > 0 else 0.0
        return {
            **asdict(self),
            "energy_saved_kwh": kwh,
            "cost_saved": kwh * self.price_per_kwh,
            "energy_saved_kwh_per_year": per_year,
            "cost_saved_per_year": per_year * self.price_per_kwh,
        }

    def annual_kwh(self, avg_powered_off_nodes: float) -> float:
        """The paper's estimate: average DRS nodes × idle power × a year × facility factor."""
        return avg_powered_off_nodes * self.idle_power_w / 1000.0 * HOURS_PER_YEAR * self.cooling_factor
