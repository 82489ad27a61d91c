"""Device identity on shared nodes (service/gpu_binding/identity.py): the kubelet's PodResources
``List`` answer decoded from protobuf's wire format (built here by a small independent encoder,
with the fields a real kubelet adds: cpu_ids, topology), the reservations' device IDs, and the
bind's decision: UUIDs in the ConfigMap when every reservation's device was read back, a wait for
the read-back on a shared node whose agent reports, the indices (unverified) otherwise. No real
kubelet runs here: the gRPC transport (``read_kubelet``, grpcio) is not exercised."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from test_gpu_binding import _binding, _seen

from dlsched.service.agent import Reading, read_devices
from dlsched.service.gpu_binding import binding as binding_mod
from dlsched.service.gpu_binding.identity import (
    WireError,
    parse_list_response,
    reservation_devices,
    visible_devices,
)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, value: bytes | str | int) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    raw = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(raw)) + raw


def _devices(resource: str, *ids: str, numa: int | None = None) -> bytes:
    body = _field(1, resource) + b"".join(_field(2, i) for i in ids)
    if numa is not None:   # TopologyInfo { repeated NUMANode nodes = 1 } with NUMANode { int64 ID = 1 }
        body += _field(3, _field(1, _field(1, numa)))
    return body


def _pod(namespace: str, name: str, *containers: bytes) -> bytes:
    return _field(1, _field(1, name) + _field(2, namespace) + b"".join(_field(3, c) for c in containers))


def _container(name: str, *devices: bytes, cpus: tuple[int, ...] = ()) -> bytes:
    body = _field(1, name) + b"".join(_field(2, d) for d in devices)
    if cpus:   # repeated int64 cpu_ids = 3, packed
        body += _field(3, b"".join(_varint(c) for c in cpus))
    return body


ANSWER = (_pod("hold", "dlsched-hold-n1-0", _container("hold", _devices("nvidia.com/gpu", "GPU-aaa", numa=0))) +
          _pod("hold", "dlsched-hold-n1-1", _container("hold", _devices("nvidia.com/gpu", "GPU-bbb", numa=1),
                                                       cpus=(2, 3))) +
          _pod("default", "theirs", _container("main", _devices("nvidia.com/gpu", "GPU-ccc", "GPU-ddd"),
                                               _devices("example.com/nic", "nic-0"))) +
          _pod("hold", "no-gpu", _container("c", cpus=(1,))))


def test_the_kubelets_answer_is_decoded_and_the_reservations_devices_picked():
    pods = parse_list_response(ANSWER)
    assert [(p.namespace, p.name) for p in pods] == [("hold", "dlsched-hold-n1-0"), ("hold", "dlsched-hold-n1-1"),
                                                     ("default", "theirs"), ("hold", "no-gpu")]
    assert pods[2].devices == {"nvidia.com/gpu": ("GPU-ccc", "GPU-ddd"), "example.com/nic": ("nic-0",)}
    assert reservation_devices(pods, "hold") == {"dlsched-hold-n1-0": ("GPU-aaa",), "dlsched-hold-n1-1": ("GPU-bbb",)}
    assert parse_list_response(b"") == []
    for bad in (ANSWER[:-3], b"\x0a\x05ab", b"\x0b", b"\x00\x01"):   # cut, short, a group, field 0
        with pytest.raises(WireError):
            parse_list_response(bad)


def test_visible_devices_are_the_uuids_only_when_each_gpu_was_read_back():
    devices = {"dlsched-hold-n1-0": ("GPU-aaa",), "dlsched-hold-n1-1": ("GPU-bbb",), "dlsched-hold-n1-2": ("x", "y")}
    assert visible_devices("n1", [1, 0], devices) == ("GPU-bbb,GPU-aaa", [])
    assert visible_devices("n1", [0, 3], devices) == ("0,3", [3])          # GPU 3 not read back
    assert visible_devices("n1", [2], devices) == ("2", [2])               # two IDs for one GPU: not trusted
    assert visible_devices("n1", [0, 1], {"dlsched-hold-n1-0": ("G",), "dlsched-hold-n1-1": ("G",)}) == ("0,1", [0, 1])


def test_the_agent_posts_the_reservations_devices():
    devices = read_devices("hold", "/nope.sock", read=lambda sock: parse_list_response(ANSWER))
    body = Reading("n1", [], {}, None, devices).body()
    assert body["devices"] == {"dlsched-hold-n1-0": ["GPU-aaa"], "dlsched-hold-n1-1": ["GPU-bbb"]}
    assert "devices" not in Reading("n1", [], {}).body()                   # no read-back asked: no key


def _shared(gb) -> None:
    """Another scheduler's device-plugin pod holds a GPU on n1."""
    gb.bridge.on_node = {"n1": {"x": {"metadata": {"name": "theirs"}, "spec": {"containers": [
        {"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}


def test_on_a_shared_node_the_bind_waits_for_the_read_back_then_writes_the_uuids(monkeypatch):
    gb, api, core = _binding()
    _shared(gb)
    _seen(core, "a")
    gb.record_devices("n1", {"dlsched-hold-n1-0": ["GPU-aaa"]})   # the agent reports on n1; GPU 1 not yet held
    why = gb.before_binding("ns", "a", "a", "n1", [0, 1])
    assert why.startswith("waiting for the node agent's read-back") and "GPU(s) 1 on n1" in why
    assert ("create pod", "dlsched-hold-n1-1") in api.calls and not [c for c in api.calls if c[0] == "create configmap"]
    del core.jobs["a"]                                            # the bind failed: the kernel holds nothing
    assert gb.keep() == 0                                         # its reservations are kept for the retry
    gb.record_devices("n1", {"dlsched-hold-n1-0": ["GPU-aaa"], "dlsched-hold-n1-1": ["GPU-bbb"], "other": ["z"]})
    _seen(core, "a")
    assert gb.before_binding("ns", "a", "a", "n1", [0, 1]) == ""
    assert api.calls[-1] == ("create configmap", "cm-a", "GPU-aaa,GPU-bbb")
    state = gb.state()
    assert state["identity_verified_binds"] == 1 and state["identity_unverified_nodes"] == {}
    assert state["readback_waits"] == 1 and gb.devices["n1"] == {"dlsched-hold-n1-0": ("GPU-aaa",),
                                                                  "dlsched-hold-n1-1": ("GPU-bbb",)}
    # a reservation deleted and made again may get another device: what was read back for it is dropped
    del core.jobs["a"]
    assert gb.keep() == 2 and gb.devices["n1"] == {}


def test_without_a_read_back_or_past_the_wait_the_indices_are_written_and_said_unverified(monkeypatch):
    gb, api, core = _binding()
    _shared(gb)
    _seen(core, "a")
    assert gb.before_binding("ns", "a", "a", "n1", [0]) == ""     # no agent reports on n1: as before
    assert api.calls[-1] == ("create configmap", "cm-a", "0") and gb.state()["identity_unverified_nodes"] == {"n1": 1}
    gb.record_devices("n1", {})
    _seen(core, "b")
    clock = SimpleNamespace(t=100.0)
    monkeypatch.setattr(binding_mod.time, "monotonic", lambda: clock.t)
    assert gb.before_binding("ns", "b", "b", "n1", [1]).startswith("waiting")
    clock.t += binding_mod.READBACK_WAIT_S
    assert gb.before_binding("ns", "b", "b", "n1", [1]) == ""     # waited long enough: bound with the index
    assert api.calls[-1] == ("create configmap", "cm-b", "1") and gb.state()["readback_timeouts"] == 1


def test_the_observations_endpoint_hands_the_read_back_to_the_gpu_binding():
    import json

    pytest.importorskip("fastapi")
    from support.live_app import LiveApp
    from test_service_safety_api import TOKEN, make, raw_post

    from dlsched.service.app import build_app

    service, _ = make()
    body = {"node": "n1", "devices": {"dlsched-hold-n1-0": ["GPU-aaa"]}}
    with LiveApp(build_app(service)) as live:
        status, out = raw_post(live.url + "/api/v1/observations", json.dumps(body).encode(), TOKEN)
        assert status == 200 and out["devices_recorded"] == "ignored: not --gpu-binding envvar-configmap", out
        gb, _, _ = _binding()
        service.gpu_binding = gb
        status, out = raw_post(live.url + "/api/v1/observations", json.dumps(body).encode(), TOKEN)
        assert status == 200 and out["devices_recorded"] == 1, out
    assert gb.devices == {"n1": {"dlsched-hold-n1-0": ("GPU-aaa",)}}
