"""The kube-scheduler extender protocol (v1.20 wire format, as in ``../shared/k8s/captured``).

Requests and replies use Go field names: filter/prioritize get ``{"Pod", "Nodes", "NodeNames"}``
(one of the two node forms, the other ``null``: ``Nodes`` = a NodeList of full objects,
``NodeNames`` with ``nodeCacheCapable: true``); filter answers ``{"Nodes"|"NodeNames",
"FailedNodes", "Error"}`` in the form it was asked, prioritize ``[{"Host", "Score"}]``, bind gets
``{"PodName", "PodNamespace", "PodUID", "Node"}`` and answers ``{"Error"}``. These functions are
pure: the HTTP app and the unit tests call them with parsed JSON.

Filter and prioritize answers are written straight to bytes (:func:`filter_reply`,
:func:`scores_reply`): every rejected node carries the same reason, so the filter's reply is the
node names joined around one pre-encoded reason, and the priority list is one pre-built template
per node list with the scores slotted in, not a thousand-entry dict through a JSON encoder
(orjson when installed, else the standard library's). Names that would need escaping go through
the encoder; :func:`filter_result` and :func:`priority_result` are the same answers as dicts.
"""

from __future__ import annotations

import json

import numpy as np

from dlsched.service.pods import PodError, PodFacts, pod_facts

try:
    import orjson
except ImportError:   # the service extra installs it; the standard library is the fallback
    orjson = None

MAX_NODES = 20000


def loads(raw: bytes) -> object:
    """A request body as JSON; :class:`WireError` (a 400) when it is not JSON."""
    try:
        if orjson is not None:
            return orjson.loads(raw)
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise WireError(f"body is not JSON: {exc}") from None


def dumps(obj: object) -> bytes:
    """JSON bytes (ASCII-escaped by the fallback encoder, so no string can fail to encode)."""
    if orjson is not None:
        return orjson.dumps(obj)
    return json.dumps(obj, separators=(",", ":")).encode()


class WireError(ValueError):
    """A request body that does not follow the extender protocol (answered with 400)."""


def parse_args(body: object) -> tuple[PodFacts, list[str], list[dict] | None]:
    """(pod, candidate node names, the full node objects when sent as ``Nodes``)."""
    if not isinstance(body, dict):
        raise WireError("the body must be a JSON object with Pod and Nodes or NodeNames")
    if "Pod" not in body:
        raise WireError("missing field Pod")
    try:
        pod = pod_facts(body["Pod"])
    except PodError as exc:
        raise WireError(str(exc)) from None
    nodes, names = body.get("Nodes"), body.get("NodeNames")
    if nodes is not None:
        if not isinstance(nodes, dict) or not isinstance(nodes.get("items") or [], list):
            raise WireError("Nodes must be a NodeList object with an items list")
        items = nodes.get("items") or []
        if len(items) > MAX_NODES:
            raise WireError(f"Nodes: {len(items)} nodes, more than {MAX_NODES}")
        out = []
        for i, item in enumerate(items):
            name = ((item if isinstance(item, dict) else {}).get("metadata") or {})
            name = name.get("name") if isinstance(name, dict) else None
            if not isinstance(name, str) or not name:
                raise WireError(f"Nodes.items[{i}].metadata.name must be a non-empty string")
            out.append(name)
        return pod, out, items
    if names is not None:
        if not isinstance(names, list):
            raise WireError("NodeNames must be a list of non-empty strings")
        if len(names) > MAX_NODES:
            raise WireError(f"NodeNames: {len(names)} nodes, more than {MAX_NODES}")
        NodeList.of(names)   # checks the names (once for a list equal to the last one)
        return pod, names, None
    raise WireError("one of Nodes or NodeNames must be given")


NAMES_KEY = b'"NodeNames":'


