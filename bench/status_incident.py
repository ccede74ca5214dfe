"""``nodewatch status`` the moment an incident starts, beside the same command on a healthy fleet.

The fleet: ``nodewatch sim-server --scenario flapping`` (its own process): one node's network is
cut for 70 s every two minutes; the rest renew every 10 s. For about 30 s of each cut the node is
still Ready while its lease is late (the minute before the node lifecycle controller flips it):
the moment an SRE runs ``status``. The bench runs the real command (``python -m nodewatch status
--format json``) again and again, and sorts each run by what its answer shows: *incident* (a Ready
node whose lease is more than two renewal intervals old, Late or Overdue) or *healthy* (every node
Ready and renewing). Reference in the same run: ``status --wait 300``, the patience that used to
be the default, which waits up to one renewal interval (+2 s) after the lists for such a lease to
be seen renewing (it never is: the node is cut off).

Figures: from the lists in to the answer, the worst incident run beside the healthy median (the
issue's "answers within 1 s of its lists"; target <= 1 s); and the whole command, the median
incident run beside the median healthy run (target: within 1 s of it; on a shared machine the
lists themselves vary by seconds between runs, so this one is noisier than what it measures).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from .harness import Figure
from .process_memory import start_sim_server, stop

TARGET_EXTRA = 1.0
RUNS = 3


_STATUS = r"""
import atexit, sys, time
from nodewatch.commands import status
from nodewatch.sources.live import LiveSource
status.LIST_WAIT = float(sys.argv[1])
synced_at = []
wait_synced = LiveSource.wait_synced
def timed(self, *a, **k):
    got = wait_synced(self, *a, **k)
    synced_at.append(time.perf_counter())
    return got
LiveSource.wait_synced = timed
atexit.register(lambda: synced_at and print(f"NW_AFTER_LISTS {time.perf_counter() - synced_at[0]:.4f}",
                                            file=sys.stderr, flush=True))
from nodewatch.cli import main
sys.exit(main(['status', *sys.argv[2:]]))
"""
"""``nodewatch status`` with a longer wait for the lists than its 30 s default when ``--wait`` is
not given (``status.LIST_WAIT``): a 65,000-node list on this shared machine can take longer. Given
``--wait``, status would also wait for renewals: the reference's behaviour, not the figure's.

Timed inside, without changing what it does: the moment ``LiveSource.wait_synced`` returns (both
lists in) to the process's exit, after its answer is printed (``NW_AFTER_LISTS`` on stderr): what
the issue's "answers within 1 s of its lists" asks, apart from the list's own time, which varies
by seconds from run to run on a shared machine."""


def _status(kc: str, *extra: str, list_wait: float = 300.0) -> tuple[float, dict | None, float]:
    """(wall seconds, the JSON answer or None, seconds from the lists in to the answer) of one
    ``nodewatch status`` (its own process)."""
    env = {**os.environ, "KUBECONFIG": kc}
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _STATUS, str(list_wait), "--format", "json", *extra],
                          capture_output=True, env=env, timeout=900)
    took = time.perf_counter() - t
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"status exited with {proc.returncode}: {proc.stderr.decode()[-300:]}")
    after = [float(line.split()[1]) for line in proc.stderr.decode().splitlines() if line.startswith("NW_AFTER_LISTS ")]
    return took, json.loads(proc.stdout), after[-1] if after else float("nan")


def _moment(doc: dict) -> str:
    """``incident`` (a Ready node whose lease is more than 20 s old), ``healthy`` (every node Ready,
    none late) or ``other`` (the cut node Unknown: after the controller's flip)."""
    nodes = doc["nodes"]
    if any(n["ready"] == "True" and n["state"] in ("Late", "Overdue") and (n["lease_age_seconds"] or 0) > 20
           for n in nodes):
        return "incident"
    if all(n["state"] == "Ready" for n in nodes):
        return "healthy"
    return "other"


def measure(nodes: int, runs: int = RUNS, budget: float = 900.0) -> dict[str, list[float]]:
    got: dict[str, list[float]] = {"incident": [], "healthy": [], "other": [], "patient": [], "setup": [],
                                   "incident_after": [], "healthy_after": []}
    with tempfile.TemporaryDirectory(prefix="nodewatch-status-incident-") as tmp:
        print(f"  status incident: sim-server with {nodes:,} nodes, scenario flapping (setup)", file=sys.stderr,
              flush=True)
        t0 = time.perf_counter()
        server, kc = start_sim_server(nodes, "flapping", tmp)
        got["setup"].append(time.perf_counter() - t0)
        print(f"  status incident: serving after {got['setup'][0]:.0f} s", file=sys.stderr, flush=True)
        try:
            deadline = time.monotonic() + budget
            while time.monotonic() < deadline and (len(got["incident"]) < runs or len(got["healthy"]) < runs
                                                   or len(got["patient"]) < 1):
                took, doc, after = _status(str(kc))
                moment = _moment(doc)
                got[moment].append(took)
                if moment != "other":
                    got[f"{moment}_after"].append(after)
                print(f"  status incident: {moment} {took:.2f} s ({after:.2f} s after the lists)", file=sys.stderr,
                      flush=True)
                if moment == "incident" and len(got["patient"]) < runs and len(got["incident"]) % 2 == 0:
                    took_p, doc_p, _ = _status(str(kc), "--wait", "300")
                    if _moment(doc_p) == "incident":  # still the same moment when it answered
                        got["patient"].append(took_p)
        finally:
            stop(server)
    return got


def _med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def run(sizes: tuple[int, ...] = (200, 65_000), runs: int = RUNS) -> list[Figure]:
    if not sizes:
        return [Figure("status: an incident starting / healthy", "not run (--quick)", "-", "-", None,
                       "the incident's moment comes 30 s into the simulated fleet: run without --quick")]
    figures = []
    for n in sizes:
        got = measure(n, runs)
        inc, ok, pat = _med(got["incident"]), _med(got["healthy"]), _med(got["patient"])
        complete = bool(got["incident"] and got["healthy"])
        inc_after, ok_after = max(got["incident_after"], default=float("nan")), _med(got["healthy_after"])
        figures.append(Figure(
            f"status, {n:,} nodes: an incident starting, from its lists in to its answer (worst run)",
            f"{inc_after:.2f} s", f"<= {TARGET_EXTRA:g} s",
            f"the same in a healthy fleet, median {ok_after:.2f} s",
            inc_after <= TARGET_EXTRA if got["incident_after"] else None,
            f"incident {', '.join(f'{x:.2f}' for x in got['incident_after'])}; healthy "
            f"{', '.join(f'{x:.2f}' for x in got['healthy_after'])} (the same runs as the row below)"))
        figures.append(Figure(
            f"status, {n:,} nodes: an incident starting (a Ready node's lease late) / healthy",
            f"{inc:.2f} s / {ok:.2f} s (+{inc - ok:.2f} s)",
            f"<= healthy + {TARGET_EXTRA:g} s",
            f"status --wait 300 (the old default patience) {pat:.2f} s",
            (inc - ok <= TARGET_EXTRA) if complete else None,
            f"runs: incident {', '.join(f'{x:.2f}' for x in got['incident'])}; healthy "
            f"{', '.join(f'{x:.2f}' for x in got['healthy'])}; --wait 300 {', '.join(f'{x:.2f}' for x in got['patient'])}"
            f"; after the flip {len(got['other'])}; setup {got['setup'][0]:.0f} s"))
    return figures


if __name__ == "__main__":
    from .harness import print_table

    print_table(run(sizes=tuple(int(a) for a in sys.argv[1:]) or (200,)))
