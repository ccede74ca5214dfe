"""The typed decoder (``core.wire``) gives the same records as the forgiving dict readers, and falls
back to them for whatever does not fit its types."""

from __future__ import annotations

import orjson
import pytest

from bench.objects import raw_lease, raw_node
from nodewatch.core.objects import lease_from_dict, node_from_dict
from nodewatch.core.wire import DECODERS, WireError
from support.factories import T0, lease, node, taint


def _list(kind: str, items: list[dict], cont: str | None = None) -> bytes:
    meta = {"resourceVersion": "77"}
    if cont:
        meta["continue"] = cont
    return orjson.dumps({"kind": kind, "apiVersion": "v1", "metadata": meta, "items": items})


NODES = [
    raw_node(0),
    raw_node(7),
    node("n-tainted", "False", taints=[taint("node.kubernetes.io/unreachable", added=T0 - 60),
                                       taint("node.kubernetes.io/not-ready", "NoSchedule")],
         unschedulable=True, conditions={"MemoryPressure": "True"}, reason="KubeletNotReady", message="PLEG"),
    node("n-bare", None, zone="", region=""),
    {"metadata": {"name": "n-minimal"}},
    {"metadata": {"name": "n-nulls", "labels": None}, "spec": None, "status": {"conditions": None, "nodeInfo": None}},
    {"metadata": {"name": "n-maps"}, "status": {"capacity": None, "allocatable": {}}},
    {"metadata": {"name": "n-maps2"}, "status": {"capacity": {"cpu": "4", "pods": "110"}, "allocatable": {"cpu": "4"}}},
    {"metadata": {"name": "n-excluded", "labels": {"node.kubernetes.io/exclude-disruption": ""}},
     "status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "conditions": [{"type": "Ready"}, {"status": "True"}]}},
]


@pytest.mark.parametrize("obj", NODES, ids=lambda o: o["metadata"]["name"])
def test_a_node_decodes_to_the_same_record_both_ways(obj):
    records, rv, cont = DECODERS["nodes"].decode_list(_list("NodeList", [obj], cont="abc"))
    assert (rv, cont) == ("77", "abc")
    assert records == [node_from_dict(obj)]


def test_leases_decode_to_the_same_records_both_ways():
    objs = [raw_lease("a", T0), lease("b", None), lease("c", T0 - 5, duration=15),
            {"metadata": {"name": "d", "namespace": "kube-node-lease"}, "spec": {"leaseDurationSeconds": 40.5}},
            {"metadata": {"name": "e"}}]
    records, rv, cont = DECODERS["leases"].decode_list(_list("LeaseList", objs))
    assert (rv, cont) == ("77", None)
    assert records == [lease_from_dict(o) for o in objs]


def test_items_without_a_name_are_left_out_as_the_dict_path_does():
    records, _, _ = DECODERS["nodes"].decode_list(_list("NodeList", [{"metadata": {}}, {}, raw_node(1)]))
    assert [r.name for r in records] == [raw_node(1)["metadata"]["name"]]


@pytest.mark.parametrize("bad", [
    {"metadata": {"name": "x", "labels": {"a": 1}}},  # a label value that is not a string
    {"metadata": {"name": "x"}, "status": {"conditions": "Ready"}},  # a list that is a string
    {"metadata": {"name": "x"}, "spec": {"unschedulable": "yes"}},
    {"metadata": {"name": "x"}, "status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": True}}}},
    {"metadata": {"name": "x"}, "status": {"capacity": {"cpu": 8}}},  # resource maps are decoded later
    {"metadata": {"name": "x"}, "status": {"allocatable": ["cpu"]}},
])
def test_what_does_not_fit_the_types_raises_for_the_dict_fallback(bad):
    with pytest.raises(WireError):
        DECODERS["nodes"].decode_list(_list("NodeList", [bad]))
    node_from_dict(bad)  # and the dict path reads it, forgivingly


