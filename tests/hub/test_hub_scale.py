"""What a hub of 130,000 nodes and 50 viewers needs (issue 29; bench/hub.py --scale measures it):
the first rows of a snapshot on their way before the rest is encoded, renewals as four values
instead of whole views, label sets shared by the nodes of a pool, and a viewer's order kept
without a sort key per node."""

from __future__ import annotations

import threading

import pytest

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
