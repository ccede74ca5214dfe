"""One agreement campaign on a real control plane: scenarios in separate zones, run at once.

nodewatch (a LiveSource on ``viewer.kubeconfig``, through real HTTP and the shipped RBAC) watches
while simulated kubelets make things go wrong, one scenario per zone so that they do not
interfere; a sampler records what nodewatch *predicted* every ``SAMPLE`` seconds. Afterwards the
real controllers' output is read back from the API objects (Ready ``lastTransitionTime``, taint
``timeAdded``, pod ``deletionTimestamp``), and the tests compare the two.

Then every kubelet is cut off at once: all zones in FullDisruption, the real controller's
"master disruption" mode, which nodewatch calls "all zones down: evictions stopped".

Controller flags are shortened (grace 20 s, default tolerations 30 s) so that the whole campaign
takes about three minutes; the monitor period stays at its 5 s default.
"""

from __future__ import annotations

import calendar
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime

import pytest

from nodewatch.core.outlook import TaintWindow, outlook_in, window_in
from nodewatch.core.rules import NodeState, ZoneState
from nodewatch.core.settings import Settings, taint_queued_in_the_flip_pass
from nodewatch.sources.live import LiveSource
from nodewatch.testbed.api import Client
from nodewatch.testbed.kubelets import TestbedFleet

GRACE = 20.0
MONITOR = 5.0
TOLERATION = 30.0
OWN_TOLERATION = 10.0
EVICTION_RATE = 0.1
CONTROLLER_FLAGS = (f"--node-monitor-grace-period={GRACE:g}s", f"--node-monitor-period={MONITOR:g}s",
                    "--vmodule=node_lifecycle_controller=4")
"""The last flag logs each monitor pass's visit to every stale node ("node X hasn't been updated
for ..."), so a test can tell the controller's passes apart (``monitor_visits``, ``monitor_pass_of``)."""
APISERVER_FLAGS = (f"--default-not-ready-toleration-seconds={TOLERATION:g}",
                   f"--default-unreachable-toleration-seconds={TOLERATION:g}")
SAMPLE = 0.2
LATENCY = 2.0
"""Watch delivery, a loaded machine's scheduling and the 100 ms tainting pass, together."""
TRUNC = 1.0
"""metav1.Time has whole seconds: lastTransitionTime, timeAdded and deletionTimestamp are truncated."""

# zone -> (region, node count, what happens there)
ZONES = {
    "eu-west-1a": ("eu-west-1", 2, "kubelet stops on one node"),
    "eu-west-1b": ("eu-west-1", 2, "container runtime down on one node (Ready=False); the other's clock 95 s behind"),
    "eu-west-1c": ("eu-west-1", 4, "three of four nodes cut off at once (PartialDisruption)"),
    "us-east-1a": ("us-east-1", 3, "the whole zone cut off (FullDisruption)"),
    "us-east-1b": ("us-east-1", 2, "Ready: one node under memory and PID pressure and cordoned, the other's clock 40 s ahead"),
}
DURATION = 95.0
MASTER_DURATION = 45.0


@contextmanager
def zone_of_its_own(tb, zone: tuple[str, str], nodes: int, seed: int) -> Iterator[tuple[Client, TestbedFleet]]:
    """(an admin client, a fleet of ``nodes`` nodes without pods in ``zone``, not set up yet) for a
    test beside the campaign on the same control plane; afterwards its kubelets stop and its nodes
    are deleted (best effort: in a zone of their own they are no one else's)."""
    admin = tb.admin()
    fleet = TestbedFleet(tb.admin(), layout=[zone] * nodes, seed=seed, pods_per_node=0)
    try:
        yield admin, fleet
    finally:
        fleet.stop()
        for n in fleet.node_order:
            try:
                admin.delete(f"/api/v1/nodes/{n}")
            except Exception:  # noqa: BLE001 - best effort: a zone of its own either way
                pass
        admin.close()


