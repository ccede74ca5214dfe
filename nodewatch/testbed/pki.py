"""Fresh PKI and credentials for one testbed: a CA, serving certificates, keys and two tokens.

The certificates come from the simulated cluster's PKI helpers (``nodewatch.sim.pki``: EC P-256,
fast to generate); everything here is the testbed's own layout: which certificate has which
names, and the static token file that gives the kubelets an admin identity and nodewatch a
read-only one.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from ..sim.pki import CA, cert_pem, issue_cert, key_pem, make_ca

ADMIN_USER = "nodewatch-testbed-admin"
VIEWER_USER = "nodewatch-viewer"
"""The user nodewatch runs as: bound to exactly the roles in ``deploy/kubernetes/rbac.yaml``."""
NODE_GROUP = "system:nodes"
"""A kubelet's group: the Node authorizer and NodeRestriction judge the user ``system:node:NAME`` in it."""
SERVICE_CIDR = "10.0.0.0/24"
APISERVER_SANS_DNS = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                      "kubernetes.default.svc.cluster.local")
APISERVER_SANS_IP = ("127.0.0.1", "10.0.0.1")
LIFETIME = 365 * 86400.0


@dataclass(frozen=True)
class Pki:
    """Paths of everything the control plane is started with, and the two bearer tokens."""

    dir: Path
    admin_token: str
    viewer_token: str

    @property
    def ca_cert(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.dir / "ca.key"

    @property
    def apiserver_cert(self) -> Path:
        return self.dir / "apiserver.crt"

    @property
    def apiserver_key(self) -> Path:
        return self.dir / "apiserver.key"

    @property
    def controller_manager_cert(self) -> Path:
        return self.dir / "controller-manager.crt"

    @property
    def controller_manager_key(self) -> Path:
        return self.dir / "controller-manager.key"

    @property
    def service_account_key(self) -> Path:
        return self.dir / "sa.key"

    @property
    def service_account_pub(self) -> Path:
        return self.dir / "sa.pub"

    @property
    def tokens(self) -> Path:
        return self.dir / "tokens.csv"


def _write_secret(path: Path, data: bytes) -> None:
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_bytes(data)


def create(folder: Path, now: float | None = None) -> Pki:
    """Write a new CA, the serving certificates, the service-account key pair and the token file."""
    folder.mkdir(parents=True, exist_ok=True)
    t = time.time() if now is None else now
    ca = make_ca("nodewatch-testbed-ca", now=t)
    pki = Pki(dir=folder, admin_token=secrets.token_hex(24), viewer_token=secrets.token_hex(24))
    pki.ca_cert.write_bytes(ca.cert_pem)
    _write_secret(pki.ca_key, ca.key_pem)
    for cert_path, key_path, name, dns, ips in (
        (pki.apiserver_cert, pki.apiserver_key, "kube-apiserver", APISERVER_SANS_DNS, APISERVER_SANS_IP),
        (pki.controller_manager_cert, pki.controller_manager_key, "kube-controller-manager",
         ("localhost",), ("127.0.0.1",)),
    ):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = issue_cert(ca, key.public_key(), name, not_before=t - 3600, not_after=t + LIFETIME,
                          client=False, server=True, dns_names=dns, ip_addresses=ips)
        cert_path.write_bytes(cert_pem(cert))
        _write_secret(key_path, key_pem(key))
    sa = ec.generate_private_key(ec.SECP256R1())
    _write_secret(pki.service_account_key, key_pem(sa))
    pki.service_account_pub.write_bytes(sa.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    _write_secret(pki.tokens, (
        f'{pki.admin_token},{ADMIN_USER},{ADMIN_USER}-uid,"system:masters"\n'
        f"{pki.viewer_token},{VIEWER_USER},{VIEWER_USER}-uid\n").encode())
    return pki


def load(folder: Path) -> Pki:
    """The PKI of a testbed that is up (tokens read back from its token file)."""
    rows = [line.split(",") for line in (folder / "tokens.csv").read_text().splitlines() if line.strip()]
    by_user = {r[1]: r[0] for r in rows}
    return Pki(dir=folder, admin_token=by_user[ADMIN_USER], viewer_token=by_user[VIEWER_USER])


def node_credentials(pki: Pki, node: str, now: float | None = None) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM) of a kubelet's client identity ``system:node:NODE`` in ``system:nodes``,
    signed by the testbed's CA, as a kubelet's TLS bootstrap would get it."""
    t = time.time() if now is None else now
    ca = CA.from_pem(pki.ca_cert.read_bytes(), pki.ca_key.read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    cert = issue_cert(ca, key.public_key(), f"system:node:{node}", organizations=(NODE_GROUP,),
                      not_before=t - 3600, not_after=t + LIFETIME, client=True, server=False)
    return cert_pem(cert), key_pem(key)
