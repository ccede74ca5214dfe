"""The hub and its viewers: one evaluation, many screens that agree, a stuck viewer that holds up
no one, reconnection, the drill-down through the hub, TLS and the token."""

from __future__ import annotations

import os
import stat
import time

import pytest

from nodewatch.core.clock import SystemClock, is_virtual
from nodewatch.core.rules import NodeState
from nodewatch.core.views import NodeDetails
from nodewatch.hub import protocol
from nodewatch.hub.codec import from_wire, to_wire, view_from_wire, view_to_wire
from nodewatch.hub.server import Hub
from nodewatch.hub.viewer_source import HubAddress, ViewerSource, parse_address
from nodewatch.hub.viewer_state import HUB_STREAM
from nodewatch.sources.demo import DemoSource
from support.hub_support import RawClient, advance, demo_hub, hub_wire, viewer
from support.simserver import wait_until


def _viewer_wire(v: ViewerSource) -> dict[str, list]:
    return {n.name: view_to_wire(n) for n in v.state.evaluate(v.clock.now()).nodes}


def test_every_viewer_shows_exactly_what_the_hub_evaluated_at_the_hubs_now(tmp_path):
    with demo_hub(tmp_path, nodes=80) as hub, viewer(hub) as a, viewer(hub) as b, viewer(hub) as c:
        states_seen: set[NodeState] = set()
        cordoned_seen = 0
        for _ in range(12):
            seq = advance(hub, 15)
            wait_until(lambda: all(v.state.seq == seq for v in (a, b, c)))
            now = hub.source.clock.now()
            expected = hub_wire(hub, now)
            hv = hub.source.state.evaluate(now)
            for v in (a, b, c):
                assert v.clock.now() == now  # the hub's clock, not the viewer's
                fv = v.state.evaluate(v.clock.now())
                assert _viewer_wire(v) == expected
                assert [n.name for n in fv.nodes] == [n.name for n in hv.nodes]  # worst first, same order
                assert fv.counts == hv.counts and to_wire(fv.zones) == to_wire(hv.zones)
                assert (fv.cordoned, fv.awaiting_renewals) == (hv.cordoned, hv.awaiting_renewals)  # the header's
                assert fv.health[HUB_STREAM].connected and not fv.leases_blind
            states_seen |= {n.state for n in hv.nodes}
            cordoned_seen = max(cordoned_seen, hv.cordoned)
        assert len(states_seen) >= 3, "the incident moved nodes through several states"
        assert cordoned_seen, "the demo cordons a node: the viewers showed its count"


def test_a_snapshot_comes_worst_first_in_parts_that_add_up_to_the_fleet(tmp_path, monkeypatch):
    from nodewatch.hub import publisher

    monkeypatch.setattr(publisher, "FIRST_PART", 5)
    monkeypatch.setattr(publisher, "PART", 8)
    with demo_hub(tmp_path, nodes=60) as hub:
        seq = advance(hub, 150)  # the incident under way: nodes in several states
        now = hub.source.clock.now()
        worst_first = [v.name for v in hub.source.state.evaluate(now).nodes]
        records = hub.source.state.node_records()
        c = RawClient(hub.socket_path)
        try:
            snap = c.read_until("snap")
            assert snap["seq"] == seq and snap["parts"] == 7  # 5 + 7 parts of at most 8 = 60
            frames = [snap] + [c.read_until("part") for _ in range(snap["parts"])]
        finally:
            c.close()
        assert [len(f["nodes"]) for f in frames] == [5, 8, 8, 8, 8, 8, 8, 7]
        assert [w[0] for f in frames for w in f["nodes"]] == worst_first
        pairs: dict[int, list] = {}
        sets: dict[int, list] = {}
        for f in frames:
            assert f["seq"] == seq and len(f["pair_idx"]) == len(f["pairs"]) and len(f["set_idx"]) == len(f["sets"])
            pairs.update(zip(f["pair_idx"], f["pairs"]))
            sets.update(zip(f["set_idx"], f["sets"]))
            for name, sid in f["labels"].items():  # each part's labels resolve with what came so far
                assert {pairs[i][0]: name if pairs[i][1] is None else pairs[i][1] for i in sets[sid]} == records[name].labels
        assert sorted(pairs) == list(range(len(pairs))) and len({n for f in frames for n in f["labels"]}) == 60
        assert sorted(sets) == list(range(len(sets))) and len(sets) < 60 / 2, "the nodes of a pool share one set"
        with viewer(hub) as v:
            assert _viewer_wire(v) == hub_wire(hub, now)
            assert [n.name for n in v.state.evaluate(now).nodes] == worst_first
            assert all(v.state.node_labels(n) == records[n].labels for n in worst_first)
            assert not v.state.loading and v.state.evaluate(now).health[HUB_STREAM].synced


