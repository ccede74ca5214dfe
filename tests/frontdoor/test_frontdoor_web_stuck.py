"""Web viewers that never read (a frozen tab, a peer that stops reading its websocket) while an
honest browser watches the same hub: the hub keeps ticking, the honest page keeps getting frames
and a new page attaches as fast as with no one stuck, the hub's memory and file descriptors stay
bounded, and each stuck page is closed, and its viewer process ended, within 1.5 heartbeats
(``frontdoor/web.py`` HEARTBEAT_SECONDS; shortened here so the test takes seconds).

The stuck clients: a headless Chromium whose page is frozen once drawn (``Page.setWebLifecycleState``:
what Chromium does to a background tab; it stops reading the websocket, pongs included), and real
TCP sockets with a real websocket handshake (a receive buffer of 4 KiB, never read after the 101).
The honest viewers are headless Chromium."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import socket
import sys
import time

from nodewatch.frontdoor.background import DoorThread
from nodewatch.frontdoor.web import start_web
from nodewatch.hub.server import Hub
from nodewatch.sources.demo import DemoSource
from support.frontdoor_support import Chromium, _wait_async
from support.simserver import wait_until
from tests.hub.test_hub_frontdoors import _viewers_of
from tests.hub.test_hub_hostile import _closed_by_peer, _within_a_second

NODES = 40
STUCK = 3
HEARTBEAT = 4.0
NODE = b"general-"
"""What every node row of the demo fleet begins with (its first screen has some)."""


def _stuck_websocket(port: int, token: str) -> socket.socket:
    """A websocket that completes its handshake and then never reads again."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET /ws?width=200&height=60 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
               f"Origin: http://127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(1)  # the 101 alone, byte by byte: not one byte of the frames behind it
        assert chunk, head
        head += chunk
    assert head.startswith(b"HTTP/1.1 101"), head
    return s


def _rss(pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def _first_rows(url: str) -> float:
    started = time.monotonic()
    async with Chromium() as browser:
        assert await browser.open(url) == 200
        await _wait_async(lambda: NODE in browser.received, 60)
        return time.monotonic() - started


def _longest_gap(samples: list[tuple[float, int, int, int]]) -> float:
    """The longest time the page's received bytes did not grow."""
    longest, last, seen = 0.0, samples[0][0], samples[0][1]
    for t, n, _, _ in samples:
        if n != seen:
            last, seen = t, n
        longest = max(longest, t - last)
    return longest


def test_web_viewers_that_never_read_hold_up_no_one_and_are_closed(tmp_path):
    sock = tmp_path / "hub.sock"
    hub = Hub(DemoSource(nodes=NODES, scenario="incident", seed=1, speed=1.0), str(sock), tick_seconds=0.5)
    hub.start()
    thread = DoorThread()
    door = thread.run(start_web("127.0.0.1:0", "a-token", [sys.executable, "-m", "nodewatch", "attach", str(sock)],
                                heartbeat_seconds=HEARTBEAT))
    stuck: list[socket.socket] = []
    try:
        alone = asyncio.run(_first_rows(door.url))  # the reference, in the same run
        wait_until(lambda: not _viewers_of(sock), timeout=20)

        async def watch() -> dict:
            async with Chromium() as browser, Chromium() as frozen:
                assert await browser.open(door.url) == 200
                await _wait_async(lambda: NODE in browser.received, 60)
                # the reference for a new page: the honest one watching, no one stuck (the same load
                # as below but the stuck peers; ``alone``, before any browser, left the honest page's
                # own rendering out, and a loaded CI machine made the difference look like theirs)
                reference = await _first_rows(door.url)
                await _wait_async(lambda: door.sessions == 1, 60)
                samples: list[tuple[float, int, int, int]] = []  # (time, bytes the page got, hub RSS, fds)
                viewer_rss: dict[int, list[int]] = {}

                async def sample() -> None:
                    while True:
                        samples.append((time.monotonic(), len(browser.received), _rss(), _fds()))
                        if len(samples) % 5 == 0:
                            for pid in _viewers_of(sock):
                                with contextlib.suppress(OSError):
                                    viewer_rss.setdefault(pid, []).append(_rss(pid))
                        await asyncio.sleep(0.1)  # sampling, not waiting for a timer

                sampler = asyncio.ensure_future(sample())
                ticks0 = hub.ticks
                await _wait_async(lambda: hub.ticks >= ticks0 + 8, 30)  # the reference: the page, no one stuck
                opened = time.monotonic()
                # a real browser that stops reading: its page frozen (what Chromium does to a tab
                # in the background), once it has drawn
                assert await frozen.open(door.url) == 200
                await _wait_async(lambda: NODE in frozen.received, 60)
                await frozen.send("Page.setWebLifecycleState", state="frozen")
                for _ in range(STUCK):
                    stuck.append(await asyncio.to_thread(_stuck_websocket, door.port, "a-token"))
                await _wait_async(lambda: door.sessions == 2 + STUCK, 30)
                await _wait_async(lambda: len(_viewers_of(sock)) == 2 + STUCK, 60)
                seconds = await _first_rows(door.url)  # a new page, while they are stuck
                await _wait_async(lambda: door.sessions == 1, 60)  # the heartbeat closed every stuck page
                closed = time.monotonic()
                sampler.cancel()
                return {"samples": samples, "opened": opened, "closed": closed, "seconds": seconds,
                        "viewer_rss": viewer_rss, "reference": reference}

        got = asyncio.run(watch())
        before = [x for x in got["samples"] if x[0] < got["opened"]]
        during = [x for x in got["samples"] if got["opened"] <= x[0] <= got["closed"]]
        gap_alone, gap_stuck = _longest_gap(before), _longest_gap(during)
        rss0, fds0 = before[-1][2], before[-1][3]
        peak_rss, peak_fds = max(x[2] for x in during), max(x[3] for x in during)
        print(f"\n{STUCK + 1} stuck pages for {got['closed'] - got['opened']:.1f}s: a new page's first rows "
              f"{got['seconds']:.2f}s (with the honest page only {got['reference']:.2f}s, alone {alone:.2f}s); the honest page's longest gap between frames "
              f"{gap_stuck:.2f}s (alone {gap_alone:.2f}s); hub RSS {rss0 / 2**20:.0f} -> peak "
              f"{peak_rss / 2**20:.0f} MiB, fds {fds0} -> peak {peak_fds}; each viewer's RSS first -> peak (MiB) "
              f"{[(v[0] >> 20, max(v) >> 20) for v in got['viewer_rss'].values()]}; load {os.getloadavg()[0]:.1f}")
        assert _within_a_second(got["seconds"], got["reference"])
        assert _within_a_second(gap_stuck, gap_alone)  # frames on time
        assert got["closed"] - got["opened"] < 1.5 * HEARTBEAT + 30
        assert peak_rss - rss0 < 64 * 2**20  # bounded: nothing piles up for the stuck pages
        assert peak_fds - fds0 < 16 * (STUCK + 1)  # their sockets and viewers' pipes, no more
        assert all(max(v) < 400 * 2**20 for v in got["viewer_rss"].values())  # a stuck viewer does not pile up frames
        wait_until(lambda: all(_closed_by_peer(s) for s in stuck), timeout=10)  # the door closed them
        wait_until(lambda: not _viewers_of(sock), timeout=20)  # and ended their viewers (and the honest ones')
    finally:
        for s in stuck:
            s.close()
        thread.close(door)
        hub.stop()
