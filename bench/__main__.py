"""Run every benchmark and print each figure beside its reference: ``make bench``.

``python -m bench --quick`` runs smaller sizes (used by the smoke test); ``--only NAME`` one group.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback

from .harness import Figure, print_table

GROUPS = ["core_ingest", "memory", "process_memory", "frame", "start", "live_path", "sim_realtime", "replay_seek",
          "replay_read", "terminal", "multi", "metrics", "status_incident", "recorder"]
QUICK = {
    "core_ingest": {"nodes": 500, "events": 20_000, "hot_nodes": 2_000},
    "memory": {"nodes": 2_000},
    "frame": {"sizes": (1_000, 5_000)},
    "start": {"nodes": 2_000, "starts": 1, "references": False},
    "replay_read": {"nodes": 200, "minutes": 3},
    "process_memory": {"nodes": 2_000, "seconds": 2.0},
    "live_path": {"nodes": 2_000, "seconds": 2.0},
    "sim_realtime": {"nodes": 300, "seconds": 3.0},
    "replay_seek": {"nodes": 200, "minutes": 5},
    "terminal": {"nodes": 2_000, "seconds": 3},
    "multi": {"clusters": 3, "nodes": 300, "frames": 2},
    "metrics": {"nodes": 2_000, "frames": 2},
    "status_incident": {"sizes": ()},  # the incident's moment comes 30 s into the fleet: not a smoke run
    "recorder": {"nodes": 300, "minutes": 3},
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke run, not the figures")
    p.add_argument("--only", action="append", choices=GROUPS, help="run only these groups")
    args = p.parse_args(argv)
    figures: list[Figure] = []
    failed = False
    for name in args.only or GROUPS:
        mod = importlib.import_module(f"bench.{name}")
        print(f"running {name} ...", file=sys.stderr, flush=True)
        try:
            figures.extend(mod.run(**(QUICK.get(name, {}) if args.quick else {})))
        except Exception:  # noqa: BLE001 - one broken benchmark must not hide the others
            failed = True
            traceback.print_exc()
            figures.append(Figure(name, "ERROR", "-", "-", False))
    print_table(figures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
