"""A small read-write client for the testbed's API server (the only writer in nodewatch).

nodewatch's own connection can only GET, on purpose. The testbed's kubelets and its setup must
create and update objects, so they use this client instead; it lives in ``nodewatch.testbed`` and
nothing outside that package may import it (a test enforces it).
"""

from __future__ import annotations

import json
import ssl
from typing import Any
from urllib.parse import quote

import urllib3

JSON_MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


class ApiStatus(Exception):
    """The API server answered with an error status."""

    def __init__(self, status: int, body: str) -> None:
        self.status = status
        self.body = body
        try:
            self.reason = json.loads(body).get("reason", "")
            self.message = json.loads(body).get("message", body)
        except (ValueError, AttributeError):
            self.reason, self.message = "", body
        super().__init__(f"HTTP {status}: {self.message[:300]}")


class Client:
    """JSON over HTTPS with a bearer token (or a client certificate: ``client_cert``, the files of
    the certificate and its key); TLS verified against the testbed's CA."""

    def __init__(self, server: str, token: str | None, ca_file: str, timeout: float = 10.0,
                 client_cert: tuple[str, str] | None = None) -> None:
        self.server = server.rstrip("/")
        ctx = ssl.create_default_context(cafile=ca_file)
        if client_cert is not None:
            ctx.load_cert_chain(*client_cert)
        self._pool = urllib3.PoolManager(maxsize=16, ssl_context=ctx, retries=False,
                                         timeout=urllib3.Timeout(connect=3.0, read=timeout))
        self._headers = {"Accept": "application/json"}
        if token is not None:
            self._headers["Authorization"] = f"Bearer {token}"

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                timeout: float | None = None, user_agent: str | None = None) -> Any:
        """``user_agent``: the API server names the field manager of a write after it, up to the
        first "/" (``managedFields[].manager``)."""
        headers = dict(self._headers)
        if user_agent is not None:
            headers["User-Agent"] = user_agent
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        kw: dict[str, Any] = {}
        if timeout is not None:
            kw["timeout"] = urllib3.Timeout(connect=3.0, read=timeout)
        resp = self._pool.request(method, self.server + path, body=data, headers=headers, **kw)
        text = resp.data.decode("utf-8", "replace")
        if resp.status >= 400:
            raise ApiStatus(resp.status, text)
        return json.loads(text) if text and text.lstrip().startswith(("{", "[")) else text

    def get(self, path: str, **kw: Any) -> Any:
        return self.request("GET", path, **kw)

    def create(self, path: str, obj: dict) -> Any:
        return self.request("POST", path, obj)

    def create_or_get(self, path: str, obj: dict) -> Any:
        """Create, or return the existing object of that name (setup is idempotent)."""
        try:
            return self.create(path, obj)
        except ApiStatus as exc:
            if exc.status != 409:
                raise
            return self.get(f"{path}/{quote(obj['metadata']['name'])}")

    def patch(self, path: str, patch: dict, kind: str = JSON_MERGE, user_agent: str | None = None) -> Any:
        return self.request("PATCH", path, patch, content_type=kind, user_agent=user_agent)

    def put(self, path: str, obj: dict) -> Any:
        return self.request("PUT", path, obj)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

    def close(self) -> None:
        self._pool.clear()


def namespaced(kind_path: str, namespace: str, name: str | None = None) -> str:
    """``/api/v1/namespaces/NS/pods[/NAME]`` from ``/api/v1/pods`` style paths."""
    prefix, resource = kind_path.rsplit("/", 1)
    out = f"{prefix}/namespaces/{quote(namespace)}/{resource}"
    return out if name is None else f"{out}/{quote(name)}"
