"""A hub process started as it starts in the shipped Deployment's pod: no kubeconfig anywhere,
``KUBERNETES_SERVICE_HOST``/``_PORT`` in its environment, a ServiceAccount token and the cluster's CA
in a directory written the way the kubelet writes a projected volume.

Used against the simulated API server (``tests/hub/test_hub_in_pod.py``) and against the testbed's real
one with a token it minted (``tests/testbed/test_deploy_on_testbed.py``). The one thing that differs
from a pod: the directory is not ``/var/run/secrets/kubernetes.io/serviceaccount``; the process is
started through :data:`BOOT`, which points ``sources.kubeconfig.SERVICE_ACCOUNT_DIR`` at it (a test's
seam, not an option nodewatch offers).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from support.metrics_support import _process

BOOT = ("import os, sys; from nodewatch.sources import kubeconfig; "
        "kubeconfig.SERVICE_ACCOUNT_DIR = os.environ.pop('NODEWATCH_TEST_SERVICE_ACCOUNT_DIR'); "
        "from nodewatch.cli import main; sys.exit(main(sys.argv[1:]))")

FLEET_STREAMS = tuple(f'{{cluster="in-cluster",resource="{r}"}}' for r in ("nodes", "leases",
                                                                         "certificatesigningrequests"))
"""The hub's cluster-wide streams, as its ``nodewatch_stream_up`` labels name them in a pod."""


def kubelet_writes(sa: Path, token: str) -> None:
    """The kubelet's atomic writer: the files in a new directory, then ``..data`` swapped to it."""
    sa.mkdir(parents=True, exist_ok=True)
    stamp = sa / f"..{time.monotonic_ns()}"
    stamp.mkdir()
    (stamp / "token").write_text(token)
    old = os.readlink(sa / "..data") if (sa / "..data").is_symlink() else None
    tmp = sa / "..data_tmp"
    os.symlink(stamp.name, tmp)
    os.replace(tmp, sa / "..data")
    if not (sa / "token").is_symlink():
        os.symlink("..data/token", sa / "token")
    if old:
        for f in (sa / old).iterdir():
            f.unlink()
        (sa / old).rmdir()


IN_FLIGHT = 1.0
"""Seconds the old token still works after the new file is written: a request whose headers were
made just before (with the token of that moment) reaches the server. A real server keeps it valid
much longer (until it expires, an hour or more)."""


def kubelet_rotates(srv, sa: Path) -> str:
    """A rotation as it happens, against the simulated server ``srv``: the new token is valid, then
    in the file, and the old one is refused :data:`IN_FLIGHT` seconds later; this returns once it
    is. From then on a request with the old token is the reader's fault: it kept a token its file
    no longer holds."""
    from nodewatch.sim.kubeconfig import new_token
    from support.simserver import wait_until

    old = srv.token
    new = srv.rotate_token(new_token(), old_valid_for=3600)
    kubelet_writes(sa, new)
    srv.auth.expire(old, time.time() + IN_FLIGHT)
    wait_until(lambda: not srv.auth.check(old), timeout=IN_FLIGHT + 5)
    return new


@dataclass
class PodHub:
    process: subprocess.Popen
    metrics: str
    """``http://127.0.0.1:PORT`` of the hub's ``--metrics``."""
    service_account: Path
    log: Path
    """The hub's output."""

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.metrics + path, timeout=10) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError:
            return 0, ""

    def samples(self, name: str) -> dict[str, float]:
        """The metric's samples by their label text (``{state="Ready"}``), from ``/metrics``."""
        _status, text = self.get("/metrics")
        out = {}
        for line in text.splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                key, _, value = line[len(name):].rpartition(" ")
                out[key] = float(value)
        return out

    def wait_ready(self, timeout: float) -> None:
        """Until ``/readyz`` says 200 (every stream listed and up); fails early if the hub exits."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the hub exited with {self.process.returncode}: {self.stderr()}")
            if self.get("/readyz")[0] == 200:
                return
            time.sleep(0.1)
        raise AssertionError(f"not ready after {timeout}s: {self.get('/readyz')}")

    def requests(self) -> float:
        """Requests the hub made to the API server so far (its own count, ``--metrics``)."""
        return sum(self.samples("nodewatch_api_requests_total").values())

    def ready_nodes(self) -> list[str]:
        """The nodes the hub judges Ready (``nodewatch_node_state``): it watches no pods of theirs
        until a viewer opens one (it does watch those of nodes that are not Ready)."""
        import re

        return sorted(re.search(r'node="([^"]+)"', k).group(1)  # type: ignore[union-attr]
                      for k, v in self.samples("nodewatch_node_state").items() if 'state="Ready"' in k and v == 1)

    def open_node(self, name: str, hub_dir: Path, timeout: float = 60) -> None:
        """A viewer attaches and opens ``name``'s drill-down (a Ready node: see ``ready_nodes``):
        the hub asks the API server for the node's pods and events at once, new requests made with
        the token of the moment (a watch already open keeps its connection for minutes)."""
        from nodewatch.hub.viewer_source import HubAddress, ViewerSource
        from support.simserver import wait_until

        before = self.requests()
        viewer = ViewerSource(HubAddress(path=str(hub_dir / "hub.sock")))
        viewer.start()
        try:
            wait_until(lambda: viewer.state.node_count() > 0, timeout=timeout)
            viewer.focus_node(name)
            wait_until(lambda: self.requests() >= before + 2, timeout=timeout)  # its pods and its events
        finally:
            viewer.stop()

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


@contextlib.contextmanager
def hub_in_pod(tmp_path: Path, host: str, port: int, ca_pem: bytes, token: str, metrics_port: int,
               *extra: str) -> Iterator[PodHub]:
    """``nodewatch hub`` as the Deployment runs it (no front doors: the token and RBAC are what is
    tested), stopped with SIGTERM as Kubernetes stops a pod."""
    sa = tmp_path / "serviceaccount"
    kubelet_writes(sa, token)
    (sa / "ca.crt").write_bytes(ca_pem)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBECONFIG", "KUBERNETES_"))}
    env.update(KUBERNETES_SERVICE_HOST=host, KUBERNETES_SERVICE_PORT=str(port), HOME=str(tmp_path / "home"),
               NODEWATCH_TEST_SERVICE_ACCOUNT_DIR=str(sa), PYTHONUNBUFFERED="1")
    log = tmp_path / "hub.log"
    args = [sys.executable, "-c", BOOT, "hub", "--dir", str(tmp_path / "hub"), "--metrics",
            f"127.0.0.1:{metrics_port}", *extra]
    with _process(args, log, env) as p:
        yield PodHub(p, f"http://127.0.0.1:{metrics_port}", sa, log)
