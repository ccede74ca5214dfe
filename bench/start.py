"""Start: from the command to the frame, launched from outside like a user (issue 29).

The simulated API server (a child process, ``bench.live_path serve --realistic``) holds ``nodes``
production-shaped Nodes (~10 KB of JSON each) and their Leases, pre-serialized (it only joins
bytes), the Leases renewed within the last 10 s before each start except one in ``STOPPED_ONE_IN``
(an incident), each with the kubelet's ``managedFields`` time as a v1.25+ server writes it. It
renews nothing during a start: a ``Renewer`` in it renews the Leases as a live fleet's kubelets do (each every 10 s, one in 15
not), and says how far behind its schedule it fell.

Measured, each in its own process started by this one, so interpreter start, imports, TLS and
both lists are in every figure:

- the dashboard, ``nodewatch watch --kubeconfig K``, in a private tmux server (200x60, as a user
  runs it), its screen captured every 20 ms: the *first useful frame* (the header counts every
  node and the lease stream is listed: every row has its heartbeat state) and the *complete
  frame* (the node stream is listed too). Every capture before the complete frame is checked
  for Late and Overdue counts (issue 29: no frame may call a node Late on evidence not yet in).
  Peak memory with its children (``process_memory.TreePeak``) until 3 s after the complete frame.
- ``nodewatch status --kubeconfig K -o name --wait 300``: wall time and peak with children.

References, same run, same server:

- *raw transfer*: a child process that reads the same two streaming lists nodewatch asks for
  (``watch=true&sendInitialEvents=true``, Nodes and Leases at once, two connections) to
  /dev/null up to each list's ``initial-events-end`` bookmark, no decoding: the server's own list
  time as a client that does nothing else sees it. The complete frame's target is <= 1.2x this.
- the official Python client's ``CoreV1Api().list_node()`` (a child process, the same server).
- ``orjson.loads`` and ``msgspec.json.decode`` of the Node list's bytes (in this process).
- memory: kube-state-metrics' published sizing for clusters above 100 nodes (200 MiB + 2 MiB a
  node; its README's "Resource recommendation"), not measured here.

``profile=PREFIX`` (e.g. ``python -m bench.start 65000 1 norefs profile=/tmp/p``): each start's
dashboard and list worker sampled by py-spy (``NW_PY_SPY``; not a dependency) from the command to
the complete frame, written to ``PREFIX-K.txt`` and its top printed (``NW_PY_SPY_GIL=1``: only
the samples of threads holding the GIL, which is what the dashboard's threads compete for; without
it a thread waiting for the GIL counts as busy; ``NW_PY_SPY_UNTIL=useful``: to the first useful
frame instead). The profiler takes CPU of its own: the figures of
a profiled run are not figures.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .harness import Figure, ksm_reference
from .live_path import Renewer, ServerChild
from .process_memory import TreePeak

COLS, ROWS = 200, 60
STOPPED_ONE_IN = 15
"""One node in 15 stopped renewing its Lease (an incident: 4,334 of 65,000); the others renewed
within the last 10 s, as a live fleet's kubelets do."""
CAPTURE_EVERY = 0.02
RENEWER_SLACK = 5.0
LATE_AGE = 20.0
"""Two renew intervals of a 40 s Lease: a live Lease older than this on the server is Late there."""
RENEW_SLACK = 2.0
"""A ``renew`` that took longer leaves the renewer's first cycle too near ``LATE_AGE``: the start waits it out."""
"""The server's ``Renewer`` renews each Lease every 15 s: more than 5 s behind that, live Leases are
older than two renew intervals on the server itself, and a frame calling them Late is right."""
AFTER_COMPLETE = 3.0
"""Seconds the dashboard runs on after its complete frame (the memory peak's window)."""
ROOT = Path(__file__).resolve().parent.parent
NODEWATCH = Path(sys.executable).parent / "nodewatch"
PATHS = {"nodes": "/api/v1/nodes", "leases": "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"}
STREAM_QUERY = "?watch=true&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"


