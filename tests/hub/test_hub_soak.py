"""A hub's day in accelerated time (30 nodes, sized for CI): a demo fleet with churn (a node replaced every 90 s, one
flapping), its flight recorder rotating every 10 virtual minutes under a 1-hour retention, and
viewers coming and going all day. Threads, file descriptors and memory stay where they were after
warm-up; retention holds the recordings to what it allows; no viewer is left behind."""

from __future__ import annotations

import os
import threading

import pytest

from nodewatch.hub.flight_recorder import SegmentedRecorder
from nodewatch.hub.server import Hub
from nodewatch.hub.viewer_source import HubAddress, ViewerSource
from nodewatch.sources.demo import DemoSource
from nodewatch.sources.segments import list_segments
from support.hub_support import advance
from support.simserver import wait_until

DAY = 24 * 3600
STEP = 60.0
SEGMENT = 600.0
KEEP = 1 * 3600.0


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.slow
def test_a_simulated_day_leaves_threads_fds_and_memory_flat(tmp_path):
    src = DemoSource(nodes=30, scenario="churn+flapping", seed=4, speed=0.0)
    rec = SegmentedRecorder(tmp_path / "recordings", {"kind": "demo"}, src.state.settings, segment_seconds=SEGMENT,
                            clock=src.clock, records=src.state.node_records, keep_seconds=KEEP, keep_bytes=None)
    src.recorder = rec
    hub = Hub(src, str(tmp_path / "hub.sock"), tick_seconds=None)
    hub.start()
    steady: list[ViewerSource] = []
    try:
        steady.append(ViewerSource(HubAddress(path=hub.socket_path)))
        steady[0].start()
        samples = []
        for i in range(int(DAY / STEP)):
            seq = advance(hub, STEP)
            if i % 30 == 0:  # every half hour, a viewer comes, looks, and goes
                v = ViewerSource(HubAddress(path=hub.socket_path))
                v.start()
                wait_until(lambda: v.state.seq >= seq)
                v.stop()
            if i % 120 == 0:  # every two hours, a sample
                wait_until(lambda: steady[0].state.seq == seq, timeout=10)
                wait_until(lambda: len(hub.viewer_stats()) == 1, timeout=10)
                samples.append((threading.active_count(), _fds(), _rss(), len(list_segments(rec.directory))))
        assert rec.segments_written >= DAY / SEGMENT - 2
        warm, later = samples[1], samples[2:]  # warm: 2 h in, past the first retention
        print("threads, fds, RSS MB, segments every 2 h:",
              [(t, f, round(m / 2**20), s) for t, f, m, s in samples])
        for threads, fds, rss, segments in later:
            assert threads <= warm[0]
            assert fds <= warm[1] + 2
            assert rss <= warm[2] + 40 * 2**20
            assert segments <= KEEP / SEGMENT + 2  # retention holds
        assert steady[0].state.connected and steady[0].connections == 1
    finally:
        for v in steady:
            v.stop()
        hub.stop()
        rec.close()


def test_api_server_restarts_under_a_live_hub_leave_it_serving_and_flat(tmp_path):
    """The scaled-down ``python -m bench.soak --hub``: a live hub over real HTTPS to the simulated
    API server (virtual time x360, churn), the server restarted twice in the virtual hour (every
    stream dropped, connections refused for half a second), viewers coming and going, segments
    rotating. The steady viewer stays connected, threads and file descriptors stay where they were,
    retention holds, and after the last restart the watches come back and the recorder writes on."""
    from bench.soak import hub_soak

    samples = hub_soak(str(tmp_path), nodes=10, hours=1.0, speed=360.0, every=0.25, restart_every=0.4,
                       down_seconds=0.5, viewer_every=1.0, segment_minutes=10.0, keep_hours=0.5)
    print([(s.hour, s.fds, s.threads, s.restarts, s.relists, s.segments, s.lines, s.streams_up) for s in samples],
          samples[-1].recovered)
    first, later = samples[0], samples[1:]
    assert later[-1].restarts == 2 and later[-1].viewers_served >= 3
    for s in later:
        assert s.steady_connected
        assert s.fds <= first.fds + 4 and s.threads <= first.threads + 2
        assert s.segments <= 0.5 * 60 / 10.0 + 2  # retention holds
    assert samples[-1].recovered is not None  # the watches came back, and the recorder wrote on
