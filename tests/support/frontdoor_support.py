"""Helpers of the front-door tests: real clients (OpenSSH's ``ssh`` in tmux, headless Chromium)
against doors running on their own event-loop thread.

tmux plays the person at the terminal: it gives ``ssh`` a real terminal of a chosen size, types
keys, resizes the window and shows the screen as drawn (``capture-pane``), so the tests read what
a user would see rather than escape sequences.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from support.simserver import wait_until

DEMO_VIEWER = [sys.executable, "-m", "nodewatch", "demo", "--nodes", "20"]
"""The dashboard the doors serve in tests (``attach`` needs a hub; the doors do not care)."""
DEMO_NODE = "general-euw1b-19"
"""A node of ``demo --nodes 20`` (seed 1) shown on its first screen, in full and in wall mode."""

PROBE_VIEWER = r'''
import os, signal, sys
print("argv", " ".join(sys.argv[1:]), flush=True)
print("term", os.environ.get("TERM"), "door", os.environ.get("NODEWATCH_FRONTDOOR"), flush=True)
with open(os.environ["PROBE_PIDFILE"] + ".cwd", "w") as f:
    f.write(os.getcwd())
with open(os.environ["PROBE_PIDFILE"], "w") as f:
    f.write(str(os.getpid()))
def size(*_):
    c, r = os.get_terminal_size(0)
    print(f"size {c}x{r}", flush=True)
signal.signal(signal.SIGWINCH, size)
size()
for line in sys.stdin:
    if line.strip() == "quit":
        sys.exit(3)
'''
"""A viewer that shows what a session gives it: its argv, TERM, terminal size (again at each
SIGWINCH), and exits 3 when the user types ``quit``; it writes its working directory and then its
pid beside ``PROBE_PIDFILE``."""


def need(program: str, package: str) -> str:
    path = shutil.which(program) or (f"/usr/sbin/{program}" if os.path.exists(f"/usr/sbin/{program}") else None)
    if not path:
        pytest.skip(f"{program} is not installed (Debian package {package})")
    return path


def client_key(directory: Path, name: str = "client") -> tuple[Path, str]:
    """A new Ed25519 key pair for the ``ssh`` client: (private key path, public key line)."""
    from nodewatch.frontdoor.ssh_library import asyncssh

    key = asyncssh.generate_private_key("ssh-ed25519", comment=name)
    private = directory / name
    private.write_bytes(key.export_private_key())
    private.chmod(0o600)
    return private, key.export_public_key().decode().strip()


def ssh_argv(port: int, key: Path, *extra: str, user: str = "alice", remote: str | None = None) -> list[str]:
    """The OpenSSH client with no user config, agent or known_hosts of the machine it runs on."""
    return ["ssh", "-F", "/dev/null", "-p", str(port), "-i", str(key), "-o", "IdentitiesOnly=yes",
            "-o", "IdentityAgent=none", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=20", *extra, f"{user}@127.0.0.1",
            *([remote] if remote is not None else [])]


def run_ssh(port: int, key: Path, *extra: str, user: str = "alice", remote: str | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(ssh_argv(port, key, *extra, user=user, remote=remote), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)


class Tmux:
    """A private tmux server; each session is one terminal running one command."""

    def __init__(self) -> None:
        need("tmux", "tmux")
        # A short path: a UNIX socket's path has a length limit that pytest's tmp_path can pass.
        self.dir = Path(tempfile.mkdtemp(prefix="nwtmux-"))
        (self.dir / "conf").write_text("set -g remain-on-exit on\nset -g status off\nset -g default-terminal screen-256color\n")
        self.started = False

    def tmux(self, *args: str) -> str:
        r = subprocess.run(["tmux", "-S", str(self.dir / "sock"), "-f", str(self.dir / "conf"), *args],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    def start(self, name: str, argv: list[str], cols: int = 120, rows: int = 35) -> None:
        env = {"TERM": "xterm-256color", "SSH_AUTH_SOCK": ""}
        env_args = [a for k, v in env.items() for a in ("-e", f"{k}={v}")]
        self.tmux("new-session", "-d", "-s", name, "-x", str(cols), "-y", str(rows), *env_args,
                  shlex.join(["sh", "-c", '"$@"; echo $? > "$0"', str(self.dir / f"{name}.status"), *argv]))
        self.started = True

    def screen(self, name: str) -> str:
        return self.tmux("capture-pane", "-p", "-t", name)

    def wait_screen(self, name: str, text: str, timeout: float = 60) -> str:
        try:
            return wait_until(lambda: _containing(self.screen(name), text), timeout, 0.1)
        except AssertionError:
            raise AssertionError(f"{text!r} not on screen {name!r} within {timeout}s:\n{self.screen(name)}") from None

    def wait_row(self, name: str, row: int, text: str, timeout: float = 60) -> None:
        """Wait until ``text`` is on the 0-based ``row`` of the screen."""
        def on_row() -> bool:
            rows = self.screen(name).splitlines()
            return row < len(rows) and text in rows[row]
        try:
            wait_until(on_row, timeout, 0.1)
        except AssertionError:
            raise AssertionError(f"{text!r} not on row {row} of {name!r} within {timeout}s:\n{self.screen(name)}") from None

    def keys(self, name: str, *keys: str) -> None:
        self.tmux("send-keys", "-t", name, *keys)

    def resize(self, name: str, cols: int, rows: int) -> None:
        self.tmux("resize-window", "-t", name, "-x", str(cols), "-y", str(rows))

    def exit_status(self, name: str) -> int | None:
        """The exit status of the session's command, None while it runs. (The command writes it
        to a file: tmux 3.3 can report a pane dead before it has reaped its process.)"""
        path = self.dir / f"{name}.status"
        text = path.read_text() if path.exists() else ""
        return int(text) if text.endswith("\n") else None

    def wait_exit(self, name: str, timeout: float = 30) -> int:
        try:
            return wait_until(lambda: _boxed(self.exit_status(name)), timeout, 0.1)[0]
        except AssertionError:
            raise AssertionError(f"{name!r} still runs after {timeout}s:\n{self.screen(name)}") from None

    def close(self) -> None:
        if self.started:
            subprocess.run(["tmux", "-S", str(self.dir / "sock"), "kill-server"], capture_output=True, timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)



def _containing(screen: str, text: str) -> str | None:
    return screen if text in screen else None


def _boxed(value: int | None) -> tuple[int] | None:
    return None if value is None else (value,)


# --- the browser ---------------------------------------------------------------------------------

class Chromium:
    """Headless Chromium driven over the DevTools protocol (aiohttp's websocket client), so a test
    can wait for the page to draw in real time: ``--screenshot`` runs on virtual time and does not
    wait for a viewer process to start.

        async with Chromium() as browser:
            status = await browser.open(url)
            await browser.wait_for("document.body.classList.contains('-first-byte')")
            png = await browser.screenshot()
    """

    def __init__(self, width: int = 1400, height: int = 900) -> None:
        self.binary = need("chromium", "chromium")
        self.width, self.height = width, height
        self._next_id = 0
        self._waiting: dict[int, Any] = {}
        self.received = bytearray()
        """What the page's websockets received (the viewer's terminal output)."""

    async def __aenter__(self) -> Chromium:
        self.profile = Path(tempfile.mkdtemp(prefix="nwchrome-"))
        self.proc = await asyncio.create_subprocess_exec(
            self.binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={self.profile}", f"--window-size={self.width},{self.height}",
            "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "about:blank",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True)  # its helpers in its group: all of them go at the end
        try:
            return await self._connect()
        except BaseException:
            await self._close_browser()
            raise

    async def _connect(self) -> Chromium:
        import aiohttp

        active = self.profile / "DevToolsActivePort"
        await _wait_async(lambda: active.exists() and len(active.read_text().splitlines()) >= 2, 60)
        port = int(active.read_text().splitlines()[0])
        self.http = aiohttp.ClientSession()
        async with self.http.get(f"http://127.0.0.1:{port}/json/list") as r:
            page = next(t for t in await r.json() if t["type"] == "page")
        self.ws = await self.http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        self._reader = asyncio.ensure_future(self._read())
        await self.send("Page.enable")
        await self.send("Network.enable")
        # The page gets the whole window (headless Chromium takes some of it for window chrome).
        await self.send("Emulation.setDeviceMetricsOverride", width=self.width, height=self.height,
                        deviceScaleFactor=1, mobile=False)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._reader.cancel()
        await self.ws.close()
        await self.http.close()
        await self._close_browser()

    async def _close_browser(self) -> None:
        """Chromium and its helper processes ended, its profile and its singleton socket's directory
        removed (killing only the browser left both behind: its network helper wrote into the
        removed profile again, and /tmp filled with them)."""
        singleton = self.profile / "SingletonSocket"
        socket_dir = Path(os.readlink(singleton)).parent if singleton.is_symlink() else None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        await self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)
        if socket_dir is not None and socket_dir.name.startswith("org.chromium."):
            shutil.rmtree(socket_dir, ignore_errors=True)

    async def _read(self) -> None:
        async for msg in self.ws:
            data = msg.json()
            if data.get("method") == "Network.webSocketFrameReceived":
                self._frame(data["params"]["response"])
            future = self._waiting.pop(data.get("id", -1), None)
            if future is not None and not future.done():
                future.set_result(data)

    def _frame(self, response: dict) -> None:
        import base64

        payload = response.get("payloadData", "")
        self.received += base64.b64decode(payload) if response.get("opcode") == 2 else payload.encode()

    async def send(self, method: str, **params: Any) -> dict:
        self._next_id += 1
        future = asyncio.get_running_loop().create_future()
        self._waiting[self._next_id] = future
        await self.ws.send_json({"id": self._next_id, "method": method, "params": params})
        reply = await asyncio.wait_for(future, 60)
        if "error" in reply:
            raise AssertionError(f"{method}: {reply['error']}")
        return reply["result"]

    async def evaluate(self, expression: str) -> Any:
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    async def open(self, url: str) -> int:
        """Navigate to ``url``; the HTTP status of the page."""
        await self.send("Page.navigate", url=url)
        await self.wait_for("document.readyState === 'complete' && location.href !== 'about:blank'")
        return int(await self.evaluate("performance.getEntriesByType('navigation')[0].responseStatus"))

    async def wait_for(self, expression: str, timeout: float = 60) -> Any:
        try:
            return await _wait_async(lambda: self.evaluate(expression), timeout)
        except AssertionError:
            raise AssertionError(f"{expression!r} not true within {timeout}s") from None

    async def screenshot(self) -> bytes:
        import base64

        return base64.b64decode((await self.send("Page.captureScreenshot", format="png"))["data"])


async def _wait_async(predicate, timeout: float) -> Any:
    """``wait_until`` for the event loop: polls ``predicate`` (sync or async) while I/O goes on."""
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(0.05)


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit, non-interlaced PNG: enough to tell a
    drawn page from a blank one without an imaging library."""
    import struct
    import zlib

    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and not interlace, "unsupported PNG"
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    bpp = 4 if color == 6 else 3
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, rows


def luminance_stddev(png: bytes, step: int = 4) -> float:
    """The standard deviation of the grey level over a grid of pixels: about 0 for a blank page."""
    import statistics

    width, height, rows = png_pixels(png)
    bpp = len(rows[0]) // width
    greys = [sum(rows[y][x * bpp:x * bpp + 3]) / 3 for y in range(0, height, step) for x in range(0, width, step)]
    return statistics.pstdev(greys)
