"""The testbed's parts that need no control plane (these run in the fast suite).

Only ``nodewatch.testbed`` may write to a cluster, so nothing else may import it; the build's
patches and flags, the PKI, and stopping processes by pid are checked here without building.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509

from nodewatch.cli import build_parser
from nodewatch.testbed import build, build_debian, build_modules, hollow, pki, processes
from nodewatch.testbed.command import join_flag_values
from nodewatch.testbed.controlplane import kubeconfig, server_flags

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "nodewatch"
ALLOWED = {PACKAGE / "commands" / "testbed.py"}


def _imports(path: Path) -> set[str]:
    """Absolute names of the modules a file imports (relative imports resolved)."""
    rel = path.relative_to(ROOT).with_suffix("")
    package = list(rel.parts[:-1]) if rel.name != "__init__" else list(rel.parts[:-1])
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            mod = ".".join([*base, node.module] if node.module else base)
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
    return out


def test_only_the_testbed_command_imports_the_cluster_writer():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if (PACKAGE / "testbed") in path.parents or path in ALLOWED:
            continue
        if any(m == "nodewatch.testbed" or m.startswith("nodewatch.testbed.") for m in _imports(path)):
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def test_the_import_check_sees_relative_imports(tmp_path):
    # The check above must not pass merely because it misses ``from ..testbed import x``.
    assert "nodewatch.testbed.command" in _imports(PACKAGE / "commands" / "testbed.py")


def test_controller_flags_may_start_with_dashes():
    argv = ["testbed", "up", "--dir", "/tmp/x", "--controller-flag", "--node-monitor-grace-period=20s",
            "--apiserver-flag", "--default-unreachable-toleration-seconds=30", "--nodes", "3"]
    args = build_parser().parse_args(argv)
    assert args.controller_flag == ["--node-monitor-grace-period=20s"]
    assert args.apiserver_flag == ["--default-unreachable-toleration-seconds=30"]
    assert args.nodes == 3
    assert join_flag_values(["--controller-flag=--a=1", "x"]) == ["--controller-flag=--a=1", "x"]


def test_reflect2_patch_applies_to_v1_0_1_once(tmp_path):
    link = tmp_path / "unsafe_link.go"
    link.write_text("package reflect2\n\n" + build_debian._REFLECT2_OLD_INIT + "\n" + build_debian._REFLECT2_OLD_HITER)
    umap = tmp_path / "unsafe_map.go"
    umap.write_text("func (type2 *UnsafeMapType) UnsafeIterate(obj unsafe.Pointer) MapIterator {\n"
                    + build_debian._REFLECT2_OLD_ITERATE + "\t}\n}\n")
    for _ in range(2):  # a resumed build patches an already patched tree
        build_debian._replace(link, [(build_debian._REFLECT2_OLD_INIT, build_debian._REFLECT2_NEW_INIT),
                              (build_debian._REFLECT2_OLD_HITER, build_debian._REFLECT2_NEW_HITER)])
        build_debian._replace(umap, [(build_debian._REFLECT2_OLD_ITERATE, build_debian._REFLECT2_NEW_ITERATE)])
    text = link.read_text()
    assert "func mapiterinit(rtype unsafe.Pointer, m unsafe.Pointer, it *hiter)\n" in text
    assert "checkBucket uintptr" in text and "*hiter\n" not in text
    assert umap.read_text().count("var it hiter") == 1


def test_reflect2_patch_refuses_an_unexpected_tree(tmp_path):
    f = tmp_path / "unsafe_link.go"
    f.write_text("package reflect2\n// something else\n")
    with pytest.raises(build.BuildError, match="reflect2"):
        build_debian._replace(f, [(build_debian._REFLECT2_OLD_INIT, build_debian._REFLECT2_NEW_INIT)])


def test_version_stamps_both_version_packages():
    flags = build_debian.version_ldflags("v1.20.2")
    for pkg in ("client-go/pkg/version", "component-base/version"):
        assert f"-X k8s.io/kubernetes/vendor/k8s.io/{pkg}.gitVersion=v1.20.2" in flags
        assert f"-X k8s.io/kubernetes/vendor/k8s.io/{pkg}.gitMinor=20" in flags


def test_openapi_inputs_follow_the_makefile(tmp_path):
    tree = tmp_path / "k"

    def go(rel: str, text: str) -> None:
        p = tree / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)

    tagged = "// +k8s:openapi-gen=true\npackage v1\n"
    go("staging/src/k8s.io/api/core/v1/doc.go", tagged)
    go("pkg/apis/abac/v1beta1/doc.go", tagged)
    go("staging/src/k8s.io/code-generator/x/doc.go", tagged)  # left out, as the Makefile does
    go("vendor/github.com/x/doc.go", tagged)  # third-party vendor: never
    go("pkg/untagged/doc.go", "package untagged\n")
    go("pkg/testdata/doc.go", tagged)
    assert build_debian.openapi_input_dirs(tree) == ["k8s.io/kubernetes/pkg/apis/abac/v1beta1",
                                              "k8s.io/kubernetes/vendor/k8s.io/api/core/v1"]


def test_cache_dir_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path / "c"))
    assert build.cache_dir() == (tmp_path / "c").resolve()
    assert build.built(build.cache_dir()) is None


def test_pki_serves_loopback_and_keeps_secrets_private(tmp_path):
    p = pki.create(tmp_path / "pki")
    cert = x509.load_pem_x509_certificate(p.apiserver_cert.read_bytes())
    ca = x509.load_pem_x509_certificate(p.ca_cert.read_bytes())
    cert.verify_directly_issued_by(ca)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)} >= {"127.0.0.1", "10.0.0.1"}
    assert "kubernetes.default.svc" in sans.get_values_for_type(x509.DNSName)
    for secret in (p.ca_key, p.apiserver_key, p.service_account_key, p.tokens):
        assert secret.stat().st_mode & 0o077 == 0, secret
    again = pki.load(p.dir)
    assert (again.admin_token, again.viewer_token) == (p.admin_token, p.viewer_token)
    assert p.admin_token != p.viewer_token
    assert '"system:masters"' in p.tokens.read_text().splitlines()[0]
    assert "system:masters" not in p.tokens.read_text().splitlines()[1]


def test_kubeconfig_verifies_tls_with_the_ca():
    cfg = kubeconfig("https://127.0.0.1:6443", b"PEM", "tok", "someone")
    cluster = cfg["clusters"][0]["cluster"]
    assert cluster["certificate-authority-data"] and "insecure-skip-tls-verify" not in cluster
    assert cfg["users"][0]["user"] == {"token": "tok"}


def test_down_stops_recorded_processes_by_pid_only(tmp_path):
    started = processes.start(tmp_path, "sleeper", [sys.executable, "-c", "import time; time.sleep(60)"])
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert processes.running(tmp_path) == {"sleeper": started.pid}
        assert processes.stop(tmp_path) == ["sleeper"]
        assert processes.running(tmp_path) == {}
        assert not processes.is_ours(started.pid, started.argv0)
        assert bystander.poll() is None  # the same program, not recorded: left alone
    finally:
        bystander.kill()
        bystander.wait()


def test_a_reused_pid_is_not_signalled(tmp_path):
    other = subprocess.Popen(["sleep", "60"])
    try:
        # A stale record whose pid now belongs to another program.
        (tmp_path / processes.PIDS_FILE).write_text(
            f'{{"etcd": {{"pid": {other.pid}, "argv0": "/nonexistent/etcd"}}}}')
        assert processes.running(tmp_path) == {}
        assert processes.stop(tmp_path) == []
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_a_recorded_process_that_ended_says_how(tmp_path):
    """The testbed's "exited during startup" names the exit status or the signal."""
    import signal as _signal

    from support.simserver import wait_until

    processes.start(tmp_path, "quits", ["/bin/sh", "-c", "exit 3"])
    wait_until(lambda: "quits" not in processes.running(tmp_path))
    assert processes.exit_status(tmp_path, "quits") == "exit status 3"
    killed = processes.start(tmp_path, "killed", ["/bin/sleep", "30"])
    os.kill(killed.pid, _signal.SIGKILL)
    wait_until(lambda: "killed" not in processes.running(tmp_path))
    assert processes.exit_status(tmp_path, "killed") == "killed by SIGKILL"


