"""Recording format v1: the watch events nodewatch received, one JSON object per line.

Why a plain JSON Lines file: it can be read with ``zcat | jq``, a crash loses at most the last
flushed second (no index or footer to write at the end), and replay needs nothing but this file.

::

    {"nodewatch_recording": 1, "started_at": "2026-...Z", "source": {...}, "settings": {...}}
    {"t": 1764410000.123, "resource": "leases", "type": "MODIFIED", "object": {...}}
    {"t": 1764410000.200, "resource": "nodes", "type": "ADDED", "object": {...}, "list": true}
    {"t": 1764410003.000, "health": {"resource": "leases", "connected": false, "last_error": "..."}}

``"list": true`` marks items of an initial list or relist (their renewals happened at an unknown
earlier time). ``health`` lines record when a watch stream went down or came back, so a replay can
show when the dashboard was blind. A ``settings`` line (``{"t": ..., "settings": {...}}``) carries
settings learned after the header was written (the API server version). Readers ignore fields they do not know.

Several clusters in one file (``watch``/``record`` with several ``--context``, ``--all-contexts`` or
``--fleet``): the header has a ``clusters`` list (each cluster's ``name``, ``context`` and
``settings``), and every event, health, certificate and settings line says whose it is::

    {"nodewatch_recording": 1, ..., "clusters": [{"name": "prod-eu", "context": "prod-eu", "settings": {...}}, ...]}
    {"t": 1764410000.123, "cluster": "prod-eu", "resource": "leases", "type": "MODIFIED", "object": {...}}

A reader that does not know ``cluster`` (an older nodewatch) replays such a file as one cluster.

What is never written: container ``env`` values, ``args`` and ``command``, the
``last-applied-configuration`` annotation and ``managedFields`` (they can hold secrets and are
large), except, on a Lease, the manager, operation and time of its kubelet's writes (no field
names): a listed renewal is timed by them. Of a Node and a Lease only what nodewatch reads is
written (``node_as_read``, ``lease_as_read``: not a Node's image list, IDs, annotations, not a
Lease's uid and owner). nodewatch never reads Secrets, and credentials never reach this module.
"""

from __future__ import annotations

import gzip
import threading
import zlib
from dataclasses import dataclass
from typing import IO, Any, Callable, Iterator

import orjson

from ..core.clock import Clock, SystemClock
from ..core.objects import KUBELET_MANAGERS
from ..core.settings import Settings
from ..core.timeutil import format_time, time_problem, valid_time
from ..core.views import EVENT_TYPES, RESOURCES
from . import writer_lock
from .line_stream import SegmentStream
from .recording_format import FORMAT_VERSION, HEADER_KEY, RecordingError

FLUSH_INTERVAL = 0.5
"""Seconds between flushes; the contract is "at least once a second" (the flusher looks twice per
interval, so a line waits at most 1.5 intervals)."""
MAX_LINE_BYTES = 16 * 1024 * 1024
"""A longer line is refused (reported and skipped), so a corrupt file cannot exhaust memory."""
HEALTH_FIELDS = ("connected", "synced", "last_activity", "down_since", "relists", "last_error", "forbidden")
HEALTH_TIMES = ("last_activity", "down_since")
MAX_COUNT = 2**53
"""A count read from a file (relists) beyond this is not a count."""


# --- sanitizing -----------------------------------------------------------------------------------

_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
_LAST_APPLIED = "last-applied-configuration"


_NODE_READ: dict[str, tuple[str, ...] | None] = {
    "apiVersion": None,
    "kind": None,
    "metadata": ("name", "namespace", "labels", "resourceVersion", "creationTimestamp"),
    "spec": ("taints", "unschedulable"),
    "status": ("conditions", "nodeInfo", "addresses", "capacity", "allocatable", "daemonEndpoints"),
}
"""What any reader of a Node reads (``core/wire.py``'s ``_Node``, ``objects.node_from_dict``): its
top-level keys, and of each mapping the keys kept (None: all of it)."""
_NODE_INFO_READ = ("kubeletVersion", "containerRuntimeVersion", "kernelVersion", "osImage")


