"""Make ``tests/data/testbed-kubelet-stop.jsonl.gz``: a real-controller incident, recorded by nodewatch.

    .venv/bin/python tests/testbed/make_recording.py [OUT]

A fresh testbed (grace 20 s, default tolerations 30 s), four simulated nodes in two zones, and
``nodewatch record`` on ``viewer.kubeconfig``; after a few quiet seconds one kubelet stops. The
real kube-controller-manager then marks the node Unknown, taints it, and evicts its pods: one with
its own 10 s toleration, one with the 30 s default. The fast suite replays the file
(``tests/testbed/test_recorded_incident.py``), so it always carries real controller output.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from campaign import APISERVER_FLAGS, CONTROLLER_FLAGS, GRACE, MONITOR, OWN_TOLERATION, TOLERATION  # noqa: E402

from nodewatch.testbed.build import ensure_built  # noqa: E402
from nodewatch.testbed.controlplane import down, up  # noqa: E402
from nodewatch.testbed.kubelets import TestbedFleet  # noqa: E402

OUT = HERE.parent / "data" / "testbed-kubelet-stop.jsonl.gz"
VICTIM = "general-euw1a-00"
QUIET = 8.0
AFTER = 75.0


def main(out: Path) -> int:
    os.environ["TZ"] = "UTC"
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"nodewatch-recording-{os.getpid()}"
    tb = up(folder, ensure_built(), controller_flags=CONTROLLER_FLAGS, apiserver_flags=APISERVER_FLAGS)
    try:
        layout = [("eu-west-1", "eu-west-1a"), ("eu-west-1", "eu-west-1b")] * 2
        fleet = TestbedFleet(tb.admin(), layout=layout, seed=11, pods_per_node=2, progress=print)
        assert VICTIM in fleet.nodes, fleet.node_order
        fleet.add_pod(VICTIM, "own-toleration", namespace="incident", toleration_seconds=OWN_TOLERATION)
        fleet.add_pod(VICTIM, "default-toleration", namespace="incident")
        fleet.setup()
        out.unlink(missing_ok=True)
        rec = subprocess.Popen([sys.executable, "-m", "nodewatch", "record", str(out), "--quiet",
                                "--kubeconfig", str(tb.viewer_kubeconfig), "--cert-cache-dir", str(folder / "certs"),
                                "--grace", f"{GRACE:g}", "--toleration", f"{TOLERATION:g}",
                                "--monitor-period", f"{MONITOR:g}", "--duration", f"{QUIET + AFTER:g}"])
        time.sleep(QUIET)
        fleet.renew_now(fleet.nodes[VICTIM])
        fleet.stop_kubelet(fleet.nodes[VICTIM])
        print(f"kubelet of {VICTIM} stopped; recording {AFTER:.0f}s more")
        rc = rec.wait(timeout=QUIET + AFTER + 60)
        fleet.stop()
    finally:
        down(folder)
    print(f"{out}: {out.stat().st_size} bytes, exit {rc}")
    return rc


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT))