def test_a_viewer_draws_the_first_part_of_a_snapshot_while_the_rest_comes(tmp_path):
    """The first part is the worst nodes: what the dashboard's first screen shows."""
    from nodewatch.hub.viewer_state import ViewerState

    with demo_hub(tmp_path, nodes=400) as hub:
        advance(hub, 150)
        now = hub.source.clock.now()
        want = [v.name for v in hub.source.state.evaluate(now).nodes]
        frames = _split(hub.snapshot()[1])
    assert [f["k"] for f in frames] == ["snap", "part"]
    state = ViewerState()
    state.receive(frames[0])
    first = state.evaluate(now)
    assert state.loading and not first.health[HUB_STREAM].synced
    assert [v.name for v in first.nodes] == want[:len(first.nodes)] and len(first.nodes) == 300
    assert first.counts == hub.source.state.evaluate(now).counts  # the counts are the whole fleet's
    state.receive(frames[1])
    assert [v.name for v in state.evaluate(now).nodes] == want and not state.loading



def test_a_part_of_another_snapshot_is_a_wire_error_the_connection_thread_catches():
    """It raised NameError once (WireError was never imported), which the connection thread's
    ``except`` does not catch: one bad frame killed the viewer's connection for good."""
    from nodewatch.hub.codec import WireError
    from nodewatch.hub.viewer_state import ViewerState

    state = ViewerState()
    with pytest.raises(WireError, match="another snapshot"):
        state.receive({"k": "part", "seq": state.seq + 1, "nodes": []})

def _split(data: bytes) -> list[dict]:
    out, pos = [], 0
    while pos < len(data):
        length, flags = protocol.HEADER.unpack_from(data, pos)
        pos += protocol.HEADER.size
        out.append(protocol.decode(flags, data[pos:pos + length]))
        pos += length
    return out


def test_the_socket_is_private(tmp_path):
    with demo_hub(tmp_path, nodes=5) as hub:
        assert stat.S_IMODE(os.stat(hub.socket_path).st_mode) == 0o600
    assert not os.path.exists(hub.socket_path)


def test_ten_viewers_get_the_same_frames(tmp_path):
    with demo_hub(tmp_path, nodes=40) as hub:
        clients = [RawClient(hub.socket_path) for _ in range(10)]
        try:
            for c in clients:
                assert c.read()["k"] == "hello"
                assert c.read_until("snap")["k"] == "snap"
            seq = advance(hub, 20)
            deltas = [c.read_until("delta", seq) for c in clients]
            assert all(d == deltas[0] for d in deltas)
            assert deltas[0]["renew"], "lease renewals changed views"
            assert len(hub.viewer_stats()) == 10
        finally:
            for c in clients:
                c.close()


def test_a_stuck_viewer_is_dropped_to_a_fresh_snapshot_and_holds_up_no_one(tmp_path):
    with demo_hub(tmp_path, nodes=1000, max_queue_frames=3) as hub, viewer(hub) as good:
        stuck = RawClient(hub.socket_path, rcvbuf=4096)  # connected, never reads
        try:
            wait_until(lambda: len(hub.viewer_stats()) == 2)
            for _ in range(25):
                seq = advance(hub, 10)  # every lease renews: big deltas
                wait_until(lambda: good.state.seq == seq)  # the good viewer keeps up, frame by frame
                assert _viewer_wire(good) == hub_wire(hub, hub.source.clock.now())
            s = next(x for x in hub.viewer_stats() if x["focus"] is None and x["dropped"])
            assert s["queued"] <= 3
            # Now it reads: a fresh snapshot comes, then the deltas after it, in order.
            snap = stuck.read_until("snap")
            if snap["seq"] == 1:  # the first one, that was on its way when it stopped reading
                snap = stuck.read_until("snap")
            assert snap["seq"] > 1
            last = advance(hub, 10)
            d = stuck.read_until("delta", last)
            assert d["seq"] == last
        finally:
            stuck.close()


