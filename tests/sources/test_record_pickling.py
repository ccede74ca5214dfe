"""Records cross a process boundary pickled, in batches of ``(etype, record, resourceVersion)``: the
Node list worker sends them to the dashboard. What comes back equals what was sent, reads the same,
and what records share stays shared within one batch."""

from __future__ import annotations

import dataclasses
import math
import pickle

import orjson
import pytest

from bench.objects import raw_lease, raw_node
from nodewatch.core.objects import (
    AWAITED,
    NO_CONDITIONS,
    NO_LABELS,
    NO_PROFILE,
    Conditions,
    Labels,
    LeaseRecord,
    NodeProfile,
    NodeRecord,
    lease_from_dict,
    node_from_dict,
)
from nodewatch.core.rules import Taint
from nodewatch.core.wire import DECODERS
from support.factories import T0, lease, node, taint


def _round_trip(batch):
    return pickle.loads(pickle.dumps(batch, protocol=5))


def _pool(n: int = 6) -> list[NodeRecord]:
    """Nodes of one pool (``raw_node`` cycles 5 zones and 12 node groups)."""
    return [node_from_dict(raw_node(60 * i)) for i in range(n)]


def test_a_batch_of_node_records_comes_back_equal_and_reads_the_same():
    recs = [node_from_dict(raw_node(i)) for i in range(6)] + [
        node_from_dict(node("n-tainted", "False", taints=[taint("node.kubernetes.io/unreachable", added=T0 - 60)],
                            unschedulable=True, conditions={"MemoryPressure": "True"}, reason="KubeletNotReady",
                            message="PLEG")),
        node_from_dict(node("n-unknown", None, zone="", region="")),
        node_from_dict({"metadata": {"name": "n-minimal"}}),
    ]
    batch = [("ADDED", r, str(i)) for i, r in enumerate(recs)]
    back = _round_trip(batch)
    assert back == batch
    for (_, a, _), (_, b, _) in zip(batch, back):
        assert b is not a
        assert type(b.labels) is Labels and type(b.conditions) is Conditions
        assert dict(b.labels) == dict(a.labels)
        assert b.labels.get("kubernetes.io/hostname") == a.labels.get("kubernetes.io/hostname")
        assert (b.zone, b.kubelet_version, b.capacity, b.kubelet_port) == \
               (a.zone, a.kubelet_version, a.capacity, a.kubelet_port)
        assert b.ready == a.ready and b.conditions.true == a.conditions.true
        assert b.conditions.values() == a.conditions.values() and list(b.conditions) == list(a.conditions)
        assert b.addresses == a.addresses and b.taints == a.taints and b.created == a.created
    tainted = back[-3][1]
    assert tainted.taints == (Taint("node.kubernetes.io/unreachable", "NoExecute", "", T0 - 60),)
    assert tainted.conditions["MemoryPressure"].status == "True" and tainted.unschedulable


def test_what_records_share_stays_shared_within_one_batch():
    pool = _pool()
    assert all(r.profile is pool[0].profile for r in pool)
    back = [r for _, r, _ in _round_trip([("ADDED", r, "1") for r in pool])]
    assert back == pool
    first = back[0]
    for r in back[1:]:
        assert r.profile is first.profile  # one pool: one profile...
        assert r.labels.common is first.labels.common  # ...one label set...
        assert r.conditions.shape is first.conditions.shape  # ...one condition shape
        assert r.capacity is first.capacity
    assert all(r.labels.host == r.name for r in back)


def test_every_field_of_a_node_record_survives():
    """Each field set to something other than its default: a field added to ``NodeRecord`` but
    left out of its pickling fails here."""
    base = node_from_dict(node("n-1", "True", taints=[taint("k", "NoSchedule", added=T0)], unschedulable=True))
    changed = {f.name: getattr(base, f.name) for f in dataclasses.fields(NodeRecord)}
    changed.update(awaited=True, created=T0 - 5, address_list=("InternalIP", "10.0.0.1"))
    rec = NodeRecord(**changed)
    defaults = NodeRecord(name="")
    for f in dataclasses.fields(NodeRecord):
        assert getattr(rec, f.name) != getattr(defaults, f.name), f.name
    assert _round_trip(rec) == rec


