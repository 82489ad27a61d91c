"""The webhook's TLS: a self-signed CA and a server certificate made at start-up with the
``openssl`` command (no Python crypto library is a dependency), or the operator's files.

The API server verifies the webhook against the ``caBundle`` of the registration, and Go's TLS
needs the address it dials in the certificate's subjectAltName (IP or DNS name).
"""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class WebhookTls:
    cert: Path        # the server certificate (PEM)
    key: Path         # its private key (PEM)
    ca_pem: bytes     # what the registration's caBundle holds


def _san(host: str) -> str:
    try:
        ipaddress.ip_address(host)
        return f"IP:{host}"
    except ValueError:
        return f"DNS:{host}"


def make_self_signed(hosts: list[str], workdir: Path | None = None) -> WebhookTls:
    """A CA and a server certificate for ``hosts`` (valid a year); RuntimeError naming the step
    when openssl is missing or fails."""
    if shutil.which("openssl") is None:
        raise RuntimeError("--gpu-binding envvar-configmap: the openssl command is needed to make the webhook's "
                           "certificate (or give --webhook-cert, --webhook-key and --webhook-ca)")
    work = workdir or Path(tempfile.mkdtemp(prefix="dlsched-webhook-"))
    ca_key, ca_crt, key, csr, crt = (work / n for n in ("ca.key", "ca.crt", "tls.key", "tls.csr", "tls.crt"))
    ext = work / "san.ext"
    ext.write_text("subjectAltName=" + ",".join(_san(h) for h in hosts) + "\n")
    steps = [
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca_crt),
         "-days", "365", "-subj", "/CN=dlsched-webhook-ca"],
        ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
         "-subj", f"/CN={hosts[0]}"],
        ["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca_crt), "-CAkey", str(ca_key), "-CAcreateserial",
         "-out", str(crt), "-days", "365", "-extfile", str(ext)],
    ]
    for argv in steps:
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"openssl {argv[1]} failed making the webhook certificate: "
                               f"{(done.stderr or '').strip().splitlines()[-1:]}")
    key.chmod(0o600)
    return WebhookTls(crt, key, ca_crt.read_bytes())


def from_files(cert: Path, key: Path, ca: Path) -> WebhookTls:
    """The operator's certificate, key and CA (e.g. from cert-manager); ValueError naming the
    option of a file that is absent or not PEM."""
    for option, path in (("--webhook-cert", cert), ("--webhook-key", key), ("--webhook-ca", ca)):
        if not path.is_file():
            raise ValueError(f"{option}: {path} does not exist")
        if b"-----BEGIN " not in path.read_bytes()[:4096]:
            raise ValueError(f"{option}: {path} is not a PEM file")
    return WebhookTls(cert, key, ca.read_bytes())
