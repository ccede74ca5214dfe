"""The agreement table of ``docs/real-control-plane.md``, from one campaign's observations.

Written when the testbed tier runs with ``NODEWATCH_AGREEMENT_TABLE=FILE``; times are seconds after
the campaign's start (the scenarios' moment), differences are real minus predicted.
"""

from __future__ import annotations

from campaign import (
    GRACE,
    MONITOR,
    TOLERATION,
    Observed,
    first,
    first_tainted_of_full_zone,
    kcm_lines,
    nodes_in_role,
    noexecute,
    parse_time,
    ready_condition,
    zone_change,
    zone_decisions,
)

from nodewatch.core.rules import NodeState, ZoneState

DOWN = (NodeState.UNKNOWN, NodeState.NOT_READY, NodeState.EVICTING, NodeState.EVICTED)


def rows(obs: Observed) -> list[tuple[str, str, str, str]]:
    s0 = obs.start
    out: list[tuple[str, str, str, str]] = []

    def rel(t: float) -> str:
        return f"+{t - s0:.1f}s"

    for role, label in (("kubelet-stop", "kubelet stops"), ("zone-full", "whole zone cut off")):
        for n in nodes_in_role(obs, role):
            samples = obs.nodes[n]
            seen = first(samples, lambda s: s.state in DOWN, after=s0)
            pred = [s for s in samples if s.t < seen.t and s.observed is not None][-1].observed + GRACE
            real = parse_time(ready_condition(obs.real_nodes_before_master[n])["lastTransitionTime"])
            out.append((f"{label}: {n} Ready -> Unknown", f"{rel(pred)} .. {rel(pred + MONITOR)}",
                        f"{rel(real)} (lastTransitionTime, whole s)", f"{real - pred:+.1f}s after the window opens"))
    (b0,) = nodes_in_role(obs, "runtime-down")
    node = obs.real_nodes_before_master[b0]
    posted = next(t for t, n, c, st in obs.posted if n == b0 and c == "Ready" and st == "False")
    added = parse_time(noexecute(node)[0]["timeAdded"])
    out.append((f"runtime down: {b0} Ready=False posted {rel(posted)}", "NotReady, taint not-ready (NoSchedule, "
                "NoExecute)", f"not-ready:NoExecute timeAdded {rel(added)}", "same taints"))
    retainted = set(nodes_in_role(obs, "zone-full")) - {first_tainted_of_full_zone(obs)}
    for key, pod in sorted(obs.real_pods_before_master.items()):
        meta = pod["metadata"]
        n = obs.pod_node.get(key)
        if n is None or not meta.get("deletionTimestamp") or not key[1].startswith(("own-", "dflt-")):
            continue
        real = parse_time(meta["deletionTimestamp"]) - meta["deletionGracePeriodSeconds"]
        preds = [(t, e) for t, e, term in obs.pods.get(key, []) if not term and e is not None]
        firstp, lastp = preds[0][1], preds[-1][1]
        what = "own 10s" if key[1].startswith("own-") else f"default {TOLERATION:g}s"
        note = " (taint re-added, countdown restarted)" if n in retainted and abs(lastp - real) > 2 else ""
        predicted = rel(lastp) if abs(firstp - lastp) < 0.5 else f"{rel(firstp)}, later {rel(lastp)}"
        out.append((f"eviction of a pod ({what} toleration) on {n}", predicted,
                    f"{rel(real)} (deletionTimestamp - grace)", f"{real - lastp:+.1f}s{note}"))
    logged = zone_decisions(obs, after=s0)
    for zone, state, key in (("eu-west-1/eu-west-1c", ZoneState.PARTIAL, ("eu-west-1::eu-west-1c", "PartialDisruption")),
                             ("us-east-1/us-east-1a", ZoneState.FULL, ("us-east-1::us-east-1a", "FullDisruption"))):
        t, rate = zone_change(obs, zone, state)
        out.append((f"zone {zone}", f"{state.value} at {rel(t)}, taint rate {rate:g}/s",
                    f"{state.value} logged at {rel(logged[key])}", f"{logged[key] - t:+.1f}s"))
    part_taints = sum(len(noexecute(obs.real_nodes_before_master[n])) for n in nodes_in_role(obs, "zone-partial"))
    out.append(("3 of 4 nodes cut off (small zone)", "no NoExecute taint (rate 0)",
                f"{part_taints} NoExecute taints", "agrees" if part_taints == 0 else "differs"))
    firsts = sorted(s.eviction_at - TOLERATION for n in nodes_in_role(obs, "zone-full")
                    if (s := first(obs.nodes[n], lambda s: s.state is NodeState.EVICTING)) is not None)
    out.append(("whole zone cut off: NoExecute taints", "one node per 10s (rate 0.1/s)",
                "first timeAdded " + ", ".join(rel(t) for t in firsts), "gaps " + ", ".join(
                    f"{b - a:.0f}s" for a, b in zip(firsts, firsts[1:]))))
    (entered, _), = kcm_lines(obs, "Entering master disruption mode")
    all_full = next(t for t, _, af in obs.zones if t > obs.master_start and af)
    left = sum(len(noexecute(n)) for n in obs.real_nodes.values())
    out.append((f"every node cut off at {rel(obs.master_start)}", f"all zones down: evictions stopped, at {rel(all_full)}",
                f"master disruption mode at {rel(entered)}; {left} NoExecute taints left", f"{entered - all_full:+.1f}s"))
    for n in nodes_in_role(obs, "clock -95s", "clock +40s"):
        ok = all(s.state is NodeState.READY for s in obs.nodes[n] if s.t < obs.master_start)
        rc = ready_condition(obs.real_nodes_before_master[n])
        out.append((f"{obs.roles[n]} on {n}", "Ready throughout" if ok else "not Ready at times",
                    f"Ready={rc['status']} throughout", "agrees" if ok and rc["status"] == "True" else "differs"))
    one = obs.oneshot
    if one.get("doc"):
        for n in nodes_in_role(obs, "clock -95s"):
            shown = next(x for x in one["doc"]["nodes"] if x["name"] == n)
            real = ready_condition(one["real_nodes"][n])["status"]
            out.append((f"`nodewatch status` (one-shot) at {rel(one['started'])}, clock -95s",
                        f"{shown['state']}, lease age {shown['lease_age_seconds']:.1f}s "
                        f"(answered in {one['ended'] - one['started']:.1f}s)",
                        f"Ready={real}", "agrees" if (shown["state"] == "Ready") == (real == "True") else "differs"))
    return out


def markdown(obs: Observed) -> str:
    lines = ["| scenario | nodewatch predicted | real controller did | difference |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows(obs)]
    return "\n".join(lines) + "\n"
