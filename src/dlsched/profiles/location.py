"""Where the profile sets are: an explicit directory, ``$DLSCHED_PROFILES``, or ``shared/profiles``
beside the repository (or beside the working directory). Resolved on every call: no cached state."""

from __future__ import annotations

import os
from pathlib import Path

from dlsched.profiles.table import ProfileError

ENV_VAR = "DLSCHED_PROFILES"


def candidate_dirs() -> list[Path]:
    """The places looked at, in order, when no directory is given."""
    found: list[Path] = []
    if os.environ.get(ENV_VAR):
        found.append(Path(os.environ[ENV_VAR]))
    if os.environ.get("DLSCHED_SHARED"):
        found.append(Path(os.environ["DLSCHED_SHARED"]) / "profiles")
    repo = Path(__file__).resolve().parents[3]
    found += [repo.parent / "shared" / "profiles", Path.cwd().parent / "shared" / "profiles",
              Path.cwd() / "shared" / "profiles"]
    return found


def profiles_dir(directory: str | Path | None = None) -> Path:
    """The profiles folder to read; ``ProfileError`` naming what was tried when there is none."""
    if directory is not None:
        path = Path(directory)
        if not path.is_dir():
            raise ProfileError(f"{path}: profiles folder not found")
        return path
    tried = candidate_dirs()
    for path in tried:
        if path.is_dir():
            return path
    raise ProfileError(f"profiles folder not found (looked in {', '.join(map(str, tried))}); "
                       f"pass --profiles DIR or set ${ENV_VAR}")