def test_a_viewer_shows_at_once_that_the_hub_went_away_and_reconnects(tmp_path):
    path = tmp_path / "hub.sock"
    first = DemoSource(nodes=20, seed=1, speed=0.0)
    hub = Hub(first, str(path), tick_seconds=None)
    hub.start()
    with viewer(hub) as v:
        assert v.state.node_count() == 20
        hub.stop()
        fv = wait_until(lambda: (f := v.state.evaluate(v.clock.now())).leases_blind and f)
        assert "hub connection lost" in fv.blind_reason and not fv.health[HUB_STREAM].connected
        assert len(fv.nodes) == 20  # the last fleet stays on screen, marked blind
        second = DemoSource(nodes=35, seed=2, speed=0.0)
        hub2 = Hub(second, str(path), tick_seconds=None)
        hub2.start()
        try:
            wait_until(lambda: v.connections == 2 and v.state.connected)
            fv = wait_until(lambda: (f := v.state.evaluate(v.clock.now())) and len(f.nodes) == 35 and f)
            assert not fv.leases_blind and fv.health[HUB_STREAM].connected
        finally:
            hub2.stop()
    assert not v.gone.is_set()


def test_a_viewer_gives_up_when_the_hub_stays_away(tmp_path):
    gone: list[str] = []
    with demo_hub(tmp_path, nodes=5) as hub:
        v = ViewerSource(HubAddress(path=hub.socket_path), reconnect_for=0.0, on_gone=gone.append)
        v.start()
        assert v.state.node_count() == 5
    try:
        wait_until(v.gone.is_set)
        assert gone and "unreachable" in gone[0]
    finally:
        v.stop()


def test_the_drill_down_asks_the_hub_for_the_nodes_pods_and_events(tmp_path):
    with demo_hub(tmp_path, nodes=30) as hub, viewer(hub) as v:
        advance(hub, 120)
        node = v.state.evaluate(v.clock.now()).nodes[0].name
        v.focus_node(node)
        wait_until(lambda: v.state.node_details(node, v.clock.now()).record is not None)
        assert [s["focus"] for s in hub.viewer_stats()] == [node]
        now = hub.source.clock.now()
        got = v.state.node_details(node, now)
        want = hub.source.state.node_details(node, now)
        assert got.record == want.record and got.pods == want.pods and got.events == want.events[:50]
        assert got.pods, "the demo's nodes run pods"
        v.focus_node(None)
        wait_until(lambda: [s["focus"] for s in hub.viewer_stats()] == [None])


def test_requests_other_than_the_read_only_ones_close_the_connection(tmp_path):
    with demo_hub(tmp_path, nodes=5) as hub:
        c = RawClient(hub.socket_path)
        try:
            c.read_until("snap")
            c.send({"k": "apply", "resource": "nodes"})
            with pytest.raises((protocol.ProtocolError, OSError)):
                while c.read() is not None:
                    pass
                raise protocol.ProtocolError("closed")
        finally:
            c.close()
        wait_until(lambda: not hub.viewer_stats())


