"""The web door ends a viewer that does not quit when told: textual-serve sends Textual's quit
when a page closes and then waited for ever; a viewer that hangs (or ignores it) kept its process,
and the door's closing, for good. It gets ``VIEWER_GRACE_SECONDS``, then SIGKILL."""

from __future__ import annotations

import asyncio
import os
import sys
import time

import aiohttp

from nodewatch.frontdoor import web
from nodewatch.frontdoor.background import DoorThread
from nodewatch.frontdoor.web import start_web

STUBBORN = r'''
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
with open(sys.argv[1], "w") as f:
    f.write(str(os.getpid()))
sys.stdout.write("__GANGLION__\n")
sys.stdout.flush()
while True:  # never reads its stdin (the quit), never closes its stdout
    time.sleep(1)
'''


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_viewer_that_ignores_quit_is_killed_after_its_grace(tmp_path):
    pidfile = tmp_path / "viewer.pid"
    thread = DoorThread()
    door = thread.run(start_web("127.0.0.1:0", "a-token", [sys.executable, "-c", STUBBORN, str(pidfile)]))
    try:
        async def page() -> int:
            async with aiohttp.ClientSession() as session:
                async with session.ws_connect(f"ws://127.0.0.1:{door.port}/ws",
                                              headers={"Authorization": "Bearer a-token"}) as ws:
                    deadline = time.monotonic() + 30
                    while not (pidfile.exists() and pidfile.read_text()):
                        assert time.monotonic() < deadline, "the viewer did not start"
                        await asyncio.sleep(0.1)
                    await asyncio.sleep(0.3)
                    pid = int(pidfile.read_text())
                    assert _alive(pid)
                    await ws.close()  # the page closes
                    return pid

        pid = asyncio.run(page())
        closed = time.monotonic()
        while _alive(pid) and time.monotonic() - closed < web.VIEWER_GRACE_SECONDS + 5:
            time.sleep(0.1)
        assert not _alive(pid), "the viewer outlived its grace by 5 s"
        assert time.monotonic() - closed >= web.VIEWER_GRACE_SECONDS - 0.5  # it had its grace
        wait = time.monotonic() + 10
        while door.sessions and time.monotonic() < wait:
            time.sleep(0.1)
        assert door.sessions == 0
    finally:
        thread.close(door)
        if pidfile.exists() and pidfile.read_text() and _alive(int(pidfile.read_text())):
            os.kill(int(pidfile.read_text()), 9)
