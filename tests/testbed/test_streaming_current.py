"""Streaming lists against a current kube-apiserver, seen in its own audit log.

Needs a current release built into the testbed cache (``nodewatch testbed build --version
latest``, from the testbed branch); skipped, with the reason, where there is none. Two control
planes: the WatchList gate at its default (on since 1.34: the Nodes and Leases are listed by one
``sendInitialEvents=true`` watch each, answered 200 and streaming on, and no paged list), and
``--feature-gates=WatchList=false`` (answered 422, then paged lists; asked once per connection,
no "disconnected" on the way). The audit policy logs every request at Metadata level.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodewatch.core.settings import Settings
from nodewatch.sources.live import LiveSource
from support.simserver import wait_until

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(900)]

AUDIT_POLICY = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"
PATHS = {"nodes": "/api/v1/nodes", "leases": "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"}


def _current_build():
    from nodewatch.testbed import build

    try:
        binaries = build.built(version="latest")  # type: ignore[call-arg]
    except TypeError:
        pytest.skip("this testbed builds v1.20.2 only (no --version latest)")
    if binaries is None:
        pytest.skip("no current release in the testbed cache: `nodewatch testbed build --version latest`")
    return binaries


@pytest.fixture(scope="module", params=["default-gates", "gate-off"])
def current(request, tmp_path_factory):
    from nodewatch.testbed.controlplane import down, up

    binaries = _current_build()
    base = tmp_path_factory.mktemp(f"current-{request.param}")
    policy, audit = base / "audit-policy.yaml", base / "audit.log"
    policy.write_text(AUDIT_POLICY)
    flags = [f"--audit-policy-file={policy}", f"--audit-log-path={audit}"]
    if request.param == "gate-off":
        flags.append("--feature-gates=WatchList=false")
    folder = base / "testbed"
    try:
        tb = up(folder, binaries, apiserver_flags=tuple(flags), progress=lambda line: print(f"testbed: {line}"))
    except Exception as exc:
        down(folder, progress=print)
        if request.param == "gate-off":
            pytest.skip(f"{binaries.version} does not start with WatchList=false: {str(exc)[:200]}")
        raise
    try:
        yield tb, audit, request.param
    finally:
        down(folder, progress=lambda line: print(f"testbed: {line}"))


def _audit(path: Path) -> list[dict]:
    """The audit events of nodewatch's own requests."""
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in events if str(e.get("userAgent", "")).startswith("nodewatch/")]


def test_streaming_lists_on_a_current_server(current, monkeypatch, tmp_path):
    tb, audit, mode = current
    flashes: list[dict] = []
    original = LiveSource._on_health

    def recording(self, reflector, **changes):
        if changes.get("connected") is False:
            flashes.append({"stream": reflector.spec.resource, **changes})
        return original(self, reflector, **changes)

    monkeypatch.setattr(LiveSource, "_on_health", recording)
    src = LiveSource(Settings(), kubeconfig=str(tb.viewer_kubeconfig), cert_cache_dir=str(tmp_path / "certs"))
    src.start()
    try:
        assert src.wait_synced(60)
        wait_until(src.watching, timeout=30)
    finally:
        src.stop()
    assert flashes == []
    events = _audit(audit)
    for resource, path in PATHS.items():
        mine = [e for e in events if e["requestURI"].split("?")[0] == path]
        streamed = [e for e in mine if "sendInitialEvents=true" in e["requestURI"]]
        paged = [e for e in mine if "watch=true" not in e["requestURI"] and "limit=" in e["requestURI"]]
        codes = {e.get("responseStatus", {}).get("code") for e in streamed
                 if e["stage"] in ("ResponseStarted", "ResponseComplete")}
        if mode == "default-gates":
            assert src.streaming.offered and not src.streaming.refused
            started = [e for e in streamed if e["stage"] == "ResponseStarted"]
            assert len(started) == 1 and codes == {200}, (resource, streamed)  # one request: list, then watch
            assert paged == []
        else:
            assert src.streaming.refused and "422" in src.streaming.reason
            # asked once on the connection: the Leases list first and are refused; the Nodes list after
            # them (``live.NODES_AFTER_LEASES``) and know the answer already
            asked = len({e["auditID"] for e in streamed})
            assert (asked, codes) == ((1, {422}) if resource == "leases" else (0, set())), (resource, streamed)
            assert len({e["auditID"] for e in paged}) >= 1
