"""The shipped alert rules: written from nodewatch/metrics/alerts.py, passing the real
``promtool check rules`` and ``promtool test rules``; and a real scrape of a demo hub passing
``promtool check metrics``."""

from __future__ import annotations

import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest

from nodewatch.metrics import alerts

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "prometheus"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian package prometheus)")


def test_the_shipped_files_are_what_alerts_py_writes(tmp_path):
    assert alerts.main(["--check", "--dir", str(DEPLOY)]) == 0
    alerts.main(["--dir", str(tmp_path)])
    assert alerts.main(["--check", "--dir", str(tmp_path)]) == 0
    (tmp_path / "nodewatch-rules.yaml").write_text("groups: []\n")
    assert alerts.main(["--check", "--dir", str(tmp_path)]) == 1


def test_the_prometheusrule_carries_the_same_group():
    import yaml

    rule = yaml.safe_load((DEPLOY / "nodewatch-prometheusrule.yaml").read_text())
    plain = yaml.safe_load((DEPLOY / "nodewatch-rules.yaml").read_text())
    assert rule["kind"] == "PrometheusRule" and rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["spec"] == plain


@needs_promtool
def test_promtool_checks_the_rules():
    out = subprocess.run([PROMTOOL, "check", "rules", str(DEPLOY / "nodewatch-rules.yaml")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{len(alerts.RULES)} rules found" in out.stdout


@needs_promtool
def test_promtool_unit_tests_of_the_rules_pass():
    out = subprocess.run([PROMTOOL, "test", "rules", "nodewatch-rules.test.yaml"], cwd=DEPLOY,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


@needs_promtool
def test_promtool_fails_a_broken_expectation(tmp_path):
    """The unit tests can fail: the same file with the lease page expected 10 s early does."""
    shutil.copy(DEPLOY / "nodewatch-rules.yaml", tmp_path)
    text = (DEPLOY / "nodewatch-rules.test.yaml").read_text()
    broken = text.replace("      - eval_time: 50s\n        alertname: NodewatchNodeLeaseOverdue\n        exp_alerts: []",
                          "      - eval_time: 60s\n        alertname: NodewatchNodeLeaseOverdue\n        exp_alerts: []")
    assert broken != text
    (tmp_path / "t.yaml").write_text(broken)
    out = subprocess.run([PROMTOOL, "test", "rules", "t.yaml"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode != 0


@needs_promtool
@pytest.mark.parametrize("accept", ["text/plain", "application/openmetrics-text; version=1.0.0"])
def test_promtool_checks_a_real_scrape_of_a_demo_hub(tmp_path, accept):
    from nodewatch.metrics.server import start_metrics
    from support.hub_support import advance, demo_hub

    with demo_hub(tmp_path, nodes=60) as hub:
        advance(hub, 120.0)  # the incident: nodes Unknown, tainted, evicted
        srv = start_metrics(hub.source, "127.0.0.1:0")
        try:
            req = urllib.request.Request(srv.url + "/metrics", headers={"Accept": accept})
            with urllib.request.urlopen(req, timeout=30) as resp:
                body = resp.read()
                ctype = resp.headers["Content-Type"]
        finally:
            srv.stop()
    assert ctype.startswith(accept.split(";")[0])
    text = body.decode()
    assert 'nodewatch_node_state{cluster="demo",node=' in text
    assert "nodewatch_statefulset_pods_at_risk{" in text
    if "openmetrics" in accept:
        assert text.endswith("# EOF\n")
        return  # promtool check metrics reads the Prometheus text format
    out = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True, timeout=60)
    assert out.returncode == 0, (out.stdout + out.stderr).decode()[:2000]
