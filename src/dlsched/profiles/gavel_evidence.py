"""Evidence that Gavel's V100 Recommendation rows are inconsistent (docs/sharing-policies.md):
the isolated throughput the simulator file gives on V100 is below its K80 and P100 figures and
equals the *unconsolidated* V100 row, while Gavel's physical-cluster measurement is ~10x higher."""

from __future__ import annotations

from pathlib import Path

from dlsched.profiles.location import profiles_dir
from dlsched.profiles.table import numeric, read_table

_ISO = ["gpu", "consolidated", "job_type", "model", "batch_size", "scale_factor", "iso_steps_per_s_sim",
        "iso_steps_per_s_phys"]


def isolated_rows(model: str = "Recommendation", directory: str | Path | None = None) -> list[dict]:
    """Gavel's single-GPU isolated throughputs of ``model`` (simulation and physical-cluster
    steps/s), per GPU type, consolidated or not."""
    path = profiles_dir(directory) / "gavel" / "isolated_throughputs.csv"
    df = read_table(path, _ISO)
    sim, phys = numeric(df, path, "iso_steps_per_s_sim"), numeric(df, path, "iso_steps_per_s_phys")
    sf, cons = numeric(df, path, "scale_factor"), numeric(df, path, "consolidated")
    out = []
    for i, (gpu, job, m) in enumerate(zip(df["gpu"].astype(str), df["job_type"].astype(str), df["model"].astype(str))):
        if m == model and sf[i] == 1:
            out.append({"gpu": gpu, "consolidated": bool(cons[i]), "job_type": job,
                        "sim_steps_per_s": float(sim[i]), "phys_steps_per_s": float(phys[i])})
    return out
