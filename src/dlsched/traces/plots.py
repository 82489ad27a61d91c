"""PNG figures of :func:`dlsched.traces.stats.trace_stats` output, in the style of Helios §3."""

from __future__ import annotations

from pathlib import Path


def plot_stats(stats: dict, out_dir: str | Path) -> list[Path]:
    """Write duration CDF, GPU mix, hourly arrivals and per-VC GPU time; return the files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    title = stats.get("name") or "trace"

    def save(fig, name: str) -> None:
        fig.tight_layout()
        path = out / name
        fig.savefig(path, dpi=110)
        plt.close(fig)
        files.append(path)

    cdf = stats["duration"].get("cdf", {})
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot([float(k) for k in cdf], list(cdf.values()), marker="o")
    ax.set_xscale("log")
    ax.set(xlabel="GPU job duration (s)", ylabel="CDF", title=f"{title}: duration (Helios Fig. 5a)")
    ax.grid(alpha=0.3)
    save(fig, "duration_cdf.png")

    mix = stats["gpus"]["mix"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    labels = list(mix)
    ax.bar([i - 0.2 for i in range(len(labels))], [m["share"] for m in mix.values()], 0.4, label="jobs")
    ax.bar([i + 0.2 for i in range(len(labels))], [m["gpu_time_share"] for m in mix.values()], 0.4,
           label="GPU time")
    ax.set_xticks(range(len(labels)), labels, rotation=45)
    ax.set(xlabel="GPUs per job", ylabel="share", title=f"{title}: GPU demand (Helios Fig. 6)")
    ax.legend()
    save(fig, "gpu_mix.png")

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar(range(24), stats["arrivals"]["per_hour"])
    ax.set(xlabel="hour of day" + ("" if stats["arrivals"]["wall_clock"] else " (relative)"),
           ylabel="jobs submitted", title=f"{title}: arrivals (Helios Fig. 2b)")
    save(fig, "arrivals_hourly.png")

    vcs = list(stats["vcs"].items())[:20]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.bar([v for v, _ in vcs], [s["gpu_hours"] for _, s in vcs])
    ax.set_xticks(range(len(vcs)), [v for v, _ in vcs], rotation=60, fontsize=7)
    ax.set(ylabel="GPU hours", title=f"{title}: GPU time per VC")
    save(fig, "vc_gpu_time.png")
    return files
