"""The core, the sources and the simulator never import the UI toolkit (harlequin's import hygiene)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import nodewatch

NO_UI_PACKAGES = ("nodewatch.core", "nodewatch.sources", "nodewatch.sim")


def _modules() -> list[str]:
    out = []
    for info in pkgutil.walk_packages(nodewatch.__path__, "nodewatch."):
        if info.name.startswith(NO_UI_PACKAGES) or info.name in NO_UI_PACKAGES:
            out.append(info.name)
    return out


def test_there_are_core_modules_to_check():
    mods = _modules()
    assert "nodewatch.core.fleet" in mods and "nodewatch.core.rules" in mods


def test_no_textual_or_rich_below_the_ui():
    mods = _modules()
    code = (
        "import importlib, sys\n"
        f"mods = {mods!r}\n"
        "bad = []\n"
        "for m in mods:\n"
        "    importlib.import_module(m)\n"
        "    leaked = [x for x in ('textual', 'rich') if x in sys.modules]\n"
        "    if leaked: bad.append((m, leaked)); break\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"UI toolkit imported below the UI layer: {r.stdout} {r.stderr[-2000:]}"


def test_every_command_module_imports():
    from nodewatch.cli import COMMANDS, build_parser

    for _, (module, _) in COMMANDS.items():
        __import__(f"nodewatch.commands.{module}")
    build_parser()
