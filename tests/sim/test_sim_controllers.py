"""The simulated control plane against the reference timings (virtual time, no sleeping)."""

from __future__ import annotations

import base64

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from nodewatch.core import rules
from nodewatch.core.certs import certificate_not_after
from nodewatch.core.settings import Settings
from nodewatch.core.timeutil import parse_time
from nodewatch.sim.fleet import SimFleet
from nodewatch.sim.node_lifecycle import TokenBucket
from support.sim_tape import Tape


def zone_members(fleet: SimFleet) -> dict[str, list[str]]:
    zones: dict[str, list[str]] = {}
    for name in fleet.node_order:
        zones.setdefault(fleet.nodes[name].zone_key, []).append(name)
    return zones


@pytest.mark.parametrize("version,grace", [("v1.33.2", 50.0), ("v1.31.4", 40.0)])
def test_ready_unknown_lands_after_grace_within_one_monitor_period(version: str, grace: float) -> None:
    fleet = SimFleet(nodes=12, scenario="steady", seed=3, version=version)
    tape = Tape(fleet)
    assert fleet.settings.grace == grace
    victims = [fleet.nodes[n] for n in fleet.node_order[:4]]
    for i, node in enumerate(victims):
        fleet.at(fleet.now + 12.0 + 3.3 * i, fleet.stop_kubelet, node)
    fleet.step_to(fleet.now + 150)
    period = fleet.settings.monitor_period_seconds
    for node in victims:
        t_unknown = tape.ready_became(node.name, "Unknown")
        assert t_unknown is not None
        # what resets the probe: a lease renewal, or a status post moving the Ready heartbeat
        posts = [t for t, e, o in tape.of("nodes", node.name) if t < t_unknown]
        last = max(tape.renewals(node.name)[-1], *posts) if posts else tape.renewals(node.name)[-1]
        # the controller sees the renewal at its next monitor pass: that is its probe timestamp
        probe = fleet.lifecycle.first_pass_from(last)
        earliest, latest = rules.unknown_due(probe, grace, period)
        assert earliest < t_unknown <= latest + 1e-9
        # ... and flips on the first pass after the grace has passed, as the real controller did
        assert last + grace < t_unknown <= last + grace + period + 0.01
        obj = tape.of("nodes", node.name)[-1][2]
        conds = {c["type"]: c for c in obj["status"]["conditions"]}
        for ctype in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure"):
            assert conds[ctype]["status"] == "Unknown"
            assert conds[ctype]["reason"] == rules.UNKNOWN_REASON
            assert conds[ctype]["message"] == rules.UNKNOWN_MESSAGE
        assert conds["NetworkUnavailable"]["status"] == "False"  # left alone
        # the NoSchedule unreachable taint follows at once, the NoExecute one through the queue
        assert tape.taint_added(node.name, rules.TAINT_UNREACHABLE, "NoSchedule") - t_unknown < 0.1
    healthy = fleet.nodes[fleet.node_order[-1]]
    assert tape.ready_became(healthy.name, "Unknown") is None


def test_lease_renewals_every_ten_seconds_with_jitter_on_the_node_clock() -> None:
    fleet = SimFleet(nodes=5, scenario="steady", seed=4)
    node = fleet.nodes[fleet.node_order[0]]
    node.clock_offset = -95.0
    tape = Tape(fleet)
    fleet.step_to(fleet.now + 200)
    times = tape.renewals(node.name)
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert gaps and all(10.0 <= g < 10.4 + 1e-9 for g in gaps)
    for t, _, obj in tape.of("leases", node.name):
        renew = parse_time(obj["spec"]["renewTime"])
        assert renew == pytest.approx(t - 95.0, abs=2e-6)
        assert obj["spec"]["renewTime"].endswith("Z") and "." in obj["spec"]["renewTime"]
        assert obj["spec"]["leaseDurationSeconds"] == 40


