"""A local cache of each node's kubelet client certificate NotAfter, per cluster.

Why: the API server's CSR cleaner deletes issued CSRs after an hour, so a dashboard started today
cannot see the NotAfter of a certificate issued last month unless someone remembered it. nodewatch
remembers what it saw in ``~/.cache/nodewatch/<cluster-id>/certs.json`` (``$XDG_CACHE_HOME`` is
honoured; the directory can be chosen). The file holds node names and dates only, nothing secret.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import orjson

MAX_ENTRIES = 200_000


def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "nodewatch")


class CertCache:
    """``certs.json``: ``{"nodes": {NODE: {"not_after": EPOCH, "source": TEXT}}}``."""

    def __init__(self, cluster_id: str, base_dir: str | None = None) -> None:
        self.dir = os.path.join(base_dir or default_cache_dir(), cluster_id)
        self.path = os.path.join(self.dir, "certs.json")
        self._saved: dict[str, tuple[float, str]] = {}
        self.error: str | None = None

    def load(self) -> dict[str, tuple[float, str]]:
        """What was remembered; an unreadable file is an empty cache (and ``error`` says why)."""
        try:
            with open(self.path, "rb") as f:
                data = orjson.loads(f.read())
        except FileNotFoundError:
            return {}
        except (OSError, orjson.JSONDecodeError) as exc:
            self.error = f"cert cache {self.path} unreadable ({type(exc).__name__}); starting empty"
            return {}
        out: dict[str, tuple[float, str]] = {}
        nodes = data.get("nodes") if isinstance(data, dict) else None
        for name, v in (nodes.items() if isinstance(nodes, dict) else ()):
            if not isinstance(name, str) or not isinstance(v, dict):
                continue
            t = v.get("not_after")
            if isinstance(t, (int, float)) and not isinstance(t, bool) and t == t:
                out[name] = (float(t), str(v.get("source") or "cache")[:200])
        self._saved = dict(out)
        return out

    def save(self, certs: dict[str, Any]) -> bool:
        """Write ``certs`` (node -> CertInfo or (not_after, source)) merged over the file, atomically.

        Returns True when something was written.
        """
        merged = dict(self._saved)
        for node, info in certs.items():
            not_after, source = (info.not_after, info.source) if hasattr(info, "not_after") else info
            cur = merged.get(node)
            if cur is None or not_after > cur[0]:
                merged[node] = (float(not_after), str(source))
        if merged == self._saved:
            return False
        if len(merged) > MAX_ENTRIES:
            merged = dict(sorted(merged.items(), key=lambda kv: kv[1][0], reverse=True)[:MAX_ENTRIES])
        payload = {"nodes": {n: {"not_after": t, "source": s} for n, (t, s) in sorted(merged.items())}}
        try:
            os.makedirs(self.dir, mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".certs-", dir=self.dir)
            with os.fdopen(fd, "wb") as f:
                f.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2))
            os.replace(tmp, self.path)
        except OSError as exc:
            self.error = f"cannot write cert cache {self.path}: {exc.strerror or exc}"
            return False
        self._saved = merged
        return True
