"""The extender's request parser skips decoding a node list equal to the last one
(``extender.parse_request``): it must answer exactly as decoding the whole body does, for
kube-scheduler's bodies and for hostile ones built to look like them."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlsched.service import extender
from dlsched.service.extender import WireError, loads, parse_args, parse_request

pytest.importorskip("orjson")

NAMES = [f"node-{i:04d}" for i in range(40)]


def pod(uid: str, gpus: int = 1, annotations: dict | None = None) -> dict:
    lim = {"nvidia.com/gpu": str(gpus)}
    meta = {"uid": uid, "name": uid, "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"}
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": {"containers": [{"name": "m", "resources": {"limits": lim, "requests": lim}}]}}


def body(p: dict, names, nodes=None) -> bytes:
    """As kube-scheduler writes it: Pod, Nodes, NodeNames, no spaces."""
    return json.dumps({"Pod": p, "Nodes": nodes, "NodeNames": names}, separators=(",", ":")).encode()


def outcome(fn, raw: bytes):
    try:
        p, names, items = fn(raw)
    except WireError as exc:
        return ("error", str(exc))
    return (p.uid, p.gpus, p.annotations, list(names), items)


def whole(raw: bytes):
    return parse_args(loads(raw))


@pytest.fixture(autouse=True)
def forget_tail():
    extender.NodeList._last = None
    yield
    extender.NodeList._last = None


def test_the_second_pod_with_the_same_nodes_reuses_the_decoded_list():
    first = parse_request(body(pod("a"), NAMES))
    second = parse_request(body(pod("b", 4), NAMES))
    assert (first[0].uid, second[0].uid, second[0].gpus) == ("a", "b", 4)
    assert second[1] is first[1] and second[1] == NAMES   # not decoded again
    third = parse_request(body(pod("c"), NAMES[:-1]))     # another list: decoded, then kept
    assert third[1] == NAMES[:-1] and third[1] is not first[1]
    assert parse_request(body(pod("d"), NAMES[:-1]))[1] is third[1]


def test_a_quote_escaped_before_the_key_falls_back_to_decoding_the_body():
    """A key that merely ends in NodeNames (its quote escaped, no comma before) never takes the
    kept list: the body answers as decoded whole (here: no node list at all)."""
    parse_request(body(pod("a"), NAMES))
    tail = extender.NodeList._last.memo["tail"]
    hostile = b'{"Pod":' + json.dumps(pod("h")).encode() + b',"NodeNames":null,"k\\' + tail
    assert outcome(parse_request, hostile) == outcome(whole, hostile)
    assert outcome(parse_request, hostile)[0] == "error"


def test_a_tail_with_more_keys_after_the_list_is_never_kept():
    raw = b'{"Pod":' + json.dumps(pod("a")).encode() + b',"NodeNames":' + json.dumps(NAMES).encode() + b',"x":[1]}'
    assert outcome(parse_request, raw) == outcome(whole, raw)
    assert "tail" not in extender.NodeList._last.memo


HOSTILE_PREFIXES = [
    b'{"Pod":%s,"Nodes":null,',                    # kube-scheduler's own
    b'{"Nodes":null,"Pod":%s,',
    b'{"Pod":%s,"NodeNames" : ["zzz"],',           # an earlier NodeNames, with spaces
    b'{"Pod":%s,"NodeNames":null,',                # an earlier null NodeNames
    b'{"Pod":%s,"Nodes":{"items":[]},',            # Nodes given too: the items win
    b'{"Pod":%s,"Pod":[],',                        # a broken second Pod
    b'{"Pod":%s,"s":"x\\",',                       # a string whose escaped quote precedes the comma
    b'[%s,',                                       # not an object
    b'{"Pod":%s,"k":{',                            # the list one level down (unbalanced)
]


@settings(max_examples=150, deadline=None)
@given(sequence=st.lists(st.tuples(st.sampled_from(range(len(HOSTILE_PREFIXES))), st.integers(0, 3),
                                   st.booleans()), min_size=1, max_size=8))
def test_every_body_answers_as_decoded_whole(sequence):
    """Bodies of kube-scheduler's shape and hostile variants, in any order (so the kept list is
    whatever the previous body left): each answers as decoding it whole does."""
    for k, (prefix, gpus, same_list) in enumerate(sequence):
        names = NAMES if same_list else NAMES[:10]
        p = json.dumps(pod(f"p{k}", gpus, {"note": '"NodeNames":[]}'} if gpus == 3 else None),
                       separators=(",", ":")).encode()
        raw = HOSTILE_PREFIXES[prefix] % p + b'"NodeNames":' + json.dumps(names, separators=(",", ":")).encode() + b"}"
        assert outcome(parse_request, raw) == outcome(whole, raw), raw[:120]
