#!/usr/bin/env python3
"""Run the dashboard on the simulated fleet, without the CLI (a quick look, or a tmux check).

    .venv/bin/python scripts/ui_demo.py [--nodes 30] [--scenario incident] [--speed 1] [--wall]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nodewatch.sources.demo import DemoSource  # noqa: E402
from nodewatch.ui.app import run_dashboard  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=30)
    ap.add_argument("--scenario", default="incident")
    ap.add_argument("--speed", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--wall", action="store_true")
    args = ap.parse_args()
    return run_dashboard(DemoSource(nodes=args.nodes, scenario=args.scenario, seed=args.seed, speed=args.speed),
                         wall=args.wall)


if __name__ == "__main__":
    raise SystemExit(main())
