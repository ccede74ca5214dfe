"""Bring a real control plane up on 127.0.0.1 (etcd, kube-apiserver, kube-controller-manager) and down.

Everything lives in one folder ``DIR``: fresh PKI (``DIR/pki``), etcd's data (``DIR/etcd``), the
logs (``DIR/logs``), the pids (``DIR/pids.json``), and the two kubeconfigs a user needs:
``DIR/admin.kubeconfig`` (full rights: the simulated kubelets) and ``DIR/viewer.kubeconfig`` (a
token bound to exactly the roles of ``deploy/kubernetes/rbac.yaml``: what nodewatch runs with, so the real
RBAC proves the shipped role is enough). Hollow kubelets get a node identity each (a client
certificate ``system:node:NAME``), so the API server's Node authorizer and NodeRestriction judge
their writes as a real kubelet's.

Flags differ by version (``server_flags``): the insecure ports (``--insecure-port=0``, the
controller manager's ``--port=0``) must be switched off up to 1.23 and are gone since 1.24.
"""

from __future__ import annotations

import base64
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from . import pki as pki_mod
from . import processes
from .api import ApiStatus, Client
from .build_common import Binaries

STATE_FILE = "testbed.json"
READY_TIMEOUT = 90.0
CONTROLLERS = "*,-daemonset,-deployment,-replicaset,-statefulset"
RBAC_FILE = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "rbac.yaml"


class TestbedError(RuntimeError):
    """The testbed could not be started (the message says which part and where its log is)."""


class StartupExit(TestbedError):
    """A server process ended while the testbed waited for it to be ready."""

    def __init__(self, name: str, status: str, message: str) -> None:
        super().__init__(message)
        self.name, self.status = name, status


@dataclass(frozen=True)
class Testbed:
    """A running testbed, as recorded in ``DIR/testbed.json``."""

    dir: Path
    server: str
    controller_manager_port: int
    controller_flags: tuple[str, ...]
    version: str = "v1.20.2"
    """The control plane's release (``Binaries.version``)."""

    @property
    def admin_kubeconfig(self) -> Path:
        return self.dir / "admin.kubeconfig"

    @property
    def viewer_kubeconfig(self) -> Path:
        return self.dir / "viewer.kubeconfig"

    @property
    def pki(self) -> pki_mod.Pki:
        return pki_mod.load(self.dir / "pki")

    def admin(self) -> Client:
        p = self.pki
        return Client(self.server, p.admin_token, str(p.ca_cert))

    def viewer(self) -> Client:
        p = self.pki
        return Client(self.server, p.viewer_token, str(p.ca_cert))

    @classmethod
    def load(cls, folder: Path) -> "Testbed":
        try:
            d = json.loads((folder / STATE_FILE).read_text())
        except FileNotFoundError as exc:
            raise TestbedError(f"no testbed in {folder} ({STATE_FILE} is missing)") from exc
        return cls(dir=folder, server=d["server"], controller_manager_port=d["controller_manager_port"],
                   controller_flags=tuple(d.get("controller_flags", ())), version=d.get("version", "v1.20.2"))

    @property
    def minor(self) -> int:
        return int(self.version.lstrip("v").split(".")[1])


def kubeconfig(server: str, ca_pem: bytes, token: str | None, user: str, *,
               client_cert_pem: bytes | None = None, client_key_pem: bytes | None = None) -> dict:
    """A kubeconfig with a bearer token, or with a client certificate (inline, so that the file
    alone is enough: a hollow node reads it from inside its own mount namespace)."""
    name = "nodewatch-testbed"
    if token is not None:
        credentials: dict = {"token": token}
    else:
        if client_cert_pem is None or client_key_pem is None:
            raise ValueError("a kubeconfig needs a token or a client certificate and key")
        credentials = {"client-certificate-data": base64.b64encode(client_cert_pem).decode(),
                       "client-key-data": base64.b64encode(client_key_pem).decode()}
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": name, "preferences": {},
        "clusters": [{"name": name, "cluster": {"server": server,
                                                "certificate-authority-data": base64.b64encode(ca_pem).decode()}}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": user}}],
    }


INSECURE_PORTS_REMOVED = 24
"""kube-apiserver's ``--insecure-port`` and the controller manager's ``--port`` are gone since 1.24
(up to 1.23 they must be set to 0, or they serve unauthenticated on 8080/10252)."""


