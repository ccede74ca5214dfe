"""LiveSource against the simulated API server over real HTTPS: normal run, node-scoped watches,
record-then-replay, throughput, cert cache, reflector unit behaviour."""

from __future__ import annotations

import os
import random
import time

from nodewatch.core.clock import ManualClock
from nodewatch.core.rules import NodeState
from nodewatch.core.settings import Settings
from nodewatch.core.timeutil import parse_time
from nodewatch.sources.certcache import CertCache
from nodewatch.sources.live import CERT_SAVE_INTERVAL, LiveSource
from nodewatch.sources.recording import Recorder
from nodewatch.sources.recording_input import read_recording
from nodewatch.sources.reflector import LEASES, NODES, Backoff
from support.simserver import TinyFleet, running_server, wait_until


def states(view) -> dict[str, NodeState]:
    return {v.name: v.state for v in view.nodes}


def test_normal_run(tmp_path, start_live):
    fleet = TinyFleet(nodes=4, start=time.time())
    with running_server(tmp_path, fleet=fleet) as srv:
        src = start_live(srv)
        assert src.name == f"context nodewatch-sim @ {srv.url}"
        wait_until(lambda: src.server_version == srv.server_version)
        assert src.state.settings.grace == 50.0  # v1.33 -> 50s
        fleet.step_to(fleet.now + 20)  # every kubelet renews twice
        wait_until(lambda: all(t.renewals >= 2 for t in src.state.leases.values()) and len(src.state.leases) == 4)
        view = src.state.evaluate(time.time())
        assert states(view) == {n: NodeState.READY for n in fleet.names}
        assert not view.leases_blind
        for res in ("nodes", "leases", "certificatesigningrequests"):
            h = view.health[res]
            assert h.connected and h.synced and h.relists == 0 and not h.forbidden, h
        # renewals seen on the watch are stamped with their receive time (not renewTime)
        track = src.state.leases["node-000"]
        assert track.observed_at is not None and abs(track.observed_at - time.time()) < 10


def test_pods_and_events_only_for_the_focus_and_not_ready_nodes(tmp_path, start_live):
    fleet = TinyFleet(nodes=4, start=time.time(), pods_per_node=3)
    with running_server(tmp_path, fleet=fleet) as srv:
        src = start_live(srv)
        assert src.scoped_nodes() == []
        assert src.state.pods == {}
        src.focus_node("node-002")
        wait_until(lambda: len(src.state.pods) == 3)
        assert {p.node_name for p in src.state.pods.values()} == {"node-002"}
        wait_until(lambda: src.state.events_for("node-002"))
        fleet.stop_kubelet("node-003")  # Ready=Unknown: its pods and events are watched too
        wait_until(lambda: src.scoped_nodes() == ["node-002", "node-003"])
        wait_until(lambda: len(src.state.pods) == 6)
        wait_until(lambda: any(e.reason == "NodeNotReady" for e in src.state.events_for("node-003")))
        src.focus_node(None)  # the drill-down closed: node-002's pods are forgotten
        wait_until(lambda: src.scoped_nodes() == ["node-003"])
        wait_until(lambda: {p.node_name for p in src.state.pods.values()} == {"node-003"})
        selectors = [r.target for r in srv.request_log if "/pods" in r.target or "/events" in r.target]
        assert selectors and all("fieldSelector=" in t for t in selectors)


def test_record_then_replay_gives_the_same_states(tmp_path, start_live, open_replay):
    fleet = TinyFleet(nodes=5, start=time.time())
    path = str(tmp_path / "live.jsonl.gz")
    with running_server(tmp_path, fleet=fleet) as srv:
        rec = Recorder(path, {"kind": "live", "name": "sim"}, Settings())
        src = start_live(srv, recorder=rec)
        snapshots = []
        wait_until(lambda: src.server_version is not None)

        def settle_and_snapshot() -> None:
            time.sleep(0.3)  # let in-flight events land; then nothing moves until the next step
            with src.state.lock:
                now = time.time()
                snapshots.append((now, states(src.state.evaluate(now))))

        settle_and_snapshot()
        fleet.step_to(fleet.now + 20)
        wait_until(lambda: all(t.renewals >= 2 for t in src.state.leases.values()))
        settle_and_snapshot()
        fleet.stop_kubelet("node-001")
        wait_until(lambda: src.state.nodes["node-001"].ready == "Unknown")
        settle_and_snapshot()
        src.stop()
        rec.close()
    _, entries, problems = read_recording(path)
    assert problems == []
    assert any(e.etype == "HEALTH" for e in entries)
    assert any(e.listing for e in entries)
    replay = open_replay(path)
    assert replay.state.settings.grace == 50.0  # the server version is in the header
    for t, live_states in snapshots:
        replay.replay.seek(t)
        assert states(replay.state.evaluate(t)) == live_states
    assert snapshots[-1][1]["node-001"] is NodeState.UNKNOWN


