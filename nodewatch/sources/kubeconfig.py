"""Finding and loading the cluster connection the way kubectl does, and a GET-only HTTP connection.

Why through the official client: it already implements kubeconfig merging (``KUBECONFIG`` with
several files), contexts, exec credential plugins (refreshed when their ``expirationTimestamp``
passes), client certificates, ``tokenFile``, ``insecure-skip-tls-verify`` and in-cluster config.
nodewatch adds what it lacks: a clear error for the user, a reload of the credentials on ``401``
(a rotated token file, an exec plugin without an expiry), an in-cluster token read again as soon as
the kubelet rotates it (``ServiceAccountToken``), and a connection that can only send GET
(nodewatch is strictly read-only; the object offers no other verb).

Credentials never leave this module but for two places: ``Connection.worker_request`` hands the
request's headers to the list worker's child process over its stdin (``sources/list_worker``), and
the kubeconfig's inline certificates and key are written where TLS can read them, in a directory of
the process's own that does not outlive it (``credential_files``).
Error messages name files, contexts and servers, never a token, a key or certificate data.
"""

from __future__ import annotations

import hashlib
import os
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import urllib3

from ..core.text import safe
from . import credential_files, tls_stream

USER_AGENT = "nodewatch/0.1 (read-only)"
RELOAD_MIN_INTERVAL = 2.0
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where the kubelet mounts a pod's ServiceAccount token and the cluster's CA (``token``, ``ca.crt``)."""
TOKEN_REREAD_SECONDS = 60.0
"""The token file is read again at least this often even when it looks unchanged (client-go's
cached file token source reads it every minute)."""


class KubeconfigError(Exception):
    """The cluster connection cannot be set up; the message is for the user."""


class ApiError(Exception):
    """A non-2xx answer from the API server (or no answer: status 0).

    ``permanent``: waiting will not help (credentials rejected after a reload, no permission, TLS
    verification failed, a name that does not resolve, a port that refuses): a one-shot command
    says so at once instead of waiting; the dashboard shows it and keeps trying."""

    def __init__(self, status: int, message: str, retry_after: float | None = None,
                 permanent: bool = False) -> None:
        super().__init__(f"HTTP {status}: {message}" if status else message)
        self.status = status
        self.message = message
        self.retry_after = retry_after
        self.permanent = permanent


@dataclass(frozen=True)
class Target:
    """Which cluster: for the header, the recording's source and the cert cache's key."""

    context: str
    server: str
    cluster: str
    in_cluster: bool = False
    user: str = ""
    """The kubeconfig user of the context (named in "credentials rejected")."""
    ca: str = "the system CAs"
    """Where the CA that verifies the server comes from (named in "TLS verification failed")."""

    @property
    def cluster_id(self) -> str:
        """A stable, file-name-safe key for this cluster (the server URL and cluster name)."""
        return hashlib.sha256(f"{self.cluster}\0{self.server}".encode()).hexdigest()[:16]

    @property
    def display(self) -> str:
        if self.in_cluster:
            return f"in-cluster @ {self.server}"
        return f"context {self.context} @ {self.server}"


def kubeconfig_paths(kubeconfig: str | None) -> list[str]:
    """The files kubectl would read: ``--kubeconfig``, else every ``KUBECONFIG`` entry, else ~/.kube/config."""
    if kubeconfig:
        path = os.path.expanduser(kubeconfig)
        if not os.path.isfile(path):
            raise KubeconfigError(f"kubeconfig {kubeconfig}: no such file")
        return [path]
    env = os.environ.get("KUBECONFIG")
    if env:
        paths = [os.path.expanduser(p) for p in env.split(os.pathsep) if p]
        return [p for p in paths if os.path.isfile(p)]
    default = os.path.expanduser("~/.kube/config")
    return [default] if os.path.isfile(default) else []


def _new_configuration() -> Any:
    from kubernetes.client import Configuration

    cfg = Configuration()
    cfg.retries = False  # nodewatch's reflector does its own backoff; no hidden retries
    cfg.connection_pool_maxsize = 256  # nodes, leases, CSRs + up to 100 node-scoped streams
    return cfg


def load_configuration(kubeconfig: str | None, context: str | None) -> tuple[Any, Target]:
    """(kubernetes.client.Configuration, Target). Raises KubeconfigError with a message for the user."""
    from kubernetes.config.config_exception import ConfigException

    paths = kubeconfig_paths(kubeconfig)
    if not paths:
        if os.environ.get("KUBERNETES_SERVICE_HOST") and not kubeconfig and context is None:
            return _in_cluster()
        looked = "KUBECONFIG=" + os.environ["KUBECONFIG"] if os.environ.get("KUBECONFIG") else "~/.kube/config"
        raise KubeconfigError(
            f"no kubeconfig found (looked at {looked}). Use --kubeconfig FILE or set KUBECONFIG, "
            "or run `nodewatch demo` to see a simulated fleet."
        )
    from kubernetes import config as kconfig

    joined = os.pathsep.join(paths)
    try:
        contexts, current = kconfig.list_kube_config_contexts(config_file=joined)
    except ConfigException as exc:
        raise KubeconfigError(f"kubeconfig {joined}: {_clean(exc)}") from None
    except Exception as exc:  # noqa: BLE001 - unreadable YAML and the like
        raise KubeconfigError(f"kubeconfig {joined}: {_unreadable(exc)}") from None
    names = [c.get("name") for c in contexts or []]
    chosen = context or (current or {}).get("name")
    if not chosen:
        raise KubeconfigError(f"kubeconfig {joined}: no current-context; choose one with --context "
                              f"({', '.join(map(str, names)) or 'none defined'})")
    entry = next((c for c in contexts or [] if c.get("name") == chosen), None)
    if entry is None:
        raise KubeconfigError(f"context {chosen!r} not found in {joined}; available: "
                              f"{', '.join(map(str, names)) or 'none'}")
    cfg = _new_configuration()
    try:
        kconfig.load_kube_config(config_file=joined, context=chosen, client_configuration=cfg,
                                 persist_config=False, temp_file_path=credential_files.directory())
    except ConfigException as exc:
        raise KubeconfigError(f"context {chosen!r}: {_clean(exc)}") from None
    except Exception as exc:  # noqa: BLE001 - an exec plugin that fails, a bad file path...
        raise KubeconfigError(f"context {chosen!r}: cannot load credentials ({type(exc).__name__}: "
                              f"{_clean(exc)})") from None
    ctx = entry.get("context") or {}
    cluster = str(ctx.get("cluster", ""))
    return cfg, Target(context=str(chosen), server=str(cfg.host), cluster=cluster, user=str(ctx.get("user", "")),
                       ca=_ca_source(paths, cluster, cfg))


class ServiceAccountToken:
    """The pod's ServiceAccount token, read again from its file whenever the file changes.

    Why: the kubelet rotates a projected token (at 80 % of its life, an hour by default) by writing
    a new file under the mount and swapping a symlink; the old token keeps working only until it
    expires. The official client's in-cluster loader re-reads the file once a minute of wall time
    (its ``datetime.now()``, not a clock one can inject), and nodewatch's 401 reload came after the
    server had refused a request. Here every request looks at the file's identity (``stat``: inode,
    mtime, size; a rotation changes all three) and reads it again when it changed, or when
    :data:`TOKEN_REREAD_SECONDS` passed (client-go's period, for a file rewritten in place). It is
    installed as the ``Configuration``'s ``refresh_api_key_hook``, which the client calls before
    it builds the headers of each request, in this process and for the list worker's child."""

    def __init__(self, path: str, clock: Any = time.monotonic) -> None:
        self.path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._read_at = 0.0
        self.token = ""
        self.reads = 0
        """How often the file was read (the tests count rotations by it)."""
        self._read(self._identity())

    def _identity(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _read(self, identity: tuple[int, int, int] | None) -> None:
        try:
            with open(self.path, encoding="utf-8") as f:
                token = f.read().strip()
        except (OSError, UnicodeDecodeError):
            token = ""
        self._read_at = self._clock()
        if token:  # a file caught mid-write or gone: keep the token that worked, look again next time
            self.token, self._seen = token, identity
            self.reads += 1

    def current(self) -> str:
        """The token, read again first if the file changed or was last read a minute ago."""
        with self._lock:
            identity = self._identity()
            if identity != self._seen or self._clock() - self._read_at >= TOKEN_REREAD_SECONDS:
                self._read(identity)
            return self.token

    def __call__(self, cfg: Any) -> None:
        """``Configuration.refresh_api_key_hook``: the current token into the request's headers."""
        cfg.api_key["BearerToken"] = f"Bearer {self.current()}"


def _in_cluster() -> tuple[Any, Target]:
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.config.incluster_config import InClusterConfigLoader

    cfg = _new_configuration()
    token_file = os.path.join(SERVICE_ACCOUNT_DIR, "token")
    try:
        InClusterConfigLoader(token_filename=token_file, cert_filename=os.path.join(SERVICE_ACCOUNT_DIR, "ca.crt"),
                              try_refresh_token=False).load_and_set(cfg)
    except ConfigException as exc:
        raise KubeconfigError(f"in-cluster config: {_clean(exc)}") from None
    cfg.refresh_api_key_hook = ServiceAccountToken(token_file)
    return cfg, Target(context="in-cluster", server=str(cfg.host), cluster="in-cluster", in_cluster=True,
                       user="the pod's service account", ca=f"CA file {cfg.ssl_ca_cert}")


def _ca_source(paths: list[str], cluster: str, cfg: Any) -> str:
    """Where the kubeconfig's CA for ``cluster`` comes from, in words (a file, or inline data)."""
    import yaml

    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                doc = yaml.safe_load(f)
        except (OSError, yaml.YAMLError, UnicodeDecodeError):
            continue
        for c in (doc or {}).get("clusters") or [] if isinstance(doc, dict) else []:
            if isinstance(c, dict) and c.get("name") == cluster and isinstance(c.get("cluster"), dict):
                body = c["cluster"]
                if body.get("certificate-authority"):
                    return f"CA file {body['certificate-authority']}"
                if body.get("certificate-authority-data"):
                    return f"certificate-authority-data of cluster {cluster!r} in {path}"
                return "the system CAs"
    return f"CA file {cfg.ssl_ca_cert}" if getattr(cfg, "ssl_ca_cert", None) else "the system CAs"


def _unreadable(exc: BaseException) -> str:
    """What is wrong with a kubeconfig the client could not read, for the user: where its YAML
    breaks (line, column, and the parser's words, never the file's text around it: it may hold a
    token), or that it is YAML but not a kubeconfig (a list, a string: the client's own error is a
    ``TypeError`` or an ``AttributeError`` from deep inside)."""
    import yaml

    if isinstance(exc, yaml.YAMLError):
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or getattr(exc, "reason", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        if isinstance(exc, yaml.reader.ReaderError):
            where = f"byte {exc.position}"
        detail = ": ".join(str(x) for x in (where, problem) if x)
        return f"not valid YAML ({safe(detail)})" if detail else "not valid YAML"
    if isinstance(exc, (TypeError, AttributeError, KeyError, ValueError)):
        return "not a kubeconfig (YAML, but not the clusters, contexts and users a kubeconfig lists)"
    return f"cannot read it ({type(exc).__name__})"


def _clean(exc: BaseException) -> str:
    """An exception's text without anything that could be a credential."""
    text = str(exc).replace("\n", " ")[:300]
    for marker in ("token", "Bearer", "BEGIN", "client-key", "password"):
        if marker.lower() in text.lower():
            return f"{type(exc).__name__} (details withheld: they may contain credentials)"
    return text


def _url_and_headers(client: Any, path: str, query: dict[str, Any] | None) -> tuple[str, dict[str, str]]:
    """The URL of a GET of ``path`` and its headers, credentials included."""
    params = [(k, _q(v)) for k, v in (query or {}).items() if v is not None]
    headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
    _method, url, hdrs, _body, _post = client.param_serialize(
        "GET", path, header_params=headers, auth_settings=["BearerToken"])
    if params:
        url = f"{url}?{urlencode(params)}"
    return url, hdrs


class Connection:
    """GET requests to the API server, with credential reload on 401. There is no other verb."""

    def __init__(self, kubeconfig: str | None = None, context: str | None = None) -> None:
        self._kubeconfig = kubeconfig
        self._context = context
        cfg, self.target = load_configuration(kubeconfig, context)
        self._lock = threading.Lock()
        self._client = self._make_client(cfg)
        self._last_reload = 0.0
        self.reloads = 0
        self.failure: ApiError | None = None
        """The last permanent failure (``ApiError.permanent``) of a request; None after a success."""
        self.requests = 0
        """Requests sent to the API server (its cost, for ``--metrics``: nodewatch_api_requests_total)."""
        self.received_bytes = 0
        """Response bytes read by this process (``count_received``; a list read by a child process
        in ``list_worker`` is not counted)."""
        self._count_lock = threading.Lock()

    @staticmethod
    def _make_client(cfg: Any) -> Any:
        from kubernetes.client import ApiClient

        if not cfg.verify_ssl:
            # the kubeconfig asked for it; say it once on the state, not on every request to the terminal
            import warnings

            warnings.filterwarnings("ignore", category=urllib3.exceptions.InsecureRequestWarning)
        client = ApiClient(configuration=cfg)
        client.user_agent = USER_AGENT
        return client

    @property
    def verify_tls(self) -> bool:
        return bool(self._client.configuration.verify_ssl)

    def reload_credentials(self) -> bool:
        """Re-read the kubeconfig (rotated token file, exec plugin run again). Rate-limited."""
        with self._lock:
            if time.monotonic() - self._last_reload < RELOAD_MIN_INTERVAL:
                return False
            self._last_reload = time.monotonic()
            try:
                if self.target.in_cluster:
                    cfg, _ = _in_cluster()
                else:
                    cfg, _ = load_configuration(self._kubeconfig, self._context)
            except KubeconfigError:
                return False
            old = self._client
            self._client = self._make_client(cfg)
            self.reloads += 1
        try:
            old.close()
        except Exception:  # noqa: BLE001
            pass
        return True

    def get(self, path: str, query: dict[str, Any] | None = None, *,
            timeout: tuple[float, float] = (10.0, 60.0), stream: bool = False) -> Any:
        """GET ``path``; the body is not read (stream it). Raises ApiError for non-2xx or no answer.
        ``stream``: a watch, read off its socket where it can be (``tls_stream``), else a urllib3
        response as any other GET.

        A 401 reloads the credentials (a rotated token) and asks once more; a 401 after that is
        "credentials rejected", permanent. Permanent failures are kept in ``failure``."""
        try:
            client = self._client
            try:
                resp = self._get(client, path, query, timeout, stream)
            except ApiError as exc:
                if exc.status != 401 or not (self.reload_credentials() or self._client is not client):
                    raise
                resp = self._get(self._client, path, query, timeout, stream)
        except ApiError as exc:
            if exc.status == 401:
                exc = ApiError(401, f"credentials rejected by {self.target.server} for user "
                                    f"{self.target.user or '?'} (context {self.target.context}): {exc.message}",
                               permanent=True)
            if exc.permanent:
                self.failure = exc
            raise exc from None
        self.failure = None
        return resp

    def worker_request(self, path: str, query: dict[str, Any] | None) -> tuple[str, dict[str, str], dict[str, Any]] | None:
        """(url, headers, pool settings) of a GET for ``sources/list_worker``'s child process, which
        opens its own connection configured like this one: the same TLS verification, CA and client
        certificate, the same credentials (as headers: they go to the child over a pipe). None
        where the child could not do the same: a proxy between here and the server."""
        client = self._client
        pm = client.rest_client.pool_manager
        if type(pm) is not urllib3.PoolManager:
            return None  # a ProxyManager, a SOCKS proxy: not reproduced in the child
        url, hdrs = _url_and_headers(client, path, query)
        return url, dict(hdrs), dict(pm.connection_pool_kw)

    def count_received(self, n: int) -> None:
        """``n`` more bytes of response read (the readers of bodies call it: one lock, per chunk)."""
        with self._count_lock:
            self.received_bytes += n

    def _get(self, client: Any, path: str, query: dict[str, Any] | None,
             timeout: tuple[float, float], stream: bool = False) -> Any:
        with self._count_lock:
            self.requests += 1
        try:
            url, hdrs = _url_and_headers(client, path, query)
            if stream and tls_stream.possible(client, url):
                resp = tls_stream.open_stream(client, url, hdrs, timeout)
            else:
                resp = client.rest_client.pool_manager.request(
                    "GET", url, headers=hdrs, preload_content=False, retries=False,
                    timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1]))
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise self._connect_error(exc) from None
        if not 200 <= resp.status <= 299:
            raise _api_error(resp)
        return resp

    def _connect_error(self, exc: BaseException) -> ApiError:
        """No answer: say what happened, to which address, and whether waiting can help."""
        server = self.target.server
        if _caused_by(exc, ssl.SSLCertVerificationError) or isinstance(exc, urllib3.exceptions.SSLError):
            reason = getattr(_caused_by(exc, ssl.SSLError), "verify_message", None) or _net_error(exc)
            return ApiError(0, f"TLS verification of {server} failed (certificate verify failed: {reason}); "
                               f"verified with {self.target.ca}",
                            permanent=True)
        if isinstance(exc, urllib3.exceptions.NameResolutionError) or _caused_by(exc, socket.gaierror):
            return ApiError(0, f"cannot resolve the API server's host name ({server})", permanent=True)
        if _caused_by(exc, ConnectionRefusedError) or "Connection refused" in str(exc):
            return ApiError(0, f"connection refused by {server}", permanent=True)
        if isinstance(exc, urllib3.exceptions.HTTPError):
            return ApiError(0, _net_error(exc))
        return ApiError(0, f"{type(exc).__name__}: {getattr(exc, 'strerror', None) or exc}")

    def get_json(self, path: str, query: dict[str, Any] | None = None, *,
                 timeout: tuple[float, float] = (10.0, 60.0)) -> Any:
        import orjson

        resp = self.get(path, query, timeout=timeout)
        try:
            data = resp.read()
            self.count_received(len(data))
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ApiError(0, _net_error(exc)) from None
        finally:
            resp.release_conn()
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            raise ApiError(0, f"GET {path}: the answer is not JSON ({len(data)} bytes)") from None

    def close(self) -> None:
        try:
            self._client.close()
        except Exception:  # noqa: BLE001
            pass


def _q(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _caused_by(exc: BaseException, kind: type) -> Any:
    """``exc`` or the first of its causes / contexts / ``reason`` that is a ``kind``; else None."""
    seen: set[int] = set()
    todo: list[Any] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen or not isinstance(e, BaseException):
            continue
        seen.add(id(e))
        if isinstance(e, kind):
            return e
        todo += [e.__cause__, e.__context__, getattr(e, "reason", None)] + [a for a in e.args if isinstance(a, BaseException)]
    return None


def _net_error(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    if reason is not None and reason is not exc:
        return _net_error(reason) if isinstance(reason, BaseException) else str(reason)[:200]
    name = type(exc).__name__
    text = str(exc)
    if "Connection refused" in text:
        return "connection refused"
    if "timed out" in text.lower():
        return f"{name}: timed out"
    return f"{name}: {text[:200]}"


def _api_error(resp: Any) -> ApiError:
    try:
        body = resp.read(64 * 1024)
    except Exception:  # noqa: BLE001
        body = b""
    finally:
        resp.release_conn()
    return api_error(resp.status, resp.reason, body, resp.headers.get("Retry-After"))


def api_error(status: int, reason: str | None, body: bytes, retry_after_header: str | None) -> ApiError:
    """The ApiError of a non-2xx answer: the Status object's message, else the HTTP reason."""
    import orjson

    message = ""
    try:
        obj = orjson.loads(body)
        if isinstance(obj, dict):
            message = str(obj.get("message") or obj.get("reason") or "")[:300]
    except orjson.JSONDecodeError:
        message = ""
    if not message:
        message = reason or "error"
    if status == 403:
        return ApiError(403, message, permanent=True)
    retry_after = None
    if retry_after_header:
        try:
            retry_after = float(retry_after_header)
        except ValueError:
            retry_after = None
    return ApiError(status, message, retry_after)