def test_watch_lines_decode_with_their_resource_version():
    obj = raw_node(3)
    etype, rec, rv = DECODERS["nodes"].decode_event(orjson.dumps({"type": "MODIFIED", "object": obj}))
    assert (etype, rv) == ("MODIFIED", obj["metadata"]["resourceVersion"])
    assert rec == node_from_dict(obj)
    assert (getattr(rec, "namespace", ""), rec.name) == ("", obj["metadata"]["name"])
    _, lrec, _ = DECODERS["leases"].decode_event(orjson.dumps({"type": "ADDED", "object": raw_lease("a", T0)}))
    assert (lrec.namespace, lrec.name) == ("kube-node-lease", "a")


@pytest.mark.parametrize("line", [
    {"type": "BOOKMARK", "object": {"kind": "Lease", "metadata": {"resourceVersion": "9"}}},
    {"type": "ERROR", "object": {"kind": "Status", "status": "Failure", "code": 410}},
    {"type": "MODIFIED", "object": {"metadata": {"name": "a"}, "spec": {"renewTime": 5}}},
])
def test_bookmarks_errors_and_odd_lines_are_left_to_the_dict_path(line):
    with pytest.raises(WireError):
        DECODERS["leases"].decode_event(orjson.dumps(line))


def test_records_pass_through_the_dict_readers():
    rec = node_from_dict(raw_node(1))
    assert node_from_dict(rec) is rec
    lrec = lease_from_dict(raw_lease("a", T0))
    assert lease_from_dict(lrec) is lrec


def test_pods_decode_to_the_same_records_both_ways():
    from nodewatch.core.objects import pod_from_dict
    from support.factories import pod

    objs = [pod("web-1", "n1"), pod("db-0", "n2", owner_kind="StatefulSet", owner_name="db", deleting=T0,
                                    tolerations=[{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                                                  "effect": "NoExecute", "tolerationSeconds": 30}]),
            {"metadata": {"name": "bare"}},
            {"metadata": {"name": "owned", "namespace": "x", "ownerReferences": [{"kind": "Job", "name": "j"},
                                                                               {"kind": "ReplicaSet", "name": "r",
                                                                                "controller": True}]},
             "status": {"phase": "Running", "conditions": [{"type": "DisruptionTarget", "status": "True"}]}}]
    records, _, _ = DECODERS["pods"].decode_list(_list("PodList", objs))
    assert records == [pod_from_dict(o) for o in objs]
    assert pod_from_dict(records[0]) is records[0]


def test_extreme_numbers_are_range_checked_on_the_typed_path_too():
    """A lease duration or toleration of 10**18 seconds is clamped the same way both paths read it."""
    from nodewatch.core.objects import pod_from_dict

    huge = 10**18
    objs = [{"metadata": {"name": "x", "namespace": "kube-node-lease"},
             "spec": {"leaseDurationSeconds": huge, "renewTime": "9999-12-31T23:59:59.000000Z"}}]
    records, _, _ = DECODERS["leases"].decode_list(_list("LeaseList", objs))
    assert records == [lease_from_dict(objs[0])]
    assert records[0].duration_seconds is not None and records[0].duration_seconds < huge
    pod = {"metadata": {"name": "p", "namespace": "d"},
           "spec": {"nodeName": "n", "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute",
                                                      "tolerationSeconds": huge}]}}
    typed, _, _ = DECODERS["pods"].decode_list(_list("PodList", [pod]))
    assert typed == [pod_from_dict(pod)]


def _lines(*events) -> list[bytes]:
    return [orjson.dumps(e) for e in events]


def test_a_block_of_lines_decodes_as_its_lines_do_one_by_one():
    lines = _lines({"type": "ADDED", "object": raw_node(1)}, {"type": "MODIFIED", "object": raw_node(2)},
                   {"type": "DELETED", "object": raw_node(3)})
    block = b"\n".join(lines) + b"\n"
    assert DECODERS["nodes"].decode_events(memoryview(block)) == [DECODERS["nodes"].decode_event(x) for x in lines]


