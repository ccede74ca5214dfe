"""Options shared by several commands: controller settings and where the fleet comes from.

The live source is built from the command line in one place (``live_source_from_args``) for
``watch``, ``record`` and ``status``, so their recordings carry the same header.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from ..core.settings import Settings, check_setting
from ..core.timeutil import duration_seconds

if TYPE_CHECKING:
    from ..sources.live import LiveSource
    from ..sources.multi import MultiSource
    from ..sources.multi_config import ClusterSpec
    from ..sources.recording import Recorder


class CommandError(Exception):
    """A failure for the user: ``nodewatch`` prints it as one line and exits 2 (``fail``)."""


def add_settings_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group(
        "controller settings (defaults are Kubernetes' own; the values in use are shown on screen)"
    )
    g.add_argument("--grace", type=float, metavar="S", dest="grace_seconds",
                   help="node-monitor grace period (default: 40s, 50s when the API server is v1.32+)")
    g.add_argument("--toleration", type=float, metavar="S", dest="toleration_seconds",
                   help="default not-ready/unreachable toleration seconds (default 300)")
    g.add_argument("--monitor-period", type=float, metavar="S", dest="monitor_period_seconds",
                   help="node-monitor period (default 5)")
    g.add_argument("--zone-threshold", type=float, metavar="F", dest="unhealthy_zone_threshold",
                   help="unhealthy zone threshold (default 0.55)")
    g.add_argument("--eviction-rate", type=float, metavar="R", dest="eviction_rate",
                   help="node eviction rate per zone, nodes/s (default 0.1)")
    g.add_argument("--secondary-eviction-rate", type=float, metavar="R", dest="secondary_eviction_rate",
                   help="secondary node eviction rate, nodes/s (default 0.01)")
    g.add_argument("--large-cluster-threshold", type=int, metavar="N", dest="large_cluster_threshold",
                   help="large cluster size threshold (default 50)")


SETTING_NAMES = (
    "grace_seconds", "toleration_seconds", "monitor_period_seconds", "unhealthy_zone_threshold",
    "eviction_rate", "secondary_eviction_rate", "large_cluster_threshold",
)


def settings_from_args(args: argparse.Namespace) -> Settings:
    values = {name: getattr(args, name, None) for name in SETTING_NAMES}
    for name, v in values.items():
        if v is None:
            continue
        flag = f"--{name.replace('_seconds', '').replace('unhealthy_', '').replace('_', '-')}"
        if v < 0:
            raise CommandError(f"{flag} must not be negative")
        try:
            check_setting(name, v)
        except ValueError as exc:
            raise CommandError(f"{flag}: {str(exc).split(': ', 1)[1]}") from None
    return Settings().override(**values)


def add_live_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("live cluster")
    g.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    g.add_argument("--context", metavar="NAME", action=_ContextAction,
                   help="kubeconfig context (default: the current context); "
                        "`watch`, `status`, `record` and `hub` take it several times to watch several clusters")
    g.add_argument("--probe-kubelet-tls", action="store_true",
                   help="opt-in: TLS handshake to each node's kubelet port to read its serving certificate")
    g.add_argument("--kubelet-metrics", action="store_true",
                   help="opt-in: read the kubelet client cert TTL from /metrics via the node proxy (needs nodes/proxy)")
    g.add_argument("--cert-cache-dir", metavar="DIR", help="where kubelet cert NotAfter dates are remembered")


class _ContextAction(argparse.Action):
    """``--context``: the last one in ``context`` (what one-cluster commands read), every one in
    ``contexts`` (several clusters at once)."""

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.context = values
        namespace.contexts = [*(getattr(namespace, "contexts", None) or []), values]


def add_multi_arguments(parser: argparse.ArgumentParser) -> None:
    """Several clusters at once (``watch`` and ``status``)."""
    g = parser.add_argument_group("several clusters at once")
    g.add_argument("--all-contexts", action="store_true", help="every context of the kubeconfig")
    g.add_argument("--fleet", metavar="FILE",
                   help="a fleet file: YAML list of clusters, each a context with optional kubeconfig, "
                        "name and settings overrides (grace, toleration...)")


def cluster_specs_from_args(args: argparse.Namespace) -> list[ClusterSpec] | None:
    """The clusters several ``--context``, ``--all-contexts`` or ``--fleet`` ask for; None for one
    cluster (one ``--context`` or none: the one-cluster dashboard, exactly as before). Raises
    CommandError."""
    from ..sources.kubeconfig import KubeconfigError
    from ..sources.multi_config import FleetFileError, all_contexts, read_fleet_file, specs_from_contexts

    contexts = list(getattr(args, "contexts", None) or [])
    every = getattr(args, "all_contexts", False)
    fleet = getattr(args, "fleet", None)
    if sum(map(bool, (contexts, every, fleet))) > 1:
        raise CommandError("choose one of --context (one or several), --all-contexts and --fleet")
    try:
        if fleet:
            return read_fleet_file(fleet)
        if every:
            return specs_from_contexts(all_contexts(args.kubeconfig), args.kubeconfig)
    except (FleetFileError, KubeconfigError) as exc:
        raise CommandError(str(exc)) from None
    specs = specs_from_contexts(contexts, args.kubeconfig)
    return specs if len(specs) > 1 else None


def multi_source(specs: list[ClusterSpec], args: argparse.Namespace, settings: Settings,
                 record: str | None = None) -> MultiSource:
    """Several clusters as one source; with ``record``, every cluster recorded into that one file
    (the caller closes ``source.recorder`` after ``source.stop()``). Raises CommandError."""
    from ..sources.multi import MultiSource

    source = MultiSource(specs, settings, cert_cache_dir=args.cert_cache_dir,
                         probe_kubelet_tls=args.probe_kubelet_tls, kubelet_metrics=args.kubelet_metrics)
    if record:
        source.recorder = open_recorder(record, source.recording_source(), settings, source.recording_clusters(),
                                        record_format=getattr(args, "record_format", None))
    return source


def live_source_from_args(args: argparse.Namespace, settings: Settings, record: str | None = None) -> LiveSource:
    """The live source the options of ``add_live_arguments`` ask for; with ``record``, its recorder
    too (the caller closes ``source.recorder`` after ``source.stop()``). Raises CommandError."""
    from ..sources.live import KubeconfigError, LiveSource

    try:
        source = LiveSource(settings, kubeconfig=args.kubeconfig, context=args.context,
                            cert_cache_dir=args.cert_cache_dir, probe_kubelet_tls=args.probe_kubelet_tls,
                            kubelet_metrics=args.kubelet_metrics)
    except KubeconfigError as exc:
        raise CommandError(str(exc)) from None
    if record:
        try:
            source.recorder = open_recorder(record, source.recording_source(), settings,
                                            record_format=getattr(args, "record_format", None))
        except CommandError:
            source.stop()
            raise
    return source


def open_recorder(path: str, source_info: dict[str, Any], settings: Settings,
                  clusters: list[dict[str, Any]] | None = None, record_format: str | None = None) -> Recorder:
    """A recorder writing ``path`` with ``source_info`` (and ``clusters``, for several) in its
    header. ``record_format``: ``columnar`` or ``jsonl``; None: columnar for a ``.nwcol`` path.
    A failed write (a full disk) stops the recording and nothing else (``StoppingRecorder``).
    Raises CommandError."""
    from ..sources.columnar import EXTENSION, ColumnarRecorder
    from ..sources.recording import Recorder
    from ..sources.recording_stop import StoppingRecorder

    if record_format is None:
        record_format = "columnar" if path.endswith(EXTENSION) else "jsonl"
    make: Any = ColumnarRecorder if record_format == "columnar" else Recorder
    try:
        recorder = make(path, source_info, settings, clusters=clusters)
    except OSError as exc:
        raise CommandError(f"{path}: cannot write ({exc.strerror or exc})") from None
    return StoppingRecorder(recorder)  # type: ignore[return-value]  # a Recorder's methods; a full disk stops only it


def say_recording_stopped(source: Any, message: str) -> None:
    """A stopped ``--record`` (a full disk) among the dashboard's problems, where the header counts
    it and the problems screen says it whole; the streams, and so the fleet's judgement, go on.
    Several clusters: said by the first (a ``MultiFleet`` has no problems of its own)."""
    state = source.state
    members = getattr(state, "members", None)
    if members:
        state = members[0].state
    state.problem(source.clock.now(), "recording", message)


MAX_SIM_NODES = 200_000
"""The most simulated nodes a command builds (the largest clusters run have 130,000): a slip of the
keyboard (``--nodes 10000000``) is told so, not a machine run out of memory."""
MAX_SPEED = 1000.0


def sim_nodes(text: str) -> int:
    """``--nodes`` of a simulated fleet (argparse ``type``: a bad value is a usage error)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= n <= MAX_SIM_NODES:
        raise argparse.ArgumentTypeError(f"{n:,}: a simulated fleet has 1 to {MAX_SIM_NODES:,} nodes")
    return n