@contextmanager
def watching(tb, folder: str, **settings: float) -> Iterator[LiveSource]:
    """nodewatch's live source on the testbed (through ``viewer.kubeconfig``), judged with the tier's
    controller flags (grace, monitor period; ``settings`` overrides more), listed, stopped after."""
    judged = Settings().override(grace_seconds=GRACE, monitor_period_seconds=MONITOR, **settings)
    src = LiveSource(judged, kubeconfig=str(tb.viewer_kubeconfig), cert_cache_dir=str(tb.dir / folder))
    src.start()
    try:
        assert src.wait_synced(30)
        yield src
    finally:
        src.stop()


def parse_time(s: str | None) -> float | None:
    if not s:
        return None
    return float(calendar.timegm(datetime.strptime(s[:19], "%Y-%m-%dT%H:%M:%S").timetuple()))


@dataclass
class NodeSample:
    t: float
    state: NodeState
    observed: float | None
    eviction_at: float | None
    taints: frozenset[tuple[str, str]]
    outlook: str | None = None
    """What nodewatch said of the coming NoExecute taint (``core.outlook``), when it said anything."""
    window: TaintWindow | None = None
    """When it said the taint would come, by the zone's queue."""


@dataclass
class Observed:
    """What nodewatch said over time (samples) and what the real objects say (read at the end)."""

    start: float = 0.0
    master_start: float = 0.0
    nodes: dict[str, list[NodeSample]] = field(default_factory=dict)
    zones: list[tuple[float, dict[str, tuple[ZoneState, float]], bool]] = field(default_factory=list)
    pods: dict[tuple[str, str], list[tuple[float, float | None, bool]]] = field(default_factory=dict)
    """(namespace, name) -> [(t, predicted eviction time, terminating)]"""
    real_nodes: dict[str, dict] = field(default_factory=dict)
    real_nodes_before_master: dict[str, dict] = field(default_factory=dict)
    real_pods: dict[tuple[str, str], dict] = field(default_factory=dict)
    real_pods_before_master: dict[tuple[str, str], dict] = field(default_factory=dict)
    pod_node: dict[tuple[str, str], str] = field(default_factory=dict)
    last_ack: dict[str, float] = field(default_factory=dict)
    """Wall time of each cut-off node's last acknowledged renewal."""
    posted: list[tuple[float, str, str, str]] = field(default_factory=list)
    roles: dict[str, str] = field(default_factory=dict)
    zone_of: dict[str, str] = field(default_factory=dict)
    server_version: str | None = None
    testbed_version: str = ""
    """The release the control plane was built as (``Testbed.version``)."""
    grace_in_use: float = 0.0
    errors: list[str] = field(default_factory=list)
    kcm_log: str = ""
    oneshot: dict = field(default_factory=dict)
    """``nodewatch status`` run once mid-campaign: its JSON, exit code, when, and the real nodes then."""
    events: list[dict] = field(default_factory=list)
    """The agreement namespace's events at the end (the taint manager's evictions among them)."""
    taints_seen: dict[str, set[tuple[str, str, float | None]]] = field(default_factory=dict)
    """Each node's taints as nodewatch had them right after ``real_nodes_before_master`` was read."""
    kubelet_write_times: list[tuple[float, dict[str, list[str]]]] = field(default_factory=list)
    """(when, node -> the Lease's managedFields times of the manager ``kubelet``), read twice."""


def ready_condition(node: dict) -> dict:
    for c in node.get("status", {}).get("conditions", []) or []:
        if c.get("type") == "Ready":
            return c
    return {}


def taints_of(node: dict) -> list[dict]:
    return list(node.get("spec", {}).get("taints", []) or [])