def test_times_unknown_and_known_survive():
    rec = node_from_dict({"metadata": {"name": "n"}, "status": {"conditions": [
        {"type": "Ready", "status": "True", "lastHeartbeatTime": "2027-01-14T08:00:00Z"},
        {"type": "DiskPressure", "status": "False", "lastTransitionTime": "garbage"}]}})
    back = _round_trip(rec)
    assert back == rec
    assert back.conditions["Ready"].last_heartbeat is not None and back.conditions["Ready"].last_transition is None
    assert back.conditions["DiskPressure"].last_heartbeat is None
    assert not any(math.isnan(t) for c in back.conditions.values() for t in (c.last_heartbeat or 0,
                                                                            c.last_transition or 0))


def test_the_shared_singletons_stay_the_ones():
    bare = NodeRecord(name="x")
    back = _round_trip([AWAITED, bare, NO_PROFILE])
    assert back[0] is AWAITED
    assert back[1] == bare and back[1].labels is NO_LABELS and back[1].conditions is NO_CONDITIONS
    assert back[1].profile is NO_PROFILE and back[2] is NO_PROFILE


def test_a_hub_viewers_copy_with_plain_dicts_pickles_too():
    """A hub viewer's records hold plain dicts for labels and conditions: pickled as they are."""
    src = node_from_dict(raw_node(1))
    rec = dataclasses.replace(src, labels=dict(src.labels), conditions=dict(zip(src.conditions,
                                                                                src.conditions.values())))
    back = _round_trip(rec)
    assert back == rec and type(back.labels) is dict and type(back.conditions) is dict


def test_a_profile_pickles_with_every_field():
    p = NodeProfile("r/z", True, "v1", "containerd", "6.1", "AL2023", {"cpu": "8"}, {"cpu": "7"}, 10250)
    assert _round_trip(p) == p


@pytest.mark.parametrize("obj", [raw_lease("a", T0), lease("b", None), lease("c", T0 - 5, written=T0 - 4),
                                 {"metadata": {"name": "d"}}])
def test_lease_records_come_back_equal(obj):
    rec = lease_from_dict(obj)
    back = _round_trip([("MODIFIED", rec, "9")])
    assert back == [("MODIFIED", rec, "9")] and type(back[0][1]) is LeaseRecord


def test_decoded_batches_round_trip_as_the_worker_sends_them():
    """What ``decode_events`` gives for a block of watch lines, pickled and unpickled, equals it."""
    lines = [orjson.dumps({"type": "ADDED", "object": raw_node(i)}) for i in range(20)]
    lines += [orjson.dumps({"type": "DELETED", "object": node("gone", "Unknown")})]
    events = DECODERS["nodes"].decode_events(b"\n".join(lines))
    assert _round_trip(events) == events
    lease_lines = b"\n".join(orjson.dumps({"type": "ADDED", "object": raw_lease(f"n{i}", T0 - i)}) for i in range(5))
    leases = DECODERS["leases"].decode_events(lease_lines)
    assert _round_trip(leases) == leases


def test_unpickled_conditions_take_no_more_memory_than_decoded_ones():
    """The dashboard holds 65,000 unpickled records: their time arrays are made at their size."""
    import sys

    rec = DECODERS["nodes"].decode_events(orjson.dumps({"type": "ADDED", "object": raw_node(1)}))[0][1]
    back = _round_trip(rec)
    assert back.conditions == rec.conditions and len(rec.conditions) == 4
    assert sys.getsizeof(back.conditions._times) <= sys.getsizeof(rec.conditions._times)


def test_a_copy_of_a_record_shares_its_parts_as_a_shallow_copy_does():
    """The replay index copies records (applying may replace their taints): a copy is a new record
    holding the same labels and conditions, not new ones as unpickling makes."""
    import copy

    rec = node_from_dict(raw_node(3))
    twin = copy.copy(rec)
    assert twin == rec and twin is not rec
    assert twin.labels is rec.labels and twin.conditions is rec.conditions and twin.profile is rec.profile