_LEASE_READ: dict[str, tuple[str, ...] | None] = {
    "apiVersion": None,
    "kind": None,
    "metadata": ("name", "namespace", "resourceVersion", "managedFields"),
    "spec": ("holderIdentity", "renewTime", "leaseDurationSeconds"),
}
"""What any reader of a Lease reads (``core/wire.py``'s ``_Lease``, ``objects.lease_from_dict``); of
its managedFields, only its kubelet's writes are kept (``_kubelet_writes``)."""


def _as_read(obj: dict, read: dict[str, tuple[str, ...] | None]) -> dict:
    """``obj`` with only the keys ``read`` names, in its own key order; a part that is not a mapping
    where one is expected is kept as it is (a reader meets the same oddity)."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        if key not in read:
            continue
        keep = read[key]
        if keep is not None and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k in keep}
        out[key] = value
    return out


def node_as_read(obj: Any) -> Any:
    """A Node with only what nodewatch reads of it (``_NODE_READ``).

    Why: the rest of a Node (its image list, uid, providerID, pod CIDRs, annotations, nodeInfo's
    machine, system and boot IDs) is most of its JSON and most of its entropy, and nodewatch never
    reads it. At 65,000 nodes a flight-recorder keyframe's Nodes compressed to 188 bytes each, 64
    without it: 1.4 of the 9.4 bytes a renewal all-in (docs/recording-format.md). A production
    Node with its image list is several times the benchmark's."""
    if not isinstance(obj, dict):
        return obj
    out = _as_read(obj, _NODE_READ)
    status = out.get("status")
    if isinstance(status, dict) and isinstance(status.get("nodeInfo"), dict):  # (status is a copy)
        status["nodeInfo"] = {k: v for k, v in status["nodeInfo"].items() if k in _NODE_INFO_READ}
    return out


def lease_as_read(obj: Any) -> Any:
    """A Lease with only what nodewatch reads of it (``_LEASE_READ``): not its uid, its owner
    reference (the Node's uid), its creation time. Two random UIDs were most of what a
    flight-recorder keyframe kept of each Lease."""
    if not isinstance(obj, dict):
        return obj
    out = _as_read(obj, _LEASE_READ)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        kept = _kubelet_writes(meta.pop("managedFields", None), obj.get("spec"))
        if kept:
            meta["managedFields"] = kept
    return out


def sanitize(obj: Any, resource: str) -> Any:
    """A copy of ``obj`` (of the watched ``resource``) without secrets-prone fields, and of a Node or
    a Lease only what nodewatch reads (``node_as_read``, ``lease_as_read``: a Lease's kubelet writes
    are the only managedFields kept); the parts left unchanged are shared, not copied."""
    if not isinstance(obj, dict):
        return obj
    if resource == "nodes":
        return node_as_read(obj)
    if resource == "leases":
        return lease_as_read(obj)
    out = dict(obj)
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        m = dict(meta)
        m.pop("managedFields", None)
        ann = m.get("annotations")
        if isinstance(ann, dict) and any(_LAST_APPLIED in str(k) for k in ann):
            m["annotations"] = {k: v for k, v in ann.items() if _LAST_APPLIED not in str(k)}
        out["metadata"] = m
    spec = obj.get("spec")
    if isinstance(spec, dict) and (isinstance(spec.get("containers"), list) or isinstance(spec.get("initContainers"), list)
                                   or isinstance(spec.get("ephemeralContainers"), list)):  # _CONTAINER_LISTS
        s = dict(spec)
        for key in _CONTAINER_LISTS:
            containers = s.get(key)
            if isinstance(containers, list):
                s[key] = [_sanitize_container(c) for c in containers]
        out["spec"] = s
    return out


def _kubelet_writes(managed: Any, spec: Any) -> list[dict] | None:
    """A Lease's kubelet write times (``objects.kubelet_write_time`` reads them), nothing else."""
    if not isinstance(managed, list) or not isinstance(spec, dict) or "holderIdentity" not in spec:
        return None
    holder = spec.get("holderIdentity")
    return [{"manager": e.get("manager"), "operation": e.get("operation"), "time": e.get("time")}
            for e in managed
            if isinstance(e, dict) and e.get("operation") == "Update"
            and (e.get("manager") in KUBELET_MANAGERS or e.get("manager") == holder)]


