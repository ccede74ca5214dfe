"""What a hub of 130,000 nodes and 50 viewers needs (issue 29; bench/hub.py --scale measures it):
the first rows of a snapshot on their way before the rest is encoded, renewals as four values
instead of whole views, label sets shared by the nodes of a pool, and a viewer's order kept
without a sort key per node."""

from __future__ import annotations

import math
import platform
import random
import subprocess
import sys
import threading

import pytest
from msgspec.structs import replace

from nodewatch.core.fleet_data import sort_key
from nodewatch.core.rules import NodeState
from nodewatch.core.views import NodeView
from nodewatch.hub import protocol, publisher, viewer_state
from nodewatch.hub.codec import view_to_wire
from nodewatch.hub.viewer_state import ViewerState
from support.hub_support import RawClient, advance, demo_hub, hub_wire, viewer
from support.simserver import wait_until


def test_a_viewer_gets_the_first_rows_while_the_rest_of_the_snapshot_is_still_being_encoded(tmp_path, monkeypatch):
    """On the old code the whole snapshot (26 parts at 130,000 nodes) was encoded before any of it
    was queued: a viewer's first row waited for the last part."""
    release = threading.Event()
    rest = publisher.Snapshot.rest

    def slow_rest(self):
        assert release.wait(10)
        return rest(self)

    monkeypatch.setattr(publisher, "FIRST_PART", 20)
    monkeypatch.setattr(publisher.Snapshot, "rest", slow_rest)
    with demo_hub(tmp_path, nodes=200) as hub:
        seq = advance(hub, 30)
        c = RawClient(hub.socket_path)
        try:
            c.sock.settimeout(5)
            snap = c.read_until("snap")  # while the rest cannot be built yet
            assert snap["seq"] == seq and len(snap["nodes"]) == 20 and snap["parts"] == 1
            assert not release.is_set()
            release.set()
            part = c.read_until("part")
            assert part["seq"] == seq and len(part["nodes"]) == 180
            later = advance(hub, 10)
            assert c.read_until("delta", later)["seq"] == later  # and the deltas after it, in order
        finally:
            release.set()
            c.close()


def test_renewals_travel_as_four_values_and_the_viewer_ends_with_the_hubs_views(tmp_path):
    with demo_hub(tmp_path, nodes=300, scenario="steady") as hub, viewer(hub) as v:
        raw = RawClient(hub.socket_path)
        try:
            raw.read_until("snap")
            for _ in range(3):
                seq = advance(hub, 10)  # every lease renews once, on time
                delta = raw.read_until("delta", seq)
                assert len(delta["renew"]) >= 250 and len(delta["up"]) < 10
                assert all(len(r) == 5 and isinstance(r[0], str) for r in delta["renew"])
                wait_until(lambda: v.state.seq == seq)
                now = hub.source.clock.now()
                got = v.state.evaluate(now)
                assert {n.name: view_to_wire(n) for n in got.nodes} == hub_wire(hub, now)
                assert [n.name for n in got.nodes] == [n.name for n in hub.source.state.evaluate(now).nodes]
        finally:
            raw.close()


def test_renewals_smaller_than_whole_views(tmp_path):
    """A renewal's entry against the view it replaces, as the hub encodes them."""
    with demo_hub(tmp_path, nodes=500, scenario="steady") as hub:
        seq = advance(hub, 10)
        wait_until(lambda: hub._recent and hub._recent[-1][0] == seq)  # (broadcast on the hub's loop)
        _, frame = hub._recent[-1]
        d = protocol.decode(*_frame(frame))
        assert d["seq"] == seq and len(d["renew"]) >= 400
        whole = len(protocol.encode({"up": [view_to_wire(hub.publisher._last[r[0]]) for r in d["renew"]]}, compress=False))
        compact = len(protocol.encode({"renew": d["renew"]}, compress=False))
        assert compact < whole / 2


def _frame(data: bytes) -> tuple[int, bytes]:
    length, flags = protocol.HEADER.unpack_from(data)
    return flags, data[protocol.HEADER.size:protocol.HEADER.size + length]


@pytest.mark.parametrize("bulk", [0, 10**9], ids=["order rebuilt", "order edited in place"])
def test_the_viewers_order_is_the_hubs_however_it_is_kept(tmp_path, monkeypatch, bulk):
    monkeypatch.setattr(viewer_state, "BULK", bulk)
    with demo_hub(tmp_path, nodes=120) as hub, viewer(hub) as v:
        for _ in range(10):
            seq = advance(hub, 15)  # the incident: nodes change state, renew, and go
            wait_until(lambda: v.state.seq == seq)
            now = hub.source.clock.now()
            assert [view_to_wire(n) for n in v.state.evaluate(now).nodes] == \
                [view_to_wire(n) for n in hub.source.state.evaluate(now).nodes]


def test_the_nodes_of_a_pool_share_one_label_set_and_each_still_has_its_own_hostname(tmp_path):
    with demo_hub(tmp_path, nodes=200) as hub, viewer(hub) as v:
        records = hub.source.state.node_records()
        v.state.evaluate(hub.source.clock.now())
        sets = {id(v.state.nodes[n]) for n in records}
        assert len(sets) < 20, "one label set per pool, not per node"
        for n, rec in records.items():
            assert v.state.node_labels(n) == dict(rec.labels)
        assert any(val == n for n, rec in records.items() for val in rec.labels.values()), "hostname labels"


