"""nodeSelector and node affinity, evaluated as kube-scheduler v1.20's NodeAffinity plugin does.

Required affinity is an OR of ``nodeSelectorTerms``, each an AND of its ``matchExpressions``
(node labels) and ``matchFields`` (only ``metadata.name``, with In / NotIn and one value). A term
that is empty or malformed matches no node (kube-scheduler skips it the same way); dlsched also
says so in a note. Preferred terms add their weight where they match: the score term.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dlsched.service.nodefit.resources import SpecError, items, obj

AFFINITY_MISMATCH = "node(s) didn't match Pod's node affinity"   # v1.20's words for nodeSelector too
_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY = re.compile(rf"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_NAME}")
_LABEL_VALUE = re.compile(rf"({_NAME})?")
_INT64 = re.compile(r"[+-]?[0-9]+")
_SET_OPS, _NULL_OPS, _NUM_OPS = ("In", "NotIn"), ("Exists", "DoesNotExist"), ("Gt", "Lt")


def _int64(text: object) -> int | None:
    """Go's ``strconv.ParseInt(s, 10, 64)``: digits with an optional sign, within int64."""
    if not isinstance(text, str) or not _INT64.fullmatch(text):
        return None
    n = int(text)
    return n if -(1 << 63) <= n < (1 << 63) else None


def _label_key_ok(key: object) -> bool:
    if not isinstance(key, str) or not _LABEL_KEY.fullmatch(key):
        return False
    prefix, _, name = key.rpartition("/")
    return len(name) <= 63 and len(prefix) <= 253


@dataclass(frozen=True, slots=True)
class Expression:
    """One label requirement: ``key op values`` (Gt/Lt hold their integer in ``number``)."""

    key: str
    op: str
    values: frozenset[str]
    number: int = 0

    def matches(self, labels: dict[str, str]) -> bool:
        """``labels.Requirement.Matches``: NotIn and DoesNotExist hold where the label is absent."""
        if self.op == "Exists":
            return self.key in labels
        if self.op == "DoesNotExist":
            return self.key not in labels
        if self.key not in labels:
            return self.op == "NotIn"
        value = labels[self.key]
        if self.op == "In":
            return value in self.values
        if self.op == "NotIn":
            return value not in self.values
        have = _int64(value)   # a label that is no integer matches neither Gt nor Lt
        return have is not None and (have > self.number if self.op == "Gt" else have < self.number)


def _expression(raw: object, where: str) -> Expression:
    """Parse one matchExpressions entry as ``labels.NewRequirement`` validates it."""
    raw = obj(raw, where)
    key, op, values = raw.get("key"), raw.get("operator"), items(raw.get("values"), f"{where}.values")
    if not _label_key_ok(key):
        raise SpecError(f"{where}.key {key!r} is not a label key")
    if op in _SET_OPS and not values:
        raise SpecError(f"{where}: operator {op} needs at least one value")
    if op in _NULL_OPS and values:
        raise SpecError(f"{where}: operator {op} takes no values")
    if op not in _SET_OPS + _NULL_OPS + _NUM_OPS:
        raise SpecError(f"{where}.operator {op!r} is not a node selector operator")
    for v in values:
        if not isinstance(v, str) or len(v) > 63 or not _LABEL_VALUE.fullmatch(v):
            raise SpecError(f"{where}.values: {v!r} is not a label value")
    number = 0
    if op in _NUM_OPS:
        number = _int64(values[0]) if len(values) == 1 else None
        if number is None:
            raise SpecError(f"{where}: operator {op} needs exactly one integer value, got {values!r}")
    return Expression(key, op, frozenset(values), number)


@dataclass(frozen=True, slots=True)
class Term:
    """One nodeSelectorTerm: label expressions AND ``metadata.name`` field conditions."""

    expressions: tuple[Expression, ...]
    names_in: frozenset[str] | None     # matchFields metadata.name In (None: no such condition)
    names_out: frozenset[str]           # matchFields metadata.name NotIn

    def matches(self, labels: dict[str, str], name: str) -> bool:
        if self.names_in is not None and name not in self.names_in:
            return False
        return name not in self.names_out and all(e.matches(labels) for e in self.expressions)


