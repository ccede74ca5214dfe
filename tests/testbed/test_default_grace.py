"""The real controller with its DEFAULT flags (v1.20.2: grace 40 s; since 1.32: 50 s; monitor period
5 s, startup grace 60 s), on a small control plane of its own, against what nodewatch predicts with no settings
given (the grace chosen from ``/version``).

- Ready -> Unknown: nodewatch's window "lease seen + grace .. + one monitor pass" against the real
  ``lastTransitionTime``.
- A node registered with no conditions and no Lease: the controller leaves it without a Ready
  condition for the startup grace, then writes Ready=Unknown ``NodeStatusNeverUpdated``.
"""

from __future__ import annotations

import threading
import time

import pytest
from campaign import LATENCY, SAMPLE, TRUNC, parse_time, ready_condition, taints_of

from nodewatch.core.rules import NodeState, unknown_due
from nodewatch.core.settings import Settings
from nodewatch.sources.live import LiveSource
from nodewatch.testbed import processes
from nodewatch.testbed.controlplane import down, up
from nodewatch.testbed.kubelets import TestbedFleet

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(900)]

GRACE_BY_MINOR = ((32, 50.0), (0, 40.0))
"""The controller's default --node-monitor-grace-period: 50 s since 1.32 (KEP-4568), 40 s before;
``test_live_on_testbed`` reads it from the controller's own --help."""


def default_grace(version: str) -> float:
    minor = int(version.split(".")[1])
    return next(g for since, g in GRACE_BY_MINOR if minor >= since)


DEFAULT_MONITOR = 5.0
STARTUP_GRACE = 60.0
DOWN = (NodeState.UNKNOWN, NodeState.EVICTING)
NEVER = "never-posted"
ZONE = ("eu-central-1", "eu-central-1a")


class Run:
    """What nodewatch showed (sampled) and what the real objects said, for the two nodes."""

    def __init__(self) -> None:
        self.samples: dict[str, list[tuple[float, NodeState, float | None, str | None]]] = {}
        self.cut = ""
        self.cut_at = 0.0
        self.last_ack = 0.0
        self.never_created = 0.0
        self.real: dict[str, dict] = {}
        self.grace_in_use = 0.0
        self.settings_origin = ""
        self.running: list[str] = []
        self.kcm_log = ""
        self.version = ""
        self.default_grace = 0.0
        self.registered: float | None = None
        """When the node controller registered the cut node (its ``RegisteredNode`` event's time)."""


@pytest.fixture(scope="module")
def run(binaries, tmp_path_factory) -> Run:
    folder = tmp_path_factory.mktemp("testbed-defaults")
    tb = up(folder, binaries, progress=lambda line: print(f"testbed (defaults): {line}"))
    r = Run()
    r.version, r.default_grace = tb.version, default_grace(tb.version)
    admin = tb.admin()
    fleet = TestbedFleet(tb.admin(), layout=[ZONE] * 3, seed=3, pods_per_node=0, version=tb.version)
    src = None
    stop = threading.Event()
    try:
        # Registered with no status at all and no Lease: its startup grace runs from its creation.
        node = admin.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": NEVER, "labels": {"kubernetes.io/hostname": NEVER, "topology.kubernetes.io/region": ZONE[0],
                                      "topology.kubernetes.io/zone": ZONE[1]}}})
        r.never_created = parse_time(node["metadata"]["creationTimestamp"])
        fleet.setup()
        src = LiveSource(Settings(), kubeconfig=str(tb.viewer_kubeconfig), cert_cache_dir=str(folder / "certcache"))
        src.start()
        assert src.wait_synced(30)
        deadline = time.time() + 30
        while src.server_version is None and time.time() < deadline:
            time.sleep(0.1)

        def sample() -> None:
            while not stop.wait(SAMPLE):
                now = time.time()
                for v in src.state.evaluate(now).nodes:
                    r.samples.setdefault(v.name, []).append((now, v.state, v.lease_observed_at, v.ready))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        r.cut = fleet.node_order[0]
        cut = fleet.nodes[r.cut]
        fleet.renew_now(cut)
        r.last_ack = fleet.renewed_at[r.cut]
        fleet.stop_kubelet(cut)
        r.cut_at = time.time()
        # until both flipped (or long after they should have)
        end = max(r.cut_at + r.default_grace, r.never_created + STARTUP_GRACE) + DEFAULT_MONITOR + 15
        while time.time() < end:
            nodes = {o["metadata"]["name"]: o for o in admin.get("/api/v1/nodes")["items"]}
            if (all(ready_condition(nodes[n]).get("status") == "Unknown" for n in (r.cut, NEVER))
                    and taints_of(nodes[NEVER])):
                break
            time.sleep(0.5)
        time.sleep(TRUNC + LATENCY + 1.0)  # nodewatch's samples after the last change
        r.real = {o["metadata"]["name"]: o for o in admin.get("/api/v1/nodes")["items"]}
        times = [parse_time(e.get("lastTimestamp") or e.get("eventTime")) for e in admin.get("/api/v1/events")["items"]
                 if e.get("reason") == "RegisteredNode" and (e.get("involvedObject") or {}).get("name") == r.cut]
        r.registered = max((t for t in times if t is not None), default=None)
        r.grace_in_use = src.settings.grace
        r.settings_origin = src.settings.origin("grace_seconds")
    finally:
        stop.set()
        if src is not None:
            src.stop()
        fleet.stop()
        admin.close()
        r.running = processes.running(folder)
        r.kcm_log = (folder / "logs" / "kube-controller-manager.log").read_text(errors="replace")
        down(folder, progress=lambda line: print(f"testbed (defaults): {line}"))
    return r