def test_node_status_patched_every_five_minutes_when_quiet() -> None:
    fleet = SimFleet(nodes=6, scenario="steady", seed=5)
    tape = Tape(fleet)
    fleet.step_to(fleet.now + 900)
    for name in fleet.node_order:
        posts = [t for t, e, o in tape.of("nodes", name)]
        assert 2 <= len(posts) <= 4
        assert all(abs((b - a) - 300.0) < 1e-6 for a, b in zip(posts, posts[1:]))


def _cut_nodes(fleet: SimFleet, names: list[str], at: float) -> None:
    for n in names:
        fleet.at(at, fleet.disconnect, fleet.nodes[n])


def test_noexecute_taints_paced_per_zone_at_the_normal_rate() -> None:
    fleet = SimFleet(nodes=30, scenario="steady", seed=6)
    tape = Tape(fleet)
    zones = zone_members(fleet)
    zone = sorted(zones)[0]
    cut = zones[zone]  # the whole zone: FullDisruption keeps the normal 0.1/s
    _cut_nodes(fleet, cut, fleet.now + 5)
    fleet.step_to(fleet.now + 180)
    added = sorted(tape.taint_added(n, rules.TAINT_UNREACHABLE) for n in cut)
    assert None not in added
    gaps = [b - a for a, b in zip(added, added[1:])]
    assert all(10.0 - 1e-6 <= g <= 10.1 + 1e-6 for g in gaps), gaps
    # timeAdded is stamped when the taint is written
    for n in cut:
        obj = tape.of("nodes", n)[-1][2]
        taint = next(t for t in obj["spec"]["taints"] if t["key"] == rules.TAINT_UNREACHABLE
                     and t["effect"] == "NoExecute")
        assert parse_time(taint["timeAdded"]) == float(int(tape.taint_added(n, rules.TAINT_UNREACHABLE)))
    assert fleet.lifecycle.zones[zone].state is rules.ZoneState.FULL


def test_partial_disruption_in_a_small_zone_stops_tainting() -> None:
    fleet = SimFleet(nodes=30, scenario="steady", seed=7)
    tape = Tape(fleet)
    zones = zone_members(fleet)
    zone = sorted(zones)[1]
    assert len(zones[zone]) <= fleet.settings.large_cluster_threshold
    cut = zones[zone][:4]  # 4 of 5: PartialDisruption
    _cut_nodes(fleet, cut, fleet.now + 5)
    fleet.step_to(fleet.now + 400)
    unknown_at = sorted(tape.ready_became(n, "Unknown") for n in cut)
    partial_since = unknown_at[2]  # the third not-ready node makes the zone partially disrupted
    tainted = [tape.taint_added(n, rules.TAINT_UNREACHABLE) for n in cut]
    assert all(t is None or t <= partial_since + 0.1 for t in tainted)
    assert sum(t is None for t in tainted) >= 2  # the rest stay Unknown, untainted
    assert fleet.lifecycle.zones[zone].state is rules.ZoneState.PARTIAL


def test_all_zones_down_removes_noexecute_taints_and_stops_evictions() -> None:
    fleet = SimFleet(nodes=12, scenario="steady", seed=8)
    tape = Tape(fleet)
    first = fleet.nodes[fleet.node_order[0]]
    fleet.at(fleet.now + 1, fleet.stop_kubelet, first)
    fleet.step_to(fleet.now + 90)
    assert first.has_taint(rules.TAINT_UNREACHABLE, "NoExecute")
    cutoff_at = fleet.now
    for name in fleet.node_order[1:]:
        fleet.disconnect(fleet.nodes[name])
    fleet.step_to(fleet.now + 100)
    assert fleet.lifecycle.all_full
    assert not any(fleet.nodes[n].has_taint(rules.TAINT_UNREACHABLE, "NoExecute") for n in fleet.node_order)
    fleet.step_to(fleet.now + 400)  # past the first node's 300s toleration: nobody is evicted
    evictions = [o for t, e, o in tape.of("events") if o["reason"] == "TaintManagerEviction" and t > cutoff_at + 60]
    assert evictions == []
    # back: the controller leaves the mode and the grace window starts again for everyone
    for name in fleet.node_order[1:]:
        fleet.reconnect(fleet.nodes[name])
    fleet.step_to(fleet.now + 30)
    assert not fleet.lifecycle.all_full
    assert all(fleet.nodes[n].ready() == "True" for n in fleet.node_order[1:])


