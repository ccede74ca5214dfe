#!/usr/bin/env python3
"""Take ``screenshots/web.png``: the hub's web front door as a browser shows it (headless Chromium).

    .venv/bin/python scripts/make_web_screenshot.py [--out screenshots/web.png] [--hub-args '...']

Starts ``nodewatch hub --demo --web 127.0.0.1:0`` in a temporary directory (the demo's incident on
30 nodes at 30x speed, so the incident is under way within seconds), reads the URL with its token
from the hub's banner, opens it in headless Chromium and waits until the wall screen (the web
door's default) shows nodes that are not Ready, then takes the picture and stops the hub. What
the browser shows is ``nodewatch attach DIR --wall`` run by the door, fed by the hub. It fails
rather than save a blank page. Needs the Debian package ``chromium``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the browser driver the web door's tests use

from frontdoor_support import Chromium, _wait_async, luminance_stddev, png_pixels  # noqa: E402

HUB_ARGS = ["--demo", "--demo-nodes", "30", "--speed", "30", "--no-record"]
INCIDENT = re.compile(rb"[1-9][0-9]* of [0-9]+ nodes not Ready")
"""The wall's headline once the incident shows (and the dashboard has drawn a full frame)."""


def start_hub(directory: str, hub_args: list[str]) -> tuple[subprocess.Popen, str]:
    hub = subprocess.Popen([sys.executable, "-m", "nodewatch", "hub", "--dir", directory, *hub_args,
                            "--web", "127.0.0.1:0"], stdout=subprocess.PIPE, text=True,
                           env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert hub.stdout is not None
    for line in hub.stdout:
        if "web front door: " in line:
            return hub, line.split("web front door: ")[1].strip()
    raise SystemExit(f"the hub ended (exit {hub.wait()}) before its web door opened")


async def take(url: str, out: Path, width: int, height: int) -> str:
    async with Chromium(width, height) as browser:
        status = await browser.open(url)
        if status != 200:
            raise SystemExit(f"the web door answered {status}")
        await browser.wait_for("document.body.classList.contains('-first-byte')")
        await _wait_async(lambda: INCIDENT.search(bytes(browser.received)), 120)
        # One more second of frames, so the picture is not caught between two of them.
        await asyncio.sleep(1.0)
        png = await browser.screenshot()
    spread = luminance_stddev(png)
    if spread < 10:
        raise SystemExit(f"the page looks blank (grey level spread {spread:.1f}); not saved")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(png)
    w, h, _ = png_pixels(png)
    return f"{w}x{h} pixels, grey level spread {spread:.1f}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "screenshots" / "web.png"))
    p.add_argument("--hub-args", default=shlex.join(HUB_ARGS), help=f"the hub's options (default: {shlex.join(HUB_ARGS)})")
    p.add_argument("--size", default="1400x900", help="browser window, WIDTHxHEIGHT (default 1400x900)")
    args = p.parse_args()
    width, height = (int(n) for n in args.size.split("x"))
    with tempfile.TemporaryDirectory(prefix="nodewatch-web-shot-") as d:
        hub, url = start_hub(d, shlex.split(args.hub_args))
        try:
            print(f"{args.out}: {asyncio.run(take(url, Path(args.out), width, height))}")
        finally:
            hub.terminate()
            hub.wait(60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