def test_a_delta_naming_a_label_set_the_viewer_never_got_is_a_wire_error():
    state = ViewerState()
    with pytest.raises(viewer_state.WireError, match="label set"):
        state.receive({"k": "delta", "seq": 1, "now": 1.0, "up": [], "del": [], "labels": {"n1": 7}})
    with pytest.raises(viewer_state.WireError, match="renewal"):
        state.receive({"k": "delta", "seq": 1, "now": 1.0, "up": [], "del": [], "renew": [["n1", 1.0]]})


def _view(name: str, rng) -> NodeView:
    state = rng.choice([NodeState.READY, NodeState.READY, NodeState.LATE, NodeState.UNKNOWN])
    return NodeView(name=name, zone="z", state=state, ready="True", lease_observed_at=rng.random() * 100,
                    lease_duration=40.0, grace=40.0, skew=None, eviction_at=None, taints=(), cordoned=False,
                    pressure=(), network_unavailable=False, cert_not_after=None, kubelet_version="v1", causes=(),
                    state_since=None, next_change=math.inf, sort_deadline=float(rng.randrange(5)))


@pytest.mark.parametrize("bulk", [0, 3, 10**9], ids=["order rebuilt", "mixed", "order edited in place"])
def test_a_viewers_frames_and_renewals_land_on_the_right_views_whatever_moved_before_them(monkeypatch, bulk):
    """The viewer keeps its views as a list in order and each key's place in it, brought up to date
    only from the first place an insertion or removal moved: random frames (views that change state
    and move, nodes that go and come, renewals of nodes before and after every move) against a
    plain dict of views sorted anew each time."""
    monkeypatch.setattr(viewer_state, "BULK", bulk)
    rng = random.Random(29)
    names = [f"n{i:03d}" for i in range(60)]
    model = {n: _view(n, rng) for n in names[:40]}
    state = ViewerState()
    # the snapshot as the hub sends it: its worst first, the rest in parts, the dashboard ticking between
    ordered = [view_to_wire(v) for v in sorted(model.values(), key=sort_key)]
    state.receive({"k": "snap", "seq": 1, "now": 1.0, "parts": 4, "nodes": ordered[:4]})
    for i in range(4):
        if rng.random() < 0.5:
            state.evaluate(1.0)
        state.receive({"k": "part", "seq": 1, "now": 1.0, "nodes": ordered[4 + 9 * i:13 + 9 * i]})
    assert [view_to_wire(v) for v in state.evaluate(1.0).nodes] == ordered
    for seq in range(2, 80):
        if seq % 3 == 0:  # nodes that join, and nothing else moves: after the last row, or not
            absent = [n for n in names if n not in model]
            up = {n: _view(n, rng) for n in rng.sample(absent, min(len(absent), rng.randrange(1, 4)))}
            if seq % 2:  # Ready, deadlines after every row's: after the last row, their names in random order
                up = {n: replace(v, state=NodeState.READY, sort_deadline=10.0 + seq) for n, v in up.items()}
            gone = []
        else:
            up = {n: _view(n, rng) for n in rng.sample(names, rng.randrange(0, 6))}
            gone = [n for n in rng.sample(sorted(model), rng.randrange(0, 3)) if n not in up]
        renew = {}
        for n in rng.sample(sorted(set(model) - set(gone)), min(len(model) - len(gone), rng.randrange(0, 15))):
            renew[n] = (rng.random() * 1000, 40.0, None, 500.0 + n.__hash__() % 7)
        for n in gone:
            del model[n]
        model.update(up)
        for n, (observed, duration, skew, nxt) in renew.items():
            if n not in up:  # (a renewal of a view sent in the same frame: the hub sends the view)
                model[n] = replace(model[n], lease_observed_at=observed, lease_duration=duration, skew=skew,
                                   next_change=nxt)
        state.receive({"k": "delta", "seq": seq, "now": float(seq), "up": [view_to_wire(v) for v in up.values()],
                       "del": gone, "renew": [[n, *r] for n, r in renew.items() if n not in up]})
        if rng.random() < 0.7:  # (frames merge until the dashboard's next tick)
            got = state.evaluate(float(seq)).nodes
            assert [view_to_wire(v) for v in got] == [view_to_wire(v) for v in sorted(model.values(), key=sort_key)]
            probe = rng.choice(names)
            assert state.has_node(probe) == (probe in model)
            assert state.node_details(probe, float(seq)).view == model.get(probe)
    state.evaluate(100.0)
    assert state.node_count() == len(model)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the knob is glibc's (sources/heap.py)")
def test_a_viewer_keeps_its_snapshot_parts_out_of_the_heap(tmp_path):
    """A snapshot's parts (a megabyte or more each at 130,000 nodes) are decoded and freed among
    views that stay; with glibc's mmap threshold fixed before the first one, they are mapped on
    their own (measured: a headless viewer of 130,000 nodes 123-127 MB against 149-150 MB)."""
    probe = ("import sys\n"
             "from nodewatch.hub.address import HubAddress\n"
             "from nodewatch.hub.viewer_source import ViewerSource\n"
             "from nodewatch.sources import heap\n"
             "s = ViewerSource(HubAddress(path=sys.argv[1]), reconnect_for=0.2, first_frame_timeout=0.2)\n"
             "before = heap._fixed\n"
             "s.start()\n"
             "s.stop()\n"
             "print(before, heap._fixed)\n")
    out = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "nothing.sock")], capture_output=True,
                         text=True, timeout=60, check=True)
    assert out.stdout.split() == ["None", "True"]
