"""How many values a composed YAML node graph expands to once its aliases are followed.

An alias bomb (each level a list of aliases to the level before) is a few hundred bytes that
expand to billions of values: ``yaml.safe_load`` of it, or any walk that follows the aliases,
never ends. Counted on the composed graph with one memo per node, the check itself costs one
visit per node, so a reader can refuse such a file before it builds anything from it."""

from __future__ import annotations

from typing import Any


def expanded_size(root: Any, cap: int) -> int:
    """The values ``root`` (a ``yaml.compose`` result, or None) expands to, counted up to ``cap + 1``
    (anything larger reads as ``cap + 1``). A recursive alias counts once instead of looping."""
    import yaml

    if root is None:
        return 0
    sizes: dict[int, int] = {}

    def size(node) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        sizes[id(node)] = 1
        if isinstance(node, yaml.MappingNode):
            n = 1 + sum(size(k) + size(v) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            n = 1 + sum(size(v) for v in node.value)
        else:
            n = 1
        sizes[id(node)] = n = min(n, cap + 1)
        return n

    return size(root)
