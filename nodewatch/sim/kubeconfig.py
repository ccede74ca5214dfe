"""The simulated API server's identity: a CA, a server certificate, a bearer token and a kubeconfig.

The kubeconfig written next to a running server is all a client needs (server URL, CA data, token).
The CA key lives in a side file (``<kubeconfig>.ca-key.pem``, mode 0600) so a server started again
with the same kubeconfig path reuses CA, key and token: to its clients it is the same cluster, which
is what reconnect tests need.
"""

from __future__ import annotations

import base64
import datetime as dt
import os
import secrets
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from . import pki

CLUSTER_NAME = "nodewatch-sim"


@dataclass
class ServerIdentity:
    """CA (cert + key), a server certificate signed by it, and the bearer token."""

    ca_cert_pem: bytes
    ca_key_pem: bytes
    server_cert_pem: bytes
    server_key_pem: bytes
    token: str

    def ssl_context(self) -> ssl.SSLContext:
        """Server-side TLS context with the server certificate (files are needed by the ssl module;
        they are written to a private temporary directory and removed at once)."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_alpn_protocols(["http/1.1"])
        with tempfile.TemporaryDirectory(prefix="nodewatch-sim-") as tmp:
            cert = Path(tmp, "server.crt")
            key = Path(tmp, "server.key")
            cert.write_bytes(self.server_cert_pem + self.ca_cert_pem)
            key.touch(mode=0o600)
            key.write_bytes(self.server_key_pem)
            ctx.load_cert_chain(str(cert), str(key))
        return ctx


def make_server_cert(ca_cert_pem: bytes, ca_key_pem: bytes, now: dt.datetime | None = None) -> tuple[bytes, bytes]:
    """A server certificate for 127.0.0.1, ::1 and localhost, signed by the CA: (cert, key) PEM."""
    t = (now or dt.datetime.now(dt.timezone.utc)).timestamp()
    ca = pki.CA.from_pem(ca_cert_pem, ca_key_pem)
    key = pki.derive_key()
    cert = pki.issue_cert(ca, key.public_key(), "kube-apiserver", not_before=t - 300, not_after=t + 365 * 86400,
                          client=False, server=True, dns_names=("localhost", "kubernetes", "kubernetes.default"),
                          ip_addresses=("127.0.0.1", "::1"))
    return pki.cert_pem(cert), pki.key_pem(key)


def new_token() -> str:
    return "nwsim-" + secrets.token_urlsafe(32)


def ca_key_path(kubeconfig_path: str | os.PathLike) -> Path:
    return Path(str(kubeconfig_path) + ".ca-key.pem")


@dataclass
class ExistingConfig:
    """What a previous server left in its kubeconfig (None fields when absent)."""

    server: str | None
    ca_cert_pem: bytes | None
    ca_key_pem: bytes | None
    token: str | None

    @property
    def port(self) -> int | None:
        if not self.server:
            return None
        try:
            return int(self.server.rsplit(":", 1)[1].split("/")[0])
        except (IndexError, ValueError):
            return None


def read_existing(kubeconfig_path: str | os.PathLike) -> ExistingConfig:
    """Read server, CA and token back from a kubeconfig this module wrote (and the CA key side file)."""
    path = Path(kubeconfig_path)
    empty = ExistingConfig(None, None, None, None)
    if not path.is_file():
        return empty
    try:
        cfg = yaml.safe_load(path.read_text()) or {}
        cluster = next(c["cluster"] for c in cfg.get("clusters", []) if c.get("name") == CLUSTER_NAME)
        user = next(u["user"] for u in cfg.get("users", []) if u.get("name") == CLUSTER_NAME)
    except (OSError, yaml.YAMLError, StopIteration, KeyError, TypeError, AttributeError):
        return empty
    ca_data = cluster.get("certificate-authority-data")
    key_file = ca_key_path(path)
    return ExistingConfig(
        server=cluster.get("server"),
        ca_cert_pem=base64.b64decode(ca_data) if ca_data else None,
        ca_key_pem=key_file.read_bytes() if key_file.is_file() else None,
        token=user.get("token"),
    )


def load_or_create_identity(kubeconfig_path: str | os.PathLike | None) -> ServerIdentity:
    """Reuse CA, CA key and token from an existing kubeconfig (+ side file), else make new ones.
    A fresh server certificate is signed by the (reused) CA every time."""
    existing = read_existing(kubeconfig_path) if kubeconfig_path else ExistingConfig(None, None, None, None)
    if existing.ca_cert_pem and existing.ca_key_pem:
        ca_cert, ca_key = existing.ca_cert_pem, existing.ca_key_pem
    else:
        ca = pki.make_ca("nodewatch-sim-ca")
        ca_cert, ca_key = ca.cert_pem, ca.key_pem
    cert, key = make_server_cert(ca_cert, ca_key)
    return ServerIdentity(ca_cert, ca_key, cert, key, existing.token or new_token())


def kubeconfig_dict(server_url: str, ca_cert_pem: bytes | None, token: str, namespace: str = "default") -> dict:
    cluster: dict = {"server": server_url}
    if ca_cert_pem is not None and server_url.startswith("https://"):
        cluster["certificate-authority-data"] = base64.b64encode(ca_cert_pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CLUSTER_NAME, "cluster": cluster}],
        "users": [{"name": CLUSTER_NAME, "user": {"token": token}}],
        "contexts": [
            {"name": CLUSTER_NAME, "context": {"cluster": CLUSTER_NAME, "user": CLUSTER_NAME, "namespace": namespace}}
        ],
        "current-context": CLUSTER_NAME,
        "preferences": {},
    }


def _write_private(path: Path, data: bytes) -> None:
    """Write atomically with mode 0600 (the file holds a token or a key)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def write_kubeconfig(
    path: str | os.PathLike, server_url: str, identity: ServerIdentity, token: str | None = None
) -> Path:
    """Write the kubeconfig (and the CA key side file) for this server; returns the path."""
    path = Path(path)
    cfg = kubeconfig_dict(server_url, identity.ca_cert_pem, token or identity.token)
    _write_private(path, yaml.safe_dump(cfg, sort_keys=False).encode())
    _write_private(ca_key_path(path), identity.ca_key_pem)
    return path