def run_campaign(tb, log=print) -> Observed:  # a controlplane.Testbed
    admin: Client = tb.admin()
    layout = [(region, zone) for zone, (region, n, _) in ZONES.items() for _ in range(n)]
    fleet = TestbedFleet(tb.admin(), layout=layout, seed=7, pods_per_node=3, version=tb.version, progress=log)
    by_zone: dict[str, list[str]] = {}
    for name in fleet.node_order:
        by_zone.setdefault(fleet.nodes[name].zone, []).append(name)
    obs = Observed(testbed_version=tb.version)
    obs.zone_of = {n: fleet.nodes[n].zone for n in fleet.node_order}
    a0, _a1 = by_zone["eu-west-1a"]
    b0, b1 = by_zone["eu-west-1b"]
    c_cut = by_zone["eu-west-1c"][:3]
    d_all = by_zone["us-east-1a"]
    e0, e1 = by_zone["us-east-1b"]
    fleet.nodes[b1].clock_offset = -95.0
    fleet.nodes[e1].clock_offset = 40.0
    obs.roles = {a0: "kubelet-stop", b0: "runtime-down", b1: "clock -95s", e1: "clock +40s", e0: "pressure",
                 **{n: "zone-partial" for n in c_cut}, **{n: "zone-full" for n in d_all}}
    # Pods whose eviction time the test chooses: their own 10 s toleration, and the 30 s default.
    for n in [a0, b0, *c_cut, *d_all]:
        fleet.add_pod(n, f"own-{n}", namespace="agreement", toleration_seconds=OWN_TOLERATION)
        fleet.add_pod(n, f"dflt-{n}", namespace="agreement", toleration_seconds=None)
    fleet.setup()
    obs.pod_node = {k: p.node for k, p in fleet.pods.items()}

    settings = Settings().override(grace_seconds=GRACE, toleration_seconds=TOLERATION,
                                   monitor_period_seconds=MONITOR)
    src = LiveSource(settings, kubeconfig=str(tb.viewer_kubeconfig), cert_cache_dir=str(tb.dir / "certcache"))
    src.start()
    stop = threading.Event()
    try:
        if not src.wait_synced(30):
            raise AssertionError("nodewatch did not list nodes and leases from the real API server")
        _wait_all_ready(src, fleet.node_order)
        sampler = threading.Thread(target=_sample, args=(src, obs, stop), daemon=True)
        sampler.start()

        obs.start = time.time()
        # Cut-offs right after a renewal, so nodes of one zone flip in one monitor pass.
        for n in [a0, *c_cut, *d_all]:
            fleet.renew_now(fleet.nodes[n])
        for n in c_cut + d_all:
            fleet.disconnect(fleet.nodes[n])
        fleet.stop_kubelet(fleet.nodes[a0])
        fleet.set_runtime_down(fleet.nodes[b0], True)
        for kind in ("memory", "pid"):  # reported at its next status sync: the controller's NoSchedule taints
            fleet.set_pressure(fleet.nodes[e0], kind)
        fleet.cordon(fleet.nodes[e0])
        for n in [a0, *c_cut, *d_all]:
            obs.last_ack[n] = fleet.renewed_at[n]
        log(f"scenarios started; observing for {DURATION:.0f}s")
        oneshot = threading.Thread(target=_status_once, args=(tb, obs, log), daemon=True)
        oneshot.start()
        time.sleep(max(0.0, obs.start + DURATION - time.time()))
        oneshot.join(timeout=60)
        obs.kubelet_write_times.append((time.time(), _kubelet_write_times(admin)))
        obs.real_nodes_before_master = {o["metadata"]["name"]: o for o in admin.get("/api/v1/nodes")["items"]}
        obs.taints_seen = {v.name: {(t.key, t.effect, t.time_added) for t in v.taints}
                           for v in src.state.evaluate(time.time()).nodes}
        obs.real_pods_before_master = {(o["metadata"]["namespace"], o["metadata"]["name"]): o
                                       for o in admin.get("/api/v1/pods")["items"]}

        # Every kubelet cut off at once: all zones in FullDisruption.
        obs.master_start = time.time()
        for n in fleet.node_order:
            node = fleet.nodes[n]
            if node.can_talk(time.time()):
                fleet.renew_now(node)
                obs.last_ack[n] = fleet.renewed_at[n]
        for n in fleet.node_order:
            fleet.disconnect(fleet.nodes[n])
        log(f"every node cut off; observing for {MASTER_DURATION:.0f}s")
        time.sleep(max(0.0, obs.master_start + MASTER_DURATION - time.time()))
        obs.real_nodes = {o["metadata"]["name"]: o for o in admin.get("/api/v1/nodes")["items"]}
        obs.real_pods = {(o["metadata"]["namespace"], o["metadata"]["name"]): o
                         for o in admin.get("/api/v1/pods")["items"]}
        obs.events = admin.get("/api/v1/namespaces/agreement/events")["items"]
    finally:
        stop.set()
        obs.server_version = src.server_version
        obs.grace_in_use = src.settings.grace
        src.stop()
        fleet.stop()
        admin.close()
    obs.posted = list(fleet.posted)
    obs.errors = list(fleet.errors)
    obs.kcm_log = (tb.dir / "logs" / "kube-controller-manager.log").read_text(errors="replace")
    return obs


