"""The testbed (developer tooling that writes to clusters) is not in the wheel; from a clone
``nodewatch testbed`` works, and an installed nodewatch says in one line where it is."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_leaves_the_testbed_out():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "nodewatch.testbed" in conf["packages"]["find"]["exclude"]
    assert "nodewatch.testbed.*" in conf["packages"]["find"]["exclude"]


def test_from_a_clone_the_testbed_command_is_there(tmp_path):
    """Installed editable (``make``'s way), away from the clone's directory."""
    r = subprocess.run([sys.executable, "-m", "nodewatch", "testbed", "--help"], capture_output=True, text=True,
                       timeout=60, cwd=tmp_path)
    assert r.returncode == 0 and "build" in r.stdout, r.stderr


def test_without_the_testbed_package_the_command_is_one_clear_line():
    code = ("import sys; sys.modules['nodewatch.testbed'] = None\n"
            "from nodewatch.cli import main, build_parser\n"
            "build_parser()\n"  # every command still lists
            "sys.exit(main(['testbed', 'up']))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    assert "not in the installed package" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
