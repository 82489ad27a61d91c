"""A small RFC 6902 applier (add / remove, ``-`` for appending) for the tests of the webhook's patch."""

from __future__ import annotations

import copy


def _token(raw: str) -> str:
    return raw.replace("~1", "/").replace("~0", "~")


def apply_patch(doc: dict, ops: list[dict]) -> dict:
    """``doc`` with ``ops`` applied (a copy); KeyError / IndexError where a path does not exist."""
    out = copy.deepcopy(doc)
    for op in ops:
        *parents, last = [_token(t) for t in op["path"].lstrip("/").split("/")]
        target = out
        for t in parents:
            target = target[int(t)] if isinstance(target, list) else target[t]
        if op["op"] == "add":
            if isinstance(target, list):
                target.insert(len(target) if last == "-" else int(last), copy.deepcopy(op["value"]))
            else:
                target[last] = copy.deepcopy(op["value"])
        elif op["op"] == "remove":
            del target[int(last) if isinstance(target, list) else last]
        else:
            raise ValueError(f"unsupported op {op['op']}")
    return out