def scenario_name(text: str) -> str:
    """``--scenario`` (argparse ``type``): known parts joined with ``+``, checked before any fleet is
    built (``demo`` built its fleet, and crashed on the name, before it looked for a terminal)."""
    from ..sim.scenarios import plan

    try:
        plan(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def speed(text: str) -> float:
    """``--speed`` (argparse ``type``): more than 0, at most ``MAX_SPEED`` (NaN and infinity refused)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < v <= MAX_SPEED:
        raise argparse.ArgumentTypeError(f"{text}: a speed is more than 0 and at most {MAX_SPEED:g}")
    return v


def add_demo_arguments(parser: argparse.ArgumentParser, *, flag_prefix: str = "",
                       speed_help: str = "virtual time speed (default 1)") -> None:
    g = parser.add_argument_group("simulated fleet")
    g.add_argument(f"--{flag_prefix}nodes", dest="nodes", type=sim_nodes, default=30, metavar="N",
                   help="number of simulated nodes (default 30)")
    g.add_argument(f"--{flag_prefix}scenario", dest="scenario", type=scenario_name, default="incident", metavar="S",
                   help="scenario, or several joined with + (default: incident)")
    g.add_argument(f"--{flag_prefix}seed", dest="seed", type=int, default=1, metavar="N", help="random seed (default 1)")
    g.add_argument("--speed", type=speed, default=1.0, metavar="X", help=speed_help)


def naming(path: str, exc: object) -> str:
    """An error about the recording ``path``, naming it once: readers name the file (or the
    directory) in some errors and not in others ("line 1: not a nodewatch recording header"), and
    a command that put the path before each said it twice in the first kind."""
    text = str(exc)
    return text if text.startswith(f"{path}:") else f"{path}: {text}"


def fail(message: str) -> int:
    """One line on stderr, exit code 2: the contract of every command's errors."""
    print(f"nodewatch: {message}", file=sys.stderr)
    return 2


SIZE_UNITS = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4}