def test_pods_evicted_at_time_added_plus_their_toleration() -> None:
    fleet = SimFleet(nodes=30, scenario="steady", seed=9, pods_per_node=12)
    tape = Tape(fleet)

    def host_of(wl_name: str) -> str:
        return next(p.node for p in fleet.pods.values() if p.wl.name == wl_name)

    nodes = {host_of("checkout"), host_of("kafka"), host_of("frontend")}
    for n in nodes:
        fleet.stop_kubelet(fleet.nodes[n])
    watched = {k: p for k, p in fleet.pods.items() if p.node in nodes}
    fleet.step_to(fleet.now + 800)
    expected_seen = {"DaemonSet": 0, "30": 0, "300": 0, "600": 0}
    for (_ns, name), pod in watched.items():
        added = tape.taint_added(pod.node, rules.TAINT_UNREACHABLE)
        deleting = [t for t, e, o in tape.of("pods", name) if o["metadata"].get("deletionTimestamp")]
        if pod.wl.kind == "DaemonSet":
            assert deleting == []  # tolerates forever
            expected_seen["DaemonSet"] += 1
            continue
        tol = min(t["tolerationSeconds"] for t in pod.wl.tolerations if "tolerationSeconds" in t)
        assert deleting, f"{name} was not evicted"
        assert deleting[0] == pytest.approx(added + tol, abs=1e-6)
        obj = [o for t, e, o in tape.of("pods", name) if o["metadata"].get("deletionTimestamp")][0]
        conds = {c["type"]: c for c in obj["status"]["conditions"]}
        assert conds["DisruptionTarget"]["reason"] == "DeletionByTaintManager"
        expected_seen[str(tol)] += 1
    assert all(expected_seen.values()), expected_seen
    reasons = [o for t, e, o in tape.of("events") if o["reason"] == "TaintManagerEviction"]
    assert reasons and all(o["source"]["component"] == "taint-eviction-controller" for o in reasons)


def test_statefulset_pods_stay_terminating_while_deployments_get_replacements() -> None:
    fleet = SimFleet(nodes=30, scenario="steady", seed=10, pods_per_node=12)
    node = next(n for n in fleet.node_order
                if {fleet.pods[k].wl.kind for k in fleet.nodes[n].pods} >= {"StatefulSet", "Deployment"})
    on_node = [fleet.pods[k] for k in sorted(fleet.nodes[node].pods)]
    fleet.stop_kubelet(fleet.nodes[node])
    fleet.step_to(fleet.now + 500)
    for pod in on_node:
        if pod.wl.kind == "DaemonSet":
            continue
        assert pod.key in fleet.pods, f"{pod.name} vanished although no kubelet confirmed"
        assert fleet.pods[pod.key].deletion_at is not None  # Terminating
        others = [p for p in fleet.pods.values() if p.wl is pod.wl and p.deletion_at is None]
        if pod.wl.kind == "Deployment":
            assert len(others) == pod.wl.replicas  # a replacement runs elsewhere
            assert all(p.node != node for p in others if p.name not in {x.name for x in on_node})
        else:
            assert len(others) == pod.wl.replicas - 1  # no second copy of the ordinal
    # the kubelet comes back: it confirms, the StatefulSet recreates the ordinal
    fleet.start_kubelet(fleet.nodes[node])
    fleet.step_to(fleet.now + 60)
    for pod in on_node:
        if pod.wl.kind == "StatefulSet":
            again = fleet.pods.get(pod.key)
            assert again is not None and again.uid != pod.uid and again.deletion_at is None


