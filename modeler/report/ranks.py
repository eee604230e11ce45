"""One run up close: rank imbalance per region and the call tree of one rank."""

from __future__ import annotations

from collections import Counter
from typing import Sequence

import numpy as np

from ..errors import InputError
from ..runchoice import RunEntry, find_run
from . import svg
from .findings import NS, Report, TreeNode
from .runs import RankData, RunGroup

def choose_run(groups: Sequence[RunGroup], run_id: str | None) -> RunGroup | None:
    """The run `--run` names (its id, directory or directory's name: `runchoice.find_run`), else
    the one with the most ranks and the largest parameters."""
    if run_id is not None:
        entries = [RunEntry(g.run_id, g.params, g.repetition, g.directories) for g in groups]
        return groups[entries.index(find_run(entries, run_id))]
    if not groups:
        return None
    return max(groups, key=lambda g: (g.world_size, sorted(g.params.values()), -g.repetition))


def run_point(g: RunGroup, parameters: Sequence[str] = (), groups: Sequence[RunGroup] = ()) -> str:
    """Which point and repetition run `g` is, `batch=64, width=16, repetition 0`: the model's
    `parameters` first, then its other parameters where the runs' values of them differ (`groups`;
    those every run shares are said in the Experiment table)."""
    varying = {k for k in g.params if len({x.params.get(k) for x in groups}) > 1}
    names = [k for k in parameters if k in g.params] + [k for k in g.params if k not in parameters and k in varying]
    return ", ".join([f"{k}={svg.param_text(g.params[k])}" for k in names] + [f"repetition {g.repetition}"])


