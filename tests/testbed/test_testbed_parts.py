"""The testbed's parts that need no control plane (these run in the fast suite).

Only ``nodewatch.testbed`` may write to a cluster, so nothing else may import it; the build's
patches and flags, the PKI, and stopping processes by pid are checked here without building.
"""

from __future__ import annotations

import os

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509

from nodewatch.cli import build_parser
from nodewatch.testbed import build, pki, processes
from nodewatch.testbed.command import join_flag_values
from nodewatch.testbed.controlplane import kubeconfig

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
    link.write_text("package reflect2\n\n" + build._REFLECT2_OLD_INIT + "\n" + build._REFLECT2_OLD_HITER)
    umap = tmp_path / "unsafe_map.go"
    umap.write_text("func (type2 *UnsafeMapType) UnsafeIterate(obj unsafe.Pointer) MapIterator {\n"
                    + build._REFLECT2_OLD_ITERATE + "\t}\n}\n")
    for _ in range(2):  # a resumed build patches an already patched tree
        build._replace(link, [(build._REFLECT2_OLD_INIT, build._REFLECT2_NEW_INIT),
                              (build._REFLECT2_OLD_HITER, build._REFLECT2_NEW_HITER)])
        build._replace(umap, [(build._REFLECT2_OLD_ITERATE, build._REFLECT2_NEW_ITERATE)])
    text = link.read_text()
    assert "func mapiterinit(rtype unsafe.Pointer, m unsafe.Pointer, it *hiter)\n" in text
    assert "checkBucket uintptr" in text and "*hiter\n" not in text
    assert umap.read_text().count("var it hiter") == 1


def test_reflect2_patch_refuses_an_unexpected_tree(tmp_path):
    f = tmp_path / "unsafe_link.go"
    f.write_text("package reflect2\n// something else\n")
    with pytest.raises(build.BuildError, match="reflect2"):
        build._replace(f, [(build._REFLECT2_OLD_INIT, build._REFLECT2_NEW_INIT)])


def test_version_stamps_both_version_packages():
    flags = build.version_ldflags("v1.20.2")
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
    assert build.openapi_input_dirs(tree) == ["k8s.io/kubernetes/pkg/apis/abac/v1beta1",
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

    from simserver import wait_until

    processes.start(tmp_path, "quits", ["/bin/sh", "-c", "exit 3"])
    wait_until(lambda: "quits" not in processes.running(tmp_path))
    assert processes.exit_status(tmp_path, "quits") == "exit status 3"
    killed = processes.start(tmp_path, "killed", ["/bin/sleep", "30"])
    os.kill(killed.pid, _signal.SIGKILL)
    wait_until(lambda: "killed" not in processes.running(tmp_path))
    assert processes.exit_status(tmp_path, "killed") == "killed by SIGKILL"
