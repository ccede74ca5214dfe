"""Every child the hub starts ends when the hub ends, however it ends: ``kill -9`` of a real hub
with a real OpenSSH viewer and a web viewer attached leaves no viewer process behind (before, the
SSH viewer was re-parented to init and spun at 60-90 % of a core for ever); a list worker ends
with the process that started it; a viewer whose terminal hangs up exits."""

from __future__ import annotations

import asyncio
import os
import pty
import signal
import subprocess
import sys
import time
from pathlib import Path

from support.frontdoor_support import client_key, need, ssh_argv
from support.simserver import wait_until
from tests.hub.test_hub_frontdoors import _door_lines, _viewers_of

ROOT = Path(__file__).resolve().parents[2]


def _cpu_seconds(pid: int) -> float:
    fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_kill_9_of_the_hub_ends_its_ssh_and_web_viewers_within_5_seconds(tmp_path):
    need("ssh", "openssh-client")
    import aiohttp

    key, public = client_key(tmp_path)
    (tmp_path / "authorized_keys").write_text(public + "\n")
    hub_dir = tmp_path / "hub"
    hub = subprocess.Popen(
        [sys.executable, "-m", "nodewatch", "hub", "--demo", "--demo-nodes", "20", "--dir", str(hub_dir), "--no-record",
         "--ssh", "127.0.0.1:0", "--authorized-keys", str(tmp_path / "authorized_keys"), "--web", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    ssh = None
    try:
        port, url = _door_lines(hub)
        token = url.split("token=", 1)[1]
        web_port = int(url.split("127.0.0.1:", 1)[1].split("/", 1)[0])
        ssh = subprocess.Popen(ssh_argv(port, key, "-tt"), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)

        async def browse() -> list[int]:
            async with aiohttp.ClientSession() as session:
                async with session.ws_connect(f"ws://127.0.0.1:{web_port}/ws?width=100&height=30",
                                              headers={"Authorization": f"Bearer {token}"}) as ws:
                    got = bytearray()

                    async def read() -> None:
                        async for msg in ws:
                            if msg.type == aiohttp.WSMsgType.BINARY:
                                got.extend(msg.data)

                    reader = asyncio.create_task(read())
                    deadline = time.monotonic() + 120
                    while b"nodes" not in got or len(_viewers_of(hub_dir)) < 2:
                        assert time.monotonic() < deadline, f"viewers {_viewers_of(hub_dir)}, page {bytes(got[-500:])!r}"
                        await asyncio.sleep(0.2)
                    viewers = _viewers_of(hub_dir)
                    os.kill(hub.pid, signal.SIGKILL)
                    hub.wait(30)
                    killed = time.monotonic()
                    # the page and the SSH client stay open: only the hub is gone
                    while _viewers_of(hub_dir) and time.monotonic() - killed < 5:
                        await asyncio.sleep(0.1)
                    left = _viewers_of(hub_dir)
                    reader.cancel()
                    return viewers, left

        viewers, left = asyncio.run(browse())
        assert len(viewers) == 2
        assert not left, f"viewers still running 5 s after kill -9 of the hub: {left}"
    finally:
        for pid in _viewers_of(hub_dir):
            os.kill(pid, signal.SIGKILL)
        if hub.poll() is None:
            hub.kill()
        hub.wait(30)
        hub.stdout.close()
        if ssh is not None:
            ssh.kill()
            ssh.wait(30)


PARENT = r'''
import socket, sys, time
sys.path.insert(0, sys.argv[1])
from nodewatch.sources import list_worker
silent = socket.socket()
silent.bind(("127.0.0.1", 0))
silent.listen(1)
req = list_worker.Request(url=f"http://127.0.0.1:{silent.getsockname()[1]}/api/v1/nodes", headers={}, pool={},
                          resource="nodes", connect_timeout=60, read_timeout=600, read_chunk=65536)
worker = list_worker.ListWorker(req)
print(worker.pid, flush=True)
time.sleep(600)
'''


def test_a_list_worker_ends_when_the_process_that_started_it_is_killed(tmp_path):
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(ROOT)], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(parent.stdout.readline())
        time.sleep(0.5)  # it has its request and waits on the API server that never answers
        assert _alive(pid)
        parent.kill()
        parent.wait(30)
        wait_until(lambda: not _alive(pid), timeout=5)
    finally:
        if parent.poll() is None:
            parent.kill()
        parent.wait(30)
        parent.stdout.close()


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_viewer_whose_terminal_hangs_up_exits_instead_of_spinning(tmp_path):
    """The guard alone (its parent stays): the pty's master end closes, as when the hub that held
    it is gone; the viewer exits rather than reading end-of-file for ever."""
    demo = [sys.executable, "-m", "nodewatch", "demo", "--nodes", "5"]
    master, slave = pty.openpty()
    child = subprocess.Popen(demo, stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
                             env={**os.environ, "TERM": "xterm-256color", "NODEWATCH_PARENT_PID": str(os.getpid())})
    os.close(slave)
    try:
        got = b""
        deadline = time.monotonic() + 60
        while b"nodes" not in got and time.monotonic() < deadline:
            import select

            if select.select([master], [], [], 0.5)[0]:
                got += os.read(master, 65536)
        assert b"nodes" in got
        os.close(master)
        master = -1
        child.wait(5)
        assert child.returncode != 0
    finally:
        if master >= 0:
            os.close(master)
        if child.poll() is None:
            child.kill()
        child.wait(30)


def test_the_guard_ends_a_child_whose_parent_was_gone_before_it_asked():
    """``getppid()`` after PR_SET_PDEATHSIG: a child told of a parent it no longer has exits."""
    code = "from nodewatch.frontdoor.child_guard import guard_viewer; guard_viewer(); print('ran on')"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "NODEWATCH_PARENT_PID": "1"}, cwd=ROOT)
    assert r.returncode == 4 and "ran on" not in r.stdout
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "NODEWATCH_PARENT_PID": str(os.getpid())}, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and "ran on" in r.stdout

