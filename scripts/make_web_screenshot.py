#!/usr/bin/env python3
"""Take ``screenshots/web.png``: the web front door as a browser shows it (headless Chromium).

    .venv/bin/python scripts/make_web_screenshot.py [--out screenshots/web.png] [--viewer COMMAND]

Starts the web door on a free loopback port serving, by default, the committed recording
``tests/data/incident-30.jsonl.gz`` replayed from 90 s in, in wall mode (as the door serves the
hub's dashboard to the office TV), opens the URL with its token in headless Chromium, waits until
the dashboard has drawn and takes the picture. It fails rather than save a blank page. Needs the
Debian package ``chromium``.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
import secrets
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the browser driver the web door's tests use

from frontdoor_support import Chromium, _wait_async, luminance_stddev, png_pixels  # noqa: E402
from nodewatch.frontdoor.web import start_web  # noqa: E402

RECORDING = ROOT / "tests" / "data" / "incident-30.jsonl.gz"
VIEWER = [sys.executable, "-m", "nodewatch", "replay", str(RECORDING), "--start", "+90"]
DRAWN = b"nodes not Ready"
"""What the wall's headline says once the dashboard has drawn its first full frame."""


async def take(viewer: list[str], out: Path, width: int, height: int) -> str:
    door = await start_web("127.0.0.1:0", secrets.token_urlsafe(16), viewer)
    try:
        async with Chromium(width, height) as browser:
            status = await browser.open(door.url)
            if status != 200:
                raise SystemExit(f"the web door answered {status}")
            await browser.wait_for("document.body.classList.contains('-first-byte')")
            await _wait_async(lambda: DRAWN in browser.received, 60)
            # One more second of frames, so the picture is not caught between two of them.
            await asyncio.sleep(1.0)
            png = await browser.screenshot()
    finally:
        door.close()
        await door.wait_closed()
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
    p.add_argument("--viewer", help="viewer command line (default: the committed recording, 90 s in)")
    p.add_argument("--size", default="1400x900", help="browser window, WIDTHxHEIGHT (default 1400x900)")
    args = p.parse_args()
    viewer = shlex.split(args.viewer) if args.viewer else VIEWER
    width, height = (int(n) for n in args.size.split("x"))
    print(f"{args.out}: {asyncio.run(take(viewer + ['--wall'], Path(args.out), width, height))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
