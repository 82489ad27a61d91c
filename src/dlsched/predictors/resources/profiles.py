"""Readers for the measured profile tables, with errors that name the file and the column.

Only readers live here; no data is bundled (the tables have their own licenses, see
docs/predictors.md). Every reader returns a tidy DataFrame with our column names.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dlsched.predictors.ml.folds import timm_family

#: a 40 GB A100 caps what the TIMM table can show; rows at or above this are censored
TIMM_CAP_MIB = 40000.0


class ProfileError(ValueError):
    """A profile table is missing, unreadable or lacks a column; the message says which."""


def read_csv(path: str | Path) -> pd.DataFrame:
    """``pd.read_csv`` with a one-line error naming the file."""
    p = Path(path)
    if not p.is_file():
        raise ProfileError(f"{p}: file not found")
    try:
        return pd.read_csv(p)
    except Exception as exc:  # noqa: BLE001 - parser errors, bad gzip, binary junk: all user input
        raise ProfileError(f"{p}: cannot read as CSV ({type(exc).__name__}: {exc})") from None


def _require(df: pd.DataFrame, path: str | Path, cols: list[str]) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ProfileError(f"{path}: missing column(s) {', '.join(missing)}; found {', '.join(map(str, df.columns))}")


def _numeric(df: pd.DataFrame, path: str | Path, col: str) -> pd.Series:
    vals = pd.to_numeric(df[col], errors="coerce")
    bad = vals.isna() & df[col].notna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise ProfileError(f"{path}: column {col!r} has a non-numeric value {df[col].iloc[row]!r} (row {row + 2})")
    return vals


def load_util_profiles(path: str | Path) -> pd.DataFrame:
    """A single-job profile table (Lucid's ``single_data.csv`` layout).

    Required: ``model``, ``batchsize`` (or ``batch_size``), ``gpu_util`` (0-100). Optional:
    ``amp`` (0/1), ``gmem`` (MiB), ``gpu`` (GPU type; "unknown" if absent), ``onnx`` (path to
    the model's ONNX file, used instead of the zoo when given), ``speed`` (samples/s; kept only
    when present, for :func:`~dlsched.predictors.resources.util_evidence.busy_idle`).
    """
    df = read_csv(path)
    if "batch_size" in df.columns and "batchsize" not in df.columns:
        df = df.rename(columns={"batch_size": "batchsize"})
    _require(df, path, ["model", "batchsize", "gpu_util"])
    out = pd.DataFrame({"model": df["model"].astype(str),
                        "batch": _numeric(df, path, "batchsize"),
                        "gpu_util": _numeric(df, path, "gpu_util")})
    out["amp"] = _numeric(df, path, "amp").fillna(0).astype(int) if "amp" in df.columns else 0
    out["gmem"] = _numeric(df, path, "gmem") if "gmem" in df.columns else np.nan
    out["gpu"] = df["gpu"].astype(str) if "gpu" in df.columns else "unknown"
    out["onnx"] = df["onnx"].fillna("").astype(str) if "onnx" in df.columns else ""
    if "speed" in df.columns:  # throughput (samples/s), only for the busy/idle evidence
        out["speed"] = _numeric(df, path, "speed")
    if out["batch"].isna().any() or (out["batch"] <= 0).any():
        raise ProfileError(f"{path}: column 'batchsize' must be a positive number in every row")
    if out["gpu_util"].isna().any() or ((out["gpu_util"] < 0) | (out["gpu_util"] > 100)).any():
        raise ProfileError(f"{path}: column 'gpu_util' must be within 0-100 in every row")
    if out.empty:
        raise ProfileError(f"{path}: no rows")
    return out


def load_timm_memory(path: str | Path) -> pd.DataFrame:
    """GPUMemNet's TIMM table: measured peak MiB vs FakeTensor estimates, with flags.

    ``censored``: measured >= 40,000 MiB or FakeTensor > 40 GiB, i.e. the 40 GB card could not
    show the true peak. ``failed``: measured below half the FakeTensor estimate - a training
    step cannot use less than the tensors it allocates, so the run died early (93 rows).
    """
    df = read_csv(path)
    cols = ["Filename", "Batch Size", "Max GPU Memory (MiB)", "GB after Forward",
            "GB after Backward", "Last Numeric Value"]
    _require(df, path, cols)
    out = pd.DataFrame({
        "model": df["Filename"].astype(str).str.replace(r"_\d+\.out$", "", regex=True),
        "batch": _numeric(df, path, "Batch Size"),
        "mem_mib": _numeric(df, path, "Max GPU Memory (MiB)"),
        # GPUMemNet's headers say "GB" but the values are MiB (resnet50 bs8: 708 vs 2875 measured)
        "fake_fwd_mib": _numeric(df, path, "GB after Forward"),
        "fake_bwd_mib": _numeric(df, path, "GB after Backward"),
        "fake_last_mib": _numeric(df, path, "Last Numeric Value"),
    })
    out["family"] = out["model"].map(timm_family)
    out["censored"] = (out["mem_mib"] >= TIMM_CAP_MIB) | (out["fake_last_mib"] > 40960)
    out["failed"] = ~out["censored"] & (out["mem_mib"] < 0.5 * out["fake_last_mib"])
    return out


def load_mlp_memory(path: str | Path) -> pd.DataFrame:
    """GPUMemNet's 3,000 synthetic MLPs: parameters, activations, batch -> peak MiB and util."""
    df = read_csv(path)
    cols = ["Depth", "Total Activations", "Total Parameters", "Batch Size", "Max GPU Memory (MiB)", "Avg GPUTL"]
    _require(df, path, cols)
    out = pd.DataFrame({
        "depth": _numeric(df, path, "Depth"),
        "params": _numeric(df, path, "Total Parameters"),
        "activations": _numeric(df, path, "Total Activations"),
        "batch": _numeric(df, path, "Batch Size"),
        "mem_mib": _numeric(df, path, "Max GPU Memory (MiB)"),
        "gpu_util": _numeric(df, path, "Avg GPUTL"),
    })
    if "Filename" in df.columns:
        out["arch"] = df["Filename"].astype(str).str.extract(r"arch:([a-z]+)")[0].fillna("unknown")
    out["param_mib"] = out["params"] * 4 / 2**20
    out["act_mib_per_sample"] = out["activations"] * 4 / 2**20
    return out


def load_horus_mlp(path: str | Path) -> pd.DataFrame:
    """GPUMemNet's re-run of the Horus formula on FC nets (MNIST): measured vs formula, MiB."""
    df = read_csv(path)
    _require(df, path, ["gpumemory_max", "neurons", "layers", "Horus MB"])
    out = pd.DataFrame({"mem_mib": _numeric(df, path, "gpumemory_max"),
                        "neurons": _numeric(df, path, "neurons"),
                        "layers": _numeric(df, path, "layers"),
                        "horus_mib": _numeric(df, path, "Horus MB")})
    return out.dropna().reset_index(drop=True)


#: the largest sequence a calibration row may name (longer than any model's context window)
MAX_SEQ = 1 << 20


def _zoo_model_known(name: str) -> bool:
    """Whether ``name`` is a zoo model, or a Lucid or Gavel name of one."""
    from dlsched.graph.zoo.registry import zoo_name_for

    try:
        zoo_name_for(name)
    except KeyError:
        return False
    return True


def load_memory_observations(path: str | Path) -> pd.DataFrame:
    """Observed peak memory of jobs (e.g. exported from a cluster's monitoring), for calibration.

    Required: ``model`` (zoo name; may be empty where ``onnx`` is given), ``batchsize`` (or
    ``batch_size``/``batch``), ``mem_mib`` (or ``gmem``). Optional: ``onnx``, ``gpu`` (a type
    ``dlsched predict --gpu`` accepts), ``optimizer`` (sgd, sgd_momentum, adam, adamw; default
    adam), ``amp`` (0/1), ``seq``, ``attention`` (eager, fused, memory_efficient; default fused),
    ``stack`` (software-stack label; default unknown).

    Every value is checked before any work: a bad one is a :class:`ProfileError` naming
    ``file:line:column`` (1-based, the header is line 1), the column and the value. A peak above
    the largest GPU's memory cannot have been observed and is refused."""
    from dlsched.core import gpus
    from dlsched.predictors.resources.gpu_memory import largest
    from dlsched.predictors.resources.train_memory import (
        ATTENTION_MODES,
        DEFAULT_OPTIMIZER,
        MAX_BATCH,
        OPTIMIZER_STATES,
    )

    df = read_csv(path)
    df = df.rename(columns={"batch_size": "batchsize", "batch": "batchsize", "gmem": "mem_mib"})
    _require(df, path, ["model", "batchsize", "mem_mib"])
    colno = {c: i + 1 for i, c in enumerate(df.columns)}

    def fail(row: int, col: str, what: str) -> None:
        raise ProfileError(f"{path}:{row + 2}:{colno[col]}: column {col!r} has {df[col].iloc[row]!r}: {what}")

    def text(col: str) -> pd.Series | str:
        return df[col].astype(object).where(df[col].notna(), "").astype(str).str.strip() if col in df.columns else ""

    def number(col: str, lo: float, hi: float, what: str, integer: bool = False,
               required: bool = True) -> pd.Series:
        vals = pd.to_numeric(df[col], errors="coerce").astype(float)
        for i, v in enumerate(vals.to_numpy()):
            if np.isnan(v) and not required and pd.isna(df[col].iloc[i]):
                continue
            if not (np.isfinite(v) and lo <= v <= hi) or (integer and v != int(v)):
                fail(i, col, what)
        return vals

    big, big_gib = largest()
    out = pd.DataFrame({"model": text("model"),
                        "batch": number("batchsize", 1, MAX_BATCH, f"expected a whole number 1-{MAX_BATCH:,}",
                                        integer=True),
                        "mem_mib": number("mem_mib", 1e-9, big_gib * 1024,
                                          f"expected a positive peak in MiB, at most the largest GPU's memory "
                                          f"({big}, {big_gib * 1024:,.0f} MiB)")})
    out["onnx"] = text("onnx")
    out["gpu"] = text("gpu")
    for i, g in enumerate(out["gpu"] if "gpu" in df.columns else []):
        if g and gpus.find(g, fuzzy=True) is None:
            fail(i, "gpu", f"unknown GPU type; known: {', '.join(gpus.names())}")
    out["optimizer"] = text("optimizer").str.lower() if "optimizer" in df.columns else ""
    if "optimizer" in df.columns:
        for i, o in enumerate(out["optimizer"]):
            if o and o not in OPTIMIZER_STATES:
                fail(i, "optimizer", f"expected one of {', '.join(OPTIMIZER_STATES)}")
    out["optimizer"] = out["optimizer"].where(out["optimizer"] != "", DEFAULT_OPTIMIZER) \
        if "optimizer" in df.columns else DEFAULT_OPTIMIZER
    out["amp"] = (number("amp", 0, 1, "expected 0 or 1", integer=True, required=False).fillna(0).astype(int)
                  if "amp" in df.columns else 0)
    out["seq"] = (number("seq", 0, MAX_SEQ, f"expected a whole number 0-{MAX_SEQ:,}", integer=True,
                         required=False).fillna(0).astype(int) if "seq" in df.columns else 0)
    out["attention"] = text("attention")
    if "attention" in df.columns:
        out["attention"] = out["attention"].str.lower().str.replace("-", "_")
        for i, a in enumerate(out["attention"]):
            if a not in ("", *ATTENTION_MODES):
                fail(i, "attention", f"expected one of {', '.join(ATTENTION_MODES)}")
    out["stack"] = text("stack")
    for i, (m, o) in enumerate(zip(out["model"], out["onnx"])):
        if not m and not o:
            raise ProfileError(f"{path}:{i + 2}:{colno['model']}: row names no model (column 'model' or 'onnx')")
        if m and not o and not _zoo_model_known(m):
            from dlsched.graph.zoo.registry import ZOO_NAMES

            fail(i, "model", f"no zoo model of this name (or give its graph in an 'onnx' column); known: "
                             f"{', '.join(sorted(ZOO_NAMES))}")
    if out.empty:
        raise ProfileError(f"{path}: no rows")
    return out
