"""nodewatch's live path on the real API server: the grace default from /version, and RBAC.

``viewer.kubeconfig`` is bound to exactly the roles of ``deploy/kubernetes/rbac.yaml``: every stream nodewatch
opens works with it, and nothing it could write is allowed.
"""

from __future__ import annotations

import pytest

from nodewatch.core.settings import Settings
from nodewatch.sources.live import LiveSource
from nodewatch.testbed.api import ApiStatus
from support.simserver import wait_until

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(900)]


def _live(testbed, settings: Settings) -> LiveSource:
    src = LiveSource(settings, kubeconfig=str(testbed.viewer_kubeconfig),
                     cert_cache_dir=str(testbed.dir / "certcache-live"))
    src.start()
    return src


def controller_default_grace(testbed) -> float:
    """The real controller manager's own default ``--node-monitor-grace-period`` (its ``--help``):
    40 s up to 1.31, 50 s since."""
    import json
    import re
    import subprocess

    argv0 = json.loads((testbed.dir / "pids.json").read_text())["kube-controller-manager"]["argv0"]
    out = subprocess.run([argv0, "--help"], capture_output=True, text=True, timeout=60).stdout
    m = re.search(r"--node-monitor-grace-period duration.*?\(default (\d+)s\)", out, re.S)
    assert m, "the controller manager's --help names no --node-monitor-grace-period default"
    return float(m.group(1))


def _until(cond, timeout: float = 20.0) -> bool:
    """The suite's one poll (``simserver.wait_until``), with the testbed's longer default."""
    return bool(wait_until(cond, timeout))


def test_grace_default_comes_from_the_servers_version(testbed):
    src = _live(testbed, Settings())
    try:
        assert src.wait_synced(20)
        assert _until(lambda: src.server_version is not None)
        assert src.server_version == testbed.version
        real_default = controller_default_grace(testbed)
        assert src.settings.grace == real_default
        assert src.settings.origin("grace_seconds") == f"server {testbed.version}"
        assert src.state.settings.grace == real_default
    finally:
        src.stop()


def test_viewer_streams_are_all_allowed(testbed):
    src = _live(testbed, Settings())
    try:
        assert src.wait_synced(20)
        src.focus_node("no-such-node")  # opens the node-scoped pod and event watches too
        assert _until(lambda: {"nodes", "leases", "certificatesigningrequests", "pods", "events"}
                      <= {r for r, h in src.state.health.items() if h.synced})
        assert not any(h.forbidden for h in src.state.health.values())
    finally:
        src.stop()


@pytest.mark.parametrize("method,path,body", [
    ("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}),
    ("DELETE", "/api/v1/nodes/anything", None),
    ("PATCH", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/anything", {"spec": {}}),
    ("GET", "/api/v1/namespaces/kube-system/secrets", None),
])
def test_viewer_may_not_write_or_read_secrets(testbed, method, path, body):
    viewer = testbed.viewer()
    try:
        with pytest.raises(ApiStatus) as err:
            viewer.request(method, path, body, content_type="application/merge-patch+json")
        assert err.value.status == 403
    finally:
        viewer.close()