def _sanitize_container(c: Any) -> Any:
    if not isinstance(c, dict):
        return c
    c = dict(c)
    c.pop("args", None)
    c.pop("command", None)
    env = c.get("env")
    if isinstance(env, list):
        c["env"] = [{"name": e.get("name")} if isinstance(e, dict) else None for e in env]
    return c


# --- writing -------------------------------------------------------------------------------------


def settings_payload(settings: Settings) -> dict[str, Any]:
    """Settings as a recording writes them (the header, a cluster of the header, a settings line)."""
    return {**settings.as_dict(), "overridden": sorted(settings.overridden)}


class FlushedWriter:
    """What both recording formats share: a writer flushed at least once a ``FLUSH_INTERVAL`` on
    its clock (by the writers, and by a flusher thread when nothing more comes), whose first failed
    write or flush (a full disk) is kept in ``error`` and raised to every later writer, the
    flusher then stopping. A subclass has ``_lock``, ``_closed``, ``_stop``, ``error`` and
    ``_flush_if_due`` (its own flush, when due)."""

    _lock: threading.Lock
    _closed: bool
    _stop: threading.Event
    error: OSError | None

    def _flush_if_due(self) -> None:
        raise NotImplementedError

    def _flush_locked(self) -> None:
        raise NotImplementedError

    def flush(self) -> None:
        with self._lock:
            if self.error is not None:
                raise self.error
            if not self._closed:
                try:
                    self._flush_locked()
                except OSError as exc:
                    self.error = exc
                    raise

    def _flush_loop(self) -> None:
        """Lines written and then nothing more: flushed all the same, once due on the clock. A
        failed flush is kept in ``error`` for the writers (the next write raises it)."""
        while not self._stop.wait(FLUSH_INTERVAL / 2):
            with self._lock:
                if self.error is not None:
                    return
                try:
                    self._flush_if_due()
                except OSError as exc:
                    self.error = exc
                    return