WRITE_TIMES_AT = 15.0
"""Every kubelet has renewed (every 10 s) since setup by then."""
ONESHOT_AT = 45.0
"""When ``nodewatch status`` runs: long after renewTime alone would call the clock-behind node
overdue, before the zone scenarios' evictions."""


def _status_once(tb, obs: Observed, log) -> None:
    """The one-shot answer, as a user runs it (lists, then at most one renewal interval of watch).
    Before it, once every kubelet has renewed, the first read of the kubelets' write times."""
    time.sleep(max(0.0, obs.start + WRITE_TIMES_AT - time.time()))
    admin = tb.admin()
    try:
        obs.kubelet_write_times.append((time.time(), _kubelet_write_times(admin)))
    finally:
        admin.close()
    time.sleep(max(0.0, obs.start + ONESHOT_AT - time.time()))
    started = time.time()
    r = subprocess.run([sys.executable, "-m", "nodewatch", "status", "--kubeconfig", str(tb.viewer_kubeconfig),
                        "--cert-cache-dir", str(tb.dir / "certcache-status"), "--format", "json",
                        "--grace", f"{GRACE:g}", "--toleration", f"{TOLERATION:g}", "--monitor-period", f"{MONITOR:g}"],
                       capture_output=True, text=True, timeout=60)
    admin = tb.admin()
    try:
        real = {o["metadata"]["name"]: o for o in admin.get("/api/v1/nodes")["items"]}
    finally:
        admin.close()
    obs.oneshot = {"started": started, "ended": time.time(), "rc": r.returncode, "stderr": r.stderr[-2000:],
                   "doc": json.loads(r.stdout) if r.stdout.strip().startswith("{") else None, "real_nodes": real}
    log(f"nodewatch status ran in {obs.oneshot['ended'] - started:.1f}s (exit {r.returncode})")


def _kubelet_write_times(admin: Client) -> dict[str, list[str]]:
    out = {}
    for le in admin.get("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases")["items"]:
        out[le["metadata"]["name"]] = [m.get("time", "") for m in le["metadata"].get("managedFields") or []
                                       if m.get("manager") == "kubelet" and m.get("operation") == "Update"]
    return out


