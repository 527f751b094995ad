"""The pictures of the pages: control charts and the rules' violation timeline as PNG, sparklines as SVG.

Every picture is a data URI inlined in its page, so a page works offline and carries no script
(the pages' Content-Security-Policy allows images from ``data:`` only).
"""
from __future__ import annotations

import base64
import io
from typing import Any

import numpy as np


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def timeline_plot(intervals: dict[str, list[int]], counters: list[str], n_intervals: int, interval_s: float) -> str | None:
    """Foo et al. 2015 Fig. 3: for each flagged counter, the intervals where its rules were violated."""
    rows = [c for c in counters if intervals.get(c)]
    if not rows:
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(rows) + 1.0))
    for y, c in enumerate(rows):
        xs = np.asarray(intervals[c]) * interval_s / 60.0
        ax.scatter(xs, np.full(len(xs), y), marker="|", s=120, color="#c0392b")
    ax.set_yticks(range(len(rows)), [c[:48] for c in rows], fontsize=8)
    ax.set_xlim(0, n_intervals * interval_s / 60.0)
    ax.set_xlabel("minutes into the load phase")
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)
    out = _png(fig)
    plt.close(fig)
    return out


def sparkline(values: list[float | None], *, marks: list[str] | None = None) -> str | None:
    """A small line of ``values`` (a counter's median per run, or a system's score per night),
    the last point drawn as a dot; ``marks`` colours points (``fail`` red). A drift over runs
    or nights shows at a glance (Skia Perf, Perfherder). An SVG data URI: a few hundred bytes,
    drawn in microseconds (no plotting library), shown by ``<img>`` under the pages' CSP."""
    ys = np.array([np.nan if v is None else float(v) for v in values], dtype=float)
    if np.isfinite(ys).sum() < 2:
        return None
    width, height, pad = 120.0, 26.0, 3.0
    lo, hi = float(np.nanmin(ys)), float(np.nanmax(ys))
    span = hi - lo or 1.0
    xs = pad + (width - 2 * pad) * np.arange(len(ys)) / max(1, len(ys) - 1)
    py = height - pad - (height - 2 * pad) * (ys - lo) / span
    pts = [(x, y) for x, y in zip(xs, py) if np.isfinite(y)]
    colours = ["#c0392b" if m == "fail" else "#2980b9" for m in (marks or ["pass"] * len(ys))]
    dots = "".join(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{3.2 if i == len(ys) - 1 else 1.6}" fill="{colours[i]}"/>'
                   for i, (x, y) in enumerate(zip(xs, py)) if np.isfinite(y))
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
           f'viewBox="0 0 {width:.0f} {height:.0f}"><polyline fill="none" stroke="#7f8c8d" stroke-width="1.2" '
           f'points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in pts)}"/>{dots}</svg>')
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()


def night_trends(nights: list[tuple[str, dict[str, dict[str, Any]]]], *, last: int) -> list[dict[str, Any]]:
    """Per system, over its last ``last`` nights: the highest run score each night (a red dot
    when a run failed), with the nights' labels and failed counts, for the night index."""
    out = []
    systems = sorted({r.get("system") for _, rows in nights for r in rows.values() if r.get("system")})
    for system in systems:
        points = []
        for night, rows in nights:
            mine = [r for r in rows.values() if r.get("system") == system]
            if mine:
                failed = sum(r.get("verdict") == "fail" for r in mine)
                points.append((night, max(float(r.get("score") or 0) for r in mine), failed, len(mine)))
        points = points[-last:]
        out.append({"system": system, "nights": [p[0] for p in points],
                    "text": ", ".join(f"{p[0]}: {p[2]}/{p[3]} failed" for p in points[-3:]),
                    "chart": sparkline([p[1] for p in points], marks=["fail" if p[2] else "pass" for p in points])})
    return out


def control_chart_plot(counter: str, series: dict[str, list], interval_s: float) -> str:
    """Nguyen 2017 Fig. 3.2: the baseline's band (LCL..UCL, centre line) and the target's points."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def arr(key):
        return np.array([np.nan if v is None else v for v in series.get(key, [])], dtype=float)
    target, lcl, ucl, cl = arr("target"), arr("lcl"), arr("ucl"), arr("cl")
    x = np.arange(len(target)) * interval_s / 60.0
    fig, ax = plt.subplots(figsize=(4.2, 2.2))
    if len(lcl) == len(x):
        ax.fill_between(x, lcl, ucl, color="#95a5a6", alpha=0.35, label="baseline LCL–UCL", step="mid")
        ax.plot(x, cl, color="#7f8c8d", lw=1, label="centre line")
    out_of = (target < lcl) | (target > ucl) if len(lcl) == len(x) else np.zeros(len(x), bool)
    ax.plot(x[~out_of], target[~out_of], "x", ms=3, color="#2c3e50", label="target")
    ax.plot(x[out_of], target[out_of], "x", ms=3, color="#c0392b", label="target, out of limits")
    ax.set_title(counter[:60], fontsize=8)
    ax.tick_params(labelsize=7)
    ax.set_xlabel("minutes", fontsize=7)
    ax.legend(fontsize=6, loc="best")
    out = _png(fig)
    plt.close(fig)
    return out