def test_evicted_pods_on_a_live_kubelet_disappear() -> None:
    fleet = SimFleet(nodes=30, scenario="steady", seed=11)
    tape = Tape(fleet)
    node = next(fleet.nodes[n] for n in fleet.node_order
                if any(fleet.pods[k].wl.kind == "Deployment" and fleet.pods[k].wl.name != "checkout"
                       for k in fleet.nodes[n].pods))
    fleet.set_cni_down(node, True)  # NotReady, but the kubelet is alive and can kill pods
    keys = [k for k in node.pods if fleet.pods[k].wl.kind == "Deployment"]
    fleet.step_to(fleet.now + 340)
    assert node.has_taint(rules.TAINT_NOT_READY, "NoExecute")
    assert node.ready() == "False"
    for ns, name in keys:
        types = [e for t, e, o in tape.of("pods", name)]
        assert types[-1] == "DELETED", types
        assert fleet.pods.get((ns, name)) is None


def test_events_expire_after_an_hour_and_issued_csrs_are_cleaned() -> None:
    fleet = SimFleet(nodes=6, scenario="steady", seed=12)
    tape = Tape(fleet)
    node = fleet.nodes[fleet.node_order[0]]
    fleet.stop_kubelet(node)
    fleet.rotate_cert(fleet.nodes[fleet.node_order[1]])
    fleet.step_to(fleet.now + 2 * 3600 + 60)
    added = {o["metadata"]["name"]: t for t, e, o in tape.of("events") if e == "ADDED"}
    deleted = {o["metadata"]["name"]: t for t, e, o in tape.of("events") if e == "DELETED"}
    assert added and set(added) == set(deleted)
    for name, t in added.items():
        assert deleted[name] == pytest.approx(t + 3600.0, abs=1e-6)
    csr_added = [t for t, e, o in tape.of("certificatesigningrequests") if e == "ADDED"]
    csr_deleted = [t for t, e, o in tape.of("certificatesigningrequests") if e == "DELETED"]
    assert len(csr_added) == 1 and len(csr_deleted) == 1
    assert 3600.0 < csr_deleted[0] - csr_added[0] <= 2 * 3600.0  # the cleaner polls hourly
    not_ready = [o for t, e, o in tape.of("events") if o["reason"] == "NodeNotReady" and
                 o["involvedObject"]["kind"] == "Node"]
    assert not_ready[0]["source"] == {"component": "node-controller"}
    assert not_ready[0]["involvedObject"]["uid"] == node.uid


def test_csr_certificates_are_real_and_parse() -> None:
    fleet = SimFleet(nodes=6, scenario="steady", seed=13)
    tape = Tape(fleet)
    node = fleet.nodes[fleet.node_order[2]]
    fleet.rotate_cert(node)
    fleet.step_to(fleet.now + 5)
    final = tape.of("certificatesigningrequests")[-1][2]
    assert final["spec"]["signerName"] == rules.KUBELET_CLIENT_SIGNER
    assert final["spec"]["username"] == f"system:node:{node.name}"
    assert final["status"]["conditions"][0]["type"] == "Approved"
    pem = base64.b64decode(final["status"]["certificate"])
    cert = x509.load_pem_x509_certificate(pem)
    assert cert.subject.rfc4514_string() == f"CN=system:node:{node.name},O=system:nodes"
    assert cert.issuer == fleet.ca.cert.subject
    fleet.ca.cert.public_key().verify(cert.signature, cert.tbs_certificate_bytes,
                                      ec.ECDSA(cert.signature_hash_algorithm))
    not_after = certificate_not_after(final["status"]["certificate"])
    assert not_after == pytest.approx(fleet.now + 365 * 86400, abs=10)
    assert node.cert_not_after == not_after
    req = x509.load_pem_x509_csr(base64.b64decode(final["spec"]["request"]))
    assert req.is_signature_valid