def parse_request(raw: bytes) -> tuple[PodFacts, list[str], list[dict] | None]:
    """:func:`parse_args` of the JSON body ``raw``, without decoding a node list equal to the
    last one: kube-scheduler sends the same ``NodeNames`` for pod after pod, and at 5,000 nodes
    decoding and comparing them was half a millisecond of every call.

    The body's end from its last ``,"NodeNames":`` on is compared as bytes with the last
    request's, kept with the last name list (:class:`NodeList`, ``memo["tail"]``) only after it decoded alone as exactly ``{"NodeNames": [...]}``;
    when equal, what comes before is decoded with ``"NodeNames":null}`` in its place and the
    kept names put in. Why that is the same answer: after a comma outside a string, ``"NodeNames":``
    is a key (inside a string the comma would be followed by the string's end and then bare
    text, which is not JSON); the kept end closes the object right after the array, so the key
    is the top-level object's last, the one a decoder keeps; replacing one valid value by another
    changes nothing else. Anything that does not match is decoded whole, as before. The kept
    list is shared by the calls that match: nothing changes a parsed name list in place."""
    at = raw.rfind(NAMES_KEY)
    tail = raw[at:] if at > 0 and raw[at - 1:at] == b"," else None
    last = NodeList._last
    if orjson is not None and tail is not None and last is not None and last.memo.get("tail") == tail:
        try:
            body = orjson.loads(raw[:at] + b'"NodeNames":null}')
        except ValueError:
            body = None
        if isinstance(body, dict) and "NodeNames" in body and body["NodeNames"] is None:
            body["NodeNames"] = last.seen
            return parse_args(body)
    body = loads(raw)
    pod, names, items = parse_args(body)
    if items is None and tail is not None:
        _keep_tail(tail, names)
    return pod, names, items


def _keep_tail(tail: bytes, names: list[str]) -> None:
    """Keep ``tail`` with ``names``' :class:`NodeList` (the last one :func:`parse_args` looked up)
    for :func:`parse_request`, if it decodes alone as ``{"NodeNames": names}``."""
    nodes = NodeList.of(names)
    if nodes.memo.get("tail") == tail:
        return
    try:
        alone = loads(b"{" + tail)
    except WireError:
        return
    if isinstance(alone, dict) and len(alone) == 1 and alone.get("NodeNames") == names:
        nodes.memo["tail"] = tail