def _wait_all_ready(src: LiveSource, names: list[str], timeout: float = 30.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        view = src.state.evaluate(time.time())
        states = {v.name: v.state for v in view.nodes}
        if all(states.get(n) is NodeState.READY for n in names):
            return
        time.sleep(0.2)
    raise AssertionError(f"nodewatch never saw every node Ready: {states}")


def _sample(src: LiveSource, obs: Observed, stop: threading.Event) -> None:
    while not stop.wait(SAMPLE):
        now = time.time()
        view = src.state.evaluate(now)
        for v in view.nodes:
            obs.nodes.setdefault(v.name, []).append(NodeSample(
                now, v.state, v.lease_observed_at, v.eviction_at, frozenset((t.key, t.effect) for t in v.taints),
                outlook_in(view, v), window_in(view, v)))
        obs.zones.append((now, {z.name: (z.state, z.taint_rate) for z in view.zones}, view.all_zones_full))
        for v in view.nodes:
            if v.state is NodeState.READY:
                continue
            for p in src.state.pods_on(v.name, now):
                obs.pods.setdefault((p.namespace, p.name), []).append((now, p.eviction_at, p.terminating))


# --- reading the campaign (shared by the tests and the agreement table) -----------------------------


def nodes_in_role(obs: Observed, *roles: str) -> list[str]:
    return sorted(n for n, r in obs.roles.items() if r in roles)


def first(samples, pred, after: float = 0.0):
    return next((s for s in samples if s.t >= after and pred(s)), None)


def noexecute(node: dict) -> list[dict]:
    return [t for t in taints_of(node) if t.get("effect") == "NoExecute"]


def kcm_lines(obs: Observed, pattern: str) -> list[tuple[float, str]]:
    """Lines of the controller manager's log matching ``pattern``, with their klog times (UTC)."""
    year = time.gmtime(obs.start).tm_year
    out = []
    for line in obs.kcm_log.splitlines():
        m = re.match(r"[IWE](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d+)", line)
        if m and re.search(pattern, line):
            mo, d, h, mi, s, frac = m.groups()
            t = calendar.timegm((year, int(mo), int(d), int(h), int(mi), int(s), 0, 0, 0)) + float("0." + frac)
            out.append((t, line.replace("\x00", "")))
    return out


STALE_VISIT = (r"node (?P<old>\S+) hasn't been updated for .* Last Ready is"
               r'|"Node hasn\'t been updated" node="(?P<new>[^"]+)".*nodeConditionType="Ready"')
"""The controller's log line for each stale node a monitor pass visits (node_lifecycle_controller.go,
shown by the ``--vmodule`` flag of ``CONTROLLER_FLAGS``): v1.20's printf line (V(4)), or the
structured line of current releases (V(2), one per condition type: the Ready one is taken)."""


def stale_node(line: str) -> str | None:
    m = re.search(STALE_VISIT, line)
    return None if m is None else (m.group("old") or m.group("new"))


def monitor_visits(obs: Observed, node: str) -> list[float]:
    """When the controller's monitor passes looked at ``node`` while its lease was past the grace,
    one time a pass; the first is the pass that flipped Ready to Unknown."""
    return [t for t, line in kcm_lines(obs, STALE_VISIT) if stale_node(line) == node]


ZONE_STATE = (r"Controller detected that zone (?P<old>\S+) is now in state (?P<olds>\w+)"
              r'|"Controller detected that zone is now in new state" zone="(?P<new>[^"]+)" newState="(?P<news>\w+)"')


def zone_decisions(obs: Observed, after: float = 0.0) -> dict[tuple[str, str], float]:
    """(zone as ``region::zone``, state) -> when the controller logged that it decided it. The zone key
    has a NUL between region and zone: raw in v1.20's line, ``\\x00`` in a structured one."""
    out: dict[tuple[str, str], float] = {}
    for t, line in kcm_lines(obs, ZONE_STATE):
        m = re.search(ZONE_STATE, line)
        if m is None or t <= after:
            continue
        zone = (m.group("old") or m.group("new")).replace("\\x00", "")
        out.setdefault((zone, m.group("olds") or m.group("news")), t)
    return out


def partial_zone_taints_until(obs: Observed, partial: float) -> float:
    """Until when a NoExecute taint may come in the small zone that became partial at ``partial``
    (nodewatch's call, or the last real Ready flip): then, up to 1.33 (the flip pass queues
    nothing); from 1.34 until the controller decided PartialDisruption at the end of the pass that
    flipped its nodes, since that pass queued them while the zone still had its normal rate, and
    the tainting loop (every 100 ms) adds them until the decision swaps the limiter (nodewatch's
    outlook says so for a monitor period after the flip: ``outlook.noexecute_outlook``). Seen on
    v1.37.2 under load: a taint 1-2 s after the last flip, before the decision."""
    if not taint_queued_in_the_flip_pass(obs.testbed_version):
        return partial
    decided = zone_decisions(obs, after=obs.start)[("eu-west-1::eu-west-1c", "PartialDisruption")]
    return max(partial, decided)


def taint_queued(obs: Observed, node: str) -> list[float]:
    """When a monitor pass queued ``node`` for its unreachable NoExecute taint (the controller's log)."""
    pattern = (rf"Node {re.escape(node)} is unresponsive as of .* Adding it to the Taint queue"
               rf'|"Node is unresponsive. Adding it to the Taint queue" node="{re.escape(node)}"')
    return [t for t, _ in kcm_lines(obs, pattern)]


def taint_request_ignored(obs: Observed, node: str) -> bool:
    """Whether the controller's tainting loop took ``node`` off its zone's queue as "ready now"
    (its V(4) line): from 1.34 the pass that flips a node queues it at once, and a loop run that
    reads the node from the controller's cache before the cache has the flip spends the zone's
    token for nothing; the next pass queues the node again, tainted a token (1/rate) later."""
    pattern = (rf'"Node was in a taint queue, but it\'s ready now. Ignoring taint request" node="{re.escape(node)}"'
               rf"|Node {re.escape(node)} was in a taint queue, but it's ready now")
    return bool(kcm_lines(obs, pattern))


def monitor_pass_of(obs: Observed, t: float) -> tuple[float, float]:
    """(first, last) stale-node visit of the monitor pass that logged a visit at ``t``.

    A pass's visits come within a moment of each other (the writes between them take milliseconds,
    or a few hundred under the client's rate limit), and the next pass starts a whole period after
    one ends (``wait.Until``), so a gap of half a period separates passes."""
    times = sorted(v for v, _ in kcm_lines(obs, STALE_VISIT))
    i = times.index(t)
    lo = hi = i
    while lo > 0 and times[lo] - times[lo - 1] < MONITOR / 2:
        lo -= 1
    while hi + 1 < len(times) and times[hi + 1] - times[hi] < MONITOR / 2:
        hi += 1
    return times[lo], times[hi]


def first_tainted_of_full_zone(obs: Observed) -> str:
    firsts = {n: first(obs.nodes[n], lambda s: s.state is NodeState.EVICTING) for n in nodes_in_role(obs, "zone-full")}
    return min((s.t, n) for n, s in firsts.items() if s is not None)[1]


def zone_change(obs: Observed, zone: str, state: ZoneState) -> tuple[float, float] | None:
    """(first time nodewatch showed ``zone`` in ``state``, the taint rate it gave)."""
    for t, zones, _ in obs.zones:
        if t >= obs.start and zones.get(zone, (None,))[0] is state:
            return t, zones[zone][1]
    return None


def disagrees_from(request, version: str, minor: int, reason: str) -> None:
    """Mark the running test an expected failure on releases from ``1.minor``: a disagreement measured
    there (``reason`` says what the real controller did) that the code under test does not model
    yet. Strict: once it agrees, the test fails until the mark goes."""
    if int(version.lstrip("v").split(".")[1]) >= minor:
        request.applymarker(pytest.mark.xfail(strict=True, reason=f"{version}: {reason}"))


def entering_pass(obs: Observed) -> tuple[float, float]:
    """(start, decision) of the monitor pass that entered master disruption mode: its first stale
    visit, and its "Entering master disruption mode" line (the end of the pass's node visits)."""
    (entered, _), = kcm_lines(obs, "Entering master disruption mode")
    started, _ = monitor_pass_of(obs, max(t for t, _ in kcm_lines(obs, STALE_VISIT) if t <= entered))
    return started, entered


def tainting_stopped_by(obs: Observed, entered: float) -> float:
    """A time by which the tainting loop had stopped after the pass entered master disruption mode:
    the next pass's first stale visit. ``handleDisruption`` logs "Entering master disruption mode"
    *before* it marks every listed node reachable (an API round trip for each listed node with a
    taint, under the client's rate limit) and only then swaps the zones' tainting limiters to 0;
    until that swap the tainting loop (every 100 ms) goes on adding the taints the pass queued, so
    one may carry a ``timeAdded`` after the log line (seen on v1.37.2: 0.3 s after it). The monitor
    loop starts its next pass a period after this one returned, so the next stale visit is after
    the swap."""
    later = [t for t, _ in kcm_lines(obs, STALE_VISIT) if t > entered]
    return min(later) if later else entered + MONITOR + LATENCY


def kept_in_master_disruption(obs: Observed) -> dict[str, float]:
    """node -> timeAdded of the NoExecute taint it still has at the end (every node cut off)."""
    return {n: parse_time(t["timeAdded"]) for n, node in obs.real_nodes.items() for t in noexecute(node)}
