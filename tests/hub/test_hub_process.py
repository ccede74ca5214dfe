"""The hub as a process and against the simulated API server: the API server sees one watcher
however many viewers attach, and a ``kill -9`` loses at most the last second of the recording."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from nodewatch.core.settings import Settings
from nodewatch.hub.live import HubLiveSource
from nodewatch.hub.server import Hub
from nodewatch.hub.viewer_source import HubAddress, ViewerSource
from nodewatch.sources.live import LiveSource
from nodewatch.sources.segments import iter_segment_lines, list_segments
from support.hub_support import RawClient, api_requests, cluster_wide, every_watch_logged
from support.simserver import make_fleet, running_server, wait_until


def test_the_api_server_sees_one_watcher_however_many_viewers(tmp_path):
    with running_server(tmp_path / "a", fleet=make_fleet(nodes=30)) as ref_srv:
        ref = LiveSource(Settings(), kubeconfig=str(ref_srv.kubeconfig_path), cert_cache_dir=str(tmp_path / "c1"))
        ref.start()
        assert ref.wait_synced(20)
        wait_until(ref.watching)
        ref.stop()
        wait_until(lambda: every_watch_logged(ref_srv))
        reference, _ = api_requests(ref_srv)
    with running_server(tmp_path / "b", fleet=make_fleet(nodes=30)) as srv:
        src = HubLiveSource(Settings(), kubeconfig=str(srv.kubeconfig_path), cert_cache_dir=str(tmp_path / "c2"))
        hub = Hub(src, str(tmp_path / "hub.sock"), tick_seconds=0.2)
        hub.start()
        viewers = []
        try:
            assert src.wait_synced(20)
            wait_until(src.watching)
            for _ in range(10):
                v = ViewerSource(HubAddress(path=hub.socket_path))
                v.start()
                viewers.append(v)
            wait_until(lambda: all(v.state.node_count() == 30 for v in viewers))
            names = sorted(v.name for v in src.state.evaluate(src.clock.now()).nodes)
            focus = names[:3]
            for v, node in zip(viewers, focus):
                v.focus_node(node)
            wait_until(lambda: set(focus) <= set(src.scoped_nodes()))
            for v, node in zip(viewers, focus):
                wait_until(lambda: v.state.node_details(node, v.clock.now()).record is not None)
        finally:
            for v in viewers:
                v.stop()
            hub.stop()
        wait_until(lambda: every_watch_logged(srv))
        wait_until(lambda: set(focus) <= api_requests(srv)[1])  # scoped watches are logged when they end too
        count, scoped = api_requests(srv)
    assert cluster_wide(count) == cluster_wide(reference)  # lists and watches of nodes, leases, CSRs
    assert all(n == 1 for k, n in cluster_wide(count).items() if k[2]), "one watch per stream"
    assert set(focus) <= scoped and len(scoped) <= 50


@contextlib.contextmanager
def _hub_process(directory: Path, *extra: str):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    p = subprocess.Popen([sys.executable, "-m", "nodewatch", "hub", "--demo", "--dir", str(directory),
                          "--demo-nodes", "300", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        yield p
    finally:
        if p.poll() is None:
            p.kill()
        p.wait(10)
        p.stdout.close()
        p.stderr.close()


def _last_hub_now(directory: Path, deltas: int) -> float:
    sock = directory / "hub.sock"
    c = wait_until(lambda: _connect(sock), timeout=60)  # (a killed hub leaves its socket file behind)
    try:
        c.read_until("snap")
        for _ in range(deltas):
            now = c.read_until("delta")["now"]
        return now
    finally:
        c.close()


def _connect(sock: Path) -> RawClient | None:
    try:
        return RawClient(str(sock))
    except OSError:
        return None


def _recorded_times(directory: Path) -> list[float]:
    import orjson

    problems: list[str] = []
    out = []
    for line in iter_segment_lines(list_segments(directory / "recordings"), problems):
        d = orjson.loads(line)
        if "t" in d:
            out.append(d["t"])
    return out


def test_kill_9_loses_at_most_a_second_and_a_restart_carries_on_in_a_new_segment(tmp_path):
    d = tmp_path / "hub"
    with _hub_process(d) as p:
        t_kill = _last_hub_now(d, deltas=3)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(10)
    assert len(list_segments(d / "recordings")) == 1
    first = _recorded_times(d)
    assert max(first) >= t_kill - 1.0, f"lost {t_kill - max(first):.2f}s of history"
    with _hub_process(d) as p:
        t_last = _last_hub_now(d, deltas=2)
        p.send_signal(signal.SIGTERM)
        assert p.wait(20) == 0
    segs = list_segments(d / "recordings")
    assert len(segs) == 2
    times = _recorded_times(d)
    assert max(times) >= t_last - 1.0 and min(times) == min(first)
    from nodewatch.sources.replay import ReplaySource

    src = ReplaySource(str(d / "recordings"))
    try:
        assert src.replay.start == min(first) and src.replay.end >= t_last - 1.0
        src.replay.seek(t_kill - 2)
        assert src.state.node_count() == 300
    finally:
        src.stop()


def test_sigusr1_writes_every_threads_stack_and_the_hub_goes_on(tmp_path):
    """``kill -USR1``: where each thread of a hub is, on its stderr (a hub that seems stuck), and the
    hub serves on and stops cleanly after."""
    d = tmp_path / "hub"
    with _hub_process(d) as p:
        _last_hub_now(d, deltas=1)
        p.send_signal(signal.SIGUSR1)
        _last_hub_now(d, deltas=1)  # still serving frames
        p.send_signal(signal.SIGTERM)
        assert p.wait(20) == 0
        err = p.stderr.read().decode()
    assert "Current thread" in err or "Thread 0x" in err, err[-2000:]
    assert "_tick_loop" in err, err[-2000:]  # the ticker thread's stack among them
    assert "nodewatch hub: stopped" in err
