"""The out-of-service taint on a fenced node, against the real PodGC of each release.

nodewatch's advice for StatefulSet pods on a node that stopped reporting (``core/fencing.py``) names
this taint only where it frees the pods: PodGC deletes the terminating pods of a node that is not
Ready and carries it from 1.26 (``gcTerminating``); before, they stay Terminating.
"""

from __future__ import annotations

import time

import pytest
from campaign import GRACE, MONITOR, ready_condition, watching, zone_of_its_own

from nodewatch.core.fencing import OUT_OF_SERVICE_TAINT, out_of_service_deletes_pods
from nodewatch.testbed.api import ApiStatus
from nodewatch.testbed.kubelets import start_fleet
from support.simserver import wait_until

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]

PODGC_PERIOD = 20.0
"""PodGC's pass (``gcCheckPeriod``, the same on every release)."""


def _pod(admin, namespace: str, name: str) -> dict | None:
    try:
        return admin.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    except ApiStatus as exc:
        if exc.status == 404:
            return None
        raise


def test_the_out_of_service_taint_frees_a_fenced_nodes_pods_only_where_nodewatch_says_so(testbed):
    with zone_of_its_own(testbed, ("ap-east-1", "ap-east-1c"), 1, seed=61) as (admin, fleet):
        (node,) = fleet.node_order
        fleet.add_pod(node, "db-0", namespace="fencing")
        start_fleet(fleet, "steady")
        wait_until(lambda: (_pod(admin, "fencing", "db-0") or {}).get("status", {}).get("phase") == "Running",
                   timeout=30, interval=0.5)
        fleet.stop_kubelet(fleet.nodes[node])  # fenced: nothing on the node will ever answer again
        wait_until(lambda: ready_condition(admin.get(f"/api/v1/nodes/{node}")).get("status") == "Unknown",
                   timeout=GRACE + 4 * MONITOR + 10, interval=0.5)
        admin.delete("/api/v1/namespaces/fencing/pods/db-0")  # as the taint manager would: Terminating for good
        assert (_pod(admin, "fencing", "db-0") or {}).get("metadata", {}).get("deletionTimestamp")
        taints = admin.get(f"/api/v1/nodes/{node}")["spec"].get("taints") or []
        admin.patch(f"/api/v1/nodes/{node}", {"spec": {"taints": [
            *taints, {"key": OUT_OF_SERVICE_TAINT, "value": "nodeshutdown", "effect": "NoExecute"}]}})
        tainted = time.time()
        deleted = False
        while time.time() < tainted + 2 * PODGC_PERIOD + 10:  # a negative needs two passes of PodGC at least
            if _pod(admin, "fencing", "db-0") is None:
                deleted = True
                break
            time.sleep(1.0)
        assert deleted == out_of_service_deletes_pods(testbed.version), (testbed.version, deleted)

        with watching(testbed, "certs-fencing") as src:
            # the advice a drill-down gives is the one of the release the API server says it is
            assert src.state.node_details(node, time.time()).server_version == testbed.version
