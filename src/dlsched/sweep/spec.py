"""A sweep spec (YAML) -> the list of cells to run, validated before anything runs.

Format::

    base:                 # options every cell shares: any `dlsched simulate` option
      jobs: 2000
      nodes: 16
    grid:                 # the cartesian product of these lists (a scalar is a list of one)
      policy: [fifo, sjf]
      seed: [0, 1, 2]
    runs:                 # and/or explicit cells, each applied over `base`
      - {policy: srtf, backfill: true}
    baseline: {policy: fifo}   # optional: the cell the statistics divide by
    replicate: seed            # optional: the option whose values are repetitions (default: seed)

Every error names the file, the line and the key (``error: spec.yaml line 7: grid.polcy: unknown
simulate option 'polcy' (did you mean 'policy'?)``). Cells that come out identical are run once
and counted.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from dlsched.sweep.options import lookup
from dlsched.traces.yaml_bounds import expanded_size

TOP_KEYS = ("base", "grid", "runs", "baseline", "replicate")
#: the most cells one spec may expand to (checked before expanding: a grid's size is a product)
MAX_CELLS = 100_000
#: values a spec may expand to once its aliases are followed (bounds an alias bomb; 20 a cell)
MAX_VALUES = 20 * MAX_CELLS


class SpecError(ValueError):
    """A spec problem; the message names the file, line and key."""


@dataclass(frozen=True, slots=True)
class Cell:
    """One simulation of the sweep: the options that differ from ``simulate``'s defaults."""

    params: dict  # spec key -> converted value, in spec order (base, then grid/run keys)

    @property
    def id(self) -> str:
        """Stable name of the cell: a hash of its options, so editing the spec never renames old cells."""
        text = json.dumps(_without_defaults(self.params), sort_keys=True, default=str)
        return hashlib.sha1(text.encode()).hexdigest()[:12]

    def label(self, keys: list[str] | None = None) -> str:
        keys = keys if keys is not None else list(self.params)
        return ",".join(f"{k}={self.params[k]}" for k in keys if k in self.params)


@dataclass(slots=True)
class Spec:
    """A loaded spec: its cells, the keys that vary, and the statistics options."""

    path: Path
    cells: list[Cell]
    swept: list[str]                       # keys with more than one value across cells
    baseline: dict = field(default_factory=dict)
    replicate: str = "seed"
    duplicates: int = 0                    # cells listed more than once (run once)
    lines: dict = field(default_factory=dict)  # option key -> first spec line that sets it (for errors)


class _Node:
    """A YAML value with the line it starts on (1-based)."""

    __slots__ = ("line", "value")

    def __init__(self, value: object, line: int) -> None:
        self.value, self.line = value, line


def _convert(node, where: str) -> _Node:
    import yaml

    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[str, tuple[int, _Node]] = {}
        for key_node, value_node in node.value:
            key = yaml.safe_load(yaml.serialize(key_node)) if not isinstance(key_node, yaml.ScalarNode) \
                else key_node.value
            if key in out:
                raise SpecError(f"{where} line {key_node.start_mark.line + 1}: key {key!r} appears twice")
            out[str(key)] = (key_node.start_mark.line + 1, _convert(value_node, where))
        return _Node(out, line)
    if isinstance(node, yaml.SequenceNode):
        return _Node([_convert(item, where) for item in node.value], line)
    # scalars: YAML's own typing (true -> bool, 3 -> int, 0.5 -> float, ~ -> None)
    return _Node(yaml.safe_load(yaml.serialize(node)), line)


