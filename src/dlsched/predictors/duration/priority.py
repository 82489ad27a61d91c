"""Read externally computed QSSF priorities (to replay the reference simulators exactly).

Two layouts exist: HeliosArtifact's ``input_qssf_priority_Philly_lgb.csv(.gz)``
(``user,vc,jobname,gpu_num,state,submit_time,duration,priority``, keyed by ``jobname``) and
Lucid's ``job_id,priority``. In both, ``priority`` is an expected *duration* in seconds; the
QSSF key is ``priority × gpus`` (the reference multiplies at scheduling time).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dlsched.traces.model import TraceError

KEY_COLUMNS: tuple[str, ...] = ("job_id", "jobname")


class PriorityFileError(TraceError):
    """A priority file that cannot be used; the message names the file, line and column."""


def load_priority_file(path: str | Path, key: str | None = None) -> dict[str, float]:
    """``{job id: priority}`` from a CSV (optionally gzip-compressed) priority file.

    The key column is ``key`` if given, else ``job_id`` or ``jobname`` (first present). Keys
    are read as strings (ids such as ``6214e9`` must not turn into floats). Raises
    ``FileNotFoundError`` for a missing file and :class:`PriorityFileError` for a missing
    column, a non-numeric/missing priority or a duplicated id.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"priority file not found: {path}")
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, compression="infer")
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, OSError) as exc:
        raise PriorityFileError(str(path), f"not a readable CSV priority file ({exc})") from None
    df.columns = [str(c).strip() for c in df.columns]
    cols = set(df.columns)
    if key is None:
        key = next((c for c in KEY_COLUMNS if c in cols), None)
        if key is None:
            raise PriorityFileError(str(path), "no job id column: expected one of "
                                    f"{', '.join(KEY_COLUMNS)}; found {', '.join(df.columns) or 'none'}")
    elif key not in cols:
        raise PriorityFileError(str(path), f"key column missing; found {', '.join(df.columns)}", column=key)
    if "priority" not in cols:
        raise PriorityFileError(str(path), f"column missing; found {', '.join(df.columns)}", column="priority")
    ids = df[key].str.strip()
    raw = df["priority"].str.strip()
    values = pd.to_numeric(raw, errors="coerce")
    bad = values.isna().to_numpy().nonzero()[0]
    if len(bad):
        i = int(bad[0])
        raise PriorityFileError(str(path), f"priority is not a number: {raw.iloc[i]!r} "
                                f"({len(bad)} bad rows in all)", line=i + 2, column="priority")
    empty = (ids == "").to_numpy().nonzero()[0]
    if len(empty):
        raise PriorityFileError(str(path), "empty job id", line=int(empty[0]) + 2, column=key)
    dup = ids.duplicated().to_numpy().nonzero()[0]
    if len(dup):
        i = int(dup[0])
        raise PriorityFileError(str(path), f"job id {ids.iloc[i]!r} appears more than once",
                                line=i + 2, column=key)
    return dict(zip(ids.tolist(), values.astype(float).tolist()))