@pytest.mark.parametrize("odd", [
    {"type": "BOOKMARK", "object": {"kind": "Lease", "metadata": {"resourceVersion": "9"}}},
    {"type": "ERROR", "object": {"kind": "Status", "status": "Failure", "code": 410}},
    {"type": "MODIFIED", "object": {"metadata": {"name": "a"}, "spec": {"renewTime": 5}}},
])
def test_a_block_with_one_odd_line_is_refused_whole(odd):
    block = b"\n".join(_lines({"type": "ADDED", "object": raw_lease("a", T0)}, odd)) + b"\n"
    with pytest.raises(WireError):
        DECODERS["leases"].decode_events(block)


def test_the_reflector_reads_a_mixed_block_as_it_reads_its_lines():
    """A block with a bookmark and a line the types refuse (read as a dict) gives the same events,
    in the same order, and the same resourceVersion as the line-by-line reader."""
    from nodewatch.sources.reflector import LEASES, Reflector

    lines = _lines({"type": "ADDED", "object": raw_lease("a", T0, rv=5)},
                   {"type": "BOOKMARK", "object": {"kind": "Lease", "metadata": {"resourceVersion": "7"}}},
                   {"type": "MODIFIED", "object": {"metadata": {"name": "b", "namespace": "kube-node-lease",
                                                                "resourceVersion": "8"},
                                                   "spec": {"renewTime": "not a time", "holderIdentity": "b"}}},
                   {"type": "MODIFIED", "object": raw_lease("c", T0, rv=9)})
    ignore = lambda *a, **k: None  # noqa: E731

    def reflector() -> Reflector:
        return Reflector(None, LEASES, ignore, ignore, ignore, wall=lambda: T0)  # type: ignore[arg-type]

    by_block, by_line = reflector(), reflector()
    got = by_block._decode_block(memoryview(b"\n".join(lines) + b"\n"))
    want = by_line._decode(lines)
    def same(batch):  # records as records, the bookmark as the dict it is
        return [(r, e, o if e == "BOOKMARK" else lease_from_dict(o), t, listing) for r, e, o, t, listing in batch]

    assert same(got) == same(want)
    assert [e for _, e, *_ in got] == ["ADDED", "BOOKMARK", "MODIFIED", "MODIFIED"]
    assert by_block.resource_version == by_line.resource_version == "9"
    # a block of object events only takes the one-call path, with the same result
    plain = [lines[0], lines[3]]
    assert [(e, o) for _, e, o, *_ in reflector()._decode_block(memoryview(b"\n".join(plain)))] == \
           [(e, o) for _, e, o, *_ in reflector()._decode(plain)]


def _typed_nodes(objs: list[dict]) -> list:
    return DECODERS["nodes"].decode_list(_list("NodeList", objs))[0]


def _conditioned(name: str, conditions: list[dict]) -> dict:
    return {"metadata": {"name": name}, "status": {"conditions": conditions}}


