"""Helios (SC'21) Table 5: Cluster Energy Saving on the Philly node series, 1-14 Dec 2017."""

from __future__ import annotations

from dlsched.reproduce.base import NA, Context, Reproduction, Table

SERIES = "traces/philly/philly_node_sequence.csv.gz"
# Helios Table 5 (Philly column); SMAPE is what the reference CES script prints on this series
PAPER = {"avg_powered_off_nodes": 100.1, "daily_wakeups": 0.5, "nodes_per_wakeup": 27.1,
         "node_util_before": 0.690, "node_util_after": 0.904, "smape": 5.29}


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


class HeliosTable5(Reproduction):
    name = "helios-table5"
    title = "Cluster Energy Saving (CES) on Philly, 1-14 Dec 2017"
    paper = "Helios (Hu et al., SC'21), Table 5"
    command = ("dlsched energy replay --series $P/philly_node_sequence.csv.gz --eval-start 2017-12-01 "
               "--eval-end 2017-12-14 [--policy vanilla --idle-timeout 30]")
    needs = (SERIES,)

    def run(self, ctx: Context) -> tuple[list[Table], list[str]]:
        from dlsched.energy.controller import CESParams
        from dlsched.energy.series import load_node_series
        from dlsched.experiments.helios.energy import ReplayConfig, replay_experiment, resolve_window

        series = load_node_series(ctx.data(SERIES))
        window = resolve_window(series, "2017-12-01", "2017-12-14")
        ces = replay_experiment(series, window, ReplayConfig(policy="ces")).summary
        vanilla = replay_experiment(series, window, ReplayConfig(policy="vanilla", idle_timeout_s=1800.0,
                                                                 ces=CESParams())).summary
        rows = [
            ["avg powered-off nodes", round(ces["avg_powered_off_nodes"], 1), PAPER["avg_powered_off_nodes"],
             round(vanilla["avg_powered_off_nodes"], 1)],
            ["wake-ups per day", round(ces["daily_wakeups"], 2), PAPER["daily_wakeups"],
             round(vanilla["daily_wakeups"], 1)],
            ["nodes per wake-up", round(ces["nodes_per_wakeup"], 1), PAPER["nodes_per_wakeup"],
             round(vanilla["nodes_per_wakeup"], 1)],
            ["node utilisation", f"{_pct(ces['node_util_before'])} -> {_pct(ces['node_util_after'])}",
             f"{_pct(PAPER['node_util_before'])} -> {_pct(PAPER['node_util_after'])}",
             f"{_pct(vanilla['node_util_before'])} -> {_pct(vanilla['node_util_after'])}"],
            ["forecast SMAPE (%)", round(ces["smape"], 2), PAPER["smape"], NA],
        ]
        table = Table("Table 5: CES on the Philly node series, 1-14 Dec 2017",
                      ["figure", "dlsched CES", "paper CES", "dlsched vanilla (30 min idle)"], rows,
                      note="paper SMAPE: the reference CES script's forecast on the same series")
        return [table], [(f"{ces['total_nodes']} nodes; energy saved by CES over the window: "
                         f"{ces['energy']['energy_saved_kwh']:,.0f} kWh")]
