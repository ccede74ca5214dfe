"""The simulated API server's request handling: authentication, routing, discovery, GET and LIST.

Only GET is allowed (nodewatch is read-only, and a test that sees a 405 knows it tried to write).
LIST supports ``limit``/``continue`` over a cached snapshot, field and label selectors, and the
Table format kubectl asks for. A watch request is handed to ``WatchStreaming``.
"""

from __future__ import annotations

import base64
import binascii
import time
from typing import Any

import orjson

from . import http_discovery as discovery
from .http_protocol import Request, response_head, status_bytes
from .http_tables import TABLE_RESOURCES, table_bytes, wants_table
from .selectors import Predicate, SelectorError, combine, parse_field_selector, parse_label_selector
from .server_conn import Conn, HTTPError, Route, ServerParts, int_param
from .store import RESOURCES, Entry

SNAPSHOT_CACHE = 16
"""LIST snapshots kept for ``continue`` tokens; an older token gets 410 Expired."""


class ReadHandlers(ServerParts):
    """Request dispatch and the non-watch reads (mixed into ``SimServer``)."""

    async def _serve(self, conn: Conn, req: Request) -> bool:
        """Answer one request; False when the connection must close."""
        began = time.monotonic()
        sent = 0
        code = 500
        is_watch = False
        try:
            route = None
            try:
                self._authenticate(req)
                if req.method not in ("GET",):
                    raise HTTPError(405, f"the server does not allow this method on the requested resource ({req.method})")
                route = self._route(req.path)
                is_watch = route is not None and (route.watch or req.flag("watch"))
                failure = self.faults.take_request_failure(route.info.name if route else None)
                if failure is not None:
                    headers = {"Retry-After": str(failure.retry_after)} if failure.retry_after is not None else {}
                    msg = "too many requests, please try again later" if failure.code == 429 else "injected failure"
                    raise HTTPError(failure.code, msg, headers=headers)
                if route is None:
                    code, sent = await self._serve_static(conn, req)
                    return True
                if self.faults.is_forbidden(route.info.name):
                    verb = "watch" if is_watch else ("get" if route.name else "list")
                    scope = f'in the namespace "{route.namespace}"' if route.namespace else "at the cluster scope"
                    raise HTTPError(
                        403,
                        f'{route.info.name} is forbidden: User "system:serviceaccount:nodewatch:nodewatch" cannot '
                        f'{verb} resource "{route.info.name}" in API group "{route.info.group}" {scope}',
                        details={"group": route.info.group, "kind": route.info.name},
                    )
                if is_watch:
                    code = 200
                    sent = await self._serve_watch(conn, req, route)
                    return not conn.closed
                code, sent = await self._serve_read(conn, req, route)
                return True
            except HTTPError as e:
                code = e.code
                body = status_bytes(e.code, e.message, e.reason, e.details)
                headers = dict(e.headers)
                if e.code == 401:
                    headers["Www-Authenticate"] = 'Bearer realm="kubernetes"'
                await self._send(conn, response_head(e.code, headers, len(body)) + body)
                sent = len(body)
                return True
        finally:
            self._record(req, code, sent, time.monotonic() - began, is_watch)

    def _authenticate(self, req: Request) -> None:
        header = req.headers.get("authorization", "")
        token = header[7:].strip() if header[:7].lower() == "bearer " else None
        if token is None and req.path in ("/version", "/healthz", "/livez", "/readyz") and not header:
            return  # anonymous public info, as a real cluster allows
        if not self.auth.check(token):
            raise HTTPError(401, "Unauthorized")

    def _route(self, path: str) -> Route | None:
        parts = [p for p in path.split("/") if p]
        if len(parts) >= 2 and parts[0] == "api" and parts[1] == "v1":
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        if not rest:
            return None
        watch = False
        if rest[0] == "watch":
            watch, rest = True, rest[1:]
        namespace = name = sub = ""
        if rest and rest[0] == "namespaces" and len(rest) >= 3:
            namespace, resource = rest[1], rest[2]
            name = rest[3] if len(rest) > 3 else ""
            sub = rest[4] if len(rest) > 4 else ""
            extra = rest[5:]
        elif rest and rest[0] == "namespaces" and len(rest) == 2:
            resource, name, extra = "namespaces", rest[1], []
        else:
            resource = rest[0] if rest else ""
            name = rest[1] if len(rest) > 1 else ""
            sub = rest[2] if len(rest) > 2 else ""
            extra = rest[3:]
        info = RESOURCES.get(resource)
        if info is None or info.group != group or info.version != version or extra:
            raise HTTPError(404, "the server could not find the requested resource", details={})
        if namespace and not info.namespaced:
            raise HTTPError(404, "the server could not find the requested resource", details={})
        if sub and sub != "status":
            raise HTTPError(404, "the server could not find the requested resource", details={})
        return Route(info, namespace, name, watch, sub)

    async def _serve_static(self, conn: Conn, req: Request) -> tuple[int, int]:
        path = req.path.rstrip("/") or "/"
        doc: Any
        if path in ("/healthz", "/livez", "/readyz"):
            body = b"ok"
            await self._send(conn, response_head(200, {"Content-Type": "text/plain"}, len(body)) + body)
            return 200, len(body)
        if path == "/version":
            doc = discovery.version_info(self.server_version)
        elif path == "/api":
            doc = discovery.api_versions(f"{self.host}:{self.port}")
        elif path == "/api/v1":
            doc = discovery.api_resource_list("", "v1")
        elif path == "/apis":
            doc = discovery.api_group_list()
        elif path.startswith("/apis/") and path.count("/") == 2:
            doc = discovery.api_group(path.split("/")[2])
        elif path.startswith("/apis/") and path.count("/") == 3:
            _, _, group, version = path.split("/")
            doc = discovery.api_resource_list(group, version)
        else:
            doc = None
        if doc is None:
            raise HTTPError(404, "the server could not find the requested resource", details={})
        body = orjson.dumps(doc)
        await self._send(conn, response_head(200, {}, len(body)) + body)
        return 200, len(body)

    def _predicate(self, req: Request, route: Route) -> Predicate | None:
        try:
            field_pred = parse_field_selector(route.info.name, req.param("fieldSelector"))
            label_pred = parse_label_selector(req.param("labelSelector"))
        except SelectorError as e:
            raise HTTPError(400, str(e)) from None
        ns_pred = None
        if route.namespace:
            ns = route.namespace
            ns_pred = lambda slim: slim.fields["metadata.namespace"] == ns  # noqa: E731
        if route.name:
            name = route.name
            name_pred = lambda slim: slim.fields["metadata.name"] == name  # noqa: E731
            return combine(ns_pred, name_pred, field_pred, label_pred)
        return combine(ns_pred, field_pred, label_pred)

    async def _serve_read(self, conn: Conn, req: Request, route: Route) -> tuple[int, int]:
        info = route.info
        table = wants_table(req.headers.get("accept", "")) and info.name in TABLE_RESOURCES
        if route.name:
            entry = self.store.get(info.name, route.namespace, route.name)
            if entry is None:
                raise HTTPError(
                    404, f'{info.name}{"." + info.group if info.group else ""} "{route.name}" not found',
                    details={"name": route.name, "group": info.group, "kind": info.name},
                )
            body: bytes | memoryview
            if table:
                obj = entry.obj
                body = table_bytes(info, [obj], obj["metadata"]["resourceVersion"], None, req.param("includeObject"),
                                   self._table_now())
            else:
                body = entry.data
            await self._send(conn, response_head(200, {}, len(body)) + body)
            return 200, len(body)
        pred = self._predicate(req, route)
        limit = int_param(req, "limit", 0)
        token = req.param("continue")
        if token:
            rv, offset = _decode_continue(token)
            entries = self._snapshots.get((info.name, rv))
            if entries is None:
                raise HTTPError(
                    410,
                    "The provided continue parameter is too old to display a consistent list result. You can start "
                    "a new list without the continue parameter, or use the continue token in this response to "
                    "retrieve the remainder of the results. Continuing with the provided token results in an "
                    "inconsistent list - objects that were created, modified, or deleted between the time the first "
                    "chunk was returned and now may show up in the list.",
                    reason="Expired",
                )
        else:
            rv, entries, _ = self.store.snapshot(info.name)
            offset = 0
        items: list[Entry] = []
        i = offset
        n = len(entries)
        while i < n and (not limit or len(items) < limit):
            e = entries[i]
            i += 1
            if pred is None or pred(e.slim):
                items.append(e)
        more = False
        if limit and i < n:
            if pred is None:
                more = True
            else:
                more = any(pred(e.slim) for e in entries[i:])
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if more:
            self._snapshots[(info.name, rv)] = entries
            self._snapshots.move_to_end((info.name, rv))
            while len(self._snapshots) > SNAPSHOT_CACHE:
                self._snapshots.popitem(last=False)
            meta["continue"] = _encode_continue(rv, i)
            if pred is None:
                meta["remainingItemCount"] = n - i
        if table:
            body = table_bytes(info, [e.obj for e in items], str(rv), meta, req.param("includeObject"), self._table_now())
        else:
            head = orjson.dumps({"kind": info.list_kind, "apiVersion": info.api_version, "metadata": meta})
            body = head[:-1] + b',"items":[' + b",".join(e.data for e in items) + b"]}"
        await self._send(conn, response_head(200, {}, len(body)) + body)
        return 200, len(body)


def _encode_continue(rv: int, offset: int) -> str:
    return base64.urlsafe_b64encode(orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "o": offset})).decode()


def _decode_continue(token: str) -> tuple[int, int]:
    try:
        data = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        return int(data["rv"]), int(data["o"])
    except (ValueError, KeyError, TypeError, binascii.Error, orjson.JSONDecodeError):
        raise HTTPError(400, "continue key is not valid: incorrect encoded start resourceVersion") from None
