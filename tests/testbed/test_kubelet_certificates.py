"""A kubelet's client certificates as the real approver and signer issue them, and what nodewatch
learns of them from the CSRs (``nodewatch.testbed.tls_bootstrap``).

Found reading the approver (``pkg/controller/certificates/approver/sarapprove.go``): a kubelet's
first CSR is created with its bootstrap credential, so the API server writes that credential's user
into ``spec.username`` (``system:bootstrap:<token id>`` with kubeadm; a service account's on
OpenShift); only rotations are created by ``system:node:<name>``. nodewatch took the node from
``spec.username`` and so never learned a node's first certificate, the one it uses for most of a
year. The node is the issued certificate's subject.
"""

from __future__ import annotations

import pytest
from campaign import watching
from cryptography.hazmat.primitives.asymmetric import ec

from nodewatch.core.certs import certificate_facts
from nodewatch.sources.live import LiveSource
from nodewatch.testbed.api import Client
from nodewatch.testbed.tls_bootstrap import allow_bootstrap, request_client_cert, write_identity
from support.simserver import wait_until

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]


def _learned(src: LiveSource, node: str) -> float | None:
    cert = src.state.snapshot().certs.get(node)
    return cert.not_after if cert is not None else None


def test_a_bootstrapped_kubelets_certificate_and_its_rotation_are_the_nodes(testbed, tmp_path):
    admin = testbed.admin()
    token = allow_bootstrap(admin)
    node = "tls-bootstrap-0"
    ca = str(testbed.pki.ca_cert)
    with watching(testbed, "certs") as src:
        first_key = ec.generate_private_key(ec.SECP256R1())
        boot = request_client_cert(Client(testbed.server, token, ca), node, first_key)
        # the real API server's and controllers' objects: asked for by the token, issued to the node
        assert boot.csr["spec"]["username"].startswith("system:bootstrap:"), boot.csr["spec"]
        approved = [c for c in boot.csr["status"]["conditions"] if c["type"] == "Approved"]
        assert approved and "Auto approving kubelet client certificate" in approved[0]["message"]
        boot_after, subject = certificate_facts(boot.cert_pem)
        assert subject == f"system:node:{node}"
        wait_until(lambda: _learned(src, node) == boot_after, timeout=30, interval=0.2)

        # the rotation: asked for by the node itself, with the certificate it was given
        own = Client(testbed.server, None, ca, client_cert=write_identity(tmp_path, node, first_key, boot.cert_pem))
        rotated = request_client_cert(own, node, ec.generate_private_key(ec.SECP256R1()))
        assert rotated.csr["spec"]["username"] == f"system:node:{node}", rotated.csr["spec"]
        rotated_after, _ = certificate_facts(rotated.cert_pem)
        assert rotated_after >= boot_after
        wait_until(lambda: _learned(src, node) == rotated_after, timeout=30, interval=0.2)
    admin.close()
