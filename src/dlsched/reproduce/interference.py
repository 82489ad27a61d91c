"""Pairwise interference models (``dlsched interference evaluate``): our MAPE and partner-choice
regret beside the MAPE that ``profiles/EVALUATION.md`` quotes for the Horus curve and the forest."""

from __future__ import annotations

from dlsched.reproduce.base import NA, Context, Reproduction, Table
from dlsched.reproduce.sharing import _pct, _r


class Interference(Reproduction):
    name = "interference"
    title = "Pairwise interference models: MAPE and partner-choice regret (Lucid LOMO, Gavel)"
    paper = "Horus curve (TPDS'21, Eq. 9-10) and Co-scheML random forest, MAPE quoted by profiles/EVALUATION.md"
    command = "dlsched interference evaluate --dataset all"
    needs = ("profiles/lucid/single_data.csv", "profiles/lucid/colocate_info.csv",
             "profiles/gavel/isolated_throughputs.csv", "profiles/gavel/pair_throughputs_sf1.csv")

    def __init__(self, dataset: str = "all") -> None:
        self.dataset = dataset

    def run(self, ctx: Context) -> tuple[list[Table], list[str]]:
        from dlsched.predictors.interference.evaluation.report import interference_report

        report = interference_report(ctx.data("profiles"), self.dataset)
        quoted = report.get("quoted_lucid_mape", {})
        tables = []
        for proto, body in report["protocols"].items():
            rows = []
            for model, r in body["models"].items():
                rows.append([model, _pct(r["mape"]), _pct(quoted[model]) if proto == "lucid-lomo" and model in quoted
                             else NA, _r(r["rmse"], 3), _r(r["spearman"], 3), _pct(r["top1"]), _pct(r["top3"]),
                             _r(r["regret_mean"], 3), _r(r["regret_p95"], 3), _r(r["safe_auroc"], 3)])
            tables.append(Table(f"{proto}: {body['description']} ({len(body['folds'])} folds)",
                                ["model", "MAPE dlsched (%)", "MAPE quoted (%)", "RMSE", "Spearman rho",
                                 "top-1 (%)", "top-3 (%)", "regret", "regret p95", "safe AUROC"], rows))
        return tables, [("MAPE/RMSE of 1/normalised speed over job sides; rho, top-k and regret rank each job's "
                         "measured partners by predicted slowdown; safe = both slowdowns <= 1.10. The quoted "
                         "8.1 % / 8.4 % use a looser grouping than leave-one-model-out."), *report["notes"]]
