"""A kubelet's client certificate as a real kubelet gets it, from the real approver and signer.

Why: nodewatch reads each node's client certificate NotAfter from the CSRs the kubelets create.
The simulator's CSRs are its own idea of them; here the objects come from the control plane:

- **TLS bootstrap** (``request_client_cert`` with a bootstrap token, as kubeadm sets it up:
  ``allow_bootstrap``): the kubelet's first CSR is created with a bootstrap token, so its
  ``spec.username`` is ``system:bootstrap:<token id>``; kube-controller-manager's approver
  auto-approves it (the ``nodeclient`` permission of the ``system:bootstrappers`` group) and its
  signer issues a certificate whose subject is ``system:node:<name>``.
- **Rotation** (``request_client_cert`` with that certificate): the kubelet asks as itself
  (``spec.username`` ``system:node:<name>``, the ``selfnodeclient`` permission).

The request is what the kubelet sends (``sim.pki.make_csr_pem``: an ECDSA key, CN
``system:node:<name>``, O ``system:nodes``; usages digital signature, key encipherment and client
auth: v1.20's approver and signer accept exactly these, newer ones also the two without key
encipherment, which later kubelets send for an ECDSA key).
"""

from __future__ import annotations

import base64
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ec

from ..core.rules import KUBELET_CLIENT_SIGNER, NODE_USER_PREFIX
from ..sim import pki as sim_pki
from .api import Client

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
BOOTSTRAP_GROUP = "system:bootstrappers:kubeadm:default-node-token"
BINDINGS = {
    # kubeadm's: bootstrap tokens may create CSRs and have their node client CSRs auto-approved,
    # nodes have the renewal of their own auto-approved
    "nodewatch-testbed:node-bootstrapper": ("system:node-bootstrapper", "system:bootstrappers"),
    "nodewatch-testbed:node-autoapprove-bootstrap": (
        "system:certificates.k8s.io:certificatesigningrequests:nodeclient", "system:bootstrappers"),
    "nodewatch-testbed:node-autoapprove-certificate-rotation": (
        "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"),
}


def allow_bootstrap(admin: Client) -> str:
    """A bootstrap token (``<id>.<secret>``) and the bindings kubeadm makes for it. Needs the API
    server's ``--enable-bootstrap-token-auth`` (the testbed's always has it)."""
    token_id, secret = secrets.token_hex(3), secrets.token_hex(8)
    admin.create("/api/v1/namespaces/kube-system/secrets", {
        "apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
        "metadata": {"name": f"bootstrap-token-{token_id}", "namespace": "kube-system"},
        "stringData": {"token-id": token_id, "token-secret": secret, "usage-bootstrap-authentication": "true",
                       "auth-extra-groups": BOOTSTRAP_GROUP},
    })
    for name, (role, group) in BINDINGS.items():
        admin.create_or_get("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}],
        })
    return f"{token_id}.{secret}"


@dataclass(frozen=True)
class Issued:
    csr: dict
    """The CSR as the API server has it once issued (``spec.username`` as it set it)."""
    cert_pem: bytes


def request_client_cert(client: Client, node: str, key: ec.EllipticCurvePrivateKey,
                        timeout: float = 60.0) -> Issued:
    """Create the kubelet's client CSR for ``node`` as ``client`` (a bootstrap token, or the node's
    own certificate) and wait until the controllers approve and sign it."""
    request = sim_pki.make_csr_pem(key, f"{NODE_USER_PREFIX}{node}", ("system:nodes",))
    created = client.create(CSRS, {
        "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"generateName": "csr-"},
        "spec": {"request": sim_pki.b64(request), "signerName": KUBELET_CLIENT_SIGNER,
                 "usages": ["digital signature", "key encipherment", "client auth"]},
    })
    name = created["metadata"]["name"]
    deadline = time.monotonic() + timeout
    while True:
        csr = client.get(f"{CSRS}/{name}")  # system:node-bootstrapper and system:node may read CSRs
        cert = (csr.get("status") or {}).get("certificate")
        if cert:
            return Issued(csr, base64.b64decode(cert))
        if time.monotonic() > deadline:
            raise TimeoutError(f"CSR {name} for {node} was not issued within {timeout:.0f}s: {csr.get('status')}")
        time.sleep(0.2)


def write_identity(folder: Path, node: str, key: ec.EllipticCurvePrivateKey, cert_pem: bytes) -> tuple[str, str]:
    """The node's certificate and key as files (what ``Client(client_cert=...)`` reads)."""
    folder.mkdir(parents=True, exist_ok=True)
    cert_file, key_file = folder / f"{node}.crt", folder / f"{node}.key"
    cert_file.write_bytes(cert_pem)
    key_file.write_bytes(sim_pki.key_pem(key))
    key_file.chmod(0o600)
    return str(cert_file), str(key_file)
