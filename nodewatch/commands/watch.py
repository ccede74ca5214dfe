"""``nodewatch watch`` (the default): the dashboard on a live cluster through kubeconfig."""

from __future__ import annotations

import argparse

from .common import (
    add_live_arguments,
    add_multi_arguments,
    add_settings_arguments,
    cluster_specs_from_args,
    live_source_from_args,
    multi_source,
    say_recording_stopped,
    settings_from_args,
)
from .dashboard import add_dashboard_arguments, run_app
from .metrics_options import MetricsServices, add_metrics_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_live_arguments(parser)
    add_multi_arguments(parser)
    add_dashboard_arguments(parser)
    add_metrics_arguments(parser)
    add_settings_arguments(parser)


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    specs = cluster_specs_from_args(args)
    if specs is not None:
        source = multi_source(specs, args, settings, record=args.record)  # one file, each line its cluster
    else:
        source = live_source_from_args(args, settings, record=args.record)
    if source.recorder is not None:
        source.recorder.on_stop = lambda message: say_recording_stopped(source, message)  # type: ignore[attr-defined]
    metrics = MetricsServices(source, args)
    try:
        if metrics.wanted:
            metrics.start()
        return run_app(source, args)
    finally:
        metrics.stop()
        source.stop()
        if source.recorder is not None:
            source.recorder.close()
