"""Device identity on shared nodes: which physical GPU each reservation pod really got.

Where pods of other schedulers also hold GPUs through the device plugin, the plugin (not dlsched's
index) picks the device a reservation pod receives. The kubelet says which one: its PodResources
API (``/var/lib/kubelet/pod-resources/kubelet.sock``, gRPC ``v1.PodResourcesLister/List``) lists
every pod's containers with the device IDs allocated to them; for the NVIDIA device plugin those
IDs are the GPUs' UUIDs, which ``NVIDIA_VISIBLE_DEVICES`` accepts. The node agent reads it
(:func:`read_kubelet`, needs ``grpcio``) and posts each reservation pod's IDs; at bind dlsched
then writes the UUIDs its chosen GPUs' reservations hold (:func:`visible_devices`).

The answer is decoded from protobuf's wire format here (``parse_list_response``; the messages'
field numbers are those of ``k8s.io/kubelet/pkg/apis/podresources/v1/api.proto``), so that neither
generated code nor ``protobuf`` is a dependency:

    ListPodResourcesResponse { repeated PodResources pod_resources = 1; }
    PodResources { string name = 1; string namespace = 2; repeated ContainerResources containers = 3; }
    ContainerResources { string name = 1; repeated ContainerDevices devices = 2; ... }
    ContainerDevices { string resource_name = 1; repeated string device_ids = 2; ... }
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from dlsched.service.gpu_binding.mutation import GPU_RESOURCE
from dlsched.service.gpu_binding.reservations import reservation_name

KUBELET_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
LIST_METHOD = "/v1.PodResourcesLister/List"


class WireError(ValueError):
    """Bytes that are not a well-formed protobuf message (the message says where)."""


@dataclass(frozen=True)
class PodDevices:
    """One pod of the kubelet's answer: the device IDs per resource, over all its containers."""

    namespace: str
    name: str
    devices: dict[str, tuple[str, ...]]


def _varint(b: bytes, i: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        if i >= len(b):
            raise WireError(f"varint cut at byte {i}")
        c = b[i]
        i += 1
        out |= (c & 0x7F) << shift
        if not c & 0x80:
            return out, i
        shift += 7
        if shift > 63:
            raise WireError(f"varint longer than 10 bytes at byte {i}")


def fields(b: bytes) -> Iterator[tuple[int, int | bytes]]:
    """``(field number, value)`` of a message: ints for varint/fixed fields, bytes for the
    length-delimited ones (strings, sub-messages, packed lists)."""
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise WireError(f"field number 0 at byte {i}")
        if wire == 0:
            value, i = _varint(b, i)
            yield number, value
        elif wire == 2:
            size, i = _varint(b, i)
            if i + size > len(b):
                raise WireError(f"field {number}: {size} bytes announced, {len(b) - i} left")
            yield number, b[i:i + size]
            i += size
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            if i + width > len(b):
                raise WireError(f"field {number}: fixed value cut")
            yield number, int.from_bytes(b[i:i + width], "little")
            i += width
        else:
            raise WireError(f"field {number}: wire type {wire} is not supported (groups)")


def _text(v: int | bytes, what: str) -> str:
    if not isinstance(v, bytes):
        raise WireError(f"{what} is not a string")
    try:
        return v.decode()
    except UnicodeDecodeError:
        raise WireError(f"{what} is not UTF-8") from None


def parse_list_response(raw: bytes) -> list[PodDevices]:
    """The pods of a ``ListPodResourcesResponse`` (module doc). Raises :class:`WireError`."""
    out = []
    for number, pod in fields(raw):
        if number != 1 or not isinstance(pod, bytes):
            continue
        name = namespace = ""
        devices: dict[str, list[str]] = {}
        for f, v in fields(pod):
            if f == 1:
                name = _text(v, "PodResources.name")
            elif f == 2:
                namespace = _text(v, "PodResources.namespace")
            elif f == 3 and isinstance(v, bytes):
                for cf, cv in fields(v):
                    if cf != 2 or not isinstance(cv, bytes):
                        continue
                    resource, ids = "", []
                    for df, dv in fields(cv):
                        if df == 1:
                            resource = _text(dv, "ContainerDevices.resource_name")
                        elif df == 2:
                            ids.append(_text(dv, "ContainerDevices.device_ids"))
                    devices.setdefault(resource, []).extend(ids)
        out.append(PodDevices(namespace, name, {r: tuple(ids) for r, ids in devices.items()}))
    return out


def reservation_devices(pods: list[PodDevices], namespace: str) -> dict[str, tuple[str, ...]]:
    """Reservation pod name -> the ``nvidia.com/gpu`` device IDs the kubelet gave it, for the
    pods of ``namespace`` (dlsched's reservation namespace) that hold any."""
    return {p.name: p.devices[GPU_RESOURCE] for p in pods
            if p.namespace == namespace and p.devices.get(GPU_RESOURCE)}


def visible_devices(node: str, gpus: list[int], devices: dict[str, tuple[str, ...]]) -> tuple[str, list[int]]:
    """``NVIDIA_VISIBLE_DEVICES`` for a pod given ``gpus`` on ``node``, and the GPUs whose device
    is not known: the IDs the GPUs' reservation pods hold, when each holds exactly one (then
    ``[]``); else the indices as before, with the GPUs that lack a single read-back ID."""
    ids, unknown = [], []
    for g in gpus:
        held = devices.get(reservation_name(node, g), ())
        if len(held) == 1:
            ids.append(held[0])
        else:
            unknown.append(g)
    if unknown or len(set(ids)) != len(ids):
        return ",".join(str(g) for g in gpus), unknown or list(gpus)
    return ",".join(ids), []


def read_kubelet(socket: str = KUBELET_SOCKET, timeout: float = 5.0) -> list[PodDevices]:
    """The kubelet's ``List`` answer over its unix socket (gRPC, ``grpcio`` needed). Raises
    RuntimeError with one line saying why (no grpcio, no socket, an RPC error)."""
    try:
        import grpc
    except ImportError:
        raise RuntimeError("reading the kubelet's PodResources API needs grpcio (pip install grpcio)") from None
    channel = grpc.insecure_channel(f"unix://{socket}")
    try:
        call = channel.unary_unary(LIST_METHOD, request_serializer=lambda _: b"",
                                   response_deserializer=lambda raw: raw)
        raw = call(None, timeout=timeout)
    except grpc.RpcError as exc:
        raise RuntimeError(f"PodResources List on {socket}: {exc.code()} {exc.details()}") from None
    finally:
        channel.close()
    return parse_list_response(raw)