KUBERNETES_GO_MOD = """module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
	github.com/blang/semver/v4 v4.0.0
	k8s.io/api v0.0.0
	k8s.io/client-go v0.0.0
)

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/client-go => ./staging/src/k8s.io/client-go
	k8s.io/cri-api => ./staging/src/k8s.io/cri-api
)
"""


def test_the_wrapper_module_points_each_staging_module_at_its_release():
    text = build_modules.wrapper_go_mod(KUBERNETES_GO_MOD, "v1.37.2")
    assert "require k8s.io/kubernetes v1.37.2" in text
    assert "go 1.26.0" in text and "godebug default=go1.26" in text
    replaced = [line.strip() for line in text.splitlines() if "=>" in line]
    assert replaced == ["k8s.io/api => k8s.io/api v0.37.2", "k8s.io/client-go => k8s.io/client-go v0.37.2",
                        "k8s.io/cri-api => k8s.io/cri-api v0.37.2"]
    assert "./staging" not in text


def test_a_go_mod_without_staging_modules_is_refused():
    with pytest.raises(build.BuildError, match="staging"):
        build_modules.wrapper_go_mod("module k8s.io/kubernetes\n\ngo 1.26.0\n", "v1.37.2")


SERVED = ["v1.13.0", "v1.30.14", "v1.36.1", "v1.36.3", "v1.37.2", "v1.38.0-beta.0"]


