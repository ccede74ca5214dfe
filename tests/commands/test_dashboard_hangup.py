"""A dashboard and its terminal. One whose terminal goes away (SIGHUP: a closed terminal window, an
SSH session that dropped, a front door closing a viewer; or no signal at all) or that is asked to
stop (SIGTERM) ends as ``q`` ends it: the command's own ending runs. Seen from outside: the
recording it was writing is closed whole (a gzip trailer, the last line complete), where the
signal's default action left it torn. And one whose standard error is a file draws on the terminal."""

from __future__ import annotations

import gzip
import os
import select
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.timeout(120)


def _drawn(fd: int, proc: subprocess.Popen, timeout: float = 30.0) -> bytes:
    """What the dashboard wrote to its terminal, read until its header is on screen."""
    seen = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:
                break
            if b"Ready" in seen and b"nodewatch" in seen:
                return seen
    raise AssertionError(f"the dashboard drew no header (exit {proc.poll()}): {seen[-400:]!r}")


def _close_after_drawing(primary: int, proc: subprocess.Popen, wait: float = 0.0) -> None:
    """Once the dashboard has drawn its header (and ``wait`` seconds more), its terminal is closed:
    it must end by itself within 20 s (else it is killed, and the test fails)."""
    try:
        _drawn(primary, proc)
        time.sleep(wait)
        os.close(primary)
        primary = -1
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if primary >= 0:
            os.close(primary)


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM])
def test_a_hung_up_dashboard_closes_its_recording_whole(tmp_path, sig):
    record = tmp_path / "demo.jsonl.gz"
    primary, secondary = os.openpty()
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="120", LINES="40")
    proc = subprocess.Popen([sys.executable, "-m", "nodewatch", "demo", "--nodes", "8", "--record", str(record)],
                            stdin=secondary, stdout=secondary, stderr=secondary, env=env, cwd=tmp_path,
                            start_new_session=True)
    os.close(secondary)
    try:
        _drawn(primary, proc)
        time.sleep(1.0)  # a few lines recorded
        proc.send_signal(sig)
        deadline = time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < deadline:  # (its terminal read on: it may write while ending)
            if select.select([primary], [], [], 0.2)[0]:
                try:
                    os.read(primary, 65536)
                except OSError:  # (EIO: the terminal's last holder closed it, the process is ending)
                    break
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        os.close(primary)
    assert proc.returncode != -sig  # not killed by the signal's default action
    with gzip.open(record, "rb") as f:
        data = f.read()  # EOFError on a file without its trailer
    assert data.endswith(b"\n") and data.count(b"\n") > 5


def test_a_dashboard_whose_terminal_closes_without_a_sighup_ends_on_its_own(tmp_path):
    """The dashboard holds the terminal without controlling it (a new session: as under ``make demo``
    or a script that goes on after it, whose shell takes the SIGHUP): closing the terminal sends it no
    signal. It ends all the same, as SIGHUP ends it, with its recording whole. The code before went on
    at ~95 % of a core until killed (Textual's writer thread died on EIO and the loop blocked on its
    full queue)."""
    record = tmp_path / "demo.jsonl.gz"
    primary, secondary = os.openpty()
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="120", LINES="40")
    proc = subprocess.Popen([sys.executable, "-m", "nodewatch", "demo", "--nodes", "8", "--record", str(record)],
                            stdin=secondary, stdout=secondary, stderr=secondary, env=env, cwd=tmp_path,
                            start_new_session=True)  # (no controlling terminal: the pty is inherited, not opened)
    os.close(secondary)
    _close_after_drawing(primary, proc, wait=1.0)
    assert proc.returncode >= 0  # it ended, not killed
    with gzip.open(record, "rb") as f:
        data = f.read()
    assert data.endswith(b"\n") and data.count(b"\n") > 5


def test_a_dashboard_with_its_standard_error_in_a_file_draws_on_the_terminal(tmp_path):
    """``nodewatch demo 2>debug.log``: Textual draws on standard error, so the whole dashboard went
    into the log and the terminal stayed blank. It draws on standard output when only that one is a
    terminal."""
    log = tmp_path / "debug.log"
    primary, secondary = os.openpty()
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="120", LINES="40")
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "nodewatch", "demo", "--nodes", "8"], stdin=secondary,
                                stdout=secondary, stderr=err, env=env, cwd=tmp_path, start_new_session=True)
    os.close(secondary)
    _close_after_drawing(primary, proc)  # (the header on the terminal: AssertionError otherwise)
    assert b"nodewatch" not in log.read_bytes()  # no screen in the log