def server_flags(minor: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(kube-apiserver, kube-controller-manager) flags that depend on the release."""
    if minor < INSECURE_PORTS_REMOVED:
        return ("--insecure-port=0",), ("--port=0",)
    return (), ()


def _write_private(path: Path, text: str) -> None:
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(text)


def up(folder: Path, binaries: Binaries, controller_flags: tuple[str, ...] = (),
       apiserver_flags: tuple[str, ...] = (), progress: Callable[[str], None] = print) -> Testbed:
    """Start etcd, kube-apiserver and kube-controller-manager with fresh PKI and data in ``folder``."""
    folder = folder.resolve()
    alive = processes.running(folder)
    if alive:
        raise TestbedError(f"a testbed is already running in {folder} ({', '.join(alive)}): "
                           f"`nodewatch testbed down --dir {folder}` first")
    folder.mkdir(parents=True, exist_ok=True)
    for attempt in (1, 2):
        _clean(folder)
        try:
            return _up(folder, binaries, controller_flags, apiserver_flags, progress)
        except StartupExit as exc:
            processes.stop(folder)
            if attempt == 2:
                raise
            # Seen rarely on a loaded machine: a server gone before its first log line (a port
            # taken between choosing it and binding it, or the process killed). Fresh ports, once.
            progress(f"{exc.name} exited during startup ({exc.status}); starting again on fresh ports")
        except BaseException:
            processes.stop(folder)
            raise
    raise AssertionError("unreachable")


def _clean(folder: Path) -> None:
    for old in ("pki", "etcd", "logs", "kcm", processes.PIDS_FILE, STATE_FILE):
        p = folder / old
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()


def _up(folder: Path, binaries: Binaries, controller_flags: tuple[str, ...], apiserver_flags: tuple[str, ...],
        progress: Callable[[str], None]) -> Testbed:
    p = pki_mod.create(folder / "pki")
    api_version_flags, kcm_version_flags = server_flags(binaries.minor)
    etcd_port, peer_port, api_port, kcm_port = (processes.free_port() for _ in range(4))
    server = f"https://127.0.0.1:{api_port}"
    progress(f"starting etcd on 127.0.0.1:{etcd_port}")
    etcd_url = f"http://127.0.0.1:{etcd_port}"
    processes.start(folder, "etcd", [
        str(binaries.etcd), "--name=testbed", f"--data-dir={folder / 'etcd'}",
        f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
        f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
        f"--initial-cluster=testbed=http://127.0.0.1:{peer_port}", "--log-level=warn",
    ])
    progress(f"starting kube-apiserver on {server}")
    processes.start(folder, "kube-apiserver", [
        str(binaries.kube_apiserver), f"--etcd-servers={etcd_url}", "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1", f"--secure-port={api_port}", *api_version_flags,
        f"--tls-cert-file={p.apiserver_cert}", f"--tls-private-key-file={p.apiserver_key}",
        f"--client-ca-file={p.ca_cert}", f"--token-auth-file={p.tokens}",
        "--enable-bootstrap-token-auth",  # as kubeadm: kubelets' TLS bootstrap (``tls_bootstrap``)
        # As a real cluster: kubelets (the hollow ones, with node certificates) are authorised by the
        # Node authorizer and limited to their own Node and Lease by NodeRestriction.
        "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={p.service_account_pub}",
        f"--service-account-signing-key-file={p.service_account_key}",
        f"--service-cluster-ip-range={pki_mod.SERVICE_CIDR}", "--endpoint-reconciler-type=none",
        *apiserver_flags,
    ])
    admin = Client(server, p.admin_token, str(p.ca_cert))
    _wait(folder, "kube-apiserver", lambda: admin.get("/readyz", timeout=3.0) == "ok")
    admin_cfg = folder / "admin.kubeconfig"
    viewer_cfg = folder / "viewer.kubeconfig"
    ca_pem = p.ca_cert.read_bytes()
    _write_private(admin_cfg, yaml.safe_dump(kubeconfig(server, ca_pem, p.admin_token, pki_mod.ADMIN_USER),
                                             sort_keys=False))
    _write_private(viewer_cfg, yaml.safe_dump(kubeconfig(server, ca_pem, p.viewer_token, pki_mod.VIEWER_USER),
                                              sort_keys=False))
    progress(f"applying {RBAC_FILE.name} for user {pki_mod.VIEWER_USER}")
    apply_rbac(admin, RBAC_FILE, pki_mod.VIEWER_USER)
    progress(f"starting kube-controller-manager (127.0.0.1:{kcm_port}) {' '.join(controller_flags)}".rstrip())
    processes.start(folder, "kube-controller-manager", [
        str(binaries.kube_controller_manager), f"--kubeconfig={admin_cfg}",
        f"--authentication-kubeconfig={admin_cfg}", f"--authorization-kubeconfig={admin_cfg}",
        "--bind-address=127.0.0.1", f"--secure-port={kcm_port}", *kcm_version_flags,
        f"--tls-cert-file={p.controller_manager_cert}", f"--tls-private-key-file={p.controller_manager_key}",
        # No scheduler and no real kubelet: a workload controller's replacement pods would stay Pending,
        # and the DaemonSet/ReplicaSet controllers would race the simulated kubelets' own pods.
        f"--controllers={CONTROLLERS}", "--leader-elect=false", "--use-service-account-credentials=false",
        f"--root-ca-file={p.ca_cert}", f"--service-account-private-key-file={p.service_account_key}",
        f"--cluster-signing-cert-file={p.ca_cert}", f"--cluster-signing-key-file={p.ca_key}",
        f"--service-cluster-ip-range={pki_mod.SERVICE_CIDR}", *controller_flags,
    ])
    kcm = Client(f"https://127.0.0.1:{kcm_port}", p.admin_token, str(p.ca_cert))
    _wait(folder, "kube-controller-manager", lambda: kcm.get("/healthz", timeout=3.0) == "ok")
    tb = Testbed(dir=folder, server=server, controller_manager_port=kcm_port,
                 controller_flags=tuple(controller_flags), version=binaries.version)
    (folder / STATE_FILE).write_text(json.dumps({
        "server": server, "controller_manager_port": kcm_port, "controller_flags": list(controller_flags),
        "apiserver_flags": list(apiserver_flags), "etcd": etcd_url, "version": binaries.version,
        "started": time.time(),
    }, indent=1))
    progress(f"ready: kubectl --kubeconfig {admin_cfg} get nodes")
    return tb


def restart_apiserver(tb: Testbed) -> float:
    """Stop kube-apiserver and start it again (same flags, same etcd); returns seconds it was down."""
    t0 = time.monotonic()
    processes.restart(tb.dir, "kube-apiserver")
    admin = tb.admin()
    try:
        _wait(tb.dir, "kube-apiserver", lambda: admin.get("/readyz", timeout=3.0) == "ok")
    finally:
        admin.close()
    return time.monotonic() - t0


def restart_controller_manager(tb: Testbed) -> float:
    """Stop kube-controller-manager and start it again (same flags); returns when it was started
    (wall clock). A new process knows no node's probe time: it takes its first pass over each node
    as one (``tests/testbed/test_controller_restart.py``)."""
    processes.restart(tb.dir, "kube-controller-manager")
    started = time.time()
    kcm = Client(f"https://127.0.0.1:{tb.controller_manager_port}", tb.pki.admin_token, str(tb.pki.ca_cert))
    try:
        _wait(tb.dir, "kube-controller-manager", lambda: kcm.get("/healthz", timeout=3.0) == "ok")
    finally:
        kcm.close()
    return started


def _wait(folder: Path, name: str, check: Callable[[], bool], timeout: float = READY_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        # Its own exit status decides (a child of this process): reading its command line could
        # miss a live server (seen once for v1.37.2's controller manager, "still running")
        if processes.exited(folder, name):
            raise StartupExit(name, processes.exit_status(folder, name),
                              f"{name} exited during startup ({processes.exit_status(folder, name)}); "
                              f"see {folder / 'logs' / (name + '.log')}:\n" + _tail(folder / "logs" / f"{name}.log"))
        try:
            if check():
                return
        except (ApiStatus, OSError, Exception) as exc:  # noqa: BLE001 - anything means "not yet"
            last = str(exc)[:200]
        time.sleep(0.2)
    raise TestbedError(f"{name} not ready after {timeout:.0f}s ({last}); see {folder / 'logs' / (name + '.log')}")


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def apply_rbac(admin: Client, rbac_file: Path, user: str) -> None:
    """Create the objects of ``deploy/kubernetes/rbac.yaml`` and add ``user`` to each of its bindings."""
    paths = {
        "Namespace": "/api/v1/namespaces",
        "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
        "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
        "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    }
    for doc in yaml.safe_load_all(rbac_file.read_text()):
        if not doc:
            continue
        kind = doc["kind"]
        if kind not in paths:
            raise TestbedError(f"{rbac_file}: unexpected kind {kind}")
        if kind.endswith("Binding"):
            doc.setdefault("subjects", []).append(
                {"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"})
        path = paths[kind].format(ns=doc["metadata"].get("namespace", ""))
        _create_retrying(admin, path, doc)


def _create_retrying(admin: Client, path: str, obj: dict, timeout: float = 30.0) -> None:
    """Create; a namespace that the API server is still setting up answers 404/403 for a moment."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            admin.create_or_get(path, obj)
            return
        except ApiStatus as exc:
            if exc.status not in (403, 404) or time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def down(folder: Path, progress: Callable[[str], None] = print) -> list[str]:
    """Stop every process ``up`` started in ``folder`` (by recorded pid)."""
    stopped = processes.stop(folder.resolve())
    progress(f"stopped: {', '.join(stopped) if stopped else 'nothing was running'}")
    return stopped

