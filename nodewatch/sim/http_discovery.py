"""Discovery documents (``/api``, ``/api/v1``, ``/apis``, ``/apis/<group>/<version>``, ``/version``).

Legacy (unaggregated) discovery only: kubectl asks for aggregated discovery first and falls back to
these when the answer's Content-Type is plain ``application/json``.
"""

from __future__ import annotations

import re

from .store import RESOURCES, ResourceInfo

VERBS = ["get", "list", "watch"]


def _singular(info: ResourceInfo) -> str:
    return info.kind.lower()


def api_versions(server_address: str) -> dict:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def groups() -> dict[str, list[ResourceInfo]]:
    """Group name -> resources, for the named groups (not the legacy core group)."""
    out: dict[str, list[ResourceInfo]] = {}
    for info in RESOURCES.values():
        if info.group:
            out.setdefault(info.group, []).append(info)
    return out


def _group_doc(name: str, version: str) -> dict:
    gv = {"groupVersion": f"{name}/{version}", "version": version}
    return {"name": name, "versions": [gv], "preferredVersion": gv}


def api_group_list() -> dict:
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group_doc(name, infos[0].version) for name, infos in sorted(groups().items())],
    }


def api_group(name: str) -> dict | None:
    infos = groups().get(name)
    if not infos:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_doc(name, infos[0].version)}


def api_resource_list(group: str, version: str) -> dict | None:
    infos = [i for i in RESOURCES.values() if i.group == group and i.version == version]
    if not infos:
        return None
    resources = []
    for info in infos:
        resources.append(
            {
                "name": info.name,
                "singularName": _singular(info),
                "namespaced": info.namespaced,
                "kind": info.kind,
                "verbs": VERBS,
                **({"shortNames": list(info.short_names)} if info.short_names else {}),
            }
        )
        if info.name in ("nodes", "pods", "namespaces", "certificatesigningrequests"):
            resources.append(
                {"name": f"{info.name}/status", "singularName": "", "namespaced": info.namespaced, "kind": info.kind, "verbs": ["get"]}
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def version_info(git_version: str) -> dict:
    m = re.match(r"v?(\d+)\.(\d+)", git_version)
    major, minor = (m.group(1), m.group(2)) if m else ("1", "33")
    return {
        "major": major,
        "minor": minor,
        "gitVersion": git_version,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    }
