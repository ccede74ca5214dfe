"""The watch decoder's renewal path (``core.wire``: the managed fields kept as text until asked, the
MicroTime memo) and ``Ingest._on_lease`` give what the full dict path gives, on objects shaped as
the API server and other recorders write them (``bench/foreign_recording.py``: its key orders,
spacing, full managedFields, extra fields), and on the odd shapes a cluster or a file may hold."""

from __future__ import annotations

import copy
import json
import pickle

import orjson
import pytest

from bench import foreign_recording as fr
from nodewatch.core.fleet import FleetState
from nodewatch.core.objects import lease_from_dict, node_from_dict
from nodewatch.core.settings import Settings
from nodewatch.core.timeutil import parse_time
from nodewatch.core.wire import DECODERS, WireError, _micro_time

READ = {"leases": lease_from_dict, "nodes": node_from_dict}


def _line(etype: str, obj: dict, style: int, seq: int) -> bytes:
    """A watch line in one of the shapes other writers use: the event's keys in either order, extra
    fields, the stdlib's spacing or none, keys sorted, a trailing blank."""
    ev: dict = {"object": obj, "type": etype} if style % 2 else {"type": etype, "object": obj}
    if style % 3 == 1:
        ev["seq"] = seq
        ev["watch"] = {"attempt": 1, "resource": "x"}
    kw = fr._STYLES[style % len(fr._STYLES)]
    return json.dumps(ev, **kw).encode() + (b"  \n" if style % 5 == 4 else b"\n")  # type: ignore[arg-type]


def _foreign(nodes: int = 40, minutes: float = 1.5) -> list[tuple[float, str, str, dict, bool]]:
    return list(fr.events(nodes, minutes, seed=7))


def test_foreign_watch_lines_decode_to_the_dict_paths_records():
    """Every Lease and Node of the foreign generator's traffic, as blocks of watch lines in mixed
    shapes: the same records (``written_at`` included, read lazily) as the dict path reads."""
    events = _foreign()
    for resource in ("leases", "nodes"):
        objs = [(etype, obj) for _, res, etype, obj, _ in events if res == resource]
        lines = [_line(etype, obj, i, i) for i, (etype, obj) in enumerate(objs)]
        got = [e for k in range(0, len(lines), 50) for e in DECODERS[resource].decode_events(b"".join(lines[k:k + 50]))]
        assert len(got) == len(objs)
        for (etype, obj), (g_type, rec, rv) in zip(objs, got):
            want = READ[resource](obj)
            assert (g_type, rv) == (etype, obj["metadata"]["resourceVersion"])
            assert rec == want
            if resource == "leases":
                assert rec.written_at is not None and rec.written_at == want.written_at
                assert pickle.loads(pickle.dumps(rec)) == want


def _lease(managed, renew: str = "2026-09-21T14:13:21.250000Z") -> dict:
    obj = fr._Fleet(1, 3).lease(0, fr.START)
    obj["spec"]["renewTime"] = renew
    if managed is _ABSENT:
        del obj["metadata"]["managedFields"]
    else:
        obj["metadata"]["managedFields"] = managed
    return obj


_ABSENT = object()
_ENTRY = {"manager": "kubelet", "operation": "Update", "time": "2026-09-21T14:13:21Z",
          "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:renewTime": {}, "f:time": {"time": "1999-01-01T00:00:00Z"}}}}

ODD_MANAGED = {
    "absent": _ABSENT,
    "null": None,
    "empty": [],
    "a string": "kubelet",
    "two writers": [dict(_ENTRY, manager="kube-controller-manager", time="2026-09-21T14:20:00Z"), _ENTRY],
    "two kubelet writes": [_ENTRY, dict(_ENTRY, time="2026-09-21T14:15:00Z", operation="Update")],
    "an Apply": [dict(_ENTRY, operation="Apply")],
    "the holder as manager": [dict(_ENTRY, manager="ip-10-20-0-0.ec2.internal")],
    "a time as a number": [dict(_ENTRY, time=1790000000)],
    "a manager as a map": [dict(_ENTRY, manager={"name": "kubelet"})],
    "an entry as a list": [["kubelet"], _ENTRY],
    "a bad time": [dict(_ENTRY, time="yesterday")],
    "escapes": [dict(_ENTRY, manager="kube\u006cet", time="2026-09-21T14:13:21Z")],
}


@pytest.mark.parametrize("managed", ODD_MANAGED.values(), ids=ODD_MANAGED.keys())
def test_odd_managed_fields_give_the_dict_paths_write_time(managed):
    """The managed fields decoded only when ``written_at`` is asked: whatever they hold, the record
    says what the dict path says (and a shape the types refuse is read as the dict path reads it)."""
    obj = _lease(copy.deepcopy(managed) if managed is not _ABSENT else _ABSENT)
    want = lease_from_dict(obj)
    line = orjson.dumps({"type": "MODIFIED", "object": obj}) + b"\n"
    try:
        (_, rec, _), = DECODERS["leases"].decode_events(line)
    except WireError:  # the line does not fit the types at all: the dict path reads it
        return
    assert rec == want
    assert rec.written_at == want.written_at


def test_a_managed_field_entry_whose_manager_is_not_a_string_is_no_kubelet_write():
    """It used to raise TypeError (a map is unhashable) in the dict path, so the whole Lease event
    was lost as a Problem; now it is an entry of no kubelet."""
    obj = _lease([dict(_ENTRY, manager={"name": "kubelet"})])
    assert lease_from_dict(obj).written_at is None