class Recorder(FlushedWriter):
    """Appends received events to a v1 recording; thread-safe; flushed at least once a second."""

    def __init__(self, path: str, source: dict, settings: Settings, started_at: float | None = None,
                 clock: Clock | None = None, clusters: list[dict[str, Any]] | None = None) -> None:
        """``started_at``: when the recorded time begins (virtual time for the demo); None: the time
        of the first line written, so a recording in virtual time gets a virtual header.
        ``clock``: the wall clock that paces the flushes (tests move a ManualClock).
        ``clusters``: several clusters in one file (see the module docstring); write each one's
        lines through ``for_cluster``."""
        self.path = path
        self._clock: Clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._closed = False
        self.error: OSError | None = None
        """The write or flush that failed (a full disk): every later write raises it again, and
        the flusher stops (it used to die with a traceback and leave the writers to find out)."""
        self.lines = 0
        raw = open(path, "wb")  # noqa: SIM115 - closed in close()
        writer_lock.hold(raw)
        self._raw = raw
        self._gz: gzip.GzipFile | None = None
        self._out: IO[bytes] = raw
        if path.endswith(".gz"):
            self._gz = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0)
            self._out = self._gz
        self._header = {
            HEADER_KEY: FORMAT_VERSION,
            "started_at": None,
            "source": source,
            "settings": settings_payload(settings),
        }
        if clusters is not None:
            self._header["clusters"] = clusters
        self._last_flush = self._clock.now()
        if started_at is not None:
            self._write_header(started_at)
        self._stop = threading.Event()
        self._flusher = threading.Thread(target=self._flush_loop, name="recorder-flush", daemon=True)
        self._flusher.start()

    def _write_header(self, t: float) -> None:
        if self._header is None:
            return
        self._header["started_at"] = format_time(t, micro=True)
        self._out.write(orjson.dumps(self._header, default=str) + b"\n")
        self._header = None
        self._flush_locked()

    def for_cluster(self, cluster: str) -> "ClusterRecorder":
        """The writer of one cluster's lines (same methods as this one)."""
        return ClusterRecorder(self, cluster)

    def write(self, resource: str, etype: str, obj: dict | None, t: float, listing: bool = False,
              cluster: str | None = None) -> None:
        entry: dict[str, Any] = _line(t, cluster)
        entry.update(resource=resource, type=etype, object=sanitize(obj, resource))
        if listing:
            entry["list"] = True
        self._write_line(orjson.dumps(entry, default=str), t)

    def write_health(self, resource: str, t: float, cluster: str | None = None, **health: Any) -> None:
        """A watch-health change (stream down/up, relist, forbidden) so a replay can show blindness."""
        h = {"resource": resource}
        h.update({k: v for k, v in health.items() if k in HEALTH_FIELDS})
        self._write_line(orjson.dumps({**_line(t, cluster), "health": h}, default=str), t)

    def write_cert(self, node: str, not_after: float, source: str, t: float, cluster: str | None = None) -> None:
        """A kubelet certificate NotAfter learned outside the watch streams (the local cache, a TLS
        probe, kubelet metrics), so a replay knows it too."""
        self._write_line(orjson.dumps({**_line(t, cluster), "cert": {"node": node, "not_after": not_after,
                                                                      "source": source}}, default=str), t)

    def write_settings(self, t: float, settings: Settings, cluster: str | None = None) -> None:
        """Settings learned after the header was written (the API server version arrives later)."""
        self._write_line(orjson.dumps({**_line(t, cluster), "settings": settings_payload(settings)},
                                      default=str), t)

    def _write_line(self, data: bytes, t: float) -> None:
        with self._lock:
            if self._closed:
                return
            if self.error is not None:
                raise self.error
            try:
                if self._header is not None:
                    self._write_header(t)
                self._out.write(data + b"\n")
                self.lines += 1
                self._flush_if_due()
            except OSError as exc:
                self.error = exc
                raise

    def _flush_if_due(self) -> None:
        """Flush when the last flush is ``FLUSH_INTERVAL`` old on the clock (or the clock went back)."""
        if not self._closed and abs(self._clock.now() - self._last_flush) >= FLUSH_INTERVAL:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if self._gz is not None:
            self._gz.flush(zlib.Z_SYNC_FLUSH)  # a sync point: readable up to here after a crash
        self._raw.flush()
        self._last_flush = self._clock.now()

    def close(self) -> None:
        """Write what is buffered and close; after a failed write (a full disk), close what can be
        closed and write nothing more: what reached the file stays readable up to its last line."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._stop.set()
            if self.error is not None:
                # Not one more byte: a write after a failed one could land after a gap.
                if self._gz is not None:
                    self._gz.fileobj = None  # its close then writes nothing
                try:
                    self._raw.raw.close()  # the fd, without the buffer
                except (OSError, ValueError, AttributeError):
                    pass
                return
            try:
                if self._header is not None:
                    self._write_header(self._clock.now())
                if self._gz is not None:
                    self._gz.close()
            except OSError:
                pass
            try:
                self._raw.close()
            except (OSError, ValueError):
                pass

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_watch_lines(write: Callable[[str, Any], None], block: bytes | memoryview) -> None:
    """Each event line of a watch read, decoded, through ``write(etype, object)``: how a recorder
    without a way of its own records the Lease watch's reads that the state takes as structs
    (``LiveSource._lane``). A line that does not decode is left out (the stream's own decode read
    it: the state has it)."""
    for line in bytes(block).split(b"\n"):
        if not line.strip():
            continue
        try:
            d = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(d, dict) and isinstance(d.get("type"), str):
            write(d["type"], d.get("object"))


def _line(t: float, cluster: str | None) -> dict[str, Any]:
    """The start of every line: its time first (``segments.py`` reads it cheaply), then its cluster."""
    return {"t": t} if cluster is None else {"t": t, "cluster": cluster}


def write_lease_watch(recorder: Any, block: bytes | memoryview, events: list[Any], t: float,
                      cluster: str | None = None) -> None:
    """A read of the synced Lease watch, which the state took as structs, into ``recorder``: its
    ``write_lease_watch`` where it has one (the flight recorder's matches renewals on their bytes),
    else each line decoded and written (``write_watch_lines``)."""
    kw = {} if cluster is None else {"cluster": cluster}  # (a one-cluster recorder takes no cluster)
    own = getattr(recorder, "write_lease_watch", None)
    if own is not None:
        own(block, events, t, **kw)
    else:
        write_watch_lines(lambda etype, obj: recorder.write("leases", etype, obj, t, **kw), block)


class ClusterRecorder:
    """One cluster's writer into a shared ``Recorder``: what a ``LiveSource`` of several clusters
    records through, so its lines say their cluster without the source knowing of the others."""

    def __init__(self, recorder: Recorder, cluster: str) -> None:
        self.recorder = recorder
        self.cluster = cluster

    def write(self, resource: str, etype: str, obj: dict | None, t: float, listing: bool = False) -> None:
        self.recorder.write(resource, etype, obj, t, listing, cluster=self.cluster)

    def write_health(self, resource: str, t: float, **health: Any) -> None:
        self.recorder.write_health(resource, t, cluster=self.cluster, **health)

    def write_lease_watch(self, block: bytes | memoryview, events: list[Any], t: float) -> None:
        """A read of the Lease watch (``LiveSource._lane``): the shared recorder's own way if it has one."""
        write_lease_watch(self.recorder, block, events, t, self.cluster)

    def write_cert(self, node: str, not_after: float, source: str, t: float) -> None:
        self.recorder.write_cert(node, not_after, source, t, cluster=self.cluster)

    def write_settings(self, t: float, settings: Settings) -> None:
        self.recorder.write_settings(t, settings, cluster=self.cluster)

    def close(self) -> None:
        """The shared recorder is closed by its owner, once every cluster has stopped."""


# --- reading -------------------------------------------------------------------------------------


@dataclass(slots=True)
class Entry:
    """One usable line of a recording."""

    line: int
    t: float | None
    resource: str
    etype: str
    obj: Any
    listing: bool = False
    health: dict | None = None
    cluster: str | None = None
    """The line's cluster, in a recording of several (None: the only one)."""


def entry_line(e: Entry) -> bytes:
    """An event or watch-health entry of one cluster as the v1 line that reads back as it (what a
    kubectl log's entries are written as: ``recording export``, a replay's spool)."""
    if e.etype == "HEALTH":
        return orjson.dumps({"t": e.t, "health": {"resource": e.resource, **(e.health or {})}}, default=str) + b"\n"
    d: dict[str, Any] = {"t": e.t, "resource": e.resource, "type": e.etype, "object": e.obj}
    if e.listing:
        d["list"] = True
    return orjson.dumps(d) + b"\n"


def iter_lines(stream: IO[bytes], problems: list[str]) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes) for each line; a line longer than ``MAX_LINE_BYTES`` is skipped, a
    truncated gzip ends the iteration, each with a problem. The lines of a directory or a columnar
    file (``line_stream.SegmentStream``) are taken as they are made, not through the buffered stream."""
    raw = getattr(stream, "raw", None)
    made = raw.lines() if isinstance(raw, SegmentStream) else None
    n = 0
    try:
        for line in made if made is not None else _read_lines(stream):
            if not line:
                continue
            n += 1
            if len(line) > MAX_LINE_BYTES + 1 or (len(line) > MAX_LINE_BYTES and not line.endswith(b"\n")):
                problems.append(f"line {n}: longer than {MAX_LINE_BYTES} bytes, skipped")
                continue
            yield n, line
    except (EOFError, zlib.error, gzip.BadGzipFile, OSError) as exc:
        if not writer_lock.being_written(stream):  # (still being written: its end is the present)
            problems.append(f"after line {n}: the file ends abruptly ({_short(exc)}); replaying what was read")
        return
    problems.extend(getattr(raw, "problems", ()))  # a columnar file's torn tail


def _read_lines(stream: IO[bytes]) -> Iterator[bytes]:
    """The lines of a stream, each at most ``MAX_LINE_BYTES + 1`` long: of a longer one, its head
    only (the rest is read past, not kept)."""
    while True:
        line = stream.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        yield line
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):  # the rest of a giant line
                line = stream.readline(MAX_LINE_BYTES)


def parse_header(line: bytes) -> dict:
    """The header dict; RecordingError when the line is not a v1 header."""
    try:
        header = orjson.loads(line)
    except orjson.JSONDecodeError:
        raise RecordingError("line 1: not a nodewatch recording header (not JSON)") from None
    if not isinstance(header, dict) or HEADER_KEY not in header:
        raise RecordingError(f"line 1: not a nodewatch recording header (no {HEADER_KEY!r} field)")
    version = header.get(HEADER_KEY)
    if version != FORMAT_VERSION:
        raise RecordingError(
            f"recording format version {version!r} is not supported (this nodewatch reads version {FORMAT_VERSION})"
        )
    return header


def parse_line(n: int, line: bytes, problems: list[str]) -> Entry | None:
    """One event or health line; None (with a problem) when it is unusable."""
    stripped = line.strip()
    if not stripped:
        return None
    try:
        d = orjson.loads(stripped)
    except orjson.JSONDecodeError:
        cut = stripped[:1] == b"{" and stripped[-1:] != b"}"
        what = "truncated JSON" if cut or not line.endswith(b"\n") else "malformed JSON"
        problems.append(f"line {n}: {what}, skipped")
        return None
    if not isinstance(d, dict):
        problems.append(f"line {n}: not a JSON object, skipped")
        return None
    raw_t = d.get("t")
    t = valid_time(raw_t)
    if t is None:
        why = "missing" if raw_t is None else time_problem(raw_t)
        problems.append(f"line {n}: no valid time \"t\" ({why}), skipped")
        return None
    cluster = d.get("cluster")
    cluster = cluster if isinstance(cluster, str) and cluster else None
    late_settings = d.get("settings")
    if isinstance(late_settings, dict):
        return Entry(n, t, "", "SETTINGS", None, False, late_settings, cluster)
    cert = d.get("cert")
    if isinstance(cert, dict):
        node, not_after = cert.get("node"), valid_time(cert.get("not_after"))
        if not isinstance(node, str) or not_after is None:
            problems.append(f"line {n}: certificate line without node and a valid not_after, skipped")
            return None
        return Entry(n, t, "", "CERT", None, False,
                     {"node": node, "not_after": not_after, "source": str(cert.get("source") or "recorded")}, cluster)
    health = d.get("health")
    if isinstance(health, dict):
        resource = health.get("resource")
        if resource not in RESOURCES:
            problems.append(f"line {n}: health of unknown resource {str(resource)[:40]!r}, skipped")
            return None
        fields = {k: v for k, v in health.items() if k in HEALTH_FIELDS}
        for k in HEALTH_TIMES:
            if fields.get(k) is not None and valid_time(fields[k]) is None:
                problems.append(f"line {n}: health {k} {time_problem(fields[k])}, ignored")
                fields[k] = None
        relists = fields.get("relists")
        if relists is not None and (isinstance(relists, bool) or not isinstance(relists, int)
                                    or not 0 <= relists <= MAX_COUNT):
            problems.append(f"line {n}: health relists {str(relists)[:24]} is not a count, ignored")
            fields.pop("relists")
        return Entry(n, t, resource, "HEALTH", None, False, fields, cluster)
    resource, etype = d.get("resource"), d.get("type")
    if resource not in RESOURCES:
        problems.append(f"line {n}: unknown resource {str(resource)[:40]!r}, skipped")
        return None
    if etype not in EVENT_TYPES:
        problems.append(f"line {n}: unknown event type {str(etype)[:40]!r}, skipped")
        return None
    obj = d.get("object")
    if etype in ("ADDED", "MODIFIED", "DELETED") and not isinstance(obj, dict):
        problems.append(f"line {n}: {etype} without an object, skipped")
        return None
    return Entry(n, t, resource, etype, obj, d.get("list") is True, None, cluster)


def _short(exc: BaseException) -> str:
    return (str(exc) or type(exc).__name__)[:120]


__all__ = [
    "ClusterRecorder",
    "Entry",
    "FORMAT_VERSION",
    "Recorder",
    "RecordingError",
    "parse_header",
    "parse_line",
    "sanitize",
    "settings_payload",
]
