#!/usr/bin/env python3
"""Render the incident report of the committed recording as HTML and photograph it with headless
Chromium into ``screenshots/report.png`` (the page itself is tests/data/expected-report.html).

    .venv/bin/python scripts/make_report_screenshot.py

Skips cleanly (exit 0, one line) when no Chromium is installed (Debian: ``apt-get install chromium``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nodewatch.cli import main as nodewatch  # noqa: E402

RECORDING = ROOT / "tests" / "data" / "incident-30.jsonl.gz"
OUT = ROOT / "screenshots"


def main() -> int:
    browser = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    if browser is None:
        print("no chromium found: skipped screenshots/report.png")
        return 0
    OUT.mkdir(exist_ok=True)
    png = OUT / "report.png"
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        if nodewatch(["report", str(RECORDING), "-o", str(page)]) != 0:
            return 1
        profile = Path(tmp) / "profile"
        cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={profile}", "--hide-scrollbars", f"--screenshot={png}", "--window-size=1200,1600",
               page.as_uri()]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if done.returncode != 0 or not png.exists():
        print(f"chromium failed ({done.returncode}): {done.stderr.strip()[-500:]}")
        return 1
    print(f"wrote {png.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
