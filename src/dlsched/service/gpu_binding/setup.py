"""``serve --gpu-binding``: the options checked, and the webhook, its registration and the
:class:`GpuBinding` attached to a service before it starts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

MODES = ("annotation", "envvar-configmap")


@dataclass(frozen=True)
class GpuBindingOptions:
    mode: str = "annotation"
    webhook_host: str = "127.0.0.1"   # the address the webhook listens on
    webhook_port: int = 8443
    webhook_url: str = ""             # what the API server calls (default https://HOST:PORT/mutate)
    register: bool = True             # create/replace the MutatingWebhookConfiguration at start
    cert: Path | None = None
    key: Path | None = None
    ca: Path | None = None
    namespace: str = "dlsched"        # where reservation pods live
    image: str = "registry.k8s.io/pause:3.9"

    def check(self, service_mode: str) -> None:
        """ValueError naming the option for a combination that cannot work."""
        if self.mode not in MODES:
            raise ValueError(f"--gpu-binding: {self.mode!r} is none of {', '.join(MODES)}")
        if self.mode == "annotation":
            return
        if service_mode != "scheduler":
            raise ValueError("--gpu-binding envvar-configmap needs --mode scheduler: as an extender, kube-scheduler "
                             "calls dlsched only for pods that still request nvidia.com/gpu, which the webhook removes")
        files = [p for p in (self.cert, self.key, self.ca) if p is not None]
        if files and len(files) != 3:
            raise ValueError("--webhook-cert, --webhook-key and --webhook-ca go together (or none: a self-signed "
                             "CA is made at start-up)")
        if self.webhook_url and not self.webhook_url.startswith("https://"):
            raise ValueError(f"--webhook-url: {self.webhook_url!r} must be an https:// URL (the API server calls "
                             "webhooks over TLS only)")
        if not self.namespace or len(self.namespace) > 63:
            raise ValueError(f"--reservation-namespace: {self.namespace!r} is not a namespace name")


def attach(service, api, options: GpuBindingOptions) -> None:
    """Serve the webhook, register it, and bind through :class:`GpuBinding` (before ``service.start``)."""
    from urllib.parse import urlparse

    from dlsched.service.gpu_binding.binding import GpuBinding
    from dlsched.service.gpu_binding.certs import from_files, make_self_signed
    from dlsched.service.gpu_binding.webhook import WebhookServer, register, registration

    bridge = service.bridge
    nodes = getattr(bridge, "nodes", {})
    binding = GpuBinding(bridge, service.core, nodes.get, options.namespace, service.scheduler_name, options.image)
    host = urlparse(options.webhook_url).hostname if options.webhook_url else options.webhook_host
    if options.cert is not None:
        tls = from_files(options.cert, options.key, options.ca)
    else:
        tls = make_self_signed([host or options.webhook_host])
    try:
        server = WebhookServer(options.webhook_host, options.webhook_port, tls, service.scheduler_name)
    except OSError as exc:
        raise ValueError(f"--webhook-port {options.webhook_port}: cannot listen on "
                         f"{options.webhook_host}: {exc.strerror or exc}") from None
    server.start()
    binding.webhook = server
    if options.register:
        url = options.webhook_url or f"https://{options.webhook_host}:{server.port}/mutate"
        try:
            binding.registration = register(api.api_client, registration(url, tls.ca_pem))
        except Exception as exc:  # noqa: BLE001 - RBAC, the API server away: one line, not a traceback
            server.stop()
            raise RuntimeError(f"cannot register the GPU-binding webhook: {str(exc).splitlines()[0][:300]}") from None
    bridge.gpu_binding = binding
    service.gpu_binding = binding
    service.config["gpu_binding"] = {"mode": options.mode, "reservation_namespace": options.namespace,
                                     "webhook_port": server.port}
