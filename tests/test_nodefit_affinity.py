"""nodeSelector, required node affinity with every operator and matchFields, preferred weights."""

import pytest
from nodefit_builders import expr, node, pod, required

from dlsched.service.nodefit import feasible

MISMATCH = "node(s) didn't match Pod's node affinity"
LABELS = {"zone": "a", "gpu": "H100", "gen": "9", "rack": "r7"}
N = node("n1", labels=LABELS)


def fits(p: dict, n: dict = N) -> bool:
    r = feasible(p, [n], {})
    assert r.nodes == [] or r.nodes == [n["metadata"]["name"]]
    if not r.nodes:
        assert r.reasons[n["metadata"]["name"]] == [MISMATCH]
    return bool(r.nodes)


@pytest.mark.parametrize(("selector", "ok"), [
    ({"zone": "a"}, True), ({"zone": "a", "gpu": "H100"}, True), ({"zone": "b"}, False),
    ({"zone": "a", "gpu": "A100"}, False), ({"missing": ""}, False), ({"kubernetes.io/hostname": "n1"}, True),
])
def test_node_selector_is_an_and_of_exact_labels(selector: dict, ok: bool) -> None:
    assert fits(pod("p", selector=selector)) is ok


@pytest.mark.parametrize(("e", "ok"), [
    (expr("zone", "In", "a", "b"), True), (expr("zone", "In", "b", "c"), False), (expr("nope", "In", "a"), False),
    (expr("zone", "NotIn", "b"), True), (expr("zone", "NotIn", "a", "b"), False), (expr("nope", "NotIn", "a"), True),
    (expr("zone", "Exists"), True), (expr("nope", "Exists"), False),
    (expr("zone", "DoesNotExist"), False), (expr("nope", "DoesNotExist"), True),
    (expr("gen", "Gt", "8"), True), (expr("gen", "Gt", "9"), False), (expr("gen", "Gt", "0"), True),
    (expr("gen", "Lt", "10"), True), (expr("gen", "Lt", "9"), False),
    (expr("zone", "Gt", "1"), False),      # label "a" is no integer: neither Gt nor Lt
    (expr("nope", "Lt", "100"), False),    # absent label: Gt/Lt fail
])
def test_every_operator(e: dict, ok: bool) -> None:
    assert fits(pod("p", affinity=required({"matchExpressions": [e]}))) is ok


def test_terms_are_or_expressions_are_and() -> None:
    a, b = expr("zone", "In", "a"), expr("gpu", "In", "A100")
    assert fits(pod("p", affinity=required({"matchExpressions": [a, b]}))) is False
    assert fits(pod("p", affinity=required({"matchExpressions": [b]}, {"matchExpressions": [a]}))) is True
    assert fits(pod("p", affinity=required({"matchExpressions": [a]}), selector={"zone": "b"})) is False


@pytest.mark.parametrize(("fields", "ok"), [
    ([{"key": "metadata.name", "operator": "In", "values": ["n1"]}], True),
    ([{"key": "metadata.name", "operator": "In", "values": ["n2"]}], False),
    ([{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}], False),
    ([{"key": "metadata.name", "operator": "NotIn", "values": ["n2"]}], True),
    ([{"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}], False),   # one value only: bad term
    ([{"key": "metadata.labels", "operator": "In", "values": ["n1"]}], False),       # only metadata.name
    ([{"key": "metadata.name", "operator": "Exists"}], False),
])
def test_match_fields_metadata_name(fields: list, ok: bool) -> None:
    assert fits(pod("p", affinity=required({"matchFields": fields}))) is ok


def test_match_fields_and_expressions_both_hold_in_one_term() -> None:
    term = {"matchExpressions": [expr("zone", "In", "a")],
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
    assert fits(pod("p", affinity=required(term))) is False


@pytest.mark.parametrize("bad", [
    expr("zone", "Like", "a"), expr("zone", "In"), expr("zone", "Exists", "a"), expr("gen", "Gt", "8", "9"),
    expr("gen", "Gt", "eight"), expr("gen", "Lt", "1.5"),
    expr("gen", "Gt", "-1"),   # no label value (starts with "-"): kube refuses it too expr("bad key!", "In", "a"), expr("zone", "In", "bad value!"),
    {"operator": "In", "values": ["a"]}, "not-a-dict",
])
def test_malformed_requirement_fails_its_term_with_a_note(bad: object) -> None:
    p = pod("p", affinity=required({"matchExpressions": [bad]}))
    r = feasible(p, [N], {})
    assert r.nodes == [] and r.reasons["n1"] == [MISMATCH]
    assert len(r.notes) == 1 and "matches no node" in r.notes[0]
    # another, valid, term still places the pod (kube-scheduler skips the bad term the same way)
    ok = pod("p", affinity=required({"matchExpressions": [bad]}, {"matchExpressions": [expr("zone", "In", "a")]}))
    assert feasible(ok, [N], {}).nodes == ["n1"]


def test_empty_term_and_empty_term_list_match_nothing() -> None:
    assert fits(pod("p", affinity=required({}))) is False
    assert fits(pod("p", affinity=required())) is False
    assert fits(pod("p", affinity={"nodeAffinity": {}})) is True


def _preferred(*weighted: tuple[int, list]) -> dict:
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": w, "preference": {"matchExpressions": es}} for w, es in weighted]}}


def test_preferred_weights_are_summed_and_normalised_to_100() -> None:
    nodes = [node("a", labels={"zone": "a", "ssd": "1"}), node("b", labels={"zone": "a"}), node("c", labels={})]
    aff = _preferred((30, [expr("zone", "In", "a")]), (10, [expr("ssd", "Exists")]), (60, [expr("zone", "In", "z")]))
    r = feasible(pod("p", affinity=aff), nodes, {})
    assert r.scores == {"a": 100, "b": 75, "c": 0}     # 40, 30, 0 -> 100 * s // 40


def test_preferred_scores_only_feasible_nodes_and_zero_when_nothing_matches() -> None:
    nodes = [node("a", labels={"zone": "a"}, gpus="1"), node("b", labels={"zone": "b"})]
    aff = _preferred((50, [expr("zone", "In", "a")]), (25, [expr("zone", "In", "b")]))
    r = feasible(pod("p", requests={"nvidia.com/gpu": "2"}, affinity=aff), nodes, {})
    assert r.nodes == ["b"] and r.scores == {"b": 100}
    r = feasible(pod("p", affinity=_preferred((50, [expr("zone", "In", "q")]))), nodes, {})
    assert r.scores == {"a": 0, "b": 0}


def test_a_bad_preferred_term_scores_nothing_and_says_so() -> None:
    aff = _preferred((20, [expr("zone", "Near", "a")]), (10, [expr("zone", "In", "a")]))
    aff["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"].append({"weight": 500, "preference": {}})
    r = feasible(pod("p", affinity=aff), [N, node("n2")], {})
    assert r.scores == {"n1": 100, "n2": 0}
    assert len(r.notes) == 2 and all("scores nothing" in n for n in r.notes)
