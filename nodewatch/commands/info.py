"""``nodewatch info``: where every file nodewatch reads and writes is, and whether it is there.

An SRE who wonders why the dashboard picked a context, a theme or a key, or where a hub keeps its
recordings, gets the answer from one command instead of the source code. Read-only: it creates
nothing (not even the directories it names).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format")


def _paths() -> list[tuple[str, str, str]]:
    """(what, path, read/write) for every file or folder, in the order a user meets them."""
    from .. import config
    from ..hub.paths import default_dir
    from ..sources.certcache import default_cache_dir
    from ..sources.kubeconfig import kubeconfig_paths
    from ..ui.keymap import keymap_path

    kube = kubeconfig_paths(None) or [os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")]
    rows = [("kubeconfig", p, "reads") for p in kube]
    rows += [
        ("settings (theme, refresh, columns, context)", str(config.config_path()), "reads"),
        ("key bindings", str(keymap_path()), "reads"),
        ("last theme chosen", str(config.remembered_theme_path()), "reads and writes"),
        ("kubelet certificate dates", default_cache_dir(), "reads and writes"),
        ("hub directory (socket, token, recordings)", str(default_dir()), "reads and writes (hub)"),
    ]
    rows.append(("testbed build cache (a clone's developer tooling)", str(testbed_cache()),
                 "reads and writes (testbed)"))
    return rows


def testbed_cache() -> Path:
    """Where ``nodewatch testbed`` builds (``testbed.build.cache_dir``, which the testbed's tests
    hold this to): said here without importing the testbed, the only code that writes to a cluster."""
    env = os.environ.get("NODEWATCH_TESTBED_CACHE")
    if env:
        return Path(env).expanduser().resolve()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return (base / "nodewatch" / "testbed").resolve()


def run(args: argparse.Namespace) -> int:
    from .. import __version__
    from ..core.text import safe

    rows = [(what, path, mode, Path(path).exists()) for what, path, mode in _paths()]
    if args.format == "json":
        json.dump({"version": __version__, "python": sys.version.split()[0],
                   "files": [{"what": w, "path": p, "access": m, "exists": e} for w, p, m, e in rows]},
                  sys.stdout, indent=2, ensure_ascii=True)
        sys.stdout.write("\n")
        return 0
    print(f"nodewatch {__version__} (Python {sys.version.split()[0]}), read-only towards clusters")
    width = max(len(w) for w, *_ in rows)
    for what, path, mode, exists in rows:
        print(f"  {what:<{width}}  {safe(path, 300)}  [{mode}{'' if exists else ', absent'}]")
    return 0
