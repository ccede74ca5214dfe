"""``nodewatch hub --ssh ... --web ...`` as a process against the simulated API server: ten OpenSSH
clients and a headless Chromium watch the one hub through its front doors, the API server sees the
watches of one nodewatch, and stopping the hub ends every viewer its doors started."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from support.frontdoor_support import Chromium, Tmux, _wait_async, client_key, need, ssh_argv
from support.hub_support import api_requests, cluster_wide, every_watch_logged
from support.simserver import make_fleet, running_server, wait_until

NODES = 30


def _door_lines(proc: subprocess.Popen) -> tuple[int, str]:
    """(SSH port, web URL) from the hub's banner."""
    port, url = None, None
    while port is None or url is None:
        line = proc.stdout.readline()
        assert line, f"the hub ended before its doors opened: {proc.stderr.read()}"
        if "SSH front door on 127.0.0.1:" in line:
            port = int(line.split("127.0.0.1:")[1].split()[0])
        elif "web front door: " in line:
            url = line.split("web front door: ")[1].strip()
    return port, url


def _viewers_of(directory: Path) -> list[int]:
    """Pids of the ``nodewatch attach DIR`` processes still running (not yet reaped zombies count
    as gone: the hub that started them has exited)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            argv = (Path("/proc") / pid / "cmdline").read_bytes().split(b"\0")
            if (Path("/proc") / pid / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
        except OSError:
            continue
        if b"attach" in argv and str(directory).encode() in argv:
            out.append(int(pid))
    return out


@pytest.mark.slow
def test_ten_ssh_viewers_and_a_browser_watch_one_hub_and_the_api_server_sees_one_watcher(tmp_path):
    need("ssh", "openssh-client")
    key, public = client_key(tmp_path)
    (tmp_path / "authorized_keys").write_text(public + "\n")
    hub_dir = tmp_path / "hub"
    users = [f"sre{i}" for i in range(9)] + ["tv"]
    with running_server(tmp_path / "sim", fleet=make_fleet(nodes=NODES)) as srv:
        hub = subprocess.Popen(
            [sys.executable, "-m", "nodewatch", "hub", "--dir", str(hub_dir), "--kubeconfig", str(srv.kubeconfig_path),
             "--cert-cache-dir", str(tmp_path / "certs"), "--ssh", "127.0.0.1:0", "--authorized-keys",
             str(tmp_path / "authorized_keys"), "--wall-user", "tv", "--web", "127.0.0.1:0"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        tmux = Tmux()
        try:
            port, url = _door_lines(hub)
            assert (hub_dir / "web-url").read_text().strip() == url
            for user in users:
                tmux.start(user, ssh_argv(port, key, "-tt", user=user), cols=120, rows=30)

            async def browse() -> None:
                async with Chromium() as browser:
                    assert await browser.open(url) == 200
                    # the web door's wall mode, with the hub's fleet
                    await _wait_async(lambda: f"of {NODES} nodes not Ready".encode() in browser.received, 120)
                    for user in users[:-1]:
                        await asyncio.to_thread(tmux.wait_screen, user, f"{NODES} nodes", 120)
                    await asyncio.to_thread(tmux.wait_screen, "tv", f"of {NODES} nodes not Ready", 120)
                    assert len(_viewers_of(hub_dir)) == len(users) + 1

            asyncio.run(browse())
            hub.send_signal(signal.SIGTERM)
            assert hub.wait(60) == 0
            for user in users:  # the SSH door closed each session
                tmux.wait_exit(user, 30)
            # every viewer was told to quit (SIGHUP on a pty, Textual's quit on a page); one still
            # drawing its last frame on a busy machine may take a moment after the hub has gone
            wait_until(lambda: not _viewers_of(hub_dir), timeout=20)
        finally:
            tmux.close()
            if hub.poll() is None:
                hub.kill()
            hub.wait(30)
            hub.stdout.close()
            hub.stderr.close()
        wait_until(lambda: every_watch_logged(srv))
        count, _ = api_requests(srv)
    wide = cluster_wide(count)  # {(method, path, watch?, streaming list?): requests} of nodes, leases and CSRs
    assert len({path for (_, path, watch, _) in wide if watch}) == 3, wide
    assert set(wide.values()) == {1}, f"each list and watch once, as one nodewatch asks: {wide}"


@pytest.mark.parametrize("args, message", [
    (["--ssh", "127.0.0.1:0"], "--ssh needs --authorized-keys"),
    (["--ssh", "127.0.0.1:0", "--authorized-keys", "/nonexistent/keys"], "no such file"),
    (["--web", "127.0.0.1:99999"], "front door: '127.0.0.1:99999': port out of range"),
])
def test_bad_front_door_options_stop_the_hub_with_a_message(tmp_path, args, message):
    r = subprocess.run([sys.executable, "-m", "nodewatch", "hub", "--demo", "--demo-nodes", "5", "--no-record",
                        "--dir", str(tmp_path / "hub"), *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert not (tmp_path / "hub" / "hub.sock").exists()
