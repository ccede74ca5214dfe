"""A kubeconfig's inline credentials are written to a directory of the process's own, and never
left behind: not at a normal exit, and not after a kill (the next nodewatch removes them)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

from nodewatch.sources import credential_files

LOAD = """
import os, signal, sys
from nodewatch.sources.kubeconfig import load_configuration
cfg, _ = load_configuration(sys.argv[1], None)
for f in (cfg.ssl_ca_cert, cfg.cert_file, cfg.key_file):
    print(f, oct(os.stat(os.path.dirname(f)).st_mode & 0o777), open(f).read())
sys.stdout.flush()
if sys.argv[2] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _kubeconfig(path: Path) -> str:
    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    path.write_text(f"""apiVersion: v1
kind: Config
current-context: c
clusters:
- name: k
  cluster: {{server: "https://127.0.0.1:6443", certificate-authority-data: "{b64('the CA')}"}}
users:
- name: u
  user: {{client-certificate-data: "{b64('the certificate')}", client-key-data: "{b64('the key')}"}}
contexts:
- name: c
  context: {{cluster: k, user: u}}
""")
    return str(path)


def _load(kubeconfig: str, tmp: Path, how: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    env["TMPDIR"] = str(tmp)
    return subprocess.run([sys.executable, "-c", LOAD, kubeconfig, how], env=env, capture_output=True, text=True,
                          timeout=60)


def test_inline_credentials_live_in_a_private_directory_removed_at_exit(tmp_path):
    kc = _kubeconfig(tmp_path / "kubeconfig")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    done = _load(kc, tmp, "exit")
    assert done.returncode == 0, done.stderr
    files = [line.split(" ", 2) for line in done.stdout.splitlines()]
    assert [content for _, _, content in files] == ["the CA", "the certificate", "the key"]
    for path, mode, _ in files:
        assert Path(path).parent.parent == tmp and Path(path).parent.name.startswith(credential_files.PREFIX)
        assert mode == "0o700"
    assert list(tmp.iterdir()) == [], "nothing left after a normal exit"


def test_a_killed_process_leaves_its_credentials_only_until_the_next_one_starts(tmp_path):
    kc = _kubeconfig(tmp_path / "kubeconfig")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    killed = _load(kc, tmp, "kill")
    assert killed.returncode == -9
    (left,) = tmp.iterdir()
    assert left.name.startswith(credential_files.PREFIX) and len(list(left.iterdir())) == 3
    done = _load(kc, tmp, "exit")
    assert done.returncode == 0, done.stderr
    assert list(tmp.iterdir()) == [], "the next run removed the killed one's files, and its own at exit"


def test_the_credentials_of_a_running_process_are_kept(tmp_path):
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as other:
        try:
            mine = tmp_path / f"{credential_files.PREFIX}{other.pid}-abc"
            gone = tmp_path / f"{credential_files.PREFIX}{_a_dead_pid()}-abc"
            unrelated = tmp_path / "nodewatch-credentials-x"
            for d in (mine, gone, unrelated):
                d.mkdir()
                (d / "key").write_text("k")
            assert credential_files.sweep(str(tmp_path)) == [gone.name]
            assert mine.exists() and unrelated.exists() and not gone.exists()
        finally:
            other.kill()


def _a_dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid
