"""A small HTTP/1.1 layer over asyncio streams: request parsing, responses, chunked bodies, Status.

Hand-written because the simulated API server needs things a framework hides: keep-alive with
long-lived chunked watch streams, control over every write (fault injection stalls, trickles, cuts
lines and resets connections), and speed (one batch of pre-serialized watch lines per chunk).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import parse_qs, unquote, urlsplit

import orjson

MAX_BODY = 8 * 1024 * 1024


class BadRequest(Exception):
    """The request cannot be parsed; answer 400 and close the connection."""


@dataclass
class Request:
    method: str
    target: str
    """The raw request target (path and query), as logged."""
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    version: str
    body: bytes = b""

    @property
    def keep_alive(self) -> bool:
        conn = self.headers.get("connection", "").lower()
        if self.version == "HTTP/1.0":
            return conn == "keep-alive"
        return conn != "close"

    def param(self, name: str, default: str = "") -> str:
        return self.query.get(name, default)

    def flag(self, name: str) -> bool:
        return self.query.get(name, "").lower() in ("true", "1")


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    """Read one request; None on a clean EOF between requests."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if not e.partial.strip():
            return None
        raise BadRequest("incomplete request head") from None
    except asyncio.LimitOverrunError:
        raise BadRequest("request head too large") from None
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, version = lines[0].split(" ", 2)
    except ValueError:
        raise BadRequest(f"malformed request line {lines[0][:80]!r}") from None
    if not version.startswith("HTTP/1."):
        raise BadRequest(f"unsupported protocol {version[:20]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise BadRequest("malformed header line")
        key = name.strip().lower()
        value = value.strip()
        headers[key] = f"{headers[key]},{value}" if key in headers else value
    body = b""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = await _read_chunked(reader)
    elif headers.get("content-length"):
        try:
            length = int(headers["content-length"])
        except ValueError:
            raise BadRequest("bad Content-Length") from None
        if length < 0 or length > MAX_BODY:
            raise BadRequest("request body too large")
        body = await reader.readexactly(length)
    split = urlsplit(target)
    query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
    return Request(method.upper(), target, unquote(split.path), query, headers, version, body)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        size_line = await reader.readline()
        try:
            size = int(size_line.split(b";")[0].strip(), 16)
        except ValueError:
            raise BadRequest("bad chunk size") from None
        if size == 0:
            while (await reader.readline()).strip():
                pass
            return b"".join(parts)
        total += size
        if total > MAX_BODY:
            raise BadRequest("request body too large")
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


def response_head(code: int, headers: dict[str, str] | None = None, length: int | None = None) -> bytes:
    """Status line and headers; chunked transfer encoding when ``length`` is None."""
    try:
        phrase = HTTPStatus(code).phrase
    except ValueError:
        phrase = "Unknown"
    out = [f"HTTP/1.1 {code} {phrase}"]
    hdrs = {"Content-Type": "application/json", "Cache-Control": "no-cache, private"}
    hdrs.update(headers or {})
    for k, v in hdrs.items():
        out.append(f"{k}: {v}")
    out.append(f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked")
    return ("\r\n".join(out) + "\r\n\r\n").encode("latin-1")


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


LAST_CHUNK = b"0\r\n\r\n"

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    410: "Expired",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def status_object(code: int, message: str, reason: str | None = None, details: dict | None = None) -> dict:
    """A ``Status`` object (kind Status, apiVersion v1), as the real API server sends for errors."""
    obj: dict = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason or REASONS.get(code, ""),
        "code": code,
    }
    if details:
        obj["details"] = details
    return obj


def status_bytes(code: int, message: str, reason: str | None = None, details: dict | None = None) -> bytes:
    return orjson.dumps(status_object(code, message, reason, details))
