"""The page of the changes per commit: each changed series with its per-commit result, its band and its
steps; each change linked to the load-test runs (and their versions) it falls between, and a later
change of the same series that reverses it said on both.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence, TypedDict

import numpy as np
import pandas as pd

from pipelines import config
from pipelines.commit_series.changes import ClusterEntry, ContractChange, F1Scores, SeriesDetection


def series_svg(values: np.ndarray, lows: np.ndarray | None, highs: np.ndarray | None, marks: list[int],
               *, width: int = 560, height: int = 90) -> str:
    """An inline SVG of one series: the Mono interval as a band, the per-commit result as a line,
    detected changes as red ticks (text-free: nothing from the input is written into it)."""
    seen = np.concatenate([np.asarray(a, float) for a in (values, lows, highs) if a is not None])
    seen = seen[np.isfinite(seen)]                 # an infinite band (no interval) is not drawn
    lo, hi = (float(seen.min()), float(seen.max())) if seen.size else (0.0, 1.0)
    if hi <= lo:                                    # a flat series: a line across the middle
        lo, hi = lo - 1.0, hi + 1.0
    span = hi - lo
    n = max(len(values) - 1, 1)
    x = lambda i: 4 + (width - 8) * i / n                      # noqa: E731
    y = lambda v: height - 4 - (height - 8) * (v - lo) / span  # noqa: E731
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">']
    if lows is not None and highs is not None:
        top = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(highs) if np.isfinite(v))
        bottom = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in reversed(list(enumerate(lows))) if np.isfinite(v))
        parts.append(f'<polygon points="{top} {bottom}" fill="#cfd8e3" stroke="none"/>')
    line = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values) if np.isfinite(v))
    parts.append(f'<polyline points="{line}" fill="none" stroke="#2b5b8a" stroke-width="1.2"/>')
    for i in marks:
        parts.append(f'<line x1="{x(i):.1f}" x2="{x(i):.1f}" y1="2" y2="{height - 2}" stroke="#c0392b" stroke-width="1.5"/>')
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True)
class RunAt:
    """A load-test run as the commits page links it: when it started, its system and version, and
    whether it is a night's target (with a page of its own)."""

    run_id: str
    started_at: str
    system: str
    version: str
    target: bool = False          # a target of a night: it has a page of its own


Timeline = dict[str, list[tuple[pd.Timestamp, RunAt]]]


def run_timeline(runs: Sequence[RunAt]) -> Timeline:
    """Per system (in order), its runs in the order they started, each with its start read once."""
    return {system: [(pd.Timestamp(r.started_at), r)
                     for r in sorted((r for r in runs if r.system == system), key=lambda r: r.started_at)]
            for system in sorted({r.system for r in runs})}


def runs_between(commit_time: str | None, timeline: Timeline) -> list[tuple[RunAt | None, RunAt | None]]:
    """Per system of ``timeline`` (:func:`run_timeline`), the last run that started before the commit
    and the first after it (either None where there is none): the runs, and their versions, a change
    at this commit falls between."""
    if not commit_time:
        return []
    at = pd.Timestamp(commit_time)
    at = at.tz_localize("UTC") if at.tzinfo is None else at.tz_convert("UTC")
    out = []
    for mine in timeline.values():
        before = [r for started, r in mine if started <= at]
        after = [r for started, r in mine if started > at]
        out.append((before[-1] if before else None, after[0] if after else None))
    return out


class ReversedBy(TypedDict):
    """The later change that undoes one: its commit and change, the net change of the two, and
    whether it undoes all of it (net within 1 %)."""

    commit: str
    magnitude_pct: float
    net_pct: float
    whole: bool


class Reverses(TypedDict):
    """The earlier change a change undoes: its commit and change."""

    commit: str
    magnitude_pct: float


class Reversal(TypedDict, total=False):
    """What a row of the commits page says of reversals: undone by a later change, undoing an earlier."""

    reversed_by: ReversedBy
    reverses: Reverses


def reversals(rows: list[ContractChange], commits: list[str]) -> dict[int, Reversal]:
    """Row index -> how a later change of the same series undoes it (``reversed_by``: its commit, its
    change, the net change of the two, and whether it undoes all of it, net within ``1 %``), and on
    the later row, which change it reverses (``reverses``)."""
    pos = {c: i for i, c in enumerate(commits)}
    by_series: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_series.setdefault(f"{r['benchmark']}|{r['config']}", []).append(i)
    out: dict[int, Reversal] = {}
    for members in by_series.values():
        ordered = sorted(members, key=lambda i: pos.get(rows[i]["commit"], 0))
        for a, b in zip(ordered, ordered[1:]):
            first, second = rows[a]["magnitude_pct"], rows[b]["magnitude_pct"]
            if first * second >= 0:
                continue
            net = 100.0 * ((1 + first / 100.0) * (1 + second / 100.0) - 1.0)
            out.setdefault(a, {})["reversed_by"] = {"commit": rows[b]["commit"], "magnitude_pct": second,
                                                   "net_pct": net, "whole": abs(net) < 1.0}
            out.setdefault(b, {})["reverses"] = {"commit": rows[a]["commit"], "magnitude_pct": first}
    return out


@dataclass(frozen=True)
class RunLinks:
    """What links a change to the load-test runs around it: each commit's time and the runs with
    their start (:func:`runs_between`)."""

    commit_times: Mapping[str, str]
    runs: Sequence[RunAt] = ()


def render_page(rows: list[ContractChange], result: SeriesDetection | None, *, source: str | None,
                new_clusters: list[ClusterEntry], metrics: dict[str, F1Scores] | None, top_series: int,
                problem: str | None = None, links: RunLinks | None = None) -> str:
    """The commits page: each change with its series, the runs around it (``links``) and the
    change that later reverses it; ``problem`` says why no series could be read."""
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(loader=FileSystemLoader(config.TEMPLATES), autoescape=select_autoescape(["html", "j2"]))
    series: list[dict[str, Any]] = []
    if result is not None:
        pos = {c: i for i, c in enumerate(result["commits"])}
        order = list(dict.fromkeys(f"{r['benchmark']}|{r['config']}" for r in rows))[:top_series]
        for s in order:
            iv = result["intervals"].get(s)
            values = result["table"].loc[s].to_numpy(float) if s in result["table"].index else np.array([])
            lows = highs = None
            if iv is not None and len(iv):
                full = iv.set_index("commit").reindex(result["commits"])
                values = full["centre"].to_numpy(float)
                lows, highs = (full["centre"] - full["half"]).to_numpy(float), (full["centre"] + full["half"]).to_numpy(float)
            marks = sorted({pos[r["commit"]] for r in rows if f"{r['benchmark']}|{r['config']}" == s})
            svg = series_svg(values, lows, highs, marks) if len(values) else None
            found = [r for r in rows if f"{r['benchmark']}|{r['config']}" == s]
            series.append({"name": s, "svg": svg, "changes": found, "summary": result["summaries"].get(s, {})})
    import base64
    for item in series:
        if item["svg"]:
            item["svg"] = "data:image/svg+xml;base64," + base64.b64encode(item["svg"].encode()).decode()
    undone = reversals(rows, list((result.get("commits") if result else None) or []))
    timeline = run_timeline(links.runs if links else ())
    times = links.commit_times if links else {}
    shown = [{**r, **undone.get(i, {}), "between": runs_between(times.get(r["commit"]), timeline)}
             for i, r in enumerate(rows)]
    undone_whole = {i for i, u in undone.items() if "reversed_by" in u and u["reversed_by"]["whole"]}
    standing = [r for i, r in enumerate(shown) if r["direction"] == "regression" and i not in undone_whole]
    return env.get_template("commits.html.j2").render(
        rows=shown, series=series, source=source, new_clusters=new_clusters, metrics=metrics, problem=problem,
        regressions=sum(r["direction"] == "regression" for r in rows), standing=len(standing),
        reversed=sum(r["direction"] == "regression" and bool(r.get("reversed_by")) for r in shown),
        method=result.get("method", "skia+mono") if result else "skia+mono",
        irregular=result.get("irregular", {}) if result else {},
        commits=len(result["commits"]) if result else 0,
        benchmarks=len(result["table"]) if result else 0)