def test_nodewatch_takes_the_default_grace_from_the_server(run: Run):
    assert run.grace_in_use == run.default_grace and run.settings_origin == f"server {run.version}"
    assert "kube-controller-manager" in run.running, run.kcm_log[-3000:].replace("\x00", "")


def test_the_flip_under_the_default_grace_lands_in_the_predicted_window(run: Run):
    rc = ready_condition(run.real[run.cut])
    assert rc["status"] == "Unknown" and rc.get("reason") == "NodeStatusUnknown"
    flipped = parse_time(rc["lastTransitionTime"])
    seen = [s for s in run.samples[run.cut] if run.cut_at <= s[0] < flipped and s[2] is not None]
    assert seen, "nodewatch showed the node before the flip"
    observed = seen[-1][2]
    assert abs(observed - run.last_ack) <= LATENCY  # the last renewal, as nodewatch received it
    # The controller's probe: the last renewal, or its first pass over the node when that came after
    # (the node is cut seconds after the fleet registers: that pass may fall after the renewal; its
    # RegisteredNode event has the second it ran in, which nodewatch counts from too)
    assert run.registered is not None
    probe = max(observed, run.registered)
    earliest, latest = unknown_due(probe, run.grace_in_use, DEFAULT_MONITOR)
    assert earliest - TRUNC - LATENCY <= flipped <= latest + TRUNC + LATENCY, (flipped - observed, run.registered - observed)
    # Overdue, not yet Unknown, from the grace until nodewatch sees the controller's flip. The
    # controller's probe is its first pass after the renewal, so that window lasts anywhere from
    # nothing to about a monitor period: it may fall between two samples, but no sample in it
    # shows anything else, and none outside it shows Overdue.
    samples = run.samples[run.cut]
    unknown_seen = next(s[0] for s in samples if s[0] >= run.cut_at and s[1] in DOWN)
    between = [(round(s[0] - earliest, 2), s[1]) for s in samples if earliest + 0.01 < s[0] < unknown_seen]
    assert all(state is NodeState.OVERDUE for _, state in between), between
    overdue = [s[0] for s in samples if s[1] is NodeState.OVERDUE]
    assert all(earliest - SAMPLE <= t <= latest + LATENCY for t in overdue), (earliest, latest, overdue)
    # then Unknown, and Evicting once the NoExecute taint comes (one pass later)
    after = [s[1] for s in run.samples[run.cut] if s[0] > flipped + TRUNC + LATENCY]
    assert after and set(after) <= {NodeState.UNKNOWN, NodeState.EVICTING}, set(after)
    print(f"default grace: lease seen at +0.0s; Unknown written at +{flipped - observed:.1f}s "
          f"(predicted +{earliest - observed:.1f}s .. +{latest - observed:.1f}s); {len(between)} samples Overdue")


def test_a_node_that_never_posted_status_becomes_unknown_after_the_startup_grace(run: Run):
    rc = ready_condition(run.real[NEVER])
    assert rc["status"] == "Unknown" and rc["reason"] == "NodeStatusNeverUpdated"
    assert rc["message"] == "Kubelet never posted node status."
    flipped = parse_time(rc["lastTransitionTime"])
    assert run.never_created + STARTUP_GRACE - TRUNC <= flipped <= run.never_created + STARTUP_GRACE + DEFAULT_MONITOR + LATENCY
    assert ("node.kubernetes.io/unreachable", "NoSchedule") in {(t["key"], t["effect"]) for t in taints_of(run.real[NEVER])}
    after = {s[1] for s in run.samples[NEVER] if s[0] > flipped + TRUNC + LATENCY}
    assert after and after <= {NodeState.UNKNOWN, NodeState.EVICTING}, after  # NoExecute one pass later
    print(f"never posted: Ready=Unknown NodeStatusNeverUpdated at creation +{flipped - run.never_created:.1f}s; "
          f"taints {sorted((t['key'], t['effect']) for t in taints_of(run.real[NEVER]))}")


def test_a_node_that_never_posted_status_is_not_called_ready_before_the_controller_says_so(run: Run):
    flipped = parse_time(ready_condition(run.real[NEVER])["lastTransitionTime"])
    before = [s for s in run.samples[NEVER] if s[0] < flipped]
    assert before
    assert all(s[1] is not NodeState.READY for s in before), {s[1] for s in before}
