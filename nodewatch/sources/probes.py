"""Opt-in extra certificate sources: a TLS handshake to each kubelet, and kubelet /metrics.

Both are off by default. The TLS probe (``--probe-kubelet-tls``) connects to each node's kubelet
endpoint (``status.daemonEndpoints.kubeletEndpoint.Port``, usually 10250) and reads the *serving*
certificate's NotAfter; it sends no request and needs no permission, only a network path to the
nodes. ``--kubelet-metrics`` reads ``kubelet_certificate_manager_client_ttl_seconds`` through the
API server's node proxy, which needs the powerful ``nodes/proxy`` permission: use it only when
asked.
"""

from __future__ import annotations

import re
import socket
import ssl
import time
from typing import Any

from ..core.certs import certificate_not_after
from .kubeconfig import ApiError, Connection

_TTL = re.compile(rb"^kubelet_certificate_manager_client_ttl_seconds(?:\{[^}]*\})?\s+([0-9.eE+-]+)\s*$", re.M)


def node_address(node: Any) -> str | None:
    """The node's InternalIP (else the first address) from a NodeRecord."""
    addrs = getattr(node, "addresses", ()) or ()
    for kind, addr in addrs:
        if kind == "InternalIP" and addr:
            return addr
    return addrs[0][1] if addrs and addrs[0][1] else None


def kubelet_serving_not_after(host: str, port: int = 10250, timeout: float = 3.0) -> float | None:
    """NotAfter of the certificate the kubelet presents; None when unreachable or unreadable.

    Verification is off on purpose: the point is to read the certificate, even an expired or
    self-signed one; nothing is sent over this connection.
    """
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            with ctx.wrap_socket(sock, server_hostname=host) as tls:
                der = tls.getpeercert(binary_form=True)
    except (OSError, ssl.SSLError, ValueError):
        return None
    if not der:
        return None
    pem = ssl.DER_cert_to_PEM_cert(der)
    return certificate_not_after(pem)


def kubelet_client_not_after(conn: Connection, node: str, now: float | None = None) -> float | None:
    """NotAfter of the kubelet's client certificate from its /metrics (via the node proxy)."""
    try:
        resp = conn.get(f"/api/v1/nodes/{node}/proxy/metrics", timeout=(5.0, 10.0))
    except ApiError:
        return None
    try:
        body = resp.read(8 * 1024 * 1024)
    except Exception:  # noqa: BLE001
        return None
    finally:
        resp.release_conn()
    m = _TTL.search(body)
    if not m:
        return None
    try:
        ttl = float(m.group(1))
    except ValueError:
        return None
    return (now if now is not None else time.time()) + ttl