def test_tcp_needs_tls_and_the_token(tmp_path):
    from nodewatch.hub.tls import load_or_create

    ctx, token = load_or_create(tmp_path, "127.0.0.1", 0)
    assert stat.S_IMODE(os.stat(tmp_path / "token").st_mode) == 0o600
    src = DemoSource(nodes=12, seed=1, speed=0.0)
    hub = Hub(src, None, tcp=("127.0.0.1", 0), ssl_context=ctx, token=token, tick_seconds=None)
    hub.start()
    ca = str(tmp_path / "tls" / "ca.pem")
    addr = parse_address(f"https://127.0.0.1:{hub.tcp_port}")
    try:
        good = ViewerSource(addr, token=token, ca_file=ca)
        good.start()
        try:
            assert good.state.node_count() == 12
        finally:
            good.stop()
        bad = ViewerSource(addr, token="nwhub-wrong", ca_file=ca)
        bad.start()
        try:
            wait_until(bad.gone.is_set)
            assert "bad token" in bad.gone_reason and bad.state.node_count() == 0
        finally:
            bad.stop()
        untrusted = ViewerSource(addr, token=token, ca_file=None, reconnect_for=0.0)  # the system CAs
        untrusted.start()
        try:
            wait_until(untrusted.gone.is_set)
            assert untrusted.state.node_count() == 0 and "CERTIFICATE_VERIFY_FAILED" in untrusted.gone_reason
        finally:
            untrusted.stop()
    finally:
        hub.stop()
    with pytest.raises(ValueError):
        Hub(src, None, tcp=("127.0.0.1", 0))  # never TCP without TLS and a token


def test_a_stopped_tls_viewer_leaves_no_socket_open(tmp_path):
    """``stop`` ends the connection task and then the viewer's loop: a TLS goodbye begun then never
    finished, and its socket was left for the collector (a ResourceWarning in every such test)."""
    import gc
    import warnings

    from nodewatch.hub.tls import load_or_create

    ctx, token = load_or_create(tmp_path, "127.0.0.1", 0)
    hub = Hub(DemoSource(nodes=12, seed=1, speed=0.0), None, tcp=("127.0.0.1", 0), ssl_context=ctx, token=token,
              tick_seconds=None)
    hub.start()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            viewer = ViewerSource(parse_address(f"https://127.0.0.1:{hub.tcp_port}"), token=token,
                                  ca_file=str(tmp_path / "tls" / "ca.pem"))
            viewer.start()
            assert viewer.state.node_count() == 12
            viewer.stop()
            del viewer
            gc.collect()
        assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
    finally:
        hub.stop()


def test_addresses():
    assert parse_address("unix:/x/hub.sock") == HubAddress(path="/x/hub.sock")
    assert parse_address("https://hub.example:7443") == HubAddress(host="hub.example", port=7443)
    assert parse_address("10.0.0.1:7443") == HubAddress(host="10.0.0.1", port=7443)
    assert parse_address("/run/nodewatch/hub.sock") == HubAddress(path="/run/nodewatch/hub.sock")
    with pytest.raises(ValueError):
        parse_address("https://nohost")
    with pytest.raises(ValueError):
        ViewerSource(HubAddress(host="h", port=1))  # TCP without a token


def test_views_and_details_survive_the_wire(tmp_path):
    src = DemoSource(nodes=60, seed=3)
    t = src.clock.now() + 400
    src.advance_to(t)
    view = src.state.evaluate(t)
    assert any(v.taints for v in view.nodes) and any(v.causes for v in view.nodes)
    for v in view.nodes:
        assert view_from_wire(view_to_wire(v)) == v
        d = src.state.node_details(v.name, t)
        assert from_wire(NodeDetails, to_wire(d)) == d


def test_a_viewer_calls_the_clock_virtual_only_when_the_hubs_is(tmp_path):
    """The header's "(virtual)" follows the hub's clock: a demo hub's is the simulator's, a live
    hub's the wall (here a demo fleet read on the wall clock, which is all the hub's hello looks at)."""
    (tmp_path / "demo").mkdir()
    (tmp_path / "live").mkdir()
    with demo_hub(tmp_path / "demo") as hub, viewer(hub) as v:
        assert is_virtual(hub.source.clock) and is_virtual(v.clock)
    src = DemoSource(nodes=10, scenario="steady", seed=1, speed=0.0)
    src.clock = SystemClock()
    hub = Hub(src, str(tmp_path / "live" / "hub.sock"), tick_seconds=None)
    hub.start()
    try:
        with viewer(hub) as v:
            assert not is_virtual(v.clock)
            assert abs(v.clock.now() - time.time()) < 60
    finally:
        hub.stop()
