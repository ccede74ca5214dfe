"""Start the testbed's programs in the background and stop exactly those again, by pid.

``up`` returns while etcd, kube-apiserver, kube-controller-manager and the kubelet driver keep
running, so their pids go into ``DIR/pids.json``. ``down`` stops only what is listed there, and
only if the process with that pid is still the program that was started (its command line is
checked), so a reused pid is never signalled.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

PIDS_FILE = "pids.json"


@dataclass(frozen=True)
class Started:
    name: str
    pid: int
    argv0: str


def _ephemeral_low() -> int:
    """The lowest port the kernel hands out on its own (``bind`` to 0, and every outgoing
    connection's local port)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, for a process started later:
    below the kernel's ephemeral range, since a port from ``bind`` to 0 is free only until the
    kernel hands it out again, to any outgoing connection on a busy machine (a test's hub once
    found its ``--metrics`` port taken that way)."""
    low = _ephemeral_low()
    for _ in range(200):
        port = random.randrange(max(1024, low - 12_000), low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(folder: Path, name: str, argv: list[str], env: dict[str, str] | None = None,
          program: str | None = None) -> Started:
    """Start ``argv`` in its own session, output to ``DIR/logs/NAME.log``, and record its pid.

    ``program``: the program the process ends up running when ``argv`` is a launcher that execs it
    (``unshare ... sh -c 'exec PROGRAM ...'``); the pid is recorded as that program's."""
    logs = folder / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / f"{name}.log", "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, env=env, cwd=folder)
    started = Started(name, proc.pid, program or argv[0])
    _children[proc.pid] = proc  # kept: a dropped Popen reaps its child and its exit status is lost
    _record(folder, started, argv)
    return started


def restart(folder: Path, name: str) -> Started:
    """Stop a recorded process and start it again with the same command line."""
    entry = recorded(folder).get(name)
    if not isinstance(entry, dict) or not entry.get("argv"):
        raise KeyError(f"{name} is not recorded in {folder / PIDS_FILE}")
    stop(folder, (name,))
    return start(folder, name, list(entry["argv"]), program=str(entry.get("argv0") or entry["argv"][0]))


def _record(folder: Path, started: Started, argv: list[str]) -> None:
    table = recorded(folder)
    table[started.name] = {"pid": started.pid, "argv0": started.argv0, "argv": argv}
    tmp = folder / (PIDS_FILE + ".tmp")
    tmp.write_text(json.dumps(table, indent=1, sort_keys=True))
    os.replace(tmp, folder / PIDS_FILE)


def recorded(folder: Path) -> dict[str, dict]:
    try:
        data = json.loads((folder / PIDS_FILE).read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


EXEC_WAIT = 1.0
"""How long a live process with no command line is looked at again: one in the middle of an exec
(a launcher becoming its program) shows none for that moment, and was taken for not ours, so a
``stop`` right after a ``start`` left it running (seen in clean-clone runs under load)."""


def is_ours(pid: int, argv0: str) -> bool:
    """Is ``pid`` alive and still running ``argv0`` (not a zombie, not a reused pid)?"""
    deadline = time.monotonic() + EXEC_WAIT
    while True:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        if stat.rsplit(")", 1)[-1].split()[0] == "Z":
            _reap(pid)
            return False
        words = [w.decode(errors="replace") for w in cmdline if w]
        if words or time.monotonic() >= deadline:
            # The program itself, or a launcher still on its way to exec it (named in its arguments).
            return bool(words) and (words[0] == argv0 or argv0 in words[1:])
        time.sleep(0.005)


_children: dict[int, subprocess.Popen] = {}
"""The processes started here: their ``Popen`` reaps them and keeps the exit status for
``exit_status`` (a ``Popen`` that is garbage collected reaps its child too, status and all)."""


def _reap(pid: int) -> None:
    proc = _children.get(pid)
    if proc is not None:
        proc.poll()


def exit_status(folder: Path, name: str) -> str:
    """How a recorded process ended, for messages: "exit status N", "killed by SIGX", or why unknown."""
    entry = recorded(folder).get(name)
    if not isinstance(entry, dict):
        return "not recorded"
    proc = _children.get(int(entry.get("pid", 0)))
    if proc is None:
        return "not a child of this process"
    try:
        code = proc.wait(timeout=2.0)  # one that is ending (no longer its program, not yet a zombie)
    except subprocess.TimeoutExpired:
        return "still running, but no longer the program started"
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit status {code}"


def exited(folder: Path, name: str) -> bool:
    """Has a recorded process ended? For a child of this process, its own exit status decides: just
    after the fork its command line is still this process's, which ``is_ours`` would not recognise."""
    entry = recorded(folder).get(name)
    if not isinstance(entry, dict):
        return True
    proc = _children.get(int(entry.get("pid", 0)))
    if proc is not None:
        return proc.poll() is not None
    return not is_ours(int(entry.get("pid", 0)), str(entry.get("argv0", "")))


def running(folder: Path) -> dict[str, int]:
    """Recorded processes that are still alive: name -> pid."""
    return {name: int(e["pid"]) for name, e in recorded(folder).items()
            if isinstance(e, dict) and is_ours(int(e.get("pid", 0)), str(e.get("argv0", "")))}


# Stop the clients before the server they talk to, the store last.
STOP_ORDER = ("kubelets", "kube-controller-manager", "kube-apiserver", "etcd")
CLIENT_PREFIX = "hollow-"
"""Hollow kubelets (``hollow-NODE``) are clients too: stopped first."""


def stop(folder: Path, names: tuple[str, ...] | None = None, timeout: float = 10.0) -> list[str]:
    """SIGTERM each recorded process (SIGKILL after ``timeout``); returns the names stopped."""
    table = recorded(folder)
    order = (sorted(n for n in table if n.startswith(CLIENT_PREFIX)) + [n for n in STOP_ORDER if n in table]
             + sorted(n for n in table if n not in STOP_ORDER and not n.startswith(CLIENT_PREFIX)))
    stopped: list[str] = []
    for name in order:
        if names is not None and name not in names:
            continue
        entry = table[name]
        pid, argv0 = int(entry.get("pid", 0)), str(entry.get("argv0", ""))
        if pid > 0 and is_ours(pid, argv0):
            _signal(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while is_ours(pid, argv0) and time.monotonic() < deadline:
                time.sleep(0.05)
            if is_ours(pid, argv0):
                _signal(pid, signal.SIGKILL)
                while is_ours(pid, argv0):
                    time.sleep(0.05)
            _wait_gone(pid, timeout)
            stopped.append(name)
        table.pop(name)
    tmp = folder / (PIDS_FILE + ".tmp")
    tmp.write_text(json.dumps(table, indent=1, sort_keys=True))
    os.replace(tmp, folder / PIDS_FILE)
    return stopped


def _wait_gone(pid: int, timeout: float) -> None:
    """Wait until ``pid`` has exited, not only stopped looking like its program: a process on its
    way out has no command line any more (its memory is released before its files are closed), so
    ``is_ours`` says no while it still holds its listening socket, and a Go program's first thread
    may show as a zombie while the others still run. A controller manager restarted at once then
    failed to bind its port ("address already in use", twice on v1.37.2). A child of this process
    is gone when it is reaped (``waitpid`` returns only once every thread has exited); another,
    when its ``/proc`` entry is."""
    deadline = time.monotonic() + timeout
    proc = _children.get(pid)
    while time.monotonic() < deadline:
        if proc is not None:
            if proc.poll() is not None:
                return
        elif not Path(f"/proc/{pid}").exists():
            return
        time.sleep(0.02)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
