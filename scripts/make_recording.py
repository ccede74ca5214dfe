#!/usr/bin/env python3
"""Record the demo fleet's incident into ``tests/data/incident-30.jsonl.gz``, in virtual time.

    .venv/bin/python scripts/make_recording.py [--out FILE] [--seconds 300]

The recording is committed: the screenshots and the recording-based snapshot tests are rendered
from it, so they show what a replay of a real recording shows. It is deterministic (seed 1), so
running this again only changes it when the simulator changed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nodewatch.sources.demo import DemoSource  # noqa: E402
from nodewatch.sources.recording import Recorder  # noqa: E402

SCENARIO = dict(nodes=30, scenario="incident", seed=1)
DEFAULT_OUT = ROOT / "tests" / "data" / "incident-30.jsonl.gz"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--seconds", type=float, default=300.0)
    args = ap.parse_args()
    probe = DemoSource(**SCENARIO)
    with Recorder(args.out, {"kind": "demo", **SCENARIO}, probe.state.settings) as rec:
        src = DemoSource(**SCENARIO, recorder=rec)
        start = src.clock.now()
        src.advance_to(start + args.seconds)
    print(f"wrote {args.out} ({Path(args.out).stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
