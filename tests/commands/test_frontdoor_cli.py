"""``python -m nodewatch.frontdoor``: the doors the hub opens (``doors.open_doors``), run alone:
where they are is printed, the web URL written, and both answer."""

from __future__ import annotations

import shlex
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from support.frontdoor_support import DEMO_VIEWER, client_key, need, run_ssh


def test_both_doors_from_the_command_line(tmp_path):
    need("ssh", "openssh-client")
    key, public = client_key(tmp_path)
    other, _ = client_key(tmp_path, "other")
    (tmp_path / "authorized_keys").write_text(public + "\n")
    hub = tmp_path / "hub"
    proc = subprocess.Popen(
        [sys.executable, "-m", "nodewatch.frontdoor", str(hub), "--ssh", "127.0.0.1:0",
         "--authorized-keys", str(tmp_path / "authorized_keys"), "--web", "127.0.0.1:0",
         "--viewer", shlex.join(DEMO_VIEWER)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ssh_line, web_line = proc.stdout.readline(), proc.stdout.readline()
        assert ssh_line.startswith("nodewatch: SSH front door on 127.0.0.1:"), (ssh_line, proc.stderr.read())
        port = int(ssh_line.split("127.0.0.1:")[1].split()[0])
        url = web_line.split("web front door: ")[1].strip()
        assert (hub / "web-url").read_text().strip() == url
        assert sorted(p.name for p in hub.iterdir()) == ["ssh_host_ed25519_key", "viewer-cwd", "web-token", "web-url"]
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url.split("?")[0], timeout=30)
        assert refused.value.code == 401
        with urllib.request.urlopen(url, timeout=30) as page:
            assert page.status == 200 and b"data-session-websocket-url" in page.read()
        assert run_ssh(port, other, "-tt").returncode == 255
        r = run_ssh(port, key, "-T")
        assert r.returncode == 1 and "connect with `ssh -t`" in r.stderr
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.mark.parametrize("args, message", [
    ([], "nothing to serve"),
    (["--ssh", "127.0.0.1:0"], "--ssh needs --authorized-keys"),
    (["--ssh", "127.0.0.1:0", "--authorized-keys", "/nonexistent/keys"], "no such file"),
])
def test_bad_options(tmp_path, args, message):
    r = subprocess.run([sys.executable, "-m", "nodewatch.frontdoor", str(tmp_path), *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and message in r.stderr
