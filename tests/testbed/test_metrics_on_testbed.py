"""The page on the testbed's real control plane: simulated kubelets on a real kube-apiserver and
kube-controller-manager v1.20.2 (grace shortened to 20 s, as for the whole tier), a ``nodewatch
hub`` process watching it through the shipped RBAC with ``--metrics``, a real Prometheus with the
shipped rules and a real Alertmanager routing to a webhook in the test. One kubelet stops right
after a renewal; the webhook must have ``NodewatchNodeLeaseOverdue`` within grace + 60 s of that
renewal, and the real controller's Ready flip is read back for kubernetes-mixin's rule (promtool,
``for: 15m`` on the Ready condition at 30 s scrapes).

Its nodes are in a zone of their own (ap-south-1a), without pods, and deleted afterwards: the
agreement campaign sharing this control plane never sees them.
"""

from __future__ import annotations

import calendar
import os
import subprocess
import sys
import time

import pytest
from campaign import GRACE, TOLERATION, ready_condition, zone_of_its_own

from support.metrics_support import HAVE_ALL, mixin_page, prometheus_and_alertmanager, series_count
from support.simserver import free_port, wait_until

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(600),
              pytest.mark.skipif(not HAVE_ALL, reason="needs Debian's prometheus and prometheus-alertmanager")]


def _ready(admin, name: str) -> dict:
    return ready_condition(admin.get(f"/api/v1/nodes/{name}"))


def test_a_stopped_kubelet_on_the_testbed_pages(testbed, tmp_path):
    metrics_port = free_port()
    with zone_of_its_own(testbed, ("ap-south-1", "ap-south-1a"), 2, seed=24) as (admin, fleet):
        names = list(fleet.node_order)
        victim = names[0]
        fleet.setup()
        with prometheus_and_alertmanager(tmp_path, metrics_port) as (hook, prom_port):
            hub = subprocess.Popen(
                [sys.executable, "-m", "nodewatch", "hub", "--kubeconfig", str(testbed.viewer_kubeconfig),
                 "--dir", str(tmp_path / "hub"), "--no-record", "--cert-cache-dir", str(tmp_path / "certs"),
                 "--grace", f"{GRACE:g}", "--toleration", f"{TOLERATION:g}", "--metrics", f"127.0.0.1:{metrics_port}"],
                stdout=open(tmp_path / "hub.log", "wb"), stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"})
            try:
                mine = " or ".join(f'nodewatch_node_state{{state="Ready",node="{n}"}} == 1' for n in names)
                wait_until(lambda: series_count(prom_port, mine) == len(names), timeout=90, interval=0.5)
                assert hook.first("NodewatchNodeLeaseOverdue", victim) is None
                fleet.renew_now(fleet.nodes[victim])
                fleet.stop_kubelet(fleet.nodes[victim])
                last = fleet.renewed_at[victim]
                wait_until(lambda: hook.first("NodewatchNodeLeaseOverdue", victim) is not None,
                           timeout=GRACE + 90, interval=0.2)
                paged = hook.first("NodewatchNodeLeaseOverdue", victim)
                wait_until(lambda: _ready(admin, victim)["status"] == "Unknown", timeout=60, interval=0.5)
                flip = calendar.timegm(time.strptime(_ready(admin, victim)["lastTransitionTime"],
                                                     "%Y-%m-%dT%H:%M:%SZ"))
            finally:
                hub.terminate()
                hub.wait(10)
    latency = paged - last
    assert GRACE < latency <= GRACE + 60, latency
    mixin = mixin_page(tmp_path, max(0.0, flip - last))
    print(f"stopped kubelet (testbed v1.20.2, grace {GRACE:g}s): paged {latency:.1f}s after the last renewal "
          f"(the real controller flipped Ready at {flip - last:.0f}s, whole seconds); kubernetes-mixin "
          f"KubeNodeNotReady fires at {mixin / 60:.1f} min")
    assert mixin > 15 * 60 > latency
