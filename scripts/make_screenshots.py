#!/usr/bin/env python3
"""Render the README screenshots into ``screenshots/`` (SVG, and PNG when rsvg-convert exists).

    .venv/bin/python scripts/make_screenshots.py [--out screenshots] [--size 150x42]

Six pictures rendered from the committed recording ``tests/data/incident-30.jsonl.gz`` (the
simulated fleet's "incident" scenario, 30 nodes, seed 1), 90 s in:

- ``main.svg``: the main screen during the incident;
- ``drilldown.svg``: the drill-down of an unreachable node with a StatefulSet pod at risk;
- ``outlook.svg``: the drill-down of a node that stopped reporting and has no NoExecute taint yet:
  what its zone's rules will do with it;
- ``wall.svg``: wall mode;
- ``replay.svg``: the same moment with the replay controls, as ``nodewatch replay`` shows it;
- ``ascii.svg``: wall mode on an old terminal (``TERM=vt100``, ``--ascii``): ASCII, 16 colours.

The clock is frozen for each capture, so the pictures are the same on every run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nodewatch.core.outlook import outlook_in  # noqa: E402
from nodewatch.core.views import AT_RISK_STATES  # noqa: E402
from nodewatch.ui.app import NodewatchApp  # noqa: E402
from nodewatch.ui.terminal import Terminal  # noqa: E402

RECORDING = ROOT / "tests" / "data" / "incident-30.jsonl.gz"
"""The committed recording of the demo incident (scripts/make_recording.py makes it)."""
AT = 90.0
"""Seconds into the recording."""


def replay_source():
    """The committed recording, replayed and paused ``AT`` seconds in (speed x4 shown)."""
    from nodewatch.sources.replay import ReplaySource

    replay = ReplaySource(str(RECORDING))
    replay.replay.pause()
    replay.replay.seek(replay.replay.start + AT)
    replay.replay.set_speed(4.0)
    return replay


class Still:
    """The recording's state at one instant, as the live dashboard showed it then (no replay bar)."""

    replay = None

    def __init__(self, replay) -> None:
        self.state = replay.state
        self.clock = replay.clock
        self.name = "demo: incident, 30 nodes (recorded)"

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def focus_node(self, node) -> None: ...


def demo_source():
    return Still(replay_source())


def unreachable_with_statefulset(src) -> str | None:
    """A node that stopped reporting (Ready Unknown) and hosts a StatefulSet pod now at risk."""
    now = src.clock.now()
    view = src.state.evaluate(now)
    fallback = None
    for v in view.nodes:
        if v.state not in AT_RISK_STATES:
            break
        if any(p.statefulset_risk for p in src.state.pods_on(v.name, now)):
            if v.ready == "Unknown":
                return v.name
            fallback = fallback or v.name
    return fallback or (view.nodes[0].name if view.nodes else None)


def awaiting_taint(src) -> str | None:
    """A node the controller judged not Ready and has not NoExecute-tainted: its outlook is said."""
    view = src.state.evaluate(src.clock.now())
    return next((v.name for v in view.nodes if outlook_in(view, v)), None)


async def capture(app: NodewatchApp, size: tuple[int, int], path: Path, keys: tuple[str, ...] = ()) -> None:
    app.animation_level = "none"
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        for k in keys:
            await pilot.press(k)
        await pilot.pause()
        app.tick()
        await pilot.pause()
        path.write_text(app.export_screenshot(title="nodewatch"), encoding="utf-8")
    print(f"wrote {path}")


def to_png(svg: Path) -> None:
    """The PNG the README shows: by rsvg-convert, else by a headless Chromium at the SVG's size."""
    png = svg.with_suffix(".png")
    exe = shutil.which("rsvg-convert")
    if exe is not None:
        subprocess.run([exe, str(svg), "-o", str(png)], check=True)
    else:
        browser = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)),
                       None)
        if browser is None:
            return
        import math
        import re

        box = re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', svg.read_text(encoding="utf-8"))
        if box is None:
            return
        w, h = (math.ceil(float(x)) for x in box.groups())
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--default-background-color=00000000", f"--window-size={w},{h}", f"--screenshot={png}",
                        svg.resolve().as_uri()], check=True, capture_output=True, timeout=120)
    print(f"wrote {png}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "screenshots"))
    ap.add_argument("--size", default="150x42", help="terminal size COLSxROWS (wall mode uses 100x30)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    size = (cols, rows)
    os.environ.setdefault("TZ", "UTC")

    shots: list[Path] = []
    src = demo_source()
    asyncio.run(capture(NodewatchApp(src, refresh_seconds=3600), size, out / "main.svg"))
    shots.append(out / "main.svg")

    src = demo_source()
    node = unreachable_with_statefulset(src)
    asyncio.run(capture(NodewatchApp(src, focus=node, refresh_seconds=3600), size, out / "drilldown.svg"))
    shots.append(out / "drilldown.svg")

    src = demo_source()
    node = awaiting_taint(src)
    asyncio.run(capture(NodewatchApp(src, focus=node, refresh_seconds=3600), size, out / "outlook.svg"))
    shots.append(out / "outlook.svg")

    src = demo_source()
    asyncio.run(capture(NodewatchApp(src, wall=True, refresh_seconds=3600), (100, 30), out / "wall.svg"))
    shots.append(out / "wall.svg")

    src = demo_source()
    asyncio.run(capture(NodewatchApp(src, wall=True, refresh_seconds=3600, terminal=Terminal(True, True, "vt100")),
                        (100, 30), out / "ascii.svg"))
    shots.append(out / "ascii.svg")

    rsrc = replay_source()
    try:
        asyncio.run(capture(NodewatchApp(rsrc, refresh_seconds=3600), size, out / "replay.svg"))
        shots.append(out / "replay.svg")
    finally:
        rsrc.stop()
    for svg in shots:
        to_png(svg)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
