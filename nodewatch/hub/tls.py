"""TCP with TLS and a token: the hub's identity and the viewer's credentials, generated once.

Like the simulated API server's kubeconfig: a private CA (``sim/pki.py``) signs the hub's serving
certificate for the address it listens on; the token is random. Both live in the hub's private
directory and are reused on restart, so viewers configured once keep working:

- ``DIR/tls/ca.pem`` (give it to viewers), ``DIR/tls/ca-key.pem``, ``DIR/tls/hub.pem``,
  ``DIR/tls/hub-key.pem``
- ``DIR/token`` (give it to viewers, like a password)
- ``DIR/viewer.json``: ``{"address", "ca", "token_file"}``, what ``attach DIR/viewer.json`` reads.

The token is compared in constant time; the Unix socket needs none (its permissions decide).
"""

from __future__ import annotations

import ipaddress
import json
import secrets
import ssl
import time
from pathlib import Path

from ..sim import pki
from .paths import ensure_private_dir, write_private

TOKEN_FILE = "token"
VIEWER_CONFIG = "viewer.json"


def load_or_create(directory: Path, host: str, port: int) -> tuple[ssl.SSLContext, str]:
    """The server TLS context and the token, created on first use (and the certificate reissued
    when the host changes or it nears expiry)."""
    tls = ensure_private_dir(directory / "tls")
    ca_file, ca_key = tls / "ca.pem", tls / "ca-key.pem"
    if ca_file.exists() and ca_key.exists():
        ca = pki.CA.from_pem(ca_file.read_bytes(), ca_key.read_bytes())
    else:
        ca = pki.make_ca("nodewatch hub CA")
        write_private(ca_key, ca.key_pem)
        write_private(ca_file, ca.cert_pem)
    cert_file, key_file, host_file = tls / "hub.pem", tls / "hub-key.pem", tls / "hub.host"
    if not (cert_file.exists() and key_file.exists() and host_file.exists()
            and host_file.read_text() == host and not _expiring(cert_file)):
        key = pki.derive_key()
        now = time.time()
        dns, ips = _names(host)
        cert = pki.issue_cert(ca, key.public_key(), "nodewatch-hub", not_before=now - 300,
                              not_after=now + 825 * 86400, client=False, server=True,
                              dns_names=dns, ip_addresses=ips)
        write_private(key_file, pki.key_pem(key))
        write_private(cert_file, pki.cert_pem(cert) + ca.cert_pem)
        write_private(host_file, host.encode())
    token_file = directory / TOKEN_FILE
    if not token_file.exists():
        write_private(token_file, ("nwhub-" + secrets.token_urlsafe(32)).encode())
    token = token_file.read_text().strip()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(cert_file), str(key_file))
    return ctx, token


def write_viewer_config(directory: Path, host: str, port: int) -> Path:
    """``DIR/viewer.json``: what a viewer needs (copy it with ``ca.pem`` and ``token``)."""
    shown = f"[{host}]" if ":" in host else host
    cfg = {"address": f"https://{shown}:{port}", "ca": str(directory / "tls" / "ca.pem"),
           "token_file": str(directory / TOKEN_FILE)}
    path = directory / VIEWER_CONFIG
    write_private(path, json.dumps(cfg, indent=2).encode() + b"\n")
    return path


def _names(host: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    import socket

    dns, ips = ["localhost", socket.gethostname()], ["127.0.0.1", "::1"]
    try:
        ipaddress.ip_address(host)
        if host not in ips:
            ips.append(host)
    except ValueError:
        if host not in dns:
            dns.append(host)
    return tuple(dns), tuple(ips)


def _expiring(cert_file: Path) -> bool:
    from cryptography import x509

    try:
        cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
    except ValueError:
        return True
    return cert.not_valid_after_utc.timestamp() - time.time() < 30 * 86400
