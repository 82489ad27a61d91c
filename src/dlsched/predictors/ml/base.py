"""The estimator contract shared by every regressor and memory estimator.

Conventions (checked by the shared conformance test): hyper-parameters only in ``__init__``;
learned state only in attributes ending ``_``; ``seed`` is a parameter; ``fit`` returns self;
``predict`` returns a float array; the learned state is written in a *safe* format (JSON or a
library's own text model) and read back without pickle.
"""

from __future__ import annotations

import inspect
import json
from typing import Any, ClassVar

import numpy as np


def _as_2d(X: Any) -> np.ndarray:
    """Float64 2-D array; a clear error instead of a cryptic shape failure later."""
    arr = np.asarray(X, dtype=float)
    if arr.ndim != 2:
        raise ValueError(f"X must be 2-D (rows x features), got shape {arr.shape}")
    return arr


class Regressor:
    """Common plumbing: parameter introspection and the safe save/restore contract."""

    kind: ClassVar[str] = ""
    #: file suffix of the saved payload
    payload_suffix: ClassVar[str] = ".json"

    def get_params(self) -> dict[str, Any]:
        """Hyper-parameters, read back from the ``__init__`` signature (sklearn's contract)."""
        names = [p for p in inspect.signature(type(self).__init__).parameters if p != "self"]
        return {n: getattr(self, n) for n in names}

    def set_params(self, **params: Any) -> Regressor:
        for key, val in params.items():
            if key not in self.get_params():
                raise ValueError(f"{type(self).__name__} has no parameter {key!r}")
            setattr(self, key, val)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def _check_fitted(self) -> None:
        if not any(k.endswith("_") and not k.startswith("_") for k in vars(self)):
            raise RuntimeError(f"{type(self).__name__} is not fitted; call fit() first")

    # --- safe persistence ---------------------------------------------------------------
    def payload(self) -> str:
        """The learned state as text (JSON or the library's text model)."""
        self._check_fitted()
        return json.dumps(self._state())

    def _state(self) -> dict[str, Any]:  # pragma: no cover - overridden
        raise NotImplementedError

    @classmethod
    def restore(cls, params: dict[str, Any], payload: str) -> Regressor:
        """Rebuild a fitted regressor from ``get_params()`` and ``payload()``."""
        obj = cls(**params)
        obj._load_payload(payload)
        return obj

    def _load_payload(self, payload: str) -> None:  # pragma: no cover - overridden
        raise NotImplementedError