def parse_age(text: str) -> float:
    """An age like ``90s``, ``15m``, ``24h``, ``7d``, ``1h30m`` (``timeutil.duration_seconds``; argparse
    ``type``: a bad value is a usage error naming its option, told before anything is built)."""
    v = duration_seconds(text.strip())
    if v is None:
        raise argparse.ArgumentTypeError(f"{text!r}: expected an age like 90s, 15m, 24h, 7d")
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be more than zero")
    return v


def parse_size(text: str) -> int:
    """A size like ``500M`` or ``2G`` (argparse ``type``, as ``parse_age``)."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = t[-1:] if t[-1:] in SIZE_UNITS and t[-1:] else ""
    num = t[:-1] if unit else t
    try:
        v = int(float(num) * SIZE_UNITS[unit])
    except (ValueError, OverflowError):  # (not a number; nan; inf or beyond a float)
        raise argparse.ArgumentTypeError(f"{text!r}: expected a size like 500M or 2G") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be more than zero")
    return v


def recording_path(text: str) -> str:
    """A recording argument (argparse ``type``): a hub's own directory (what ``hub --dir`` and
    ``attach`` take) stands for its flight recorder, ``DIR/recordings``. Anything else as given
    (a file, a directory of segments, ``-``; a path that does not exist is the reader's to name)."""
    from ..hub.paths import RECORDINGS
    from ..sources.segments import list_segments

    inner = os.path.join(text, RECORDINGS)
    try:
        if os.path.isdir(inner) and not list_segments(text):
            return inner
    except OSError:
        pass
    return text
