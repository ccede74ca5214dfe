"""A current Kubernetes release from Go modules only: kube-apiserver, kube-controller-manager, kubemark, etcd.

``k8s.io/kubernetes`` cannot be required as it is: its ``go.mod`` points every ``k8s.io/*``
staging module (``k8s.io/api``, ``k8s.io/client-go``, ...) at ``./staging/src/...`` with
``replace`` directives, which apply only inside its own repository, and requires them at
``v0.0.0``. So the programs are built from a small generated wrapper module that requires
``k8s.io/kubernetes vX.Y.Z`` and replaces each staging module named in that release's ``go.mod``
with its published ``v0.Y.Z`` release (the same code, tagged from the same commit). The
``godebug`` lines of Kubernetes' ``go.mod`` are copied too: they set the programs' GODEBUG
defaults, as in the released binaries.

etcd: the release's own choice (``hack/lib/etcd.sh`` in the tree, 3.7.0 for 1.37), built from
``go.etcd.io/etcd/server/v3`` (a ``main`` package) in a second wrapper module, at the newest patch
of that minor that the proxy serves, and never older than 3.5.13: streaming lists need its
RequestWatchProgress (an older etcd makes a current apiserver answer them with an ERROR event).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from .build_common import (
    Binaries,
    BuildError,
    Progress,
    Shared,
    built_in,
    component_builder,
    list_versions,
    minor_of,
    module_env,
    niced,
    proxy_name,
    record_built,
    run,
    run_steps,
    stamp_version,
)

KUBERNETES_MODULE = "k8s.io/kubernetes"
ETCD_MODULE = "go.etcd.io/etcd/server/v3"
ETCD_MINIMUM = (3, 5, 13)
COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kubemark")
WRAPPER_MODULE = "nodewatch.testbed/kubernetes"
ETCD_WRAPPER_MODULE = "nodewatch.testbed/etcd"


class Layout:
    """One release's folder in the cache."""

    def __init__(self, shared: Shared, release: str) -> None:
        self.shared = shared
        self.release = release
        self.root = shared.version_dir(release)
        self.wrapper = self.root / "module"
        self.etcd_wrapper = self.root / "etcd-module"
        self.bin = self.root / "bin"
        self.markers = self.root / "done"
        self.etcd_version_file = self.root / "etcd.version"

    def binaries(self) -> Binaries:
        return Binaries(etcd=self.bin / "etcd", kube_apiserver=self.bin / "kube-apiserver",
                        kube_controller_manager=self.bin / "kube-controller-manager", version=self.release,
                        kubemark=self.bin / "kubemark", etcd_version=self.etcd_version_file.read_text().strip())


def build(shared: Shared, release: str, progress: Progress) -> Binaries:
    """Every missing step for ``release`` (called under the cache's lock, with Go unpacked)."""
    layout = Layout(shared, release)
    layout.root.mkdir(parents=True, exist_ok=True)
    minor = minor_of(release)
    steps: list[tuple[str, str, Callable[[], None]]] = [
        ("wrapper", f"fetching {KUBERNETES_MODULE}@{release} and its modules (staging modules at "
                    f"v0.{minor}.x) from the Go module proxy", lambda: _wrapper(layout, progress)),
    ]
    steps += [(f"build-{c}", f"building {c} {release} (cold: minutes)", _builder(layout, c)) for c in COMPONENTS]
    steps += [
        ("etcd-module", "fetching etcd's modules from the Go module proxy", lambda: _etcd_wrapper(layout, progress)),
        ("build-etcd", "building etcd", lambda: _build_etcd(layout)),
    ]
    run_steps(layout.markers, steps, progress, release)
    record_built(layout.root, layout.binaries())
    done = built_in(layout.root)
    if done is None:
        raise BuildError(f"the build finished but the binaries are missing under {layout.root}")
    progress(f"built: {layout.bin} (etcd {done.etcd_version})")
    return done


# --- the wrapper module ---------------------------------------------------------------------------------

