"""Helpers of the front-door tests: real clients (OpenSSH's ``ssh`` in tmux, headless Chromium)
against doors running on their own event-loop thread.

tmux plays the person at the terminal: it gives ``ssh`` a real terminal of a chosen size, types
keys, resizes the window and shows the screen as drawn (``capture-pane``), so the tests read what
a user would see rather than escape sequences.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from simserver import wait_until

DEMO_VIEWER = [sys.executable, "-m", "nodewatch", "demo", "--nodes", "20"]
"""The dashboard the doors serve in tests (``attach`` needs a hub; the doors do not care)."""
DEMO_NODE = "general-euw1b-19"
"""A node of ``demo --nodes 20`` (seed 1) shown on its first screen, in full and in wall mode."""

PROBE_VIEWER = r'''
import os, signal, sys
print("argv", " ".join(sys.argv[1:]), flush=True)
print("term", os.environ.get("TERM"), "door", os.environ.get("NODEWATCH_FRONTDOOR"), flush=True)
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
SIGWINCH), and exits 3 when the user types ``quit``."""


def need(program: str, package: str) -> str:
    path = shutil.which(program) or (f"/usr/sbin/{program}" if os.path.exists(f"/usr/sbin/{program}") else None)
    if not path:
        pytest.skip(f"{program} is not installed (Debian package {package})")
    return path


def client_key(directory: Path, name: str = "client") -> tuple[Path, str]:
    """A new Ed25519 key pair for the ``ssh`` client: (private key path, public key line)."""
    import asyncssh

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
