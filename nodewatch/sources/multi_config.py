"""Which clusters to watch at once: several ``--context``, ``--all-contexts``, or a fleet file.

A fleet file is YAML: a list of clusters (or a mapping with a ``clusters`` list). Each is a
context name, or a mapping with ``context``, and optionally ``kubeconfig``, ``name`` (what the
screen calls it; the context by default) and settings overrides named like the command-line flags
(``grace``, ``toleration``, ``monitor-period``, ``zone-threshold``, ``eviction-rate``,
``secondary-eviction-rate``, ``large-cluster-threshold``)::

    clusters:
      - context: prod-eu            # grace from its own API server's version (40s / 50s)
      - context: prod-us
        kubeconfig: ~/.kube/us.yaml
      - context: batch
        name: batch-tuned
        grace: 20                   # its controller runs --node-monitor-grace-period=20s

An override in the file beats the command line's, which beats the server's version.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ..core.settings import Settings
from .kubeconfig import KubeconfigError, kubeconfig_paths

FILE_SETTINGS = {
    "grace": "grace_seconds",
    "toleration": "toleration_seconds",
    "monitor-period": "monitor_period_seconds",
    "zone-threshold": "unhealthy_zone_threshold",
    "eviction-rate": "eviction_rate",
    "secondary-eviction-rate": "secondary_eviction_rate",
    "large-cluster-threshold": "large_cluster_threshold",
}
"""Fleet file keys (the flags' names) -> ``Settings`` fields."""
MAX_CLUSTERS = 200


class FleetFileError(ValueError):
    """A fleet file nodewatch cannot use; the message says where and why."""


@dataclass(frozen=True)
class ClusterSpec:
    """One cluster to watch."""

    name: str
    """What the screen, ``status`` and node keys call it."""
    context: str | None
    kubeconfig: str | None = None
    overrides: dict[str, float] = field(default_factory=dict)
    """``Settings`` field -> value, from the fleet file."""

    def settings(self, base: Settings) -> Settings:
        return base.override(**self.overrides) if self.overrides else base


def specs_from_contexts(contexts: list[str], kubeconfig: str | None) -> list[ClusterSpec]:
    seen: list[str] = []
    for c in contexts:
        if c not in seen:
            seen.append(c)
    return [ClusterSpec(name=c, context=c, kubeconfig=kubeconfig) for c in seen]


def all_contexts(kubeconfig: str | None) -> list[str]:
    """Every context of the kubeconfig (``--kubeconfig``, or what kubectl would read), in its order."""
    from kubernetes import config as kconfig

    paths = kubeconfig_paths(kubeconfig)
    if not paths:
        raise KubeconfigError("--all-contexts: no kubeconfig found (use --kubeconfig FILE or set KUBECONFIG)")
    joined = os.pathsep.join(paths)
    try:
        contexts, _ = kconfig.list_kube_config_contexts(config_file=joined)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is one line for the user
        raise KubeconfigError(f"kubeconfig {joined}: cannot list its contexts ({type(exc).__name__})") from None
    names = [str(c.get("name")) for c in contexts or [] if c.get("name")]
    if not names:
        raise KubeconfigError(f"kubeconfig {joined}: no contexts defined")
    return names


def read_fleet_file(path: str) -> list[ClusterSpec]:
    """The clusters of a fleet file. Raises FleetFileError with a message for the user."""
    import yaml

    try:
        with open(os.path.expanduser(path), encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except OSError as exc:
        raise FleetFileError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise FleetFileError(f"{path}: not YAML ({str(exc).splitlines()[0][:200]})") from None
    return parse_fleet(data, path)


def parse_fleet(data: Any, path: str = "fleet file") -> list[ClusterSpec]:
    if isinstance(data, dict) and set(data) == {"clusters"}:
        data = data["clusters"]
    if not isinstance(data, list) or not data:
        raise FleetFileError(f"{path}: expected a list of clusters (or `clusters:` with one)")
    if len(data) > MAX_CLUSTERS:
        raise FleetFileError(f"{path}: {len(data)} clusters; at most {MAX_CLUSTERS}")
    specs = [_spec(item, i, path) for i, item in enumerate(data, 1)]
    names = [s.name for s in specs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise FleetFileError(f"{path}: two clusters are called {dup[0]!r}; give one a `name:`")
    return specs


def _spec(item: Any, i: int, path: str) -> ClusterSpec:
    where = f"{path}: cluster {i}"
    if isinstance(item, str) and item:
        return ClusterSpec(name=item, context=item)
    if not isinstance(item, dict):
        raise FleetFileError(f"{where}: expected a context name or a mapping with `context:`")
    item = dict(item)
    context = item.pop("context", None)
    kubeconfig = item.pop("kubeconfig", None)
    name = item.pop("name", None)
    for key, value in (("context", context), ("kubeconfig", kubeconfig), ("name", name)):
        if value is not None and (not isinstance(value, str) or not value):
            raise FleetFileError(f"{where}: `{key}` must be a non-empty string")
    if context is None and name is None:
        raise FleetFileError(f"{where}: needs a `context` (or a `name` with a kubeconfig's current context)")
    overrides: dict[str, float] = {}
    for key, value in item.items():
        field_name = FILE_SETTINGS.get(str(key))
        if field_name is None:
            raise FleetFileError(f"{where}: unknown key {str(key)[:40]!r}; settings are "
                                 f"{', '.join(FILE_SETTINGS)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise FleetFileError(f"{where}: {key} must be a number, not negative")
        overrides[field_name] = value
    try:
        Settings().override(**overrides)
    except ValueError as exc:
        raise FleetFileError(f"{where}: {exc}") from None
    return ClusterSpec(name=name or context, context=context, kubeconfig=kubeconfig, overrides=overrides)