def filter_result(passed: list[str], failed: dict[str, str], items: list[dict] | None, error: str = "") -> dict:
    """The ExtenderFilterResult in the form the request used."""
    if items is not None:
        keep = set(passed)
        nodes = [obj for obj in items if obj["metadata"]["name"] in keep]
        return {"Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None, "FailedNodes": failed, "Error": error}
    return {"Nodes": None, "NodeNames": passed, "FailedNodes": failed, "Error": error}


def priority_result(scores: list[tuple[str, int]]) -> list[dict]:
    return [{"Host": host, "Score": score} for host, score in scores]


class NodeList:
    """A checked list of node names (strings, none empty) and what the replies need from it,
    derived once: kube-scheduler sends the same list (every feasible node) for pod after pod, so
    :meth:`of` keeps the last one and answers from it while the next list is equal (a C-level
    comparison, no hashing; the very list object seen last is recognised without one, so the
    reply of a call that already looked its list up pays nothing). ``memo`` keeps what callers
    derive from the names (the answers' node ids). :meth:`template` is the priority list with a
    ``0`` in each score's place (``[{"Host":"a","Score":0},{"Host":"b","Score":0}]``) and the
    offsets of those digits, when every name can be written as it is."""

    __slots__ = ("_template", "memo", "names", "seen", "unique", "verbatim")

    def __init__(self, names: list[str]) -> None:
        try:
            joined = "".join(names)   # a TypeError names a non-string
        except TypeError:
            raise WireError("NodeNames must be a list of non-empty strings") from None
        if "" in names:
            raise WireError("NodeNames must be a list of non-empty strings")
        self.names = list(names)
        self.seen = names   # the list object last found equal (the request's, never changed after parsing)
        self.memo: dict[str, object] = {}
        # every name is its own JSON string body (no quote, backslash or control character to escape;
        # a non-printable character sends the answer through the encoder)
        self.verbatim = joined.isprintable() and '"' not in joined and "\\" not in joined
        self.unique = list(dict.fromkeys(names))   # FailedNodes keys: each name once, in request order
        self._template: tuple[np.ndarray, np.ndarray] | None = None

    def template(self) -> tuple[np.ndarray, np.ndarray]:
        """(the priority list's bytes with every score ``0``, as uint8; the offset of each score's
        digit), built on the first prioritize of this list."""
        if self._template is None:
            parts, offsets, at = [], [], 0
            for i, name in enumerate(self.names):
                head = (("},{" if i else "[{") + '"Host":"' + name + '","Score":').encode()
                parts += head, b"0"
                at += len(head)
                offsets.append(at)
                at += 1
            parts.append(b"}]")
            self._template = (np.frombuffer(b"".join(parts), np.uint8), np.array(offsets, np.intp))
        return self._template

    _last: NodeList | None = None

    @classmethod
    def of(cls, names: list[str]) -> NodeList:
        last = cls._last
        if last is not None and (last.seen is names or last.names == names):
            last.seen = names
            return last
        cls._last = last = cls(names)
        return last


def _failed_nodes(nodes: NodeList, why: str) -> bytes:
    """The ``FailedNodes`` object of an answer where no node passes: each name (once, in request
    order) -> ``why``."""
    if not nodes.unique:
        return b"{}"
    if not nodes.verbatim:
        return dumps(dict.fromkeys(nodes.unique, why))
    reason = dumps(why).decode()
    return ('{"' + ('":' + reason + ',"').join(nodes.unique) + '":' + reason + "}").encode()


def filter_reply(passed: list[str], why: str, names: list[str], items: list[dict] | None) -> bytes:
    """``filter_result`` as JSON bytes: where no node passes, every node fails with ``why``; where
    one does (a nomination), ``FailedNodes`` is empty. kube-scheduler (v1.20, ``findNodesThatPassExtenders``)
    reads the failed map only into the per-node statuses, which it uses to explain a pod that
    fits nowhere (its FitError and preemption) and to count evaluated nodes in its log; with a
    node passing, the map reaches nobody, and at 5,000 nodes it was 300 kB of every reply
    (filter p99 14 ms against 5.2 ms without it). The reason stays in ``GET /api/v1/state``."""
    failed = b"{}" if passed else _failed_nodes(NodeList.of(names), why)
    if items is not None:
        keep = set(passed)
        nodes = dumps({"metadata": {}, "items": [obj for obj in items if obj["metadata"]["name"] in keep]})
        return b'{"Nodes":' + nodes + b',"NodeNames":null,"FailedNodes":' + failed + b',"Error":""}'
    return b'{"Nodes":null,"NodeNames":' + dumps(passed) + b',"FailedNodes":' + failed + b',"Error":""}'


MAX_PRIORITY = 10   # v1.20's MaxExtenderPriority: the protocol's scores are 0..10


def scores_reply(names: list[str], scores) -> bytes:
    """``priority_result`` of ``zip(names, scores)`` (a list or an int array) as JSON bytes: the
    node list's template with each score's digit written in by one array assignment, and a
    ``1`` put before the digit of each 10 (the nominated node: at most a few); a score outside
    0..10 or a name that needs escaping goes through the encoder. At 5,000 nodes: 0.5 ms as a
    join of 10,000 pieces, 0.05 ms so."""
    if not names:
        return b"[]"
    nodes = NodeList.of(names)
    values = np.asarray(scores, dtype=np.int64)
    if not nodes.verbatim or values.min() < 0 or values.max() > MAX_PRIORITY:
        return dumps(priority_result(list(zip(names, values.tolist()))))
    template, offsets = nodes.template()
    out = template.copy()
    out[offsets] = values % 10 + ord("0")
    body = out.tobytes()
    wide = offsets[values == MAX_PRIORITY].tolist()
    if not wide:
        return body
    pieces, prev = [], 0
    for at in wide:
        pieces += body[prev:at], b"1"
        prev = at
    pieces.append(body[prev:])
    return b"".join(pieces)


def parse_bind(body: object) -> tuple[str, str, str, str]:
    """(namespace, name, uid, node) of an ExtenderBindingArgs."""
    if not isinstance(body, dict):
        raise WireError("the body must be a JSON object with PodName, PodNamespace, PodUID and Node")
    out = []
    for key in ("PodNamespace", "PodName", "PodUID", "Node"):
        value = body.get(key)
        if not isinstance(value, str) or not value or len(value) > 253:
            raise WireError(f"{key} must be a non-empty string of at most 253 characters")
        out.append(value)
    return out[0], out[1], out[2], out[3]


# JSON schemas of the bodies, for the OpenAPI document (the fuzzer generates from them).
POD_SCHEMA = {"type": "object", "properties": {
    "metadata": {"type": "object", "properties": {"uid": {"type": "string"}, "name": {"type": "string"},
                                                  "namespace": {"type": "string"},
                                                  "annotations": {"type": "object"}, "labels": {"type": "object"}}},
    "spec": {"type": "object"}, "status": {"type": "object"}}}
EXTENDER_ARGS_SCHEMA = {"type": "object", "required": ["Pod"], "properties": {
    "Pod": POD_SCHEMA,
    "Nodes": {"type": ["object", "null"], "properties": {"items": {"type": "array", "items": {"type": "object"}}}},
    "NodeNames": {"type": ["array", "null"], "items": {"type": "string"}}}}
BIND_ARGS_SCHEMA = {"type": "object", "required": ["PodName", "PodNamespace", "PodUID", "Node"], "properties": {
    "PodName": {"type": "string"}, "PodNamespace": {"type": "string"}, "PodUID": {"type": "string"},
    "Node": {"type": "string"}}}
