"""The page, end to end with the real programs: a ``nodewatch hub`` process watching the simulated
API server (its fleet running at wall speed), scraped by a real Prometheus (Debian's) loading the
shipped rules, alerting through a real Alertmanager to a webhook in this test. A kubelet stops; the
webhook must receive ``NodewatchNodeLeaseOverdue`` within grace + 60 s of the node's last renewal.

Beside it, kubernetes-mixin's ``KubeNodeNotReady`` (``for: 15m`` on kube-state-metrics' Ready
condition) is evaluated by ``promtool test rules`` on the same node's Ready series, as
kube-state-metrics would have exported it (the flip time taken from this run), at kube-prometheus'
30 s scrapes: silent one scrape before it fires.

Short intervals (1 s scrapes and evaluations, no group wait) keep it near the grace period: about
70 s. Every process is on loopback, started and stopped by the test. The same on the testbed's
real control plane: tests/testbed/test_metrics_on_testbed.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from support.metrics_support import HAVE_ALL, mixin_page, prometheus_and_alertmanager, series_count
from support.simserver import free_port, running_server, wait_until

pytestmark = pytest.mark.skipif(not HAVE_ALL, reason="needs Debian's prometheus and prometheus-alertmanager packages")


def test_a_stopped_kubelet_pages_through_prometheus_and_alertmanager(tmp_path):
    from nodewatch.sim.fleet import SimFleet

    fleet = SimFleet(nodes=6, scenario="steady", seed=3, start=time.time())
    victim = fleet.node_order[2]
    renewals: list[float] = []
    flips: list[float] = []

    def sink(resource: str, etype: str, obj: dict, t: float) -> None:
        name = (obj.get("metadata") or {}).get("name")
        if name != victim:
            return
        if resource == "leases":
            renewals.append(time.time())  # the API server has the renewal now (wall clock)
        elif resource == "nodes" and not flips:
            ready = [c for c in (obj.get("status") or {}).get("conditions") or () if c.get("type") == "Ready"]
            if ready and ready[0].get("status") == "Unknown":
                flips.append(time.time())

    fleet.subscribe(sink)
    metrics_port = free_port()
    with running_server(tmp_path, fleet=fleet, run_fleet=True, speed=1.0) as srv, \
            prometheus_and_alertmanager(tmp_path, metrics_port) as (hook, prom_port):
        hub = subprocess.Popen(
            [sys.executable, "-m", "nodewatch", "hub", "--kubeconfig", str(srv.kubeconfig_path), "--dir",
             str(tmp_path / "hub"), "--no-record", "--cert-cache-dir", str(tmp_path / "certs"),
             "--metrics", f"127.0.0.1:{metrics_port}"],
            stdout=open(tmp_path / "hub.log", "wb"), stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            wait_until(lambda: series_count(prom_port, 'nodewatch_node_state{state="Ready"}') == 6, timeout=60,
                       interval=0.5)
            assert hook.received == [], "nothing pages while every node renews"
            with fleet.lock:
                fleet.stop_kubelet(fleet.node(victim))
            grace = 50.0  # v1.33 (the simulated API server's version)
            wait_until(lambda: hook.first("NodewatchNodeLeaseOverdue", victim) is not None, timeout=grace + 90,
                       interval=0.2)
            paged = hook.first("NodewatchNodeLeaseOverdue", victim)
            last = renewals[-1]
            wait_until(lambda: flips, timeout=30, interval=0.2)
        finally:
            hub.terminate()
            hub.wait(10)
    latency, flip = paged - last, flips[0] - last
    assert grace < latency <= grace + 60, latency  # not before the grace: the lease was on time till then
    mixin = mixin_page(tmp_path, flip)
    line = (f"stopped kubelet (simulated API server): paged {latency:.1f}s after the last renewal (Ready flipped "
            f"at {flip:.1f}s); kubernetes-mixin KubeNodeNotReady fires at {mixin / 60:.1f} min "
            f"(+30s group_wait: {(mixin + 30) / 60:.1f} min)")
    print(line)
    assert mixin > 15 * 60 > latency


def test_without_prometheus_the_pusher_pages_and_resolves_through_a_real_alertmanager(tmp_path):
    """``--alertmanager``: the same alert straight from nodewatch to a real Alertmanager, fired
    when the lease passes the grace (15 s here, the controller and nodewatch told alike), resolved
    once the kubelet is back and renews; startsAt on nodewatch's clock."""
    from nodewatch.core.settings import Settings
    from nodewatch.metrics.alertmanager import AlertPusher
    from nodewatch.metrics.sample import take_sample
    from nodewatch.sim.fleet import SimFleet
    from nodewatch.sources.live import LiveSource
    from support.metrics_support import alertmanager_only

    settings = Settings().override(grace_seconds=15.0)
    fleet = SimFleet(nodes=4, scenario="steady", seed=5, start=time.time(), settings=settings)
    victim = fleet.node_order[1]
    with running_server(tmp_path, fleet=fleet, run_fleet=True, speed=1.0) as srv, \
            alertmanager_only(tmp_path) as (hook, am_url):
        src = LiveSource(settings, kubeconfig=str(srv.kubeconfig_path), cert_cache_dir=str(tmp_path / "c"))
        src.start()
        pusher = AlertPusher(am_url, lambda: take_sample(src, nodes="not-ready"), interval=0.5, resend=5.0)
        try:
            assert src.wait_synced(20)
            pusher.start()
            with fleet.lock:
                node = fleet.node(victim)
                fleet.stop_kubelet(node)
            stopped = time.time()
            wait_until(lambda: hook.first("NodewatchNodeLeaseOverdue", victim) is not None, timeout=60, interval=0.2)
            paged = hook.first("NodewatchNodeLeaseOverdue", victim)
            with fleet.lock:
                fleet.start_kubelet(node)
            wait_until(lambda: hook.first("NodewatchNodeLeaseOverdue", victim, status="resolved") is not None,
                       timeout=60, interval=0.2)
        finally:
            pusher.stop()
            src.stop()
    assert pusher.errors == 0, pusher.last_error
    assert paged - stopped <= 15.0 + 10.0 + 5.0  # grace after the last renewal, which was < 10 s before the stop
    fired = next(a for _, m in hook.received for a in m["alerts"]
                 if a["labels"]["alertname"] == "NodewatchNodeLeaseOverdue" and a["status"] == "firing")
    assert fired["labels"]["severity"] == "critical" and "past the grace" in fired["annotations"]["summary"]
    from datetime import datetime

    starts = datetime.fromisoformat(fired["startsAt"].replace("Z", "+00:00")).timestamp()
    assert stopped < starts <= paged + 1.0  # nodewatch's clock (the wall clock of a live source)