def imbalance_view(report: Report, g: RunGroup) -> None:
    report.imbalance_run = g.run_id
    # a rank whose profile is empty timed no region (probes off, everything excluded; a rank that
    # SCALEPROBE_RANKS leaves out writes no file at all): counting it as 0 would make every region
    # look imbalanced
    profiled = [r for r in g.ranks if r.profile]
    report.profiled_ranks = len(profiled)
    report.unprofiled = unprofiled_text(g)
    if len(profiled) < 2:
        return
    per_rank = {r.rank: r.incl_by_callpath() for r in profiled}
    paths = sorted({p for d in per_rank.values() for p in d})
    ranks = sorted(per_rank)
    rows = []
    for path in paths:
        times = np.array([per_rank[r].get(path, 0) for r in ranks], dtype=float) * NS
        mean = float(times.mean())
        if mean <= 0:
            continue
        slow = int(np.argmax(times))
        rows.append({
            "callpath": path, "mean": mean, "max": float(times.max()), "min": float(times.min()),
            # max - mean is never negative; clamp the rounding error so it does not print as -1e-08
            "imbalance": max(0.0, float(times.max()) / mean - 1), "lost": max(0.0, float(times.max()) - mean),
            "slowest": ranks[slow], "times": times,
        })
    rows.sort(key=lambda r: r["lost"], reverse=True)
    report.imbalance = rows
    counts = Counter(r["slowest"] for r in rows if r["imbalance"] > 0.05)
    report.slowest_ranks = counts.most_common(5)
    shown = rows[:15]
    if not shown:
        return
    # up to 256 ranks fit a page by narrowing the cells; narrow cells keep their numbers in the tooltip
    cols = ranks[:256]
    cell_w = max(6, min(44, 1100 // len(cols)))
    cells = []
    for r in reversed(shown):
        row = []
        for j, rk in enumerate(cols):
            t = float(r["times"][j])
            rel = t / r["mean"] - 1
            row.append(svg.HeatCell(
                t, _percent(rel) if cell_w >= 36 else "",
                f"{r['callpath']} on rank {rk}: {svg.format_seconds(t)} ({rel * 100:+.1f}% vs the mean)",
                color=svg.diverging(rel / 0.25),
            ))
        cells.append(row)
    report.imbalance_chart = svg.heat_map(
        [_short(r["callpath"]) for r in reversed(shown)], [str(c) for c in cols], cells,
        row_label="", col_label="rank" if len(cols) == len(ranks) else f"rank (the first {len(cols)} of {len(ranks)})",
        title="time per rank relative to the mean over ranks (red: slower)", cell_w=cell_w, log=False,
    )


def _percent(rel: float) -> str:
    """+24%, -5%, and 0% rather than -0% for a rounding error."""
    return "0%" if abs(rel) < 0.005 else f"{rel * 100:+.0f}%"


def _short(callpath: str, n: int = 14) -> str:
    leaf = callpath.rsplit("->", 1)[-1]
    return leaf if len(leaf) <= n else leaf[: n - 1] + "…"


def check_rank(g: RunGroup, rank: int) -> RankData:
    """The rank `--rank` names in run `g`, or an `InputError` that lists the ranks with a profile
    (review 86 LOW-2: a rank with an empty profile was taken, and its empty call tree read "No
    completed run to show")."""
    chosen = next((r for r in g.ranks if r.rank == rank), None)
    profiled = [r.rank for r in g.ranks if r.profile]
    with_one = f"ranks with a profile: {_rank_list(profiled)}" if profiled else "no rank of it recorded a profile"
    if chosen is None:
        raise InputError(f"--rank: run {g.run_id} has no rank {rank}; it has {_rank_list([r.rank for r in g.ranks])} "
                         f"({with_one})")
    if not chosen.profile:
        raise InputError(f"--rank: rank {rank} of run {g.run_id} recorded no profile (it timed no region); {with_one}")
    return chosen


def _rank_list(ranks: Sequence[int]) -> str:
    """`0, 2, 5-9`: runs of consecutive ranks as ranges, at most 16 items then how many more
    (review 93 LOW-5: a run of 1024 ranks listed each)."""
    items: list[list[int]] = []  # [first, last] of each run of consecutive ranks
    for r in sorted(ranks):
        if items and items[-1][1] == r - 1:
            items[-1][1] = r
        else:
            items.append([r, r])
    text = [str(a) if a == b else f"{a}, {b}" if b == a + 1 else f"{a}-{b}" for a, b in items]
    if len(text) <= 16:
        return ", ".join(text)
    # "and N more" counts ranks, not items (review 94 LOW-5: "and 3 more" stood for 33 ranks)
    return ", ".join(text[:16]) + f" and {sum(b - a + 1 for a, b in items[16:])} more"


def unprofiled_text(g: RunGroup) -> str:
    """Which ranks of run `g` recorded no profile, in words (empty when every rank did): the rank
    and call-tree views leave them out, and say so."""
    missing = [r.rank for r in g.ranks if not r.profile]
    if not missing:
        return ""
    one = len(missing) == 1
    which = f"rank {missing[0]}" if one else f"ranks {_rank_list(missing)}"
    return (f"{which} of {len(g.ranks)} recorded no profile (timed no region) and {'is' if one else 'are'} not shown")


def call_tree_view(report: Report, g: RunGroup, rank: int | None) -> None:
    chosen: RankData | None
    if rank is not None:
        chosen = check_rank(g, rank)
    else:
        chosen = next((r for r in g.ranks if r.profile), None)
    if chosen is None:
        report.tree_run = g.run_id
        return
    report.tree_run, report.tree_rank = g.run_id, chosen.rank
    total = chosen.total_ns() * NS or 1.0
    nodes: dict[tuple[int, ...], TreeNode] = {}
    roots: list[TreeNode] = []
    for path in sorted(chosen.profile, key=len):
        st = chosen.profile[path]
        node = TreeNode(
            chosen.names.get(path[-1], f"region{path[-1]}"), int(st.incl_ns) * NS, int(st.excl_ns) * NS,
            int(st.visits), int(st.incl_ns) * NS / total,
        )
        nodes[path] = node
        parent = nodes.get(path[:-1])
        (parent.children if parent is not None else roots).append(node)

    def order(ns: list[TreeNode]) -> None:
        ns.sort(key=lambda n: n.incl_s, reverse=True)
        for n in ns:
            order(n.children)

    order(roots)
    report.tree = roots
