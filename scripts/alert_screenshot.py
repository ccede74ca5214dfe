"""screenshots/alert.txt: what on-call sees in Alertmanager when a kubelet stops, made for real.

A simulated API server (6 nodes, wall speed, grace 15 s for a short run), nodewatch's live source
and its Alertmanager pusher (``--alertmanager``), a real Alertmanager (Debian's), one kubelet
stopped; once the page is in, Alertmanager's own ``amtool alert query -o extended`` lists it
(Debian's Alertmanager has no web UI: amtool is its way to look).
Run: ``.venv/bin/python scripts/alert_screenshot.py`` (needs prometheus-alertmanager).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from metrics_support import alertmanager_only  # noqa: E402
from simserver import running_server, wait_until  # noqa: E402

from nodewatch.core.settings import Settings  # noqa: E402
from nodewatch.metrics.alertmanager import AlertPusher  # noqa: E402
from nodewatch.metrics.sample import take_sample  # noqa: E402
from nodewatch.sim.fleet import SimFleet  # noqa: E402
from nodewatch.sources.live import LiveSource  # noqa: E402


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="nodewatch-alert-"))
    settings = Settings().override(grace_seconds=15.0)
    fleet = SimFleet(nodes=6, scenario="steady", seed=5, start=time.time(), settings=settings)
    victim = fleet.node_order[1]
    with running_server(tmp, fleet=fleet, run_fleet=True, speed=1.0) as srv, alertmanager_only(tmp) as (hook, url):
        src = LiveSource(settings, kubeconfig=str(srv.kubeconfig_path), cert_cache_dir=str(tmp / "c"))
        src.start()
        pusher = AlertPusher(url, lambda: take_sample(src, nodes="not-ready", cluster="prod"), interval=0.5)
        try:
            src.wait_synced(20)
            pusher.start()
            with fleet.lock:
                fleet.stop_kubelet(fleet.node(victim))
            wait_until(lambda: hook.first("NodewatchNodeLeaseOverdue", victim) is not None, timeout=60, interval=0.2)
            time.sleep(1.0)
            out = ROOT / "screenshots" / "alert.txt"
            shown = subprocess.run(["amtool", "alert", "query", "-o", "extended", f"--alertmanager.url={url}"],
                                   check=True, capture_output=True, text=True, timeout=60).stdout
            out.write_text(shown)
            print(shown)
        finally:
            pusher.stop()
            src.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