@pytest.mark.parametrize("request_, release", [("latest", "v1.37.2"), ("1.36", "v1.36.3"), ("v1.36", "v1.36.3"),
                                               ("1.36.1", "v1.36.1"), ("v1.37.2", "v1.37.2")])
def test_the_release_asked_for(request_, release):
    assert build.pick_release(SERVED, request_) == release


def test_a_release_not_served_says_what_is():
    with pytest.raises(build.BuildError, match=r"no k8s.io/kubernetes release for --version 1.35.*v1.37.2"):
        build.pick_release(SERVED, "1.35")
    with pytest.raises(build.BuildError, match="expected latest"):
        build.parse_request("newest")
    assert build.is_debian("1.20") and build.is_debian("v1.20.2") and not build.is_debian("latest")


def test_etcd_is_the_release_s_minor_at_its_newest_patch_and_new_enough_for_streaming_lists():
    served = ["v3.5.12", "v3.5.21", "v3.6.16", "v3.7.0", "v3.7.3", "v3.8.0-alpha.0"]
    assert build_modules.choose_etcd(served, "3.7.0") == "v3.7.3"
    assert build_modules.choose_etcd(served, "3.5.9") == "v3.5.21"
    with pytest.raises(build.BuildError, match="at least v3.5.13"):
        build_modules.choose_etcd(["v3.5.12"], "3.5.12")


def test_etcd_version_read_from_the_tree(tmp_path):
    (tmp_path / "hack" / "lib").mkdir(parents=True)
    (tmp_path / "hack" / "lib" / "etcd.sh").write_text("# x\nETCD_VERSION=${ETCD_VERSION:-3.7.0}\n")
    assert build_modules.etcd_of_tree(tmp_path) == "3.7.0"


def test_a_failed_fetch_names_the_module():
    out = ("go: k8s.io/cri-streaming@v0.37.2: reading https://proxy.golang.org/k8s.io/cri-streaming/@v/v0.37.2.mod: "
           "404 Not Found\n\tserver response: not found")
    assert build_modules.unfetched_modules(out) == ["k8s.io/cri-streaming@v0.37.2"]
    out = "go: module k8s.io/nonexistent: reading https://proxy.golang.org/k8s.io/nonexistent/@v/list: 403 Forbidden"
    assert build_modules.unfetched_modules(out) == ["k8s.io/nonexistent"]


def test_module_version_stamps_both_version_packages():
    flags = build_modules.version_ldflags("v1.37.2")
    for pkg in ("k8s.io/client-go/pkg/version", "k8s.io/component-base/version"):
        assert f"-X {pkg}.gitVersion=v1.37.2" in flags and f"-X {pkg}.gitMinor=37" in flags


