"""The SSH front door against the real OpenSSH client: logins, the viewer on a terminal of the
client's size, resizes, the end of a session, and everything the door must refuse."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

from nodewatch.frontdoor.background import DoorThread
from nodewatch.frontdoor.doors import HOST_KEY_NAME
from nodewatch.frontdoor.ssh import VIEWER_DIR_NAME, start_ssh
from nodewatch.frontdoor.viewer import wall_command_for
from support.frontdoor_support import DEMO_NODE, DEMO_VIEWER, PROBE_VIEWER, Tmux, client_key, need, run_ssh, ssh_argv
from support.simserver import wait_until


class Door:
    """An SSH door on its own loop thread, with one authorized client key."""

    def __init__(self, tmp: Path, viewer: list[str], *, key_options: str = "", wall_users=(), **kw) -> None:
        need("ssh", "openssh-client")
        self.tmp = tmp
        self.key, self.public = client_key(tmp)
        self.authorized = tmp / "authorized_keys"
        self.authorized.write_text(f"{key_options + ' ' if key_options else ''}{self.public}\n")
        self.thread = DoorThread()
        self.door = self.thread.run(start_ssh(
            "127.0.0.1:0", self.authorized, tmp / "hub" / HOST_KEY_NAME, wall_command_for(viewer, wall_users),
            env={"PROBE_PIDFILE": str(tmp / "viewer.pid")}, **kw))
        self.port = self.door.port

    def ssh(self, *extra: str, user: str = "alice") -> list[str]:
        return ssh_argv(self.port, self.key, "-tt", *extra, user=user)

    def close(self) -> None:
        if self.thread.thread.is_alive():
            self.thread.close(self.door)


@pytest.fixture
def tmux():
    t = Tmux()
    yield t
    t.close()


@pytest.fixture
def door_factory(tmp_path):
    doors: list[Door] = []

    def make(viewer: list[str], **kw) -> Door:
        d = Door(tmp_path, viewer, **kw)
        doors.append(d)
        return d

    yield make
    for d in doors:
        d.close()


@pytest.fixture
def probe(tmp_path) -> list[str]:
    path = tmp_path / "probe.py"
    path.write_text(PROBE_VIEWER)
    return [sys.executable, str(path)]


# --- the dashboard, as a user sees it -------------------------------------------------------------

def test_dashboard_over_ssh_draws_resizes_and_quits(door_factory, tmux):
    door = door_factory(DEMO_VIEWER)
    tmux.start("s", door.ssh(), cols=120, rows=35)
    tmux.wait_screen("s", DEMO_NODE)
    tmux.wait_row("s", 34, "q Quit")  # the footer on the client's last row
    tmux.resize("s", 90, 20)
    # The footer moves up to row 20: the viewer learnt the new size (without the resize it would
    # still draw 35 rows, its footer outside the window).
    tmux.wait_row("s", 19, "q Quit")
    tmux.keys("s", "q")
    assert tmux.wait_exit("s") == 0
    wait_until(lambda: not door.door.sessions, 10)


def test_an_old_ssh_client_gets_the_dashboard_in_ascii(door_factory, tmux):
    """A client whose terminal says TERM=vt100 (a wall screen's thin client): its viewer draws
    ASCII only, in 16 colours (``ui/terminal.py``), chosen by the TERM the client sent."""
    door = door_factory(DEMO_VIEWER)
    tmux.start("v", ["env", "TERM=vt100", *door.ssh()], cols=120, rows=35)
    screen = tmux.wait_screen("v", DEMO_NODE)
    screen = tmux.wait_screen("v", "+ Ready")
    assert screen.isascii(), sorted({c for c in screen if not c.isascii()})
    assert "X Evicted" in screen and "C cordoned 1" in screen
    tmux.keys("v", "q")
    assert tmux.wait_exit("v") == 0


def test_viewer_gets_the_clients_size_term_and_resizes(door_factory, tmux, probe, tmp_path):
    door = door_factory(probe)
    tmux.start("p", door.ssh(), cols=101, rows=33)
    screen = tmux.wait_screen("p", "size 101x33")
    assert screen.splitlines()[0].strip() == "argv"  # the viewer's own argv, nothing added
    assert "door ssh" in screen
    assert "term screen-256color" in screen  # the TERM of the client's terminal
    tmux.resize("p", 77, 21)
    tmux.wait_screen("p", "size 77x21")
    tmux.keys("p", "quit", "Enter")
    assert tmux.wait_exit("p") == 3  # the viewer's exit code is the session's


def test_session_ends_when_the_client_goes_away(door_factory, tmux, probe, tmp_path):
    door = door_factory(probe)
    tmux.start("p", door.ssh())
    tmux.wait_screen("p", "size 120x35")
    pid = int((tmp_path / "viewer.pid").read_text())
    tmux.tmux("kill-session", "-t", "p")  # the client's terminal closes: ssh exits, the connection drops
    wait_until(lambda: not door.door.sessions, 20)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_viewers_work_in_the_hubs_directory_and_leave_nothing_in_tmp(door_factory, tmux, probe, tmp_path,
                                                                     monkeypatch):
    """A directory made per session in the temporary directory stayed behind whenever the hub was
    killed with sessions open (dozens after a few test runs)."""
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    door = door_factory(probe)
    for name in ("p1", "p2"):
        tmux.start(name, door.ssh())
        tmux.wait_screen(name, "size 120x35")
        assert (tmp_path / "viewer.pid.cwd").read_text() == str(tmp_path / "hub" / VIEWER_DIR_NAME)
        tmux.keys(name, "quit", "Enter")
        assert tmux.wait_exit(name) == 3
        wait_until(lambda: not door.door.sessions, 20)
    assert (tmp_path / "hub" / VIEWER_DIR_NAME).stat().st_mode & 0o777 == 0o700
    assert list(scratch.iterdir()) == []


# --- wall mode per key and per user ---------------------------------------------------------------

@pytest.mark.parametrize("options", ['environment="NODEWATCH_WALL=1"', 'command="nodewatch attach --wall"'])
def test_a_key_option_asks_for_wall_mode(door_factory, tmux, probe, options):
    door = door_factory(probe, key_options=options)
    tmux.start("p", door.ssh())
    screen = tmux.wait_screen("p", "size 120x35")
    assert "--wall" in screen.splitlines()[0]


def test_wall_user(door_factory, tmux, probe):
    door = door_factory(probe, wall_users=["tv"])
    tmux.start("tv", door.ssh(user="tv"))
    tmux.start("al", door.ssh(user="alice"))
    assert "--wall" in tmux.wait_screen("tv", "size").splitlines()[0]
    assert "--wall" not in tmux.wait_screen("al", "size").splitlines()[0]


def test_wall_mode_dashboard(door_factory, tmux):
    door = door_factory(DEMO_VIEWER, key_options='environment="NODEWATCH_WALL=1"')
    tmux.start("w", door.ssh())
    tmux.wait_screen("w", "of 20 nodes not Ready")  # the wall's headline; the full table has none
    tmux.keys("w", "q")
    assert tmux.wait_exit("w") == 0


def test_a_key_forcing_another_command_is_refused(door_factory, tmp_path, probe):
    door = door_factory(probe, key_options='command="touch pwned"')
    r = run_ssh(door.port, door.key, "-tt")
    assert r.returncode != 0
    assert "runs only `nodewatch attach" in r.stdout + r.stderr
    assert not (tmp_path / "viewer.pid").exists()


# --- what the door refuses --------------------------------------------------------------------

def test_wrong_key_is_refused(door_factory, tmp_path, probe):
    door = door_factory(probe)
    other, _ = client_key(tmp_path, "other")
    r = run_ssh(door.port, other, "-tt")
    assert r.returncode == 255
    assert "Permission denied (publickey)" in r.stderr


def test_a_removed_key_is_refused_at_the_next_login(door_factory, tmux, probe):
    door = door_factory(probe)
    tmux.start("p", door.ssh())
    tmux.wait_screen("p", "size")
    door.authorized.write_text("")
    r = run_ssh(door.port, door.key, "-tt")
    assert r.returncode == 255 and "Permission denied" in r.stderr


def test_no_command_of_the_clients_choice(door_factory, tmp_path, probe):
    door = door_factory(probe)
    marker = tmp_path / "pwned"
    for extra in (["-tt"], []):
        r = run_ssh(door.port, door.key, *extra, remote=f"touch {marker}")
        assert r.returncode != 0 and "exec request failed" in r.stderr, r
    r = run_ssh(door.port, door.key, "-s", remote="sftp")
    assert r.returncode != 0 and "subsystem request failed" in r.stderr, r
    assert not marker.exists()
    assert not (tmp_path / "viewer.pid").exists()


def test_no_port_forwarding(door_factory, probe):
    door = door_factory(probe)
    r = run_ssh(door.port, door.key, "-W", f"127.0.0.1:{door.port}")
    assert r.returncode == 255 and "stdio forwarding failed" in r.stderr, r
    r = run_ssh(door.port, door.key, "-N", "-o", "ExitOnForwardFailure=yes", "-R", "0:127.0.0.1:9")
    assert r.returncode == 255 and "remote port forwarding failed" in r.stderr, r


def test_no_agent_or_x11_forwarding(door_factory, tmux, probe):
    door = door_factory(probe)
    tmux.start("p", door.ssh("-A", "-X", "-o", "ForwardX11Trusted=no"))
    tmux.wait_screen("p", "size")
    session = next(iter(door.door.sessions))
    assert session.chan.get_agent_path() is None
    assert session.chan.get_x11_display() is None


def test_without_a_terminal_the_session_says_so(door_factory, probe):
    door = door_factory(probe)
    r = run_ssh(door.port, door.key, "-T")
    assert r.returncode == 1 and "connect with `ssh -t`" in r.stderr


def test_closing_the_door_ends_its_sessions(door_factory, tmux, probe, tmp_path):
    door = door_factory(probe)
    tmux.start("p", door.ssh())
    tmux.wait_screen("p", "size")
    pid = int((tmp_path / "viewer.pid").read_text())
    door.close()
    assert tmux.wait_exit("p") != 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert run_ssh(door.port, door.key, "-tt").returncode == 255  # nobody listens any more


def test_sessions_are_bounded(door_factory, tmux, probe):
    door = door_factory(probe, max_sessions=1)
    tmux.start("one", door.ssh())
    tmux.wait_screen("one", "size")
    r = run_ssh(door.port, door.key, "-tt")
    assert r.returncode == 1 and "already shows 1 viewers" in r.stdout + r.stderr
    tmux.keys("one", "quit", "Enter")
    assert tmux.wait_exit("one") == 3
    wait_until(lambda: not door.door.sessions, 10)
    tmux.start("two", door.ssh())
    tmux.wait_screen("two", "size")


# --- the host key --------------------------------------------------------------------------------

def test_host_key_made_once_and_private(door_factory, tmp_path, probe):
    door = door_factory(probe)
    path = tmp_path / "hub" / HOST_KEY_NAME
    assert path.stat().st_mode & 0o777 == 0o600
    first = path.read_bytes()
    door.close()
    door_factory(probe)
    assert path.read_bytes() == first


# --- many at once ----------------------------------------------------------------------------------

def test_ten_concurrent_dashboards(door_factory, tmux):
    door = door_factory(DEMO_VIEWER)
    names = [f"v{i}" for i in range(10)]
    for name in names:
        tmux.start(name, door.ssh(user=name), cols=110, rows=30)
    for name in names:
        tmux.wait_screen(name, DEMO_NODE, timeout=120)
    assert len(door.door.sessions) == 10
    for name in names:
        tmux.keys(name, "q")
    assert [tmux.wait_exit(name) for name in names] == [0] * 10
    wait_until(lambda: not door.door.sessions, 20)


def test_the_ssh_door_imports_without_a_warning():
    """asyncssh's import printed ten lines of CryptographyDeprecationWarning (DSA) on the hub's
    console before its banner; nodewatch uses no DSA key (``frontdoor/ssh_library.py``)."""
    import subprocess

    done = subprocess.run([sys.executable, "-W", "error", "-c", "import nodewatch.frontdoor.ssh"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == "", done.stderr[-500:]