# --- the raw transfer: a child process ------------------------------------------------------------


def _raw_main(kubeconfig: str, mode: str) -> int:
    """Read both lists to nothing; print {resource: [seconds from process start, bytes]} as JSON.
    ``mode`` "stream": the streaming lists up to their end bookmark; "get": one unpaged GET each."""
    import base64
    import http.client
    import ssl
    import threading
    import urllib.parse

    import yaml

    t0 = time.perf_counter()
    cfg = yaml.safe_load(Path(kubeconfig).read_text())
    cluster, user = cfg["clusters"][0]["cluster"], cfg["users"][0]["user"]
    url = urllib.parse.urlparse(cluster["server"])
    ctx = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    out: dict[str, list[float]] = {}

    def read(resource: str) -> None:
        conn = http.client.HTTPSConnection(url.hostname, url.port, context=ctx)
        conn.request("GET", PATHS[resource] + (STREAM_QUERY if mode == "stream" else ""),
                     headers={"Authorization": f"Bearer {user['token']}"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"{resource}: HTTP {resp.status}")
        n, tail = 0, b""
        while True:
            chunk = resp.read1(1 << 20)
            if not chunk:
                break
            n += len(chunk)
            if mode == "stream" and b"initial-events-end" in tail + chunk:
                break
            tail = chunk[-64:]
        out[resource] = [time.perf_counter() - t0, n]
        conn.close()

    threads = [threading.Thread(target=read, args=(r,)) for r in PATHS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps(out), flush=True)
    return 0


def raw_transfer(kubeconfig: str, mode: str = "stream") -> tuple[float, dict[str, list[float]]]:
    """(seconds from the command to both lists read, per list [seconds, bytes]; "cpu": [its CPU seconds])."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "bench.start", "raw", kubeconfig, mode], capture_output=True,
                         text=True, cwd=ROOT, timeout=600)
    took = time.perf_counter() - t
    if out.returncode != 0:
        raise RuntimeError(f"raw transfer failed: {out.stderr[-500:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    parts = json.loads(out.stdout)
    parts["cpu"] = [after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime]
    return took, parts


def python_client_list_node(kubeconfig: str, timeout: float = 180) -> str:
    """The official Python client's ``list_node()`` in a child process (its deserialization too)."""
    code = ("import sys,time;t=time.perf_counter();from kubernetes import client,config;"
            "config.load_kube_config(sys.argv[1]);n=len(client.CoreV1Api().list_node().items);"
            "print(n,time.perf_counter()-t)")
    t = time.perf_counter()
    try:
        out = subprocess.run([sys.executable, "-c", code, kubeconfig], capture_output=True, text=True,
                             timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"Python client list_node() > {timeout:.0f} s (stopped)"
    took = time.perf_counter() - t
    if out.returncode != 0:
        return f"Python client list_node() failed: {out.stderr.strip().splitlines()[-1][:200]}"
    return f"Python client list_node() {took:.2f} s ({int(out.stdout.split()[0]):,} nodes)"


def decode_references(kubeconfig: str) -> str:
    """``orjson.loads`` and ``msgspec.json.decode`` of the unpaged Node list's bytes, best of 2."""
    import gc

    import msgspec
    import orjson

    from nodewatch.sources.kubeconfig import Connection

    conn = Connection(kubeconfig, None)
    resp = conn.get(PATHS["nodes"], {}, timeout=(10.0, 600.0))
    body = resp.read()
    resp.release_conn()
    conn.close()
    times = {}
    for name, fn in (("orjson.loads", orjson.loads), ("msgspec.json.decode", msgspec.json.decode)):
        best = float("inf")
        for _ in range(2):
            gc.collect()
            t = time.perf_counter()
            obj = fn(body)
            best = min(best, time.perf_counter() - t)
            del obj
        times[name] = best
    mb = len(body) / 1e6
    del body
    return f"of the Node list's {mb:,.0f} MB: " + ", ".join(f"{k} {v:.2f} s" for k, v in times.items())


# --- the dashboard in tmux ----------------------------------------------------------------------------


class _Pane:
    """A process we did not start directly (tmux's pane): what ``TreePeak`` needs of a Popen."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def poll(self) -> int | None:
        return None if os.path.exists(f"/proc/{self.pid}") else 0


class Tmux:
    """A private tmux server (its own socket), one session of COLS x ROWS running ``command``."""

    def __init__(self, command: list[str]) -> None:
        self.socket = f"nodewatch-bench-{os.getpid()}"
        self._tmux(["-f", "/dev/null", "new-session", "-d", "-s", "b", "-x", str(COLS), "-y", str(ROWS),
                    "exec " + shlex.join(command)])
        self.pid = int(self._tmux(["display", "-p", "-t", "b", "#{pane_pid}"]).strip())

    def _tmux(self, args: list[str]) -> str:
        # COLUMNS/LINES of the caller (a test runner may set 80x24) would reach the dashboard through
        # tmux's global environment and override the pane's size: the pane decides
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True,
                              timeout=30, env=env).stdout

    def screen(self) -> str:
        return self._tmux(["capture-pane", "-p", "-t", "b"])

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)


def tree_cpu(root: int, seen: dict[int, float] | None = None, walk: bool = True) -> float:
    """CPU seconds (user + system) a process and its descendants have used so far. ``seen``: each
    process's CPU as last read, kept across calls, so a child that has ended (the list worker ends
    with its list) still counts with what it used until it was last read; without it, only the
    live ones count (until this session the complete frame's CPU missed the list worker's).
    ``walk`` False: only the processes already in ``seen`` are read again (no walk of /proc)."""
    from .process_memory import _descendants

    tick = os.sysconf("SC_CLK_TCK")
    seen = {} if seen is None else seen
    for pid in [root, *_descendants(root)] if walk or not seen else list(seen):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            seen[pid] = (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            pass
    return sum(seen.values())


def _count(header: str, word: str) -> int:
    m = re.search(rf"{word} ([\d,]+)", header)
    return int(m.group(1).replace(",", "")) if m else -1


PY_SPY = os.environ.get("NW_PY_SPY", "py-spy")
"""The sampling profiler ``profile=`` runs (py-spy: every thread and the list worker, no change to
the code measured; not a dependency of nodewatch, installed apart)."""
PROFILE_UNTIL = os.environ.get("NW_PY_SPY_UNTIL", "complete")
"""``useful``: the profile ends at the first useful frame, not the complete one."""


def _profiler(pid: int, out: str) -> subprocess.Popen:
    """py-spy sampling the dashboard (and its list worker) from now until it is sent SIGINT."""
    gil = ["--gil"] if os.environ.get("NW_PY_SPY_GIL") else []  # only the samples that hold the GIL
    return subprocess.Popen([PY_SPY, "record", "--pid", str(pid), "--subprocesses", "--threads", "--nonblocking",
                             *gil, "-r", "200", "-f", "raw", "-o", out], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def summarize_profile(path: str, top: int = 25) -> str:
    """The top of a py-spy raw profile: per process and thread the samples, then the functions by
    their own samples and by the samples under them (each function once a stack)."""
    from collections import Counter

    own: Counter[str] = Counter()
    under: Counter[str] = Counter()
    roots: Counter[str] = Counter()
    total = 0
    for line in Path(path).read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():  # a stack py-spy cut short as it was stopped
            continue
        count = int(n)
        frames = stack.split(";")
        total += count
        roots[";".join(f.split(" (")[0][:60] for f in frames[:2])] += count
        own[frames[-1]] += count
        for f in set(frames[2:]):
            under[f] += count
    lines = [f"{total} samples (200/s)", "by process;thread:"]
    lines += [f"  {n:6d} {100 * n / total:5.1f}%  {k}" for k, n in roots.most_common(8)]
    lines.append("own samples:")
    lines += [f"  {n:6d} {100 * n / total:5.1f}%  {k}" for k, n in own.most_common(top)]
    lines.append("samples under:")
    lines += [f"  {n:6d} {100 * n / total:5.1f}%  {k}" for k, n in under.most_common(top)]
    return "\n".join(lines)


def dashboard(kubeconfig: str, nodes: int, stopped: int, timeout: float = 300,
              profile: str | None = None) -> dict[str, float]:
    """The dashboard from its command to its frames (see the module docstring). ``profile``: a
    py-spy raw profile written there, from the command to the complete frame."""
    t0 = time.perf_counter()
    tmux = Tmux([str(NODEWATCH), "watch", "--kubeconfig", kubeconfig])
    spy = _profiler(tmux.pid, profile) if profile else None
    peak = TreePeak(_Pane(tmux.pid))  # type: ignore[arg-type]
    got: dict[str, float] = {"late_max": 0, "overdue_max": 0, "judged_max": 0}
    total = f"{nodes:,} nodes"
    cpu: dict[int, float] = {}
    captures = 0
    try:
        while "complete" not in got:
            if time.perf_counter() - t0 > timeout:
                raise RuntimeError(f"no complete frame within {timeout:.0f} s; the screen:\n{tmux.screen()}")
            captures += 1
            tree_cpu(tmux.pid, cpu, walk=captures % 10 == 1)  # the list worker's CPU before it ends
            lines = tmux.screen().splitlines()
            now = time.perf_counter() - t0
            header = lines[1] if len(lines) > 1 else ""
            if total in header and "leases:listing" not in header and "leases:" in header:
                got.setdefault("useful", now)
                late, overdue = _count(header, "Late"), _count(header, "Overdue")
                got["late_max"] = max(got["late_max"], late)
                got["overdue_max"] = max(got["overdue_max"], overdue)
                got["judged_max"] = max(got["judged_max"], late + overdue)
                if "useful_cpu" not in got:
                    got["useful_cpu"] = tree_cpu(tmux.pid, cpu)
                    if spy is not None and PROFILE_UNTIL == "useful":
                        spy.send_signal(2)  # SIGINT: py-spy writes its profile
                if "nodes:ok" in header:
                    got["complete"] = now
                    got["complete_cpu"] = tree_cpu(tmux.pid, cpu)
                    got["late_at_complete"] = _count(header, "Late")
                    got["overdue_at_complete"] = _count(header, "Overdue")
                    if spy is not None and PROFILE_UNTIL != "useful":
                        spy.send_signal(2)  # SIGINT: py-spy writes its profile
            time.sleep(CAPTURE_EVERY)
        if spy is not None:
            spy.wait(60)
        time.sleep(AFTER_COMPLETE)
    finally:
        tmux.close()
    got["peak_mb"] = peak.peak() / 1e6
    got["wrongly_late"] = max(0, got["judged_max"] - stopped)
    return got


def status(kubeconfig: str) -> tuple[float, float]:
    """``nodewatch status --kubeconfig K -o name --wait 300``: (wall seconds, peak MB with children)."""
    t = time.perf_counter()
    # --wait 300: the default 30 s for both lists is not enough at 130k on a loaded 2-core machine
    # (the leases are dated by the server: nothing is in doubt, so --wait adds no wait of its own)
    proc = subprocess.Popen([str(NODEWATCH), "status", "--kubeconfig", kubeconfig, "-o", "name", "--wait", "300"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = TreePeak(proc)
    proc.wait(600)
    took = time.perf_counter() - t
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"status exited {proc.returncode}: {proc.stderr.read()[-300:]!r}")  # type: ignore[union-attr]
    return took, peak.peak() / 1e6


ALTERNATE = os.environ.get("NW_START_ALTERNATE")
"""A second checkout of nodewatch (a path): every second start runs its dashboard
(``PYTHONPATH``), so two versions are timed against the same server, turn about, in one run
(before and after a change on a shared machine, where two runs apart differ by 2x). Each start's
line says which it ran; the figures then mix both: read the lines."""


@contextmanager
def _alternate(k: int) -> Iterator[None]:
    """The dashboard of start ``k`` (0-based) from ``ALTERNATE`` when ``k`` is odd."""
    if not ALTERNATE or k % 2 == 0:
        yield
        return
    was = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = ALTERNATE
    print(f"    (this start: the dashboard of {ALTERNATE})", file=sys.stderr, flush=True)
    try:
        yield
    finally:
        if was is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = was


def run(nodes: int = 65_000, starts: int = 3, references: bool = True, live: bool = True,
        profile: str | None = None) -> list[Figure]:
    """Medians of ``starts`` starts, each beside a raw transfer measured just before it (the
    Leases renewed again before each); the note gives every run and the load average. ``live``
    False: the server renews nothing during a start (where its renewer cannot keep up: the Leases
    then age during the start, and Late frames are the server's truth)."""
    print(f"  start: simulated API server with {nodes:,} production-shaped nodes (setup)", file=sys.stderr, flush=True)
    load = [os.getloadavg()[0]]
    # history: 20 s of the renewals (410 Gone for a watch behind it: with 10 events, as until issue 29,
    # the Leases relisted forever once the server renewed during a start)
    with ServerChild(nodes, realistic=True, history=2 * nodes) as server:
        kc = server.kubeconfig
        runs, raws = [], []
        for k in range(starts):
            print(f"  start: raw transfer, then the dashboard in tmux ({k + 1} of {starts})", file=sys.stderr,
                  flush=True)
            t = time.perf_counter()
            renewed = server.renew(STOPPED_ONE_IN, Renewer.RENEW_EVERY)
            # its first cycle leaves Leases as old as RENEW_EVERY + renew's own time (``Renewer``):
            # where that is near Late (130k: ~5 s), the start waits for the cycle's end
            wait = live and time.perf_counter() - t > RENEW_SLACK
            if live:
                server.renewing(STOPPED_ONE_IN)
            cycle_ends = time.perf_counter() + Renewer.RENEW_EVERY + 2 * Renewer.SLICE
            t = time.perf_counter()
            raws.append(raw_transfer(kc))
            if wait:
                time.sleep(max(0.0, cycle_ends - time.perf_counter()))
            out = f"{profile}-{k + 1}.txt" if profile else None
            with _alternate(k):
                runs.append(dashboard(kc, nodes, nodes - renewed, profile=out))
            if out:
                print(summarize_profile(out), file=sys.stderr, flush=True)
            stored, behind, first, oldest = server.stop_renewing() if live else (0, math.inf, math.inf, math.inf)
            runs[-1]["renewals_per_s"] = stored / (time.perf_counter() - t)
            runs[-1]["renewer_behind"] = behind
            runs[-1]["renewer_oldest"] = oldest if wait else max(first, oldest)  # what a start may have met
            print(f"    raw {raws[-1][0]:.2f} s {raws[-1][1]}; dashboard {runs[-1]}", file=sys.stderr, flush=True)
            load.append(os.getloadavg()[0])
        server.renew(STOPPED_ONE_IN, Renewer.RENEW_EVERY)
        if live:
            server.renewing(STOPPED_ONE_IN)
        status_s, status_mb = status(kc)
        print(f"    status {status_s:.2f} s {status_mb:.0f} MB", file=sys.stderr, flush=True)
        st_raw = raw_transfer(kc)[0]
        get_s = raw_transfer(kc, "get")[0]
        if live:
            server.stop_renewing()
        extra = []
        if references:
            print("  start: references (decode, Python client)", file=sys.stderr, flush=True)
            extra = [decode_references(kc), python_client_list_node(kc)]
        load.append(os.getloadavg()[0])
    med = lambda key: statistics.median(r[key] for r in runs)  # noqa: E731
    each = lambda key: " / ".join(f"{r[key]:.2f}" for r in runs)  # noqa: E731
    raw = statistics.median(r[0] for r in raws)
    raw_cpu = " / ".join(f"{r[1]['cpu'][0]:.2f}" for r in raws)
    leases_raw = statistics.median(r[1]["leases"][0] for r in raws)
    sizes = raws[0][1]
    useful, complete = med("useful"), med("complete")
    mem_target = 250 if nodes <= 65_000 else 400
    loads = "load average " + " -> ".join(f"{x:.1f}" for x in load) + " (2 cores, shared)"
    wrong = max(r["wrongly_late"] for r in runs)
    behind_max = max(r["renewer_behind"] for r in runs)
    oldest_max = max(r["renewer_oldest"] for r in runs)
    server_late = behind_max > RENEWER_SLACK or not oldest_max <= LATE_AGE
    raw_ref = f"raw transfer of both lists {raw:.2f} s"
    return [
        Figure(f"start: {nodes:,} nodes -> first useful frame (from the Leases)", f"{useful:.2f} s", "<= 1.5 s",
               f"raw transfer of the Lease list {leases_raw:.2f} s", useful <= 1.5,
               f"from the command, in tmux; median of {starts} ({each('useful')} s); {loads}; the server renewed "
               f"{each('renewals_per_s')} Leases/s during the starts (a live fleet: {nodes / 10:,.0f}/s), at most "
               f"{max(r['renewer_behind'] for r in runs):.2f} s behind its schedule"),
        Figure(f"start: {nodes:,} nodes -> complete frame", f"{complete:.2f} s ({complete / raw:.2f}x)",
               "<= 3 s, <= 1.2x", raw_ref, complete <= 3.0 and complete <= 1.2 * raw,
               f"median of {starts} ({each('complete')} s), raw transfers {' / '.join(f'{r[0]:.2f}' for r in raws)} s "
               f"(nodes {sizes['nodes'][1] / 1e6:,.0f} MB in {sizes['nodes'][0]:.2f} s, leases "
               f"{sizes['leases'][1] / 1e6:,.0f} MB in {sizes['leases'][0]:.2f} s from the reader's start); "
               f"unpaged GETs of both {get_s:.2f} s; CPU to the complete frame (the dashboard and its list "
               f"worker) {each('complete_cpu')} s against the raw reader's {raw_cpu} s "
               f"(to the first useful frame {each('useful_cpu')} s); " + "; ".join(extra)),
        Figure(f"start: {nodes:,} nodes -> frames calling a node Late/Overdue before its evidence", f"{wrong:,}", "0",
               f"{nodes - renewed:,} nodes stopped renewing", None if server_late else wrong == 0,
               f"most Late + Overdue in one frame up to the complete one: {each('judged_max')} (most Late "
               f"{each('late_max')}, most Overdue {each('overdue_max')}); "
               f"at the complete frame {each('late_at_complete')} + {each('overdue_at_complete')}; the server's renewer "
               f"at most {behind_max:.1f} s behind, its live Leases at most {oldest_max:.1f} s old when renewed (more "
               f"than {RENEWER_SLACK:g} s behind or {LATE_AGE:g} s old: live Leases really were Late on the server, "
               f"the figure is not judged)"),
        Figure(f"start: {nodes:,} nodes -> dashboard peak with children", f"{med('peak_mb'):.0f} MB",
               f"<= {mem_target} MB", ksm_reference(nodes), med("peak_mb") <= mem_target,
               f"runs {each('peak_mb')} MB, until {AFTER_COMPLETE:.0f} s after the complete frame"),
        Figure(f"start: {nodes:,} nodes -> status peak with children", f"{status_mb:.0f} MB", "<= 300 MB",
               ksm_reference(nodes), status_mb <= 300,
               f"status -o name took {status_s:.2f} s against a raw transfer of both lists of {st_raw:.2f} s "
               f"({status_s / st_raw:.2f}x)"),
    ]


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "raw":
        sys.exit(_raw_main(sys.argv[2], sys.argv[3]))
    from .harness import print_table

    print_table(run(nodes=int(sys.argv[1]) if len(sys.argv) > 1 else 2_000,
                    starts=int(sys.argv[2]) if len(sys.argv) > 2 else 3,
                    references="norefs" not in sys.argv[3:], live="static" not in sys.argv[3:],
                    profile=next((a.split("=", 1)[1] for a in sys.argv[3:] if a.startswith("profile=")), None)))
