"""Helpers of the metrics tests: the real Prometheus and Alertmanager on loopback, configured by
the test, and a webhook receiver that keeps every notification with its arrival time."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import yaml

from support.simserver import free_port, wait_until

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "nodewatch-rules.yaml"
PROMETHEUS = shutil.which("prometheus")
ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
PROMTOOL = shutil.which("promtool")
HAVE_ALL = bool(PROMETHEUS and ALERTMANAGER and PROMTOOL)


class Webhook:
    """Alertmanager's webhook receiver: every notification with its arrival time."""

    def __init__(self) -> None:
        self.received: list[tuple[float, dict]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                hook.received.append((time.time(), json.loads(body)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def first(self, alertname: str, node: str, status: str = "firing") -> float | None:
        """Arrival time of the first notification of that alert on that node in that status."""
        for t, msg in self.received:
            for a in msg.get("alerts", ()):
                if (a["labels"].get("alertname") == alertname and a["labels"].get("node") == node
                        and a["status"] == status):
                    return t
        return None


@contextlib.contextmanager
def _process(args: list[str], log: Path, env: dict[str, str] | None = None):
    """``args`` running, its output in ``log``; stopped with SIGTERM (then SIGKILL) at the end."""
    with open(log, "wb") as out:
        p = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        yield p
    finally:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)


def _up(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False



def _alertmanager_config(tmp_path: Path, hook: "Webhook") -> Path:
    path = tmp_path / "am.yml"
    path.write_text(yaml.safe_dump({
        "route": {"receiver": "test", "group_by": ["alertname", "node"], "group_wait": "0s",
                  "group_interval": "1s", "repeat_interval": "1h"},
        "receivers": [{"name": "test", "webhook_configs": [
            {"url": f"http://127.0.0.1:{hook.port}/hook", "send_resolved": True}]}]}))
    return path


@contextlib.contextmanager
def alertmanager_only(tmp_path: Path) -> Iterator[tuple[Webhook, str]]:
    """A real Alertmanager routing every alert at once to a webhook here: (the webhook, its URL)."""
    hook = Webhook()
    port = free_port()
    config = _alertmanager_config(tmp_path, hook)
    with contextlib.ExitStack() as stack:
        stack.callback(hook.httpd.shutdown)
        stack.enter_context(_process(
            [ALERTMANAGER, f"--config.file={config}", f"--storage.path={tmp_path / 'am'}",
             f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="], tmp_path / "am.log"))
        wait_until(lambda: _up(f"http://127.0.0.1:{port}/-/ready"), timeout=60, interval=0.2)
        yield hook, f"http://127.0.0.1:{port}"


@contextlib.contextmanager
def prometheus_and_alertmanager(tmp_path: Path, metrics_port: int) -> Iterator[tuple[Webhook, int]]:
    """Alertmanager routing every alert at once to a webhook here, and Prometheus scraping
    ``127.0.0.1:metrics_port`` (job nodewatch) every second with the shipped rules evaluated every
    second; yields (the webhook, Prometheus' port) once both are ready."""
    hook = Webhook()
    am_port, prom_port = free_port(), free_port()
    _alertmanager_config(tmp_path, hook)
    rules = yaml.safe_load(RULES.read_text())
    for g in rules["groups"]:
        g["interval"] = "1s"  # the test's pace; the shipped file evaluates every 10 s
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    (tmp_path / "prom.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(tmp_path / "rules.yml")],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]},
        "scrape_configs": [{"job_name": "nodewatch", "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}]}],
    }))
    with contextlib.ExitStack() as stack:
        stack.callback(hook.httpd.shutdown)
        stack.enter_context(_process(
            [ALERTMANAGER, f"--config.file={tmp_path / 'am.yml'}", f"--storage.path={tmp_path / 'am'}",
             f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address="], tmp_path / "am.log"))
        stack.enter_context(_process(
            [PROMETHEUS, f"--config.file={tmp_path / 'prom.yml'}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{prom_port}"], tmp_path / "prom.log"))
        wait_until(lambda: _up(f"http://127.0.0.1:{am_port}/-/ready"), timeout=60, interval=0.2)
        wait_until(lambda: _up(f"http://127.0.0.1:{prom_port}/-/ready"), timeout=60, interval=0.2)
        yield hook, prom_port


def series_count(prom_port: int, query: str) -> int:
    q = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(q, timeout=5) as r:
        return len(json.loads(r.read())["data"]["result"])


MIXIN_RULE = {"groups": [{"name": "kubernetes-system-kubelet", "rules": [{
    # kubernetes-mixin alerts/kubelet.libsonnet (the unschedulable clause of newer releases changes
    # nothing for a node that is not cordoned)
    "alert": "KubeNodeNotReady",
    "expr": 'kube_node_status_condition{job="kube-state-metrics",condition="Ready",status="true"} == 0',
    "for": "15m", "labels": {"severity": "warning"},
    "annotations": {"description": "{{ $labels.node }} has been unready for more than 15 minutes."}}]}]}


def mixin_page(tmp_path: Path, flip_after: float) -> float:
    """When kubernetes-mixin's KubeNodeNotReady fires, seconds after the last renewal, by promtool on
    the node's Ready series as kube-state-metrics exports it at 30 s scrapes (the flip at
    ``flip_after`` s). Checked both ways: silent one scrape before, firing at the returned time."""
    scrape = 30
    first_zero = int(-(-flip_after // scrape))  # the first scrape that sees Ready not True
    steps = first_zero + 15 * 60 // scrape + 4
    values = " ".join("1" if i < first_zero else "0" for i in range(steps))
    fires = (first_zero + 15 * 60 // scrape) * scrape
    (tmp_path / "mixin.yml").write_text(yaml.safe_dump(MIXIN_RULE))
    (tmp_path / "mixin-test.yml").write_text(yaml.safe_dump({
        "rule_files": ["mixin.yml"], "evaluation_interval": f"{scrape}s",
        "tests": [{"interval": f"{scrape}s", "input_series": [{
            "series": 'kube_node_status_condition{job="kube-state-metrics",node="n",condition="Ready",status="true"}',
            "values": values}],
            "alert_rule_test": [
                {"eval_time": f"{fires - scrape}s", "alertname": "KubeNodeNotReady", "exp_alerts": []},
                {"eval_time": f"{fires}s", "alertname": "KubeNodeNotReady", "exp_alerts": [{
                    "exp_labels": {"severity": "warning", "job": "kube-state-metrics", "node": "n",
                                   "condition": "Ready", "status": "true"},
                    "exp_annotations": {"description": "n has been unready for more than 15 minutes."}}]},
            ]}]}))
    out = subprocess.run([PROMTOOL, "test", "rules", "mixin-test.yml"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return float(fires)
