"""The pictures of the pages: control charts, the rules' violation timeline and sparklines, as SVG.

Every picture is a data URI inlined in its page, so a page works offline and carries no script
(the pages' Content-Security-Policy allows images from ``data:`` only).
"""
from __future__ import annotations

import base64
import html
import math
from typing import Any

import numpy as np

from pipelines.storage.stage_files import IndexRow


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round ticks (1, 2 or 5 times a power of ten apart, at least ``(hi - lo) / n``) inside
    ``lo``..``hi``: 0..60 gives 0, 20, 40, 60; 7..13 gives 8, 10, 12."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / n
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw * (1 - 1e-9))
    first = math.ceil(lo / step - 1e-9)
    return [float(f"{k * step:.12g}") + 0.0 for k in range(first, math.floor(hi / step + 1e-9) + 1)]


def tick_labels(ticks: list[float]) -> list[str]:
    """The ticks as text, with as many decimals as their step needs and one unit prefix for the
    axis, from its largest tick (k from 10,000, then M, G, T): 2e6, 2.5e6, 3e6 read 2.0M, 2.5M, 3.0M."""
    if not ticks:
        return []
    big = max(abs(t) for t in ticks)
    scale, suffix = next(((s, x) for least, s, x in ((1e12, 1e12, "T"), (1e9, 1e9, "G"), (1e6, 1e6, "M"),
                                                    (1e4, 1e3, "k")) if big >= least), (1.0, ""))
    if len(ticks) < 2:
        return [f"{ticks[0] / scale + 0.0:.3g}{suffix}"]
    step = (ticks[1] - ticks[0]) / scale
    decimals = min(4, max(0, -math.floor(math.log10(step) + 1e-9)))
    return [f"{t / scale + 0.0:.{decimals}f}{suffix}" for t in ticks]


def _svg_uri(width: float, height: float, body: list[str], label: str) -> str:
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
           f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="DejaVu Sans, Arial, sans-serif" role="img" '
           f'aria-label="{html.escape(label)}"><rect width="100%" height="100%" fill="#fff"/>{"".join(body)}</svg>')
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()


def _x_axis(lo: float, hi: float, sx, left: float, right: float, y: float, top: float, label: str) -> list[str]:
    """Ticks, faint grid lines up to ``top`` and ``label`` under an x axis at height ``y``."""
    ticks = nice_ticks(lo, hi)
    out = [f'<line x1="{left:.1f}" x2="{right:.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="#555"/>']
    for t, text in zip(ticks, tick_labels(ticks)):
        out.append(f'<line x1="{sx(t):.1f}" x2="{sx(t):.1f}" y1="{top:.1f}" y2="{y:.1f}" stroke="#000" '
                   f'stroke-opacity="0.08"/><line x1="{sx(t):.1f}" x2="{sx(t):.1f}" y1="{y:.1f}" y2="{y + 3:.1f}" '
                   f'stroke="#555"/><text x="{sx(t):.1f}" y="{y + 12:.1f}" font-size="8" text-anchor="middle">'
                   f'{text}</text>')
    out.append(f'<text x="{(left + right) / 2:.1f}" y="{y + 23:.1f}" font-size="8" text-anchor="middle">{label}</text>')
    return out