def test_insecure_port_flags_only_where_they_exist():
    assert server_flags(20) == (("--insecure-port=0",), ("--port=0",))
    assert server_flags(37) == ((), ())


def test_a_node_identity_is_a_kubelet_s(tmp_path):
    p = pki.create(tmp_path / "pki")
    cert_pem, key_pem = pki.node_credentials(p, "hollow-a-00")
    cert = x509.load_pem_x509_certificate(cert_pem)
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(p.ca_cert.read_bytes()))
    subject = {a.oid._name: a.value for a in cert.subject}
    assert subject == {"commonName": "system:node:hollow-a-00", "organizationName": "system:nodes"}
    cfg = kubeconfig("https://127.0.0.1:1", b"PEM", None, "system:node:hollow-a-00",
                     client_cert_pem=cert_pem, client_key_pem=key_pem)
    assert set(cfg["users"][0]["user"]) == {"client-certificate-data", "client-key-data"}


def test_a_hollow_node_runs_in_its_own_mount_namespace_with_its_kubeconfig_open(tmp_path):
    b = build.Binaries(etcd=Path("/e"), kube_apiserver=Path("/a"), kube_controller_manager=Path("/c"),
                       version="v1.20.2", kubemark=Path("/k/kubemark"))
    link = hollow.Link(("127.0.0.1", 9))
    try:
        node = hollow.HollowNode("n1", "z", "r", tmp_path / "n1", link, kubelet_port=12345)
        argv = hollow.kubemark_argv(b, node)
    finally:
        link.close()
    assert argv[0] == "unshare" and "--mount" in argv
    assert "tmpfs /tmp" in argv[argv.index("-c") + 1]
    assert str(tmp_path / "n1" / "kubeconfig") in argv and "--kubeconfig=/dev/fd/3" in argv
    assert "--use-host-image-service=false" not in argv  # no such flag in 1.20
    b37 = build.Binaries(etcd=Path("/e"), kube_apiserver=Path("/a"), kube_controller_manager=Path("/c"),
                         version="v1.37.2", kubemark=Path("/k/kubemark"))
    assert "--use-host-image-service=false" in hollow.kubemark_argv(b37, node)


def test_a_link_relays_until_cut_and_again_once_restored():
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)

    def serve(c):
        try:
            for data in iter(lambda: c.recv(100), b""):
                c.sendall(data)
        except OSError:
            pass  # a held connection closed by restore()

    def echo():
        while True:
            try:
                c, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(c,), daemon=True).start()

    threading.Thread(target=echo, daemon=True).start()
    link = hollow.Link(server.getsockname())
    try:
        a = socket.create_connection(("127.0.0.1", link.port), timeout=2)
        a.sendall(b"one")
        assert a.recv(100) == b"one"
        link.cut()
        a.sendall(b"two")
        a.settimeout(1.0)
        with pytest.raises(socket.timeout):
            a.recv(100)  # held, as on a partition: no answer, no reset
        b = socket.create_connection(("127.0.0.1", link.port), timeout=2)
        b.settimeout(1.0)
        b.sendall(b"three")
        with pytest.raises(socket.timeout):
            b.recv(100)
        link.restore()
        c = socket.create_connection(("127.0.0.1", link.port), timeout=2)
        c.sendall(b"four")
        assert c.recv(100) == b"four"
        for s in (a, b, c):
            s.close()
    finally:
        link.close()
        server.close()


def test_a_process_started_through_a_launcher_is_recorded_as_its_program(tmp_path):
    started = processes.start(tmp_path, "hollow-x", ["/bin/sh", "-c", 'exec "$@"', "sh", "/bin/sleep", "30"],
                              program="/bin/sleep")
    try:
        from support.simserver import wait_until

        wait_until(lambda: processes.running(tmp_path) == {"hollow-x": started.pid})
        assert started.argv0 == "/bin/sleep"
    finally:
        assert processes.stop(tmp_path) == ["hollow-x"]