def _read(path: Path) -> _Node:
    try:
        import yaml
    except ImportError:
        raise SpecError("dlsched sweep reads YAML specs with PyYAML: pip install 'dlsched[sweep]'") from None

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{path}: sweep spec not found") from None
    except OSError as exc:
        raise SpecError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        if root is None:
            raise SpecError(f"{path}: the spec is empty; give 'grid:' and/or 'runs:'")
        if expanded_size(root, MAX_VALUES) > MAX_VALUES:
            raise SpecError(f"{path}: its YAML aliases (*name) expand to more than {MAX_VALUES:,} values "
                            f"(the limit; a spec of {MAX_CELLS:,} cells needs far fewer)")
        node = _convert(root, str(path))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise SpecError(f"{path}{where}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    except RecursionError:
        raise SpecError(f"{path}: lists or mappings nested too deeply to read (a spec needs 3 levels)") from None
    if not isinstance(node.value, dict):
        raise SpecError(f"{path} line {node.line}: the spec must be a mapping with {', '.join(TOP_KEYS)}")
    return node


def _options(node: _Node, where: str, section: str, lists: bool, lines: dict | None = None) -> dict[str, object]:
    """Validated ``key -> value`` (or ``key -> [values]`` when ``lists``) of one mapping section."""
    if not isinstance(node.value, dict):
        raise SpecError(f"{where} line {node.line}: {section}: expected a mapping of simulate options")
    out: dict[str, object] = {}
    for key, (line, value) in node.value.items():
        try:
            option = lookup(key)
        except (TypeError, ValueError) as exc:
            raise SpecError(f"{where} line {line}: {section}.{key}: {exc}") from None
        if lines is not None:
            lines.setdefault(option.key, line)
        items = value.value if lists and isinstance(value.value, list) else [value] if lists else None
        if lists and not items:
            raise SpecError(f"{where} line {line}: {section}.{key}: the list of values is empty")
        try:
            if lists:
                converted = [option.convert(item.value) for item in items]
                if len(set(map(repr, converted))) < len(converted):
                    raise ValueError("a value appears twice in the list")
                out[option.key] = converted
            else:
                out[option.key] = option.convert(value.value)
        except (TypeError, ValueError) as exc:
            raise SpecError(f"{where} line {line}: {section}.{key}: {exc}") from None
    return out


def _without_defaults(params: dict) -> dict:
    """Drop values equal to simulate's default, so `policy: fifo` and no policy are the same cell."""
    return {k: v for k, v in params.items() if v != lookup(k).default}


def load_spec(path: str | Path) -> Spec:
    """Read, validate and expand a sweep spec; SpecError names the file, line and key of a problem."""
    path = Path(path)
    where = str(path)
    top = _read(path).value
    for key, (line, _) in top.items():
        if key not in TOP_KEYS:
            raise SpecError(f"{where} line {line}: unknown key {key!r}; a spec has {', '.join(TOP_KEYS)}")
    lines: dict[str, int] = {}
    base = _options(top["base"][1], where, "base", lists=False, lines=lines) if "base" in top else {}
    grid = _options(top["grid"][1], where, "grid", lists=True, lines=lines) if "grid" in top else {}
    runs: list[dict] = []
    if "runs" in top:
        line, node = top["runs"]
        if not isinstance(node.value, list) or not node.value:
            raise SpecError(f"{where} line {line}: runs: expected a non-empty list of mappings")
        runs = [_options(item, where, f"runs[{i}]", lists=False, lines=lines) for i, item in enumerate(node.value)]
    if not grid and not runs:
        raise SpecError(f"{where}: nothing to run; give 'grid:' and/or 'runs:'")
    size = math.prod(len(v) for v in grid.values()) if grid else 0
    if size + len(runs) > MAX_CELLS:
        sizes = " x ".join(f"{len(v):,} {k}" for k, v in grid.items())
        raise SpecError(f"{where}: the spec expands to {size + len(runs):,} cells ({sizes}"
                        + (f" + {len(runs)} runs" if runs else "") + f"), more than the limit of {MAX_CELLS:,} "
                        "cells a sweep may have; split it into several specs")
    raw: list[dict] = []
    if grid:
        keys = list(grid)
        for values in itertools.product(*(grid[k] for k in keys)):
            raw.append({**base, **dict(zip(keys, values))})
    raw.extend({**base, **run} for run in runs)
    cells, seen = [], set()
    for params in raw:
        cell = Cell(params)
        if cell.id not in seen:
            seen.add(cell.id)
            cells.append(cell)
    baseline = _options(top["baseline"][1], where, "baseline", lists=False) if "baseline" in top else {}
    replicate = "seed"
    if "replicate" in top:
        line, node = top["replicate"]
        try:
            replicate = lookup(node.value).key
        except (TypeError, ValueError) as exc:
            raise SpecError(f"{where} line {line}: replicate: {exc}") from None
    swept = [k for k in dict.fromkeys(k for c in cells for k in c.params)
             if len({repr(c.params.get(k, lookup(k).default)) for c in cells}) > 1]
    return Spec(path, cells, swept, baseline, replicate, len(raw) - len(cells), lines)


def parse_baseline(text: str, where: str = "--baseline") -> dict:
    """``policy=fifo[,nodes=16]`` -> validated options (the CLI form of the spec's ``baseline:``)."""
    import yaml

    out: dict[str, object] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"{where}: expected KEY=VALUE, got {part!r}")
        option = lookup(key.strip())
        try:
            out[option.key] = option.convert(yaml.safe_load(value.strip()))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {key.strip()}: {exc}") from None
    if not out:
        raise ValueError(f"{where}: expected KEY=VALUE, got {text!r}")
    return out
