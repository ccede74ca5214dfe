"""The fleet history (core/history.py): samples, node changes, marks, bounded memory, a recording."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from nodewatch.core.fleet import FleetState
from nodewatch.core.history import FIRST_LOOK_MAX, HistoryRecorder, MarkKind, Sample, sample_recording
from nodewatch.core.rules import TAINT_UNREACHABLE, NodeState, ZoneState
from nodewatch.core.settings import Settings
from nodewatch.core.views import RESOURCES
from support.factories import T0, lease, node, pod, taint

RECORDING = Path(__file__).parents[1] / "data" / "incident-30.jsonl.gz"


def _fleet(n: int = 3, zone: str = "z1") -> FleetState:
    st = FleetState(Settings())
    for i in range(n):
        st.apply("nodes", "ADDED", node(f"n{i}", zone=zone), T0)
        st.apply("leases", "ADDED", lease(f"n{i}", T0), T0)
    for r in RESOURCES:
        st.apply(r, "SYNCED", None, T0)
    return st


def _renew(st: FleetState, names: list[str], t: float) -> None:
    for name in names:
        st.apply("leases", "MODIFIED", lease(name, t), t)


def _set_ready(st: FleetState, names: list[str], status: str, t: float) -> None:
    for name in names:
        st.apply("nodes", "MODIFIED", node(name, status, transition=t), t)


def _run(st: FleetState, rec: HistoryRecorder, t0: float, t1: float, healthy: list[str]) -> None:
    """One sample a second; the ``healthy`` nodes renew every 10 s."""
    t = t0
    while t <= t1:
        if int(t - T0) % 10 == 0:
            _renew(st, healthy, t)
        rec.observe(st, st.evaluate(t))
        t += 1


def test_a_node_going_down_is_a_run_of_changes_with_a_taint_and_an_eviction_mark():
    st = _fleet()
    st.apply("pods", "ADDED", pod("web-1", "n0"), T0)
    st.apply("pods", "ADDED", pod("db-0", "n0", owner_kind="StatefulSet", owner_name="db"), T0)
    rec = HistoryRecorder()
    _run(st, rec, T0, T0 + 60, ["n1", "n2"])  # n0 stops renewing after T0
    # the controller: Unknown, then the NoExecute taint, then the taint manager deletes the web pod
    added = T0 + 61.0
    st.apply("nodes", "MODIFIED", node("n0", "Unknown", transition=T0 + 60,
                                       taints=[taint(TAINT_UNREACHABLE, "NoExecute", added)]), T0 + 61.2)
    _run(st, rec, T0 + 61, T0 + 70, ["n1", "n2"])
    st.apply("pods", "MODIFIED", pod("web-1", "n0", deleting=T0 + 101), T0 + 70.5)
    _run(st, rec, T0 + 71, T0 + 75, ["n1", "n2"])

    changes = [(c.node, c.before, c.after) for c in rec.changes]
    assert changes == [
        ("n0", NodeState.READY, NodeState.LATE),
        ("n0", NodeState.LATE, NodeState.OVERDUE),
        ("n0", NodeState.OVERDUE, NodeState.EVICTING),
    ]
    overdue = rec.changes[1]
    assert overdue.stopped_renewing == T0  # the last renewal seen
    assert overdue.at == T0 + st.settings.grace + 1  # the first sample past the (strict) grace
    kinds = [(m.kind, m.subject, m.at) for m in rec.marks]
    assert kinds == [(MarkKind.TAINT, "n0", T0 + 61), (MarkKind.EVICTION, "default/web-1", T0 + 71)]
    assert rec.marks[0].happened == added
    assert [(p.name, p.node) for p in rec.evictions] == [("web-1", "n0")]
    assert [(p.name, p.at) for p in rec.statefulset_at_risk] == [("db-0", T0 + 61)]
    last = rec.all_samples()[-1]
    assert last.count(NodeState.EVICTING) == 1 and last.count(NodeState.READY) == 2


def test_recovery_and_deletion_are_changes_too():
    st = _fleet()
    rec = HistoryRecorder()
    _run(st, rec, T0, T0 + 45, ["n1", "n2"])  # n0 and... only n0 stops
    _renew(st, ["n0"], T0 + 46)
    st.apply("nodes", "DELETED", node("n1"), T0 + 46)
    st.apply("nodes", "MODIFIED", node("n2", "False", reason="KubeletNotReady", message="runtime down",
                                       transition=T0 + 46), T0 + 46)
    rec.observe(st, st.evaluate(T0 + 47))
    st.apply("nodes", "DELETED", node("n2"), T0 + 48)
    rec.observe(st, st.evaluate(T0 + 48))
    tail = [(c.node, c.before, c.after) for c in rec.changes if c.at >= T0 + 47]
    assert ("n0", NodeState.OVERDUE, NodeState.READY) in tail
    assert ("n2", NodeState.READY, NodeState.NOT_READY) in tail
    assert ("n2", NodeState.NOT_READY, None) in tail  # deleted while down
    assert not any(c.node == "n1" for c in rec.changes)  # deleted while Ready: nothing to say


def test_a_zone_entering_partial_disruption_is_a_mark():
    st = _fleet(4)
    rec = HistoryRecorder()
    rec.observe(st, st.evaluate(T0))
    _set_ready(st, ["n0", "n1", "n2"], "Unknown", T0 + 50)
    rec.observe(st, st.evaluate(T0 + 50))
    zone_marks = [m for m in rec.marks if m.kind is MarkKind.ZONE]
    assert len(zone_marks) == 1
    assert zone_marks[0].text == "Normal -> PartialDisruption"
    z = rec.zone_changes[-1]
    assert z.after is ZoneState.PARTIAL and z.not_ready == 3 and z.taint_rate == 0.0  # a small zone: tainting stops


def test_memory_is_bounded_and_a_short_outage_survives_the_merging():
    rec = HistoryRecorder(max_samples=16)
    ok = (0, 0, 0, 0, 0, 0, 10)
    bad = (0, 0, 3, 0, 0, 0, 7)
    for i in range(1000):
        rec._add_sample(T0 + i, bad if i == 517 else ok)
    samples = rec.all_samples()
    assert len(samples) <= 16
    assert rec.step >= 1000 / 16
    assert sum(1 for s in samples if s.count(NodeState.UNKNOWN) == 3) == 1
    assert samples[0].at == T0


def test_next_mark_skips_the_one_it_stands_on():
    st = _fleet(4)
    rec = HistoryRecorder()
    rec.observe(st, st.evaluate(T0))
    _set_ready(st, ["n0", "n1", "n2"], "Unknown", T0 + 5)
    rec.observe(st, st.evaluate(T0 + 5))
    _set_ready(st, ["n0", "n1", "n2"], "True", T0 + 9)
    rec.observe(st, st.evaluate(T0 + 9))
    first = rec.next_mark(T0)
    assert first is not None and first.at == T0 + 5
    second = rec.next_mark(first.at)
    assert second is not None and second.at == T0 + 9 and second.text == "PartialDisruption -> Normal"
    assert rec.next_mark(second.at) is None


def test_blind_periods_follow_the_lease_stream_health():
    st = _fleet()
    st.update_health("leases", connected=True, synced=True, last_activity=T0)
    rec = HistoryRecorder()
    rec.observe(st, st.evaluate(T0))
    st.update_health("leases", connected=False, down_since=T0 + 1, last_error="connection refused")
    rec.observe(st, st.evaluate(T0 + 2))
    rec.observe(st, st.evaluate(T0 + 3))
    st.update_health("leases", connected=True, last_activity=T0 + 4)
    rec.observe(st, st.evaluate(T0 + 4))
    assert len(rec.blind) == 1
    b = rec.blind[0]
    assert (b.start, b.end) == (T0 + 2, T0 + 4)
    assert "connection refused" in b.reason


def _evicted_in_file() -> set[str]:
    """Pods the file shows getting a deletionTimestamp after its start, read without nodewatch."""
    names = set()
    with gzip.open(RECORDING, "rt") as f:
        next(f)
        for line in f:
            d = json.loads(line)
            if d.get("resource") == "pods" and d.get("type") == "MODIFIED" and not d.get("list"):
                if (d["object"].get("metadata") or {}).get("deletionTimestamp"):
                    names.add(d["object"]["metadata"]["name"])
    return names


def test_the_committed_recording_in_one_pass():
    from nodewatch.sources.replay.index import EventIndex

    idx = EventIndex(str(RECORDING))
    try:
        rec = sample_recording(idx, idx.settings(None))
    finally:
        idx.close()
    assert rec.complete
    samples = rec.all_samples()
    assert samples[0].at == idx.start and idx.end - 1 < samples[-1].at <= idx.end and rec.end == idx.end
    assert len(samples) == int(idx.end - idx.start) + 1  # one a second (the end shares the last second's)
    assert all(sum(s.counts) == 30 for s in samples)
    assert {p.name for p in rec.evictions} == _evicted_in_file()
    assert sorted(m.subject.split("/")[1] for m in rec.marks if m.kind is MarkKind.EVICTION) == sorted(_evicted_in_file())
    taints = [m for m in rec.marks if m.kind is MarkKind.TAINT]
    assert [m.subject for m in taints] == ["general-euw1b-01"]
    assert taints[0].happened is not None and taints[0].happened <= taints[0].at
    peak = rec.peak()
    assert isinstance(peak, Sample) and peak.down >= 7


def test_the_peak_is_when_the_most_nodes_down_came_first():
    """Six down from the first sample on, a seventh node Late (not down) later: the peak is the
    first sample with six down, where the report's timeline shows six first. With none down, the
    first sample with the most not Ready."""
    def sample(at: float, down: int, late: int) -> Sample:
        counts = [0] * len(NodeState)
        counts[NodeState.UNKNOWN.rank] = down
        counts[NodeState.LATE.rank] = late
        counts[NodeState.READY.rank] = 30 - down - late
        return Sample(at, tuple(counts))

    rec = HistoryRecorder()
    rec.samples += [sample(T0, 6, 0), sample(T0 + 6, 6, 1), sample(T0 + 9, 5, 0)]
    assert rec.peak() == rec.samples[0]
    calm = HistoryRecorder()
    calm.samples += [sample(T0, 0, 1), sample(T0 + 1, 0, 2), sample(T0 + 2, 0, 2)]
    assert calm.peak() == calm.samples[1]


def test_a_recordings_first_lines_before_any_node_are_no_sample():
    """A recording starts with its lists: sampled before the first Node, the fleet read "0 down",
    and every node already down at the start then counted as going down in the window (``Ready →
    Evicted``), its earlier NoExecute taint as added in it. Nothing is sampled until a node is known."""
    st = FleetState(Settings())
    rec = HistoryRecorder()
    rec.observe(st, st.evaluate(T0))  # the recording's first line: no node yet
    added = T0 - 400
    st.apply("nodes", "ADDED", node("n0", "Unknown", transition=T0 - 460,
                                    taints=[taint(TAINT_UNREACHABLE, "NoExecute", added)]), T0 + 1)
    st.apply("nodes", "ADDED", node("n1"), T0 + 1)
    st.apply("leases", "ADDED", lease("n1", T0), T0 + 1)
    for r in RESOURCES:
        st.apply(r, "SYNCED", None, T0 + 1)
    rec.observe(st, st.evaluate(T0 + 1))
    rec.observe(st, st.evaluate(T0 + 2))
    assert [s.at for s in rec.all_samples()] == [T0 + 1, T0 + 2]
    assert rec.all_samples()[0].count(NodeState.EVICTED) == 1
    # down before the window: said as found at the start, nothing happened in it
    assert [(c.node, c.before, c.after) for c in rec.changes] == [("n0", None, NodeState.EVICTED)]
    assert list(rec.marks) == []


def test_a_list_that_spans_samples_is_a_first_look_until_it_is_in():
    """At 65,000 nodes the Node list comes over seconds: a node first seen in its second half was
    down before the recording began, not going down then."""
    st = FleetState(Settings())
    rec = HistoryRecorder()
    for r in ("nodes", "leases"):  # as a recording has it: each stream connected, then its list
        st.update_health(r, connected=True)
    st.apply("nodes", "ADDED", node("n0"), T0, True)
    st.apply("leases", "ADDED", lease("n0", T0), T0, True)
    rec.observe(st, st.evaluate(T0))  # the list half in
    added = T0 - 400
    st.apply("nodes", "ADDED", node("n1", "Unknown", transition=T0 - 460,
                                    taints=[taint(TAINT_UNREACHABLE, "NoExecute", added)]), T0 + 1, True)
    for r in RESOURCES:
        st.apply(r, "SYNCED", None, T0 + 1.5)
        st.update_health(r, synced=True)
    rec.observe(st, st.evaluate(T0 + 2))  # the list in, with a node down since before it
    st.apply("nodes", "MODIFIED", node("n0", "Unknown", transition=T0 + 3), T0 + 3)
    rec.observe(st, st.evaluate(T0 + 4))  # then one goes down in the window
    changes = [(c.node, c.before, c.after) for c in rec.changes]
    assert changes[0] == ("n1", None, NodeState.EVICTED)  # found so, not "Ready → Evicted"
    assert ("n0", NodeState.READY, NodeState.UNKNOWN) in changes  # the window's own change
    assert not any(m.subject == "n1" for m in rec.marks)  # its taint was added before the window


def test_a_pod_first_seen_terminating_was_not_evicted_in_the_window():
    """A node's pod list can come in after the Node list (its scoped watch starts when the node is at
    risk): a pod already terminating then was evicted before, at a time nodewatch never saw. Only a
    pod seen alive on a node at risk and then terminating is an eviction of the window."""
    st = _fleet()
    tainted = [taint(TAINT_UNREACHABLE, "NoExecute", T0 - 400)]
    st.apply("nodes", "MODIFIED", node("n0", "Unknown", transition=T0 - 460, taints=tainted), T0)
    rec = HistoryRecorder()
    rec.observe(st, st.evaluate(T0))
    rec.observe(st, st.evaluate(T0 + 1))  # the lists are in; n0's pods are not yet
    st.apply("pods", "ADDED", pod("old-1", "n0", deleting=T0 - 60), T0 + 1.5)
    st.apply("pods", "ADDED", pod("web-1", "n0"), T0 + 1.5)
    rec.observe(st, st.evaluate(T0 + 2))
    st.apply("pods", "MODIFIED", pod("web-1", "n0", deleting=T0 + 30), T0 + 2.5)
    rec.observe(st, st.evaluate(T0 + 3))
    assert [p.name for p in rec.evictions] == ["web-1"]
    assert [m.subject for m in rec.marks if m.kind is MarkKind.EVICTION] == ["default/web-1"]


def test_a_pod_evicted_as_its_node_comes_to_be_at_risk_is_an_eviction():
    """A toleration of 0 s: the taint manager deletes the pod as the NoExecute taint comes, within
    the sample that first sees its node at risk."""
    st = _fleet()
    st.apply("pods", "ADDED", pod("fast-1", "n0"), T0)
    rec = HistoryRecorder()
    rec.observe(st, st.evaluate(T0))
    rec.observe(st, st.evaluate(T0 + 1))
    tainted = [taint(TAINT_UNREACHABLE, "NoExecute", T0 + 1.2)]
    st.apply("nodes", "MODIFIED", node("n0", "Unknown", transition=T0 + 1.2, taints=tainted), T0 + 1.3)
    st.apply("pods", "MODIFIED", pod("fast-1", "n0", deleting=T0 + 1.4), T0 + 1.5)
    rec.observe(st, st.evaluate(T0 + 2))
    assert [p.name for p in rec.evictions] == ["fast-1"]


def test_a_statefulset_pod_listed_late_is_at_risk_since_its_node():
    """A StatefulSet pod is at risk from when its node came to be (Unknown, evicting): a pod list
    that comes a sample later does not move that, and a node found so at the start says so."""
    st = _fleet()
    down = [taint(TAINT_UNREACHABLE, "NoExecute", T0 - 400)]
    st.apply("nodes", "MODIFIED", node("n0", "Unknown", transition=T0 - 460, taints=down), T0)
    rec = HistoryRecorder()
    rec.observe(st, st.evaluate(T0))  # n0 found down; its pods not listed yet
    st.apply("nodes", "MODIFIED", node("n1", "Unknown", transition=T0 + 1,
                                       taints=[taint(TAINT_UNREACHABLE, "NoExecute", T0 + 1)]), T0 + 1.2)
    rec.observe(st, st.evaluate(T0 + 2))  # n1 goes down in the window
    for name, on in (("db-0", "n0"), ("db-1", "n1")):
        st.apply("pods", "ADDED", pod(name, on, owner_kind="StatefulSet", owner_name="db"), T0 + 2.5)
    rec.observe(st, st.evaluate(T0 + 3))  # both pod lists come in
    assert [(p.name, p.at, p.at_start) for p in rec.statefulset_at_risk] == [
        ("db-0", T0, True), ("db-1", T0 + 2, False)]


def test_a_list_that_will_not_come_ends_the_first_look():
    """The lease list forbidden (RBAC), or a stream failing for minutes: the first look ends (at
    once, or after ``FIRST_LOOK_MAX``), and what changes after it is a change."""
    for forbidden in (True, False):
        st = FleetState(Settings())
        rec = HistoryRecorder()
        st.update_health("nodes", connected=True, synced=True)
        st.update_health("leases", connected=False, forbidden=forbidden)
        st.apply("nodes", "ADDED", node("n0"), T0, True)
        st.apply("nodes", "SYNCED", None, T0)
        wait = 1 if forbidden else FIRST_LOOK_MAX
        rec.observe(st, st.evaluate(T0))
        rec.observe(st, st.evaluate(T0 + wait))
        st.apply("nodes", "MODIFIED", node("n0", "False", transition=T0 + wait + 1), T0 + wait + 1)
        rec.observe(st, st.evaluate(T0 + wait + 2))
        assert [(c.before, c.after) for c in rec.changes][-1:] == [(NodeState.READY, NodeState.NOT_READY)], forbidden