def test_token_bucket_swap_drains_when_the_old_one_was_empty() -> None:
    b = TokenBucket(0.1, 0.0)
    assert b.try_accept(0.0) and not b.try_accept(5.0) and b.try_accept(10.0)
    never = TokenBucket(0.0, 0.0)
    assert not never.try_accept(100.0)


def test_user_grace_override_drives_the_controller() -> None:
    fleet = SimFleet(nodes=4, scenario="steady", settings=Settings().override(grace_seconds=20.0))
    tape = Tape(fleet)
    node = fleet.nodes[fleet.node_order[0]]
    fleet.stop_kubelet(node)
    fleet.step_to(fleet.now + 60)
    last = tape.renewals(node.name)[-1] if tape.renewals(node.name) else None
    t = tape.ready_became(node.name, "Unknown")
    assert t is not None and (last is None or t - last <= 25.0 + 1e-9)


def test_a_kubelets_ready_false_is_tainted_by_the_pass_that_sees_it_as_the_outlook_allows() -> None:
    """processTaintBaseEviction is handed the Ready condition the pass observed: a Ready=False the
    kubelet posted is queued by the first pass that sees it, so the not-ready NoExecute taint lands
    within one monitor period (+ a tainting sweep) of the transition; the outlook's "not before"
    must not be later than that (it said transition + 5 s)."""
    from nodewatch.core.fleet import FleetState
    from nodewatch.core.outlook import window_in

    fleet = SimFleet(nodes=12, scenario="steady", seed=3)
    state = FleetState(fleet.settings)
    for r in ("nodes", "leases", "pods"):
        for obj in fleet.objects(r):
            state.apply(r, "ADDED", obj, fleet.now, listing=True)
        state.apply(r, "SYNCED", None, fleet.now)
    fleet.subscribe(lambda r, e, o, t: state.apply(r, e, o, t))
    tape = Tape(fleet)
    node = fleet.nodes[fleet.node_order[0]]
    fleet.at(fleet.now + 12.3, fleet.set_runtime_down, node)
    window = None
    end = fleet.now + 60
    while fleet.now < end and tape.taint_added(node.name, rules.TAINT_NOT_READY) is None:
        fleet.step_to(fleet.now + 0.05)
        if window is None and tape.ready_became(node.name, "False") is not None:
            view = state.evaluate(fleet.now)
            window = window_in(view, view.node(node.name))
    t_false = tape.ready_became(node.name, "False")
    t_taint = tape.taint_added(node.name, rules.TAINT_NOT_READY)
    assert t_false is not None and t_taint is not None and window is not None
    period = fleet.settings.monitor_period_seconds
    assert t_false <= t_taint <= t_false + period + 0.2
    assert window.earliest <= t_taint


