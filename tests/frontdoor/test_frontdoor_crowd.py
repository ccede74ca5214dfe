"""Ten SSH clients and a browser at once, each through its front door, both doors on one loop (as
the hub runs them): every screen draws the dashboard and every session ends cleanly."""

from __future__ import annotations

import asyncio
import time

from nodewatch.frontdoor.background import DoorThread
from nodewatch.frontdoor.doors import HOST_KEY_NAME
from nodewatch.frontdoor.ssh import start_ssh
from nodewatch.frontdoor.viewer import wall_command_for
from nodewatch.frontdoor.web import start_web
from support.frontdoor_support import DEMO_NODE, DEMO_VIEWER, Chromium, Tmux, _wait_async, client_key, need, ssh_argv
from support.simserver import wait_until


def test_ten_ssh_viewers_and_a_browser(tmp_path):
    need("ssh", "openssh-client")
    key, public = client_key(tmp_path)
    (tmp_path / "authorized_keys").write_text(public + "\n")
    doors = DoorThread()
    ssh = doors.run(start_ssh("127.0.0.1:0", tmp_path / "authorized_keys", tmp_path / HOST_KEY_NAME,
                              wall_command_for(DEMO_VIEWER)))
    web = doors.run(start_web("127.0.0.1:0", "crowd-token", DEMO_VIEWER + ["--wall"]))
    tmux = Tmux()
    names = [f"v{i}" for i in range(10)]
    try:
        started = time.monotonic()
        for name in names:
            tmux.start(name, ssh_argv(ssh.port, key, "-tt", user=name), cols=110, rows=30)

        async def browse() -> None:
            async with Chromium() as browser:
                assert await browser.open(web.url) == 200
                await _wait_async(lambda: DEMO_NODE.encode() in browser.received, 120)
                for name in names:  # the SSH screens drew meanwhile
                    await asyncio.to_thread(tmux.wait_screen, name, DEMO_NODE, 120)
                assert len(ssh.sessions) == 10 and web.sessions == 1
                print(f"11 screens drawn {time.monotonic() - started:.1f}s after the first ssh started")

        asyncio.run(browse())
        wait_until(lambda: web.sessions == 0, 30)  # the page closed: its viewer went
        for name in names:
            tmux.keys(name, "q")
        assert [tmux.wait_exit(name) for name in names] == [0] * 10
        wait_until(lambda: not ssh.sessions, 20)
    finally:
        tmux.close()
        doors.close(ssh, web)