_STAGING = re.compile(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/src/\1\s*$", re.M)
_GODEBUG = re.compile(r"^godebug\s.*$|^godebug\s*\((?:.|\n)*?^\)", re.M)
_GO_LINE = re.compile(r"^go\s+(\d+\.\d+(?:\.\d+)?)\s*$", re.M)


def staging_modules(kubernetes_go_mod: str) -> list[str]:
    """The modules that Kubernetes' ``go.mod`` replaces with its own ``./staging/src`` folders."""
    found = _STAGING.findall(kubernetes_go_mod)
    if not found:
        raise BuildError("k8s.io/kubernetes's go.mod names no staging modules (replace ... => ./staging/src/...): "
                         "its layout changed; the wrapper module cannot be generated")
    return found


def wrapper_go_mod(kubernetes_go_mod: str, release: str) -> str:
    """The wrapper's ``go.mod``: Kubernetes at ``release``, each staging module at ``v0.MINOR.PATCH``."""
    _, minor, patch = release.lstrip("v").split(".")
    staged = f"v0.{minor}.{patch}"
    go_line = _GO_LINE.search(kubernetes_go_mod)
    if go_line is None:
        raise BuildError("k8s.io/kubernetes's go.mod has no go line")
    lines = [f"module {WRAPPER_MODULE}", "", f"go {go_line.group(1)}", ""]
    lines += [m.group(0) for m in _GODEBUG.finditer(kubernetes_go_mod)]
    lines += ["", f"require {KUBERNETES_MODULE} {release}", "", "replace ("]
    lines += [f"\t{m} => {m} {staged}" for m in staging_modules(kubernetes_go_mod)]
    lines += [")", ""]
    return "\n".join(lines)


def _go_fetch(layout: Layout, argv: list[str], what: str, cwd: Path) -> str:
    """A ``go`` command that downloads; its failure names the modules that could not be fetched."""
    try:
        return run(argv, what, cwd=cwd, env=module_env(layout.shared))
    except BuildError as exc:
        missing = unfetched_modules(str(exc))
        if missing:
            raise BuildError(f"could not fetch {', '.join(missing)} from the Go module proxy ({proxy_name()}); "
                             f"{exc}") from None
        raise


_UNFETCHED = re.compile(r"(?:^|\s)(?:module\s+)?([\w.~-]+(?:/[\w.~-]+)+)@?([\w.+-]*):\s+"
                        r"(?:reading|verifying|unknown revision|invalid version|no matching versions|"
                        r"module lookup disabled|Get \"|dial tcp|lookup )")


def unfetched_modules(output: str) -> list[str]:
    """``module@version`` of each module a go command said it could not download or verify."""
    out: list[str] = []
    for m in _UNFETCHED.finditer(output):
        name = m.group(1) + (f"@{m.group(2)}" if m.group(2) else "")
        if name not in out:
            out.append(name)
    return out


def _wrapper(layout: Layout, progress: Progress) -> None:
    release = layout.release
    layout.wrapper.mkdir(parents=True, exist_ok=True)
    info = json.loads(_go_fetch(layout, [layout.shared.go, "mod", "download", "-json", f"{KUBERNETES_MODULE}@{release}"],
                                f"fetching {KUBERNETES_MODULE}@{release}", layout.root))
    if info.get("Error"):
        raise BuildError(f"could not fetch {KUBERNETES_MODULE}@{release} from the Go module proxy "
                         f"({proxy_name()}): {info['Error']}")
    kubernetes_go_mod = Path(info["GoMod"]).read_text()
    (layout.wrapper / "go.mod").write_text(wrapper_go_mod(kubernetes_go_mod, release))
    (layout.wrapper / "go.sum").unlink(missing_ok=True)
    progress(f"      {len(staging_modules(kubernetes_go_mod))} staging modules replaced by their "
             f"v0.{minor_of(release)} releases")
    _go_fetch(layout, [layout.shared.go, "get", *(f"{KUBERNETES_MODULE}/cmd/{c}@{release}" for c in COMPONENTS)],
              f"fetching the modules of {KUBERNETES_MODULE}@{release} (go get in {layout.wrapper})", layout.wrapper)
    layout.etcd_version_file.write_text(pick_etcd(layout, Path(info["Dir"])) + "\n")


def version_ldflags(release: str) -> str:
    """Stamp ``/version`` (nodewatch reads it to choose the grace default), as Kubernetes' build does."""
    return stamp_version(release)


def _builder(layout: Layout, component: str) -> Callable[[], None]:
    def go_build(tmp: Path) -> None:
        _go_fetch(layout, niced([layout.shared.go, "build", "-trimpath", "-o", str(tmp), "-ldflags",
                                 version_ldflags(layout.release), f"{KUBERNETES_MODULE}/cmd/{component}"]),
                  f"building {component} {layout.release}", layout.wrapper)
    return component_builder(layout.bin, component, go_build)


# --- etcd -------------------------------------------------------------------------------------------------

_ETCD_SH = re.compile(r"^ETCD_VERSION=\$\{ETCD_VERSION:-(\d+\.\d+\.\d+)\}", re.M)
_ETCD_RELEASE = re.compile(r"^v(\d+)\.(\d+)\.(\d+)$")


def etcd_of_tree(tree: Path) -> str:
    """The etcd version a Kubernetes tree tests with (``hack/lib/etcd.sh``), e.g. ``3.7.0``."""
    try:
        m = _ETCD_SH.search((tree / "hack" / "lib" / "etcd.sh").read_text())
    except OSError:
        m = None
    if m is None:
        raise BuildError(f"{tree}/hack/lib/etcd.sh names no ETCD_VERSION: cannot tell which etcd this release uses")
    return m.group(1)


def choose_etcd(served: list[str], wanted: str) -> str:
    """The newest served stable patch of the wanted etcd's minor, never older than 3.5.13."""
    want = tuple(int(x) for x in wanted.split("."))
    releases = sorted((tuple(int(x) for x in m.groups()) for v in served if (m := _ETCD_RELEASE.match(v))),
                      reverse=True)
    for r in releases:
        if r[:2] == want[:2] and r >= ETCD_MINIMUM:
            return "v" + ".".join(map(str, r))
    shown = ", ".join("v" + ".".join(map(str, r)) for r in sorted(releases)[-6:]) or "none"
    raise BuildError(f"the Go module proxy serves no {ETCD_MODULE} v{want[0]}.{want[1]}.x at least "
                     f"v{'.'.join(map(str, ETCD_MINIMUM))} (this release tests with etcd {wanted}; served: {shown})")


def pick_etcd(layout: Layout, tree: Path) -> str:
    return choose_etcd(list_versions(layout.shared, ETCD_MODULE), etcd_of_tree(tree))


def _etcd_wrapper(layout: Layout, progress: Progress) -> None:
    version = layout.etcd_version_file.read_text().strip()
    layout.etcd_wrapper.mkdir(parents=True, exist_ok=True)
    (layout.etcd_wrapper / "go.mod").write_text(f"module {ETCD_WRAPPER_MODULE}\n\ngo 1.24\n")
    (layout.etcd_wrapper / "go.sum").unlink(missing_ok=True)
    progress(f"      etcd {version}")
    _go_fetch(layout, [layout.shared.go, "get", f"{ETCD_MODULE}@{version}"],
              f"fetching {ETCD_MODULE}@{version} (go get in {layout.etcd_wrapper})", layout.etcd_wrapper)


def _build_etcd(layout: Layout) -> None:
    layout.bin.mkdir(parents=True, exist_ok=True)
    out = layout.bin / "etcd"
    tmp = out.with_name("etcd.partial")
    _go_fetch(layout, niced([layout.shared.go, "build", "-trimpath", "-o", str(tmp), "-ldflags", "-s -w",
                             ETCD_MODULE]), "building etcd", layout.etcd_wrapper)
    tmp.rename(out)