@pytest.mark.parametrize("version, in_the_flip_pass", [("v1.33.2", False), ("v1.34.0", True), ("v1.37.2", True)])
def test_the_unknown_the_pass_writes_is_queued_by_that_pass_from_1_34(version: str, in_the_flip_pass: bool) -> None:
    """kubernetes PR #120816 (1.34): ``processTaintBaseEviction`` is handed the Ready condition
    after the pass's update, so the pass that writes Unknown queues the unreachable NoExecute taint
    (v1.37.2 in the testbed: 2-3 s after the flip, its own writes); up to 1.33 the next pass does
    (v1.20.2: one pass later). The outlook's "not before" is the simulator's taint time for each."""
    from nodewatch.core.fleet import FleetState
    from nodewatch.core.outlook import window_in

    fleet = SimFleet(nodes=12, scenario="steady", seed=3, version=version)
    state = FleetState(fleet.settings)
    for r in ("nodes", "leases", "pods"):
        for obj in fleet.objects(r):
            state.apply(r, "ADDED", obj, fleet.now, listing=True)
        state.apply(r, "SYNCED", None, fleet.now)
    node = fleet.nodes[fleet.node_order[0]]
    windows = []

    def seen(r, e, o, t) -> None:
        state.apply(r, e, o, t)
        if r == "nodes" and o["metadata"]["name"] == node.name and not windows:
            view = state.evaluate(t)  # what nodewatch says on seeing the flip, before any taint
            v = view.node(node.name)
            if v.ready == "Unknown" and not any(x["effect"] == "NoExecute" for x in o["spec"].get("taints", [])):
                windows.append(window_in(view, v))

    fleet.subscribe(seen)
    tape = Tape(fleet)
    fleet.at(fleet.now + 7.7, fleet.stop_kubelet, node)
    end = fleet.now + 120
    while fleet.now < end and tape.taint_added(node.name, rules.TAINT_UNREACHABLE) is None:
        fleet.step_to(fleet.now + 0.05)
    window = windows[0] if windows else None
    flipped = tape.ready_became(node.name, "Unknown")
    tainted = tape.taint_added(node.name, rules.TAINT_UNREACHABLE)
    assert flipped is not None and tainted is not None and window is not None
    period = fleet.settings.monitor_period_seconds
    delay = tainted - flipped
    if in_the_flip_pass:
        assert 0.0 <= delay <= 0.1 + 1e-6  # the next 100 ms tainting sweep
    else:
        assert period <= delay <= period + 0.1 + 1e-6
    assert window.earliest <= tainted <= window.earliest + 0.1 + 1e-6


@pytest.mark.parametrize("version", ["v1.33.2", "v1.37.2"])
def test_entering_master_disruption_keeps_only_the_taints_its_pass_added_from_1_34(version: str) -> None:
    """handleDisruption marks every node reachable from the node list its pass began with, and
    RemoveTaintOffNode skips a node whose listed copy has no eviction taint. From 1.34 the pass that
    flips the last Ready nodes queues them, and the tainting loop taints one per zone with a token
    while the pass still writes: those taints stay, and their pods are evicted (v1.37.2 kept 4 and 3
    of 16 in the testbed). Up to 1.33 that pass queues nothing new: every taint comes off."""
    fleet = SimFleet(nodes=12, scenario="steady", seed=8, version=version)
    tape = Tape(fleet)
    first = fleet.nodes[fleet.node_order[0]]
    fleet.at(fleet.now + 1, fleet.stop_kubelet, first)
    fleet.step_to(fleet.now + 90)
    assert first.has_taint(rules.TAINT_UNREACHABLE, "NoExecute")
    for name in fleet.node_order[1:]:
        fleet.disconnect(fleet.nodes[name])
    while not fleet.lifecycle.all_full:
        fleet.step_to(fleet.now + 0.05)
    entered = fleet.now  # within 50 ms after the entering pass
    fleet.step_to(fleet.now + 60)
    kept = sorted(n for n in fleet.node_order if fleet.nodes[n].has_taint(rules.TAINT_UNREACHABLE, "NoExecute"))
    assert not first.has_taint(rules.TAINT_UNREACHABLE, "NoExecute")  # tainted before: taken off
    zones = {fleet.nodes[n].zone_key for n in fleet.node_order}
    if version == "v1.37.2":
        # at most one a zone (a bucket's token), each tainted during the entering pass
        assert kept and len(kept) <= len(zones)
        assert len({fleet.nodes[n].zone_key for n in kept}) == len(kept)
        for n in kept:
            (added,) = [t.time_added for t in fleet.nodes[n].taints if t.effect == "NoExecute"]
            assert entered - 0.05 <= added <= entered
        # ... and the taint-eviction controller evicts their pods, master disruption or not
        fleet.step_to(entered + fleet.settings.toleration_seconds + 30)
        gone = {(o["involvedObject"]["namespace"], o["involvedObject"]["name"]) for t, e, o in tape.of("events")
                if o["reason"] == "TaintManagerEviction" and t > entered}
        assert gone and {fleet.pods[k].node for k in gone if k in fleet.pods} <= set(kept)
    else:
        assert kept == []
