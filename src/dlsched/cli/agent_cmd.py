"""``dlsched agent``: the node agent (NVML, or a seeded fake) posting readings to the service."""

from __future__ import annotations

import json
import socket
import time

import typer

from dlsched.cli.common import clear_errors, console


def register(app: typer.Typer) -> None:
    @app.command("agent")
    def agent(
        service: str = typer.Option("http://127.0.0.1:8888", help="URL of `dlsched serve`"),
        token: str | None = typer.Option(None, envvar="DLSCHED_TOKEN", help="operator API bearer token"),
        node: str | None = typer.Option(None, envvar="NODE_NAME", help="this node's Kubernetes name "
                                           "(default: the host name)"),
        fake_gpus: int = typer.Option(0, min=0, max=64, help="model N fake GPUs instead of reading NVML"),
        seed: int = typer.Option(0, help="seed of the fake GPUs' utilisation model"),
        fake_memory_mib: float = typer.Option(32768.0, min=1.0, help="memory of each fake GPU (MiB)"),
        interval: float = typer.Option(10.0, min=0.0, help="seconds between rounds"),
        rounds: int = typer.Option(0, min=0, help="stop after this many rounds (0: run until stopped)"),
        once_json: bool = typer.Option(False, "--print-reading", help="print each reading as JSON, post nothing"),
        reservation_namespace: str = typer.Option("", help="the service's --reservation-namespace: read back, from "
                                                  "the kubelet's PodResources API, the devices its reservation pods "
                                                  "got (--gpu-binding envvar-configmap; needs grpcio)"),
        pod_resources_socket: str = typer.Option("/var/lib/kubelet/pod-resources/kubelet.sock",
                                                 help="the kubelet's PodResources socket"),
    ) -> None:
        """Report this node's GPUs (inventory, memory, topology, per-pod use) to the service."""
        from dlsched.service.agent import FakeSource, NvmlSource, placed_on, post, read_devices

        with clear_errors():
            if not service.startswith(("http://", "https://")):
                raise ValueError(f"--service {service}: must be an http:// or https:// URL")
            if not token and not once_json:
                raise ValueError("--token (or DLSCHED_TOKEN) is required to post readings")
            source = FakeSource(fake_gpus, seed, fake_memory_mib) if fake_gpus else NvmlSource()
        name = node or socket.gethostname()
        done = 0
        while True:
            with clear_errors():
                try:
                    placed = {} if once_json else placed_on(service, name)
                    reading = source.read(name, placed)
                    if reservation_namespace:
                        try:
                            reading.devices = read_devices(reservation_namespace, pod_resources_socket)
                        except RuntimeError as exc:   # the reading still goes; the read-back is said to be missing
                            console.print(f"warning: no device read-back this round: {exc}", soft_wrap=True,
                                          highlight=False)
                    if once_json:
                        console.print(json.dumps(reading.body()), soft_wrap=True, highlight=False)
                    else:
                        answer = post(service, token or "", reading)
                        console.print(f"{name}: {len(reading.pods)} pods reported: {answer}", soft_wrap=True,
                                      highlight=False)
                except OSError as exc:
                    raise RuntimeError(f"--service {service}: {exc}") from None
            done += 1
            if rounds and done >= rounds:
                return
            time.sleep(interval)
