"""``nodewatch watch`` (the default): the dashboard on a live cluster through kubeconfig."""

from __future__ import annotations

import argparse

from .common import add_live_arguments, add_settings_arguments, fail, settings_from_args
from .dashboard import add_dashboard_arguments, make_recorder, run_app


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_live_arguments(parser)
    add_dashboard_arguments(parser)
    add_settings_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ..sources.live import KubeconfigError, LiveSource

    settings = settings_from_args(args)
    recorder = None
    try:
        source = LiveSource(settings, kubeconfig=args.kubeconfig, context=args.context,
                            cert_cache_dir=args.cert_cache_dir, probe_kubelet_tls=args.probe_kubelet_tls,
                            kubelet_metrics=args.kubelet_metrics)
        recorder = make_recorder(args, {"kind": "live", "context": args.context}, settings)
        source.recorder = recorder
    except KubeconfigError as exc:
        return fail(str(exc))
    try:
        return run_app(source, args)
    finally:
        if recorder is not None:
            recorder.close()