def test_nodes_whose_conditions_say_the_same_keep_their_own_times():
    """The second node's conditions come from the memo of texts already seen: its times are its own."""
    def ready(hb: str, tr: str | None) -> list[dict]:
        c = {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": hb}
        if tr is not None:
            c["lastTransitionTime"] = tr
        return [c, {"type": "DiskPressure", "status": "False", "lastHeartbeatTime": hb, "lastTransitionTime": hb}]

    objs = [_conditioned("a", ready("2027-01-14T08:00:00Z", "2027-01-14T07:00:00Z")),
            _conditioned("b", ready("2027-01-14T08:00:07Z", "2027-01-14T06:00:00Z")),
            _conditioned("c", ready("2027-01-14T08:00:07Z", None)),
            _conditioned("d", ready("not a time", "2027-01-14T06:00:00Z"))]
    typed = _typed_nodes(objs)
    assert typed == [node_from_dict(o) for o in objs]
    a, b, c, d = typed
    assert a.conditions.shape is b.conditions.shape is c.conditions.shape is d.conditions.shape
    assert b.conditions["Ready"].last_heartbeat - a.conditions["Ready"].last_heartbeat == 7
    assert b.conditions["Ready"].last_transition - a.conditions["Ready"].last_transition == -3600
    assert c.conditions["Ready"].last_transition is None
    assert d.conditions["Ready"].last_heartbeat is None and d.conditions["DiskPressure"].last_transition is None


@pytest.mark.parametrize("twice", [False, True], ids=["first", "from the memo"])
def test_conditions_without_a_type_or_given_twice_read_as_the_dict_path_reads_them(twice):
    conds = [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2027-01-14T08:00:00Z"},
             {"status": "True", "lastHeartbeatTime": "2027-01-14T08:00:01Z"},
             {"type": "MemoryPressure", "lastHeartbeatTime": "2027-01-14T08:00:02Z"},
             {"type": "Ready", "status": "False", "reason": "again", "lastHeartbeatTime": "2027-01-14T08:00:03Z"}]
    objs = [_conditioned("x", conds)] * (2 if twice else 1) + [_conditioned("y", [{"status": "True"}])]
    typed = _typed_nodes(objs)
    assert typed == [node_from_dict(o) for o in objs]
    rec = typed[-2]
    assert list(rec.conditions) == ["Ready", "MemoryPressure"]
    assert rec.conditions["Ready"].status == "False" and rec.conditions["MemoryPressure"].status == "Unknown"
    assert rec.conditions["Ready"].last_heartbeat - rec.conditions["MemoryPressure"].last_heartbeat == 1
    assert not typed[-1].conditions


def test_the_memos_start_again_when_full(monkeypatch):
    """Past their bounds the memos of condition texts and pool profiles are emptied, and the records
    stay the same as the dict path's."""
    from nodewatch.core import objects, wire

    monkeypatch.setattr(wire, "SHAPES_MAX", 2)
    monkeypatch.setattr(objects, "PROFILES_MAX", 2)
    objs = [node(f"n{i}", "False", reason=f"reason-{i % 4}", labels={"pool": f"p{i % 3}"}) for i in range(12)]
    for i, o in enumerate(objs):
        o["status"]["nodeInfo"]["kubeletVersion"] = f"v1.{i % 5}"
    assert _typed_nodes(objs) == [node_from_dict(o) for o in objs]
    assert len(wire._condition_shapes) <= 2 and len(objects._pool_profiles) <= 2


def test_nodes_of_one_label_set_with_other_versions_get_their_own_profiles():
    objs = [node("a", labels={"pool": "p"}), node("b", labels={"pool": "p"}), node("c", labels={"pool": "p"})]
    objs[1]["status"]["nodeInfo"]["kubeletVersion"] = "v1.34.0"
    a, b, c = _typed_nodes(objs)
    assert a.labels.common is b.labels.common is c.labels.common
    assert (a.kubelet_version, b.kubelet_version) == ("v1.33.2", "v1.34.0")
    assert a.profile is c.profile and b.profile is not a.profile
    assert [node_from_dict(o) for o in objs] == [a, b, c]


def test_nodes_with_the_same_resource_maps_share_them_however_the_text_is_spaced():
    cap = {"cpu": "8", "memory": "32386544Ki", "pods": "58"}
    spaced = b'{"metadata": {"name": "c"}, "status": {"capacity": { "cpu" : "8", "memory":"32386544Ki","pods":"58"}}}'
    body = b'{"items": [%s, %s, %s]}' % (orjson.dumps({"metadata": {"name": "a"}, "status": {"capacity": cap}}),
                                         orjson.dumps({"metadata": {"name": "b"}, "status": {"capacity": cap}}), spaced)
    a, b, c = DECODERS["nodes"].decode_list(body)[0]
    assert a.capacity == b.capacity == c.capacity == cap and a.capacity is b.capacity
    assert a.allocatable == {} and [a, b, c] == [node_from_dict(orjson.loads(body)["items"][i]) for i in range(3)]


def _node_text(name: str, labels: bytes) -> bytes:
    return b'{"metadata": {"name": %s, "labels": %s}}' % (orjson.dumps(name), labels)


@pytest.mark.parametrize("name,labels", [
    ("n1", b'{"kubernetes.io/hostname":"n1","pool":"a","zone":"z"}'),  # first
    ("n2", b'{"pool":"a","kubernetes.io/hostname":"n2","zone":"z"}'),  # between
    ("n3", b'{"pool":"a","zone":"z","kubernetes.io/hostname":"n3"}'),  # last
    ("n4", b'{"kubernetes.io/hostname":"n4"}'),  # alone
    ("n5", b'{"pool":"a", "kubernetes.io/hostname" : "n5"}'),  # spaced: read whole
    ("n6", b'{"pool":"a","kubernetes.io/hostname":"other"}'),  # another host name: a shared label like any
    ("n7", b'{"pool":"a","kubernetes.io/hostname":"n\\u0037"}'),  # the name written with an escape
    ("n8", b'{"kubernetes.io/hostname":"n8","kubernetes.io\\/hostname":"evil"}'),  # twice, once escaped
    ("n9", b'{"kubernetes.io/hostname":"evil","kubernetes.io/hostname":"n9"}'),  # twice: the last counts
    ('a","x":"b', b'{"kubernetes.io/hostname":"a","x":"b"}'),  # a name that looks like JSON members
    ('q"', b'{"kubernetes.io/hostname":"q\\"","p":"1"}'),
    ("n10", b'null'), ("n11", b'{}'),
    ("n12", b'{"pool":"a,\\"kubernetes.io/hostname\\":\\"n12\\""}'),  # the member inside a value
])
def test_labels_read_from_their_text_as_the_dict_path_reads_them(name, labels):
    text = _node_text(name, labels)
    typed = DECODERS["nodes"].decode_list(b'{"items": [%s, %s]}' % (text, text))[0]  # the second from the memo
    want = node_from_dict(orjson.loads(text))
    assert typed == [want, want]
    assert dict(typed[1].labels) == dict(want.labels) and list(typed[1].labels) == list(want.labels)
    assert typed[1].labels.get("kubernetes.io/hostname") == want.labels.get("kubernetes.io/hostname")


def test_a_pool_shares_one_label_set_wherever_its_nodes_write_the_hostname():
    texts = [_node_text("n1", b'{"kubernetes.io/hostname":"n1","pool":"a"}'),
             _node_text("n2", b'{"pool":"a","kubernetes.io/hostname":"n2"}'),
             _node_text("n3", b'{"pool":"a", "kubernetes.io/hostname":"n3"}')]
    a, b, c = DECODERS["nodes"].decode_list(b'{"items": [%s]}' % b",".join(texts))[0]
    assert [r.labels.host for r in (a, b, c)] == ["n1", "n2", "n3"]
    assert a.labels.common == {"pool": "a"} and b.labels.common is c.labels.common
    assert [a, b, c] == [node_from_dict(orjson.loads(t)) for t in texts]


@pytest.mark.parametrize("labels", [b'{"kubernetes.io/hostname":"n","a":{"b":"c"}}', b'{"a":["b"]}', b'"text"',
                                    b'{"kubernetes.io/hostname":"n","a":1}'])
def test_labels_that_are_not_a_map_of_strings_leave_the_node_to_the_dict_path(labels):
    with pytest.raises(WireError):
        DECODERS["nodes"].decode_list(b'{"items": [%s]}' % _node_text("n", labels))


def test_renew_times_read_as_parse_time_reads_them():
    """The MicroTime shortcut gives exactly ``parse_time``'s float, and leaves every other form
    (and every malformed one) to it."""
    import random

    from nodewatch.core.timeutil import parse_time
    from nodewatch.core.wire import _micro_time

    rng = random.Random(14)
    samples = ["2026-12-01T00:33:48.953171Z", "9999-12-31T23:59:59.000000Z", "9999-12-31T23:59:59.500000Z",
               "1970-01-01T00:00:00.000000Z", "1969-12-31T23:59:59.999999Z", "2026-12-31T23:59:60.500000Z",
               "2026-02-30T00:00:00.000000Z", "2026-12-01T24:00:00.000000Z", "2026-12-01 00:33:48.953171Z",
               "2026-12-01t00:33:48.953171Z", "2026-12-01T00:33:48.95317Z", "2026-12-01T00:33:48.9531710",
               "2026-12-01T00:33:48.95317\u0661Z", "\u0662026-12-01T00:33:48.953171Z", "2026-12-01T00:33:48,953171Z",
               "0000-01-01T00:00:00.000000Z", "2026-12-01T00:33:48.953171+00:00", "", None]
    for _ in range(3000):
        t = rng.uniform(-1e9, 2.6e11)
        s = f"{int(t // 86400) % 10000:04d}-{rng.randint(0, 13):02d}-{rng.randint(0, 32):02d}T" \
            f"{rng.randint(0, 25):02d}:{rng.randint(0, 61):02d}:{rng.randint(0, 61):02d}.{rng.randint(0, 999999):06d}Z"
        samples.append(s)
        samples.append(f"20{rng.randint(0, 99):02d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T"
                       f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}."
                       f"{rng.randint(0, 999999):06d}Z")
    for s in samples:
        assert _micro_time(s) == parse_time(s), s
    assert sum(parse_time(s) is not None for s in samples) > 3000  # most are times