def _crosses(points: list[tuple[float, float]], colour: str, css: str, size: float = 2.2) -> str:
    """One path of small x marks (matplotlib's ``"x"`` marker)."""
    if not points:
        return ""
    d = "".join(f"M{x - size:.1f} {y - size:.1f}l{2 * size:.1f} {2 * size:.1f}m0 {-2 * size:.1f}"
                f"l{-2 * size:.1f} {2 * size:.1f}" for x, y in points)
    return f'<path class="{css}" d="{d}" stroke="{colour}" stroke-width="1.1" fill="none"/>'


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """The ``[start, end)`` stretches where ``mask`` holds."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))


def timeline_plot(intervals: dict[str, list[int]], counters: list[str], n_intervals: int, interval_s: float) -> str | None:
    """Foo et al. 2015 Fig. 3: for each flagged counter, the intervals where its rules were
    violated, a red tick each, over the minutes of the load phase."""
    rows = [c for c in counters if intervals.get(c)]
    if not rows:
        return None
    width, row_h, top, bottom = 720.0, 18.0, 8.0, 34.0
    left = min(300.0, 10.0 + 5.2 * max(len(c[:48]) for c in rows))
    right = width - 12.0
    height = top + row_h * len(rows) + bottom
    axis_y = top + row_h * len(rows)
    span = (n_intervals or max(max(intervals[c]) for c in rows) + 1) * interval_s / 60.0 or 1.0

    def sx(minutes: float) -> float:
        return left + (right - left) * minutes / span
    body = _x_axis(0.0, span, sx, left, right, axis_y, top, "minutes into the load phase")
    for i, c in enumerate(rows):
        y = top + row_h * (i + 0.5)
        ticks = "".join(f"M{sx(k * interval_s / 60.0):.1f} {y - 6:.1f}v12" for k in intervals[c])
        body.append(f'<text x="{left - 6:.1f}" y="{y + 3:.1f}" font-size="9" text-anchor="end">'
                    f'{html.escape(c[:48])}</text><path d="{ticks}" stroke="#c0392b" stroke-width="1.5"/>')
    return _svg_uri(width, height, body, "violation time-line")


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


def night_trends(nights: list[tuple[str, dict[str, IndexRow]]], *, last: int) -> list[dict[str, Any]]:
    """Per system, over its last ``last`` nights: the highest run score each night (a red dot
    when a run failed), with the nights' labels and failed counts, for the night index."""
    out = []
    systems = sorted({str(r["system"]) for _, rows in nights for r in rows.values() if r.get("system")})
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
    """Nguyen 2017 Fig. 3.2: the baseline's band (LCL..UCL, a step per interval), its centre line
    and the target's points, red where out of the band; an SVG data URI (no plotting library)."""
    def arr(key):
        return np.array([np.nan if v is None else v for v in series.get(key, [])], dtype=float)
    target, lcl, ucl, cl = arr("target"), arr("lcl"), arr("ucl"), arr("cl")
    x = np.arange(len(target)) * interval_s / 60.0
    band = len(lcl) == len(ucl) == len(x) and len(x) > 0
    if not band:
        lcl = ucl = cl = np.full(len(x), np.nan)
    seen = np.concatenate([target, lcl, ucl, cl if len(cl) == len(x) else []])
    seen = seen[np.isfinite(seen)]
    lo, hi = (float(seen.min()), float(seen.max())) if len(seen) else (0.0, 1.0)
    pad = (hi - lo) * 0.06 or max(abs(hi) * 0.05, 0.5)
    lo, hi = lo - pad, hi + pad
    x_hi = float(x[-1]) if len(x) > 1 else 1.0
    width, height, left, right, top, axis_y = 340.0, 200.0, 44.0, 332.0, 18.0, 150.0

    def sx(v):
        return left + (right - left) * v / x_hi

    def sy(v):
        return axis_y - (axis_y - top) * (v - lo) / (hi - lo)
    body = [f'<text x="{(left + right) / 2:.1f}" y="11" font-size="9" text-anchor="middle">{html.escape(counter[:60])}</text>']
    edges = np.concatenate([[x[0]], (x[1:] + x[:-1]) / 2, [x[-1]]]) if len(x) else np.array([])
    for a, b in _runs(np.isfinite(lcl) & np.isfinite(ucl)):
        upper = [f"{sx(edges[i + k]):.1f},{sy(ucl[i]):.1f}" for i in range(a, b) for k in (0, 1)]
        lower = [f"{sx(edges[i + k]):.1f},{sy(lcl[i]):.1f}" for i in reversed(range(a, b)) for k in (1, 0)]
        body.append(f'<polygon points="{" ".join(upper + lower)}" fill="#95a5a6" fill-opacity="0.35"/>')
    for a, b in [(a, b) for a, b in _runs(np.isfinite(cl)) if b - a > 1] if len(cl) == len(x) else ():
        body.append(f'<polyline points="{" ".join(f"{sx(x[i]):.1f},{sy(cl[i]):.1f}" for i in range(a, b))}" '
                    f'fill="none" stroke="#7f8c8d" stroke-width="1"/>')
    out_of = (target < lcl) | (target > ucl)
    shown = np.isfinite(target)
    body.append(_crosses([(sx(x[i]), sy(target[i])) for i in np.flatnonzero(shown & ~out_of)], "#2c3e50", "in"))
    body.append(_crosses([(sx(x[i]), sy(target[i])) for i in np.flatnonzero(shown & out_of)], "#c0392b", "out"))
    ticks = nice_ticks(lo, hi)
    body.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{axis_y}" stroke="#555"/>')
    body += [f'<line x1="{left - 3}" x2="{left}" y1="{sy(t):.1f}" y2="{sy(t):.1f}" stroke="#555"/>'
             f'<text x="{left - 5}" y="{sy(t) + 3:.1f}" font-size="8" text-anchor="end">{text}</text>'
             for t, text in zip(ticks, tick_labels(ticks))]
    body += _x_axis(0.0, x_hi, sx, left, right, axis_y, top, "minutes")
    legend = ([("band", "baseline LCL–UCL"), ("line", "centre line")] if band else []) + \
        [("#2c3e50", "target"), ("#c0392b", "target, out of limits")]
    at, y = 8.0, 192.0
    for kind, text in legend:
        if kind == "band":
            body.append(f'<rect x="{at:.1f}" y="{y - 6}" width="10" height="7" fill="#95a5a6" fill-opacity="0.35"/>')
        elif kind == "line":
            body.append(f'<line x1="{at:.1f}" x2="{at + 10:.1f}" y1="{y - 2.5}" y2="{y - 2.5}" stroke="#7f8c8d"/>')
        else:
            body.append(_crosses([(at + 5, y - 2.5)], kind, "key"))
        body.append(f'<text x="{at + 13:.1f}" y="{y:.1f}" font-size="7.5">{text}</text>')
        at += 20 + 4.1 * len(text)
    return _svg_uri(width, height, body, f"control chart {counter[:60]}")