def test_a_burst_of_60000_renewals_all_arrive(tmp_path, start_live):
    """A burst of events over the watch path all reach the state, the last one too (how many a
    second is ``bench/live_path.py``'s figure, not a test's)."""
    fleet = TinyFleet(nodes=1000, start=time.time())
    with running_server(tmp_path, fleet=fleet, history_limit=400_000) as srv:
        src = start_live(srv)
        leases = [fleet.lease(n) for n in fleet.names]
        reflector = src.reflector("leases")
        before = reflector.events
        total = 60_000
        changes = []
        for k in range(total // len(leases)):
            for lease in leases:
                obj = dict(lease)
                obj["spec"] = dict(lease["spec"], renewTime=f"2030-01-01T00:00:{k:02d}.000000Z")
                changes.append(("leases", "MODIFIED", obj, None))
        srv.store.emit_many(changes)
        wait_until(lambda: reflector.events - before >= total, timeout=60)  # every one, in order:
        assert src.state.leases[fleet.names[-1]].renew_time is not None
        last = parse_time(f"2030-01-01T00:00:{total // len(leases) - 1:02d}.000000Z")
        wait_until(lambda: all(t.renew_time == last for t in src.state.leases.values()), timeout=10)
        assert {t.age_from for t in src.state.leases.values()} == {"receipt"}  # timed as the watch's


def test_the_lease_watch_takes_the_lane_and_a_recorder_gets_its_lines(tmp_path):
    """The synced Lease watch hands its structs to the state in one call (``LiveSource._lane``); a
    source that records reads its lists and other streams as dicts (the recorder writes the
    objects), and its Lease watch through the lane too, the read's lines to the recorder."""
    fleet = TinyFleet(nodes=3, start=time.time())
    with running_server(tmp_path, fleet=fleet) as srv:
        plain = LiveSource(Settings(), kubeconfig=str(srv.kubeconfig_path), cert_cache_dir=str(tmp_path / "a"))
        assert plain._reflector(LEASES).lane == plain._lane
        assert plain._reflector(NODES).lane is None
        with Recorder(str(tmp_path / "r.jsonl"), {"name": "t"}, Settings()) as rec:
            recording = LiveSource(Settings(), kubeconfig=str(srv.kubeconfig_path),
                                   cert_cache_dir=str(tmp_path / "b"), recorder=rec)
            leases = recording._reflector(LEASES)
            assert leases.lane == recording._lane and leases.decoder is None
            assert recording._reflector(NODES).decoder is None


def test_a_recording_source_records_the_lease_watch_from_its_lines(tmp_path):
    """A hub's source: its Lease watch goes through the lane and the flight recorder writes the
    reads' lines (plain renewals as rows matched on their bytes); the recording replays to the
    renewals the source applied."""
    from nodewatch.hub.flight_recorder import SegmentedRecorder
    from nodewatch.sources.replay import state_at

    fleet = TinyFleet(nodes=6, start=time.time())
    fleet.written.update({n: fleet.now for n in fleet.names})  # the kubelet's managedFields entry
    with running_server(tmp_path, fleet=fleet) as srv:
        src = LiveSource(Settings(), kubeconfig=str(srv.kubeconfig_path), cert_cache_dir=str(tmp_path / "c"))
        rec = SegmentedRecorder(tmp_path / "rec", {"name": "t"}, src.settings, records=src.state.node_records,
                                record_format="columnar", keep_seconds=None, keep_bytes=None)
        src.recorder = rec
        lanes = []
        lane = src._lane

        def counting(events, received_at, block):
            lanes.append(len(events))
            lane(events, received_at, block)

        src._lane = counting  # type: ignore[method-assign]
        src.start()
        try:
            assert src.wait_synced(15)
            for _ in range(4):
                fleet.step_to(fleet.now + 10)  # every kubelet renews
            wait_until(lambda: all(t.renewals >= 4 for t in src.state.leases.values()) and len(src.state.leases) == 6)
            live = {n: t.renew_time for n, t in src.state.leases.items()}
        finally:
            src.stop()
            rec.close()
    assert sum(lanes) >= 18 and rec.fast_lines > 0
    replayed, _, problems = state_at(str(tmp_path / "rec"), None)
    assert not problems, problems
    assert {n: t.renew_time for n, t in replayed.leases.items()} == live


def test_cert_cache_survives_restarts(tmp_path):
    cache = CertCache("abc", str(tmp_path))
    assert cache.load() == {}
    assert cache.save({"n1": (2_000_000_000.0, "CSR csr-1")})
    assert not cache.save({"n1": (1_900_000_000.0, "older")})  # an older NotAfter does not win
    again = CertCache("abc", str(tmp_path))
    assert again.load() == {"n1": (2_000_000_000.0, "CSR csr-1")}
    (tmp_path / "abc" / "certs.json").write_text("{broken")
    broken = CertCache("abc", str(tmp_path))
    assert broken.load() == {} and "unreadable" in (broken.error or "")


def test_cached_certs_are_loaded_into_the_state(tmp_path, start_live):
    fleet = TinyFleet(nodes=2, start=time.time())
    with running_server(tmp_path, fleet=fleet) as srv:
        probe = LiveSource(Settings(), kubeconfig=str(srv.kubeconfig_path), cert_cache_dir=str(tmp_path / "c"))
        CertCache(probe.target.cluster_id, str(tmp_path / "c")).save({"node-000": (2_100_000_000.0, "CSR old")})
        src = start_live(srv, cert_cache_dir=str(tmp_path / "c"))
        assert src.state.certs["node-000"].not_after == 2_100_000_000.0
        assert "cached" in src.state.certs["node-000"].source


def test_backoff_grows_with_jitter_caps_and_resets():
    now = [0.0]
    b = Backoff(rng=random.Random(3), clock=lambda: now[0])
    delays = [b.next_delay() for _ in range(10)]
    assert 0.8 <= delays[0] <= 1.6
    assert all(d <= 30.0 for d in delays)
    assert delays[-1] >= 15.0
    b.healthy()
    now[0] += 61  # a healthy minute resets it
    assert b.next_delay() <= 1.6
    b.healthy()
    now[0] += 5  # a short healthy spell does not
    assert b.next_delay() > 1.6


def test_every_time_of_the_live_source_comes_from_its_clock(tmp_path, start_live):
    """Receive times and the cert cache's save interval follow the injected clock (an hour ahead
    of the wall here), so no test waits for them in real time."""
    clock = ManualClock(time.time() + 3600)
    fleet = TinyFleet(nodes=2, start=time.time())
    with running_server(tmp_path, fleet=fleet) as srv:
        src = start_live(srv, clock=clock)
        fleet.step_to(fleet.now + 10)
        wait_until(lambda: all(t.renewals >= 2 for t in src.state.leases.values()))
        assert {t.observed_at for t in src.state.leases.values()} == {clock.now()}
        src.state.remember_cert("node-000", 2_100_000_000.0, "kubelet serving cert (TLS probe)")  # as a probe would
        assert not os.path.exists(src.cert_cache.path)  # not saved: no time has passed on the clock
        clock.advance(CERT_SAVE_INTERVAL)
        wait_until(lambda: os.path.exists(src.cert_cache.path))  # the housekeeping's next pass
        assert set(CertCache(src.target.cluster_id, str(tmp_path / "cache")).load()) == set(src.state.certs)


def test_a_quiet_watch_after_a_streaming_list_waits_for_the_server_to_end_it(tmp_path):
    """The initial events are read with a short read timeout (silence there means the server
    ignored ``sendInitialEvents``); the watch that follows on the same stream with one past its
    ``timeoutSeconds``: a quiet resource (no bookmark at all, as 1.20 on an unchanged one) is
    watched until the server ends each stream, never cut by the client."""
    import socket

    from nodewatch.sources.chunked import stream_socket
    from nodewatch.sources.kubeconfig import Connection
    from nodewatch.sources.reflector import CSRS, Reflector

    fleet = TinyFleet(nodes=3, start=time.time())
    with running_server(tmp_path, fleet=fleet, bookmarks_when_unchanged=False) as srv:
        health: list[dict] = []
        r = Reflector(Connection(str(srv.kubeconfig_path)), CSRS, lambda b: None,
                      lambda _r, **ch: health.append(ch), lambda *_: None, watch_timeout=1.0, initial_silence=0.3)
        r.start()
        try:
            wait_until(lambda: r.listed and r.watching)
            sock = stream_socket(r._resp)
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            assert sock.gettimeout() > 1.0  # switched from the list's 0.3 s at its end bookmark
            wait_until(lambda: len([q for q in srv.request_log if "certificatesigningrequests" in q.target]) >= 3,
                       timeout=15)  # 2 streams the server ended (each after 1-2 s of silence)
        finally:
            r.stop()
        assert not any(ch.get("connected") is False for ch in health)
        for q in [q for q in srv.request_log if "certificatesigningrequests" in q.target][:2]:
            asked = int(q.target.split("timeoutSeconds=")[1].split("&")[0])
            assert q.duration >= asked - 0.1  # ended by the server at its timeoutSeconds


def test_a_listed_lease_is_judged_once_the_lease_stream_is_read_over_tls(tmp_path, start_live):
    """The lease stream's frontier (``core/evidence.py``) is fed by the reader over real TLS: after
    the streaming list the reader finds the stream drained and waits on it, so once the clock is a
    renewal interval past the list, a lease the list dates 30 s back is Late, one renewed 0-9 s
    ago Ready. (Were the frontier never fed, the old lease would be awaited for ever.)"""
    import math

    clock = ManualClock(time.time())
    fleet = TinyFleet(nodes=3, start=clock.now())
    fleet.renewed["node-002"] = clock.now() - 30.0
    with running_server(tmp_path, fleet=fleet) as srv:
        src = start_live(srv, clock=clock)
        frontier = src.state.store.lease_frontier
        assert frontier is not None
        wait_until(lambda: frontier.idle_since is not None)  # read to the end, waiting on the stream
        assert frontier.drained_to < math.inf  # tracked: the TLS stream told when it was drained
        listed = clock.now()
        assert src.state.evaluate(listed).awaiting_renewals == 3  # renewTime alone dates them
        later = listed + 13.5  # past one renewal interval + margin, the stream read to now - 1 s
        assert frontier.at(later, False) == later - 1.0
        view = src.state.evaluate(later)
        assert view.node("node-002").state is NodeState.LATE
        assert view.node("node-000").state is NodeState.READY and view.awaiting_renewals == 0


def test_the_lease_list_waits_for_the_servers_version_that_dates_it(tmp_path):
    """How a listed Lease is dated depends on the server's version (from v1.25 its write time is
    the renewal's own: ``ingest.listed_renewal``). /version is asked beside the lists; answered
    after the Lease list was read, the list waits for it rather than be dated by renewTime alone
    and judged on the undated frontier (the old code: ``age_from`` "renewTime")."""
    import threading

    clock = ManualClock(time.time())
    fleet = TinyFleet(nodes=3, start=clock.now())
    for n in fleet.names:
        fleet.written[n] = int(fleet.renewed[n])
    with running_server(tmp_path, fleet=fleet) as srv:
        src = LiveSource(Settings(), kubeconfig=str(srv.kubeconfig_path), cert_cache_dir=str(tmp_path / "c"),
                         clock=clock)
        answer = threading.Event()
        real = src.conn.get_json

        def slow_version(path, *a, **kw):
            if path == "/version":
                assert answer.wait(10)
            return real(path, *a, **kw)

        src.conn.get_json = slow_version  # type: ignore[method-assign]
        listed = threading.Event()
        sink = src._sink

        def seen(batch):
            if batch[0][0] == "leases":
                listed.set()  # the Lease list is read and handed on; /version has not answered
            sink(batch)

        src._sink = seen  # type: ignore[method-assign]
        src.start()
        try:
            assert listed.wait(10)
            assert src.state.settings.server_version is None
            answer.set()
            assert src.wait_synced(15)
            assert src.state.settings.server_version == fleet.server_version
            assert {t.age_from for t in src.state.leases.values()} == {"server"}
        finally:
            answer.set()
            src.stop()
