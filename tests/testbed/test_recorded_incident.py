"""Replay a real controller incident (fast suite): nodewatch's states against the real objects' times.

``tests/data/testbed-kubelet-stop.jsonl.gz`` was recorded with ``nodewatch record`` on a testbed
(``tests/testbed/make_recording.py``): a kubelet stops, and the real kube-controller-manager
v1.20.2 (grace 20 s, default tolerations 30 s) marks the node Unknown, taints it, and evicts its
pods. Every instant checked below is taken from the recorded objects, not written down by hand.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from campaign import GRACE, LATENCY, MONITOR, TOLERATION, TRUNC, parse_time, ready_condition

from nodewatch.core.rules import TAINT_UNREACHABLE, NodeState
from nodewatch.sources.replay import ReplaySource

RECORDING = Path(__file__).resolve().parents[1] / "data" / "testbed-kubelet-stop.jsonl.gz"
NODE = "general-euw1a-00"


class Incident:
    """The moments of the incident, read from the recording's objects."""

    def __init__(self, path: Path) -> None:
        self.last_renewal_seen = 0.0
        self.unknown_seen = self.noexecute_seen = None
        self.flip = self.taint_added = None
        self.evictions: dict[str, float] = {}
        self.deletion_seen: dict[str, float] = {}
        self.tolerations: dict[str, list[dict]] = {}
        with gzip.open(path, "rt") as fh:
            for line in fh:
                d = json.loads(line)
                obj, t = d.get("object"), d.get("t")
                if not isinstance(obj, dict) or "metadata" not in obj:
                    continue
                name = obj["metadata"].get("name")
                if d["resource"] == "leases" and name == NODE:
                    self.last_renewal_seen = t
                elif d["resource"] == "nodes" and name == NODE:
                    rc = ready_condition(obj)
                    if rc.get("status") == "Unknown" and self.unknown_seen is None:
                        self.unknown_seen, self.flip = t, parse_time(rc["lastTransitionTime"])
                    for taint in obj["spec"].get("taints", []) or []:
                        if taint["key"] == TAINT_UNREACHABLE and taint["effect"] == "NoExecute" \
                                and self.noexecute_seen is None:
                            self.noexecute_seen, self.taint_added = t, parse_time(taint["timeAdded"])
                elif d["resource"] == "pods" and obj["spec"].get("nodeName") == NODE:
                    self.tolerations[name] = obj["spec"].get("tolerations", [])
                    meta = obj["metadata"]
                    if meta.get("deletionTimestamp") and name not in self.evictions:
                        self.evictions[name] = parse_time(meta["deletionTimestamp"]) - meta["deletionGracePeriodSeconds"]
                        self.deletion_seen[name] = t


@pytest.fixture(scope="module")
def incident() -> Incident:
    return Incident(RECORDING)


@pytest.fixture
def replay():
    src = ReplaySource(str(RECORDING))
    yield src
    src.stop()


def _at(src: ReplaySource, t: float):
    src.replay.seek(t)
    return src.state.evaluate(t).node(NODE)


def test_the_recording_holds_a_whole_incident(incident, replay):
    assert replay.problems == []
    assert replay.settings.grace == GRACE and replay.settings.toleration_seconds == TOLERATION
    assert replay.settings.server_version == "v1.20.2"
    assert None not in (incident.unknown_seen, incident.noexecute_seen)
    assert {"own-toleration", "default-toleration"} <= set(incident.evictions)


def test_ready_then_overdue_then_unknown_as_the_real_flip_says(incident, replay):
    predicted = incident.last_renewal_seen + GRACE
    # the real lastTransitionTime falls in nodewatch's window: after grace, within one monitor pass
    assert predicted - TRUNC - LATENCY <= incident.flip <= predicted + MONITOR + LATENCY
    assert _at(replay, predicted - 0.5).state in (NodeState.READY, NodeState.LATE)
    overdue = _at(replay, (predicted + incident.unknown_seen) / 2)
    assert overdue.state is NodeState.OVERDUE
    assert overdue.lease_age(incident.unknown_seen) <= GRACE + MONITOR + LATENCY
    assert _at(replay, incident.unknown_seen).state is NodeState.UNKNOWN


def test_evicting_with_the_countdown_the_real_deletions_kept(incident, replay):
    assert _at(replay, incident.noexecute_seen - 0.01).state is NodeState.UNKNOWN
    v = _at(replay, incident.noexecute_seen)
    assert v.state is NodeState.EVICTING
    assert v.eviction_at == incident.taint_added + TOLERATION
    pods = {p.name: p for p in replay.state.pods_on(NODE, incident.noexecute_seen)}
    for name, real in incident.evictions.items():
        assert pods[name].eviction_at is not None, name
        assert abs(pods[name].eviction_at - real) <= TRUNC, (name, pods[name].eviction_at, real)
        assert not pods[name].terminating


def test_pods_terminate_when_deleted_and_the_node_ends_evicted(incident, replay):
    last = max(incident.deletion_seen.values())
    for name, seen in incident.deletion_seen.items():
        replay.replay.seek(seen)
        pods = {p.name: p for p in replay.state.pods_on(NODE, seen)}
        assert pods[name].terminating, name
    assert _at(replay, last).state is NodeState.EVICTED