@pytest.mark.parametrize("duration", [40, 40.0, 0, -0.0, -5, 1e300, 10**18, 0.5])
def test_lease_durations_read_as_the_dict_path_reads_them(duration):
    obj = {"metadata": {"name": "a", "namespace": "kube-node-lease"},
           "spec": {"holderIdentity": "a", "leaseDurationSeconds": duration,
                    "renewTime": "2026-12-01T00:33:48.953171Z"}}
    for _ in range(2):  # the second from the memo
        rec = DECODERS["leases"].decode_list(_list("LeaseList", [obj]))[0][0]
        assert rec == lease_from_dict(obj) and repr(rec) == repr(lease_from_dict(obj))


def test_odd_address_types_beyond_the_memo_read_as_the_dict_path_reads_them():
    obj = {"metadata": {"name": "n"}, "status": {"addresses": [{"type": f"Odd{i}", "address": f"10.0.0.{i}"}
                                                             for i in range(100)] + [{"address": "n"}]}}
    rec = _typed_nodes([obj, obj])[1]
    assert rec == node_from_dict(obj) and rec.addresses[-1] == ("", "n") and rec.addresses[70] == ("Odd70", "10.0.0.70")


def _damaged(rng, value):
    """``value`` with keys reordered, some dropped, some replaced by odd values, list items repeated."""
    odd = [None, "", 5, True, [], {}, "x", "True", "2027-01-14T08:00:00Z", "garbage", 1.5,
           "kubernetes.io/hostname", '"', "\\"]
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        out = {}
        for k in keys:
            r = rng.random()
            if r < 0.05:
                continue
            out[k] = rng.choice(odd) if r < 0.1 else _damaged(rng, value[k]) if r < 0.6 else value[k]
        return out
    if isinstance(value, list):
        out = [_damaged(rng, x) if rng.random() < 0.5 else x for x in value]
        if out and rng.random() < 0.1:
            out.append(rng.choice(out))
        return out
    return value