def term(raw: object, where: str) -> Term | None:
    """A term, or None when it matches nothing (empty). Raises :class:`SpecError` when malformed."""
    raw = obj(raw, where)
    exprs = tuple(_expression(e, f"{where}.matchExpressions[{i}]")
                  for i, e in enumerate(items(raw.get("matchExpressions"), f"{where}.matchExpressions")))
    names_in: frozenset[str] | None = None
    names_out: set[str] = set()
    raw_fields = items(raw.get("matchFields"), f"{where}.matchFields")
    for i, f in enumerate(raw_fields):
        f, at = obj(f, f"{where}.matchFields[{i}]"), f"{where}.matchFields[{i}]"
        values = items(f.get("values"), f"{at}.values")
        if f.get("key") != "metadata.name":
            raise SpecError(f"{at}.key {f.get('key')!r}: only metadata.name is a node field")
        if f.get("operator") not in _SET_OPS or len(values) != 1 or not isinstance(values[0], str):
            raise SpecError(f"{at}: metadata.name takes In or NotIn with exactly one value")
        if f["operator"] == "In":
            names_in = frozenset(values) if names_in is None else names_in & frozenset(values)
        else:
            names_out.add(values[0])
    if not exprs and not raw_fields:
        return None
    return Term(exprs, names_in, frozenset(names_out))


@dataclass(frozen=True, slots=True)
class Placement:
    """A pod's node selection: nodeSelector AND (any required term); ``terms`` None: no affinity."""

    selector: tuple[tuple[str, str], ...]
    terms: tuple[Term, ...] | None
    preferred: tuple[tuple[int, Term], ...]

    def required(self, labels: dict[str, str], name: str) -> bool:
        """nodeSelector and required node affinity both hold on this node."""
        if any(labels.get(k) != v for k, v in self.selector):
            return False
        return self.terms is None or any(t.matches(labels, name) for t in self.terms)

    def raw_score(self, labels: dict[str, str], name: str) -> int:
        """The sum of the weights of the preferred terms that match (before normalising)."""
        return sum(w for w, t in self.preferred if t.matches(labels, name))


def placement(spec: dict, notes: list[str]) -> Placement:
    """Compile a pod's nodeSelector and node affinity once, for every node it is checked against.

    Raises :class:`SpecError` only for a nodeSelector or affinity that is not an object; a bad term
    is a note (required: it matches nothing; preferred: it scores nothing).
    """
    selector = obj(spec.get("nodeSelector"), "spec.nodeSelector")
    for k, v in selector.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise SpecError(f"spec.nodeSelector {k!r}: {v!r} is not a string pair")
    aff = obj(obj(spec.get("affinity"), "spec.affinity").get("nodeAffinity"), "spec.affinity.nodeAffinity")
    base = "spec.affinity.nodeAffinity"
    terms: tuple[Term, ...] | None = None
    req = aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req is not None:
        raw_terms = items(obj(req, f"{base}.required").get("nodeSelectorTerms"), f"{base}.required.nodeSelectorTerms")
        kept = []
        for i, raw in enumerate(raw_terms):
            where = f"{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]"
            try:
                t = term(raw, where)
            except SpecError as e:
                notes.append(f"{e}: this required term matches no node")
                continue
            if t is None:
                notes.append(f"{where} is empty: it matches no node")
            else:
                kept.append(t)
        terms = tuple(kept)
    preferred = []
    for i, raw in enumerate(items(aff.get("preferredDuringSchedulingIgnoredDuringExecution"), f"{base}.preferred")):
        where = f"{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        try:
            raw = obj(raw, where)
            weight = raw.get("weight")
            if isinstance(weight, bool) or not isinstance(weight, int) or not 0 <= weight <= 100:
                raise SpecError(f"{where}.weight {weight!r} is not a whole number in 0..100")
            t = term(raw.get("preference"), f"{where}.preference")
        except SpecError as e:
            notes.append(f"{e}: this preferred term scores nothing")
            continue
        if weight and t is not None:
            preferred.append((weight, t))
    return Placement(tuple(selector.items()), terms, tuple(preferred))


def normalise(raw: dict[str, int]) -> dict[str, int]:
    """``DefaultNormalizeScore``: 100 * score // best, all 0 when no node scores."""
    best = max(raw.values(), default=0)
    return {n: (100 * s // best if best else 0) for n, s in raw.items()}
