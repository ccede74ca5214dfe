"""``--alertmanager URL``: the alerts of ``alerts.py`` pushed to Alertmanager's v2 API, for a team
without a Prometheus.

As Prometheus does it: each evaluation (every ``interval`` seconds) judges every rule on a fresh
sample; an alert firing for its rule's ``for`` is POSTed to ``/api/v2/alerts`` at once, then again
every ``resend`` seconds while it fires, with ``endsAt`` a few resends ahead (so a nodewatch that
dies stops renewing them and Alertmanager resolves them by itself); an alert that stops firing is
sent once more with ``endsAt`` now: resolved. ``startsAt`` and ``endsAt`` are on the source's one
clock, the clock every other time nodewatch shows is on.

A POST that fails (Alertmanager restarting, unreachable) is tried again ``RETRY`` seconds later
with everything it held, not at the next resend: a page must not wait half a minute for an
Alertmanager blip. The failures are counted for ``/metrics`` (``sent``, ``errors``, as Prometheus'
``prometheus_notifications_sent_total`` and ``..._errors_total``) and logged once per error and
resend period, not at every try.

Nothing here can say "nodewatch is down": that is the scraper's job (``NodewatchDown``).
"""

from __future__ import annotations

import datetime
import json
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Callable

from .alerts import RULES, Rule
from .sample import FleetSample

log = logging.getLogger("nodewatch.alertmanager")

INTERVAL = 1.0
RESEND = 30.0
RETRY = 5.0
"""Seconds after a failed POST before its alerts are tried again."""
VALID_RESENDS = 4
"""A firing alert's ``endsAt``: this many resends ahead (Prometheus: 4 x max(eval interval, resend delay))."""


def rfc3339(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


class AlertPusher:
    """Judges ``rules`` on ``sampler()`` every ``interval`` seconds and keeps Alertmanager told.
    ``evaluate(sample)`` is the step (tests call it with samples of their own and no thread)."""

    def __init__(self, url: str, sampler: Callable[[], FleetSample], *, rules: tuple[Rule, ...] = RULES,
                 interval: float = INTERVAL, resend: float = RESEND, generator_url: str = "",
                 post: Callable[[list[dict]], None] | None = None) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"--alertmanager {url!r}: expected http://HOST:PORT or https://...")
        self.url = url.rstrip("/") + "/api/v2/alerts"
        self.sampler = sampler
        self.rules = rules
        self.interval = interval
        self.resend = resend
        self.generator_url = generator_url
        self._post = post or self._http_post
        self._pending: dict[tuple, float] = {}
        """Alerts true but not yet for their rule's ``for``: since when."""
        self._firing: dict[tuple, dict] = {}
        """Alerts firing: key -> the alert as last sent."""
        self._last_sent = -float("inf")
        self._retry_at: float | None = None
        """After a failed POST: when to try the firing alerts again (None: no failure pending)."""
        self._logged_at = -float("inf")
        self._unsent: list[dict] = []
        self.sent = 0
        """Alerts delivered (each firing or resolved alert of each successful POST)."""
        self.errors = 0
        """POSTs that failed."""
        self.last_error = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- the step --------------------------------------------------------------------------------

    def evaluate(self, sample: FleetSample) -> list[dict]:
        """One evaluation: the alerts to POST now (new, resolved, or all of them when a resend is due),
        already posted."""
        now = sample.at
        seen: dict[tuple, tuple[Rule, dict[str, str], dict[str, str]]] = {}
        for rule in self.rules:
            for labels, notes in rule.fire(sample):
                full = {"alertname": rule.name, "severity": rule.severity, **labels}
                seen[_key(full)] = (rule, full, notes)
        out: list[dict] = []
        new = False
        for key, (rule, labels, notes) in seen.items():
            since = self._pending.setdefault(key, now)
            if now - since < rule.for_seconds:
                continue
            alert = self._firing.get(key)
            if alert is None:
                new = True
                alert = {"labels": labels, "startsAt": rfc3339(now)}
                if self.generator_url:
                    alert["generatorURL"] = self.generator_url
            alert["annotations"] = notes
            alert["endsAt"] = rfc3339(now + VALID_RESENDS * max(self.resend, self.interval))
            self._firing[key] = alert
        for key in [k for k in self._pending if k not in seen]:
            del self._pending[key]
        resolved = [k for k in self._firing if k not in seen]
        for key in resolved:
            alert = self._firing.pop(key)
            alert["endsAt"] = rfc3339(now)
            out.append(alert)
        retry = self._retry_at is not None and now >= self._retry_at
        if new or resolved or retry or now - self._last_sent >= self.resend:
            out.extend(self._unsent)  # resolutions a failed POST did not deliver
            self._unsent = []
            out.extend(self._firing.values())
        if out:
            self._last_sent = now
            try:
                self._post(out)
                self.sent += len(out)
                self._retry_at = None
            except (OSError, ValueError) as exc:
                self.errors += 1
                error = f"{type(exc).__name__}: {exc}"
                if error != self.last_error or now - self._logged_at >= self.resend:
                    log.warning("alertmanager %s: %s (trying again every %gs)", self.url, error, RETRY)
                    self._logged_at = now
                self.last_error = error
                self._retry_at = now + RETRY  # the firing ones then; the resolutions say them again too
                self._unsent = [a for a in out if a["endsAt"] <= rfc3339(now)]
        return out

    def _http_post(self, alerts: list[dict]) -> None:
        req = urllib.request.Request(self.url, data=json.dumps(alerts).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            resp.read()

    # --- the thread ------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="alertmanager-push", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.evaluate(self.sampler())
            except Exception:  # one failed evaluation is logged; the next one tries again
                log.exception("alert evaluation failed")
            self._stop.wait(self.interval)


def _key(labels: dict[str, str]) -> tuple:
    return tuple(sorted(labels.items()))