def test_randomly_damaged_nodes_and_leases_read_the_same_both_ways_or_go_to_the_dict_path():
    """Each object decoded twice in one block (the second through the memos the first filled): the
    same records as the dict path, or a ``WireError`` that sends the block there."""
    import random

    rng = random.Random(14)
    compared = 0
    for i in range(600):
        kind = "leases" if i % 3 == 0 else "nodes"
        obj = _damaged(rng, raw_lease(f"n{i % 7}", T0 + i * 0.37) if kind == "leases" else raw_node(i % 40))
        meta = obj.get("metadata")
        if kind == "nodes" and isinstance(meta, dict) and isinstance(meta.get("labels"), dict) and rng.random() < 0.3:
            meta["labels"]["kubernetes.io/hostname"] = meta.get("name")
        line = orjson.dumps({"type": "ADDED", "object": obj})
        try:
            events = DECODERS[kind].decode_events(line + b"\n" + line)
        except WireError:
            continue
        read = node_from_dict if kind == "nodes" else lease_from_dict
        try:
            want = read(obj)
        except Exception:  # noqa: BLE001 - no name: the typed path leaves it out
            assert events[0][1] is None and events[1][1] is None
            continue
        assert events[0][1] == want and events[1][1] == want, obj
        compared += 1
    assert compared > 250