RENEW_TIMES = [
    "2026-09-21T14:13:21.250000Z",
    "2026-09-21T14:13:21.000001Z",
    "2016-12-31T23:59:60.500000Z",  # a leap second: parse_time's own reading
    "2026-09-21T14:13:21.\u0661\u0662\u0663\u0664\u0665\u0666Z",  # digits, not ASCII
    "2026-09-21T14:13:21. 12345Z",
    "2026-09-21T14:13:21.+12345Z",
    "2026-09-21T14:13:21.1_2345Z",
    "2026-09-21T14:13:21.123456z",
    "2026-09-21t14:13:21.123456Z",
    "2026-09-21 14:13:21.123456Z",
    "2026-09-21T14:13:21,123456Z",
    "2026-09-21T14-13-21.123456Z",
    "2026-13-21T14:13:21.123456Z",
    "9999-12-31T23:59:59.999999Z",
    "9999-12-31T23:59:58.999999Z",
    "1969-12-31T23:59:59.999999Z",
    "1970-01-01T00:00:00.000000Z",
    "2026-09-21T14:13:21.1234567Z",
    "2026-09-21T14:13:21.12345Z",
    "2026-09-21T14:13:21.123456+00:00",
]


@pytest.mark.parametrize("value", RENEW_TIMES)
def test_the_microtime_memo_reads_as_parse_time_does(value):
    """Twice: the second reading goes through the memo the first may have filled."""
    assert _micro_time(value) == parse_time(value)
    assert _micro_time(value) == parse_time(value)


def _state(events, typed: bool, synced: bool) -> FleetState:
    """The foreign traffic applied as the live source applies it: typed records from blocks of
    watch lines, or the dict path's; with a SYNCED after each list, or none (a recorder that did not
    say when its lists were complete: every renewal is then dated by the server's write time, the
    record's ``written_at``)."""
    st = FleetState(Settings(server_version="v1.33.2"))
    last = None
    for t, resource, etype, obj, listed in events:
        if synced and last is not None and last[1] and (not listed or resource != last[0]):
            st.apply(last[0], "SYNCED", None, t)
        rec = DECODERS[resource].decode_events(_line(etype, obj, int(t * 1000), 0))[0][1] if typed else obj
        st.apply(resource, etype, rec, t, listed)
        last = (resource, listed)
    return st


@pytest.mark.parametrize("synced", [True, False], ids=["synced", "never-synced"])
def test_the_renewal_path_leaves_the_state_the_dict_path_leaves(synced):
    """The same foreign traffic (lists, renewals, a zone losing nodes and getting half back) through
    the typed watch path and through the dict path: the same lease tracks, heartbeats and views at
    several instants."""
    events = _foreign(30, 2.0)
    cut = [len(events) // 4, len(events) // 2, len(events)]
    for end in cut:
        a, b = _state(events[:end], True, synced), _state(events[:end], False, synced)
        assert a.leases == b.leases
        assert {k: list(v) for k, v in a.beats.items()} == {k: list(v) for k, v in b.beats.items()}
        now = events[end - 1][0] + 1
        assert a.evaluate(now).nodes == b.evaluate(now).nodes
    assert {t.age_from for t in a.leases.values()} == ({"receipt"} if synced else {"server"})


def test_the_lease_frontier_reads_one_write_time_a_batch_and_the_newest():
    """The reflector moves the lease stream's frontier by a batch's newest write (``reflector._written``):
    a watch delivers writes in order, so that is the last record's. It reads that one ``written_at``
    only: every other renewal's managedFields stay undecoded text, as the receipt-timed ingest left
    them (reading each was 1.7 us a renewal). A last record without a write time (no kubelet entry)
    passes the question to the one before; the frontier never passes the batch's receipt."""
    from nodewatch.core.evidence import StreamFrontier
    from nodewatch.sources.reflector import _written

    fleet = fr._Fleet(5, 3)
    objs = [fleet.lease(i, fr.START + i) for i in range(5)]
    del objs[4]["metadata"]["managedFields"]  # the last: no kubelet write time
    block = b"".join(_line("MODIFIED", o, 0, i) for i, o in enumerate(objs))
    records = [rec for _, rec, _ in DECODERS["leases"].decode_events(block)]
    received = fr.START + 100.0
    batch = [("leases", "MODIFIED", rec, received, False) for rec in records]
    frontier = StreamFrontier()
    _written(frontier, batch)
    want = lease_from_dict(objs[3]).written_at
    assert want is not None and frontier.written_to == want
    assert [rec._managed is None for rec in records] == [False, False, False, True, True]  # decoded: the 4th only
    early = StreamFrontier()
    _written(early, [("leases", "MODIFIED", records[3], want - 5.0, False)])
    assert early.written_to == want - 5.0  # clamped to its receipt
    nothing = StreamFrontier()
    _written(nothing, [("leases", "MODIFIED", objs[0], received, False)])  # a dict (a recorder's path)
    assert nothing.written_to == float("-inf")


def test_managed_fields_decoded_once_per_text_still_answer_for_each_holder():
    """Leases listed in one second share their managed fields' text, decoded once (``wire._entries_of``):
    the holder is applied to each record's own, so the same text says a write time for the Lease
    whose holder wrote it and none for another holder's."""
    entry = dict(_ENTRY, manager="ip-10-20-0-0.ec2.internal")
    mine, other = _lease([dict(entry)]), _lease([dict(entry)])
    mine["spec"]["holderIdentity"] = "ip-10-20-0-0.ec2.internal"
    other["spec"]["holderIdentity"] = "ip-10-20-0-9.ec2.internal"
    lines = b"".join(orjson.dumps({"type": "ADDED", "object": o}) + b"\n" for o in (mine, other, mine))
    recs = [rec for _, rec, _ in DECODERS["leases"].decode_events(lines)]
    assert [r.written_at for r in recs] == [lease_from_dict(o).written_at for o in (mine, other, mine)]
    assert recs[0].written_at is not None and recs[1].written_at is None
