"""The plain OpenSSH way: Debian's sshd with ``deploy/sshd-forcecommand.conf`` (its user and
command replaced), run as a non-daemon on a loopback port, and the real ``ssh`` client seeing the
dashboard. Skipped, with sshd's own words, where sshd cannot run (not installed, or not as root)."""

from __future__ import annotations

import getpass
import os
import re
import shlex
import socket
import subprocess
from pathlib import Path

import pytest

from support.frontdoor_support import DEMO_NODE, DEMO_VIEWER, Tmux, client_key, need, run_ssh, ssh_argv
from support.simserver import free_port, wait_until

EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "sshd-forcecommand.conf"


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def example_block(user: str, command: list[str]) -> str:
    """The Match block of the deploy example, for ``user`` and running ``command``."""
    text = EXAMPLE.read_text()
    block = text[text.index("Match User"):]
    block = re.sub(r"^Match User \S+", f"Match User {user}", block, flags=re.M)
    block, n = re.subn(r"^(\s*ForceCommand) .*$", lambda m: f"{m.group(1)} {shlex.join(command)}", block, flags=re.M)
    assert n == 1
    return block


@pytest.fixture
def sshd(tmp_path):
    """Start sshd on a free loopback port with the example's block for this user; yields
    (port, client key). The viewer is the demo dashboard."""
    binary = need("sshd", "openssh-server")
    need("ssh", "openssh-client")
    if os.geteuid() != 0:
        pytest.skip("sshd runs here only as root (it changes to the user who logs in)")
    # sshd's privilege separation needs its empty directory; Debian's package makes it at boot.
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    user = getpass.getuser()
    key, public = client_key(tmp_path)
    (tmp_path / "authorized_keys").write_text(public + "\n")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "host_key")], check=True)
    port = free_port()
    config = tmp_path / "sshd_config"
    config.write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {tmp_path / 'host_key'}",
        f"PidFile {tmp_path / 'sshd.pid'}", f"AuthorizedKeysFile {tmp_path / 'authorized_keys'}",
        "UsePAM no", "StrictModes no", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
        "PermitRootLogin prohibit-password", "PrintMotd no", "PrintLastLog no", "LogLevel VERBOSE",
        "",
        example_block(user, DEMO_VIEWER), ""]))
    check = subprocess.run([binary, "-t", "-f", str(config)], capture_output=True, text=True)
    assert check.returncode == 0, f"sshd rejects the configuration: {check.stderr.strip()}"
    log = tmp_path / "sshd.log"
    proc = subprocess.Popen([binary, "-D", "-f", str(config), "-E", str(log)], stdin=subprocess.DEVNULL)
    try:
        try:
            wait_until(lambda: listening(port) or proc.poll() is not None, 30, 0.05)
        except AssertionError:
            pass
        if proc.poll() is not None or not listening(port):
            pytest.skip(f"sshd did not start here: {log.read_text()[-500:] if log.exists() else proc.returncode}")
        yield port, key, user
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture
def tmux():
    t = Tmux()
    yield t
    t.close()


def test_forcecommand_shows_the_dashboard(sshd, tmux):
    port, key, user = sshd
    tmux.start("s", ssh_argv(port, key, "-tt", user=user), cols=120, rows=35)
    tmux.wait_screen("s", DEMO_NODE)
    tmux.wait_row("s", 34, "q Quit")
    tmux.resize("s", 100, 25)
    tmux.wait_row("s", 24, "q Quit")
    tmux.keys("s", "q")
    assert tmux.wait_exit("s") == 0


def test_forcecommand_runs_no_other_command(sshd, tmp_path):
    port, key, user = sshd
    marker = tmp_path / "pwned"
    r = run_ssh(port, key, user=user, remote=f"touch {marker}")
    assert not marker.exists()
    assert r.returncode == 2 and "needs a terminal" in r.stderr  # the viewer ran instead, without a tty


def test_forcecommand_block_refuses_forwarding(sshd):
    port, key, user = sshd
    r = run_ssh(port, key, "-W", f"127.0.0.1:{port}", user=user)
    assert r.returncode == 255 and "stdio forwarding failed" in r.stderr, r
    r = run_ssh(port, key, "-N", "-o", "ExitOnForwardFailure=yes", "-R", "0:127.0.0.1:9", user=user)
    assert r.returncode == 255 and "remote port forwarding failed" in r.stderr, r


def test_the_example_is_a_valid_sshd_config(tmp_path):
    """``sshd -t`` accepts the deploy file as it ships, in a config of its own (no root needed)."""
    binary = need("sshd", "openssh-server")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "host_key")], check=True)
    config = tmp_path / "sshd_config"
    config.write_text(f"HostKey {tmp_path / 'host_key'}\nUsePAM no\n" + EXAMPLE.read_text())
    r = subprocess.run([binary, "-t", "-f", str(config)], capture_output=True, text=True)
    if r.returncode != 0 and "privilege separation" in r.stderr.lower() and os.geteuid() != 0:
        pytest.skip(f"sshd -t needs /run/sshd here: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
