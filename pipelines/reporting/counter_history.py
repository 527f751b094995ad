"""counter_history: one counter across nights and versions, per system ("since when?").

Grafana, Perfherder and Skia lead with a counter's graph over time; a run page shows only the
baseline runs' sparkline.  Per system, ``reports/systems/<system>/`` holds:

- ``index.html``: the counters with a page (those flagged or shown on a run page in the last
  ``report.history_nights`` nights, and ``report.history_counters``), with their latest level
  and how often they were flagged; then every counter of the system, one anchor each
  (``index.html#c-<slug>``), so the browser's find and a link reach any of them without a script;
- ``counters/<slug>.html``: the counter's median in every run of the system, oldest first, as an
  inline SVG (no script, the pages' policy): each point coloured by the run's verdict (a verified
  run by its verdict in the history, a target by its night's verdict), ringed when its night
  flagged the counter, with the version changes marked and the band of the latest target's
  baseline runs (smallest to largest of their medians); the last runs as a table below;
- ``counters.json``: every counter, its page (or null) and latest median, for tools.

Run medians come from the normalised frames, as collected (not load-scaled), and are kept in
``medians.parquet`` with the key of each run's frame (``memo.frame_key``): a night reads only the
frames of runs it has not seen.  A page once written is rewritten every night while its counter
exists, so a run page's link never goes stale.  Counter names come from archives: they are
escaped in the pages and never become a path (:func:`slug`).  Pure core, I/O shell.
"""
from __future__ import annotations

import html
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from pipelines import config
from pipelines.objectives.files import Criterion
from pipelines.reporting.links import shown_counters, slug
from pipelines.reporting.plots import sparkline
from pipelines.reporting.summary import with_unit
from pipelines.storage.run_records import Environment, RunRecord, ValidIndex
from pipelines.storage.stage_files import VerdictFile

log = logging.getLogger("regresslab.report")

STATUS = {  # fill colour and legend of a point, by the run's verdict
    "verified pass": ("#95a5a6", "verified normal run of the history"),
    "verified fail": ("#8e44ad", "verified regression of the history"),
    "pass": ("#27ae60", "passed night"),
    "fail": ("#c0392b", "failed night"),
    "no_baseline": ("#e67e22", "night with no baseline"),
    "unjudged": ("#bdc3c7", "not judged yet"),
}
KEY_COLUMN = "__frame_key__"

# --------------------------------------------------------------------------- pure core


@dataclass
class Point:
    """One run on a counter's graph."""
    run_id: str
    started_at: str
    version: str
    status: str
    value: float | None
    flagged: bool
    lab: str = ""


def run_status(row: RunRecord, doc: VerdictFile | None, is_target: bool) -> str:
    """A verified run by its verdict in the history; a target by its night's verdict."""
    if not is_target and row.get("verdict") in ("pass", "fail"):
        return f"verified {row['verdict']}"
    verdict = (doc or {}).get("verdict")
    return verdict if verdict in ("pass", "fail", "no_baseline") else "unjudged"


LAB_COLOURS = ("#1abc9c", "#3498db", "#9b59b6", "#f1c40f", "#e67e22", "#34495e", "#e84393", "#7f8c8d")


def lab_labels(envs: dict[str, Environment]) -> dict[str, str]:
    """Each run's lab, named by the environment components whose value differs between the runs
    given (``memory_gb=16``): the same counter moves with the hardware (Foo et al. 2015, seed 003
    §3), so the graph says which lab each point ran in.  Empty when every run shares one lab."""
    keys = sorted({k for env in envs.values() for k in env})
    varying = [k for k in keys if len({str(env.get(k)) for env in envs.values()}) > 1]
    return {r: ", ".join(f"{k}={env.get(k, '—')}" for k in varying) for r, env in envs.items()}


def _ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    return list(np.linspace(lo, hi, n))


def objective_limits(doc: VerdictFile | None) -> dict[str, list[tuple[str, float, str]]]:
    """Counter -> the absolute criteria the run's objectives set on it: (label, bound, ``pass`` or
    ``warning``); relative criteria move with each run's earlier results and are not drawn."""
    out: dict[str, list[tuple[str, float, str]]] = {}
    gate = (doc or {}).get("objectives")
    for o in gate["objectives"] if gate else []:
        for kind, written in (("pass", o["pass"]), ("warning", o["warning"])):
            for criteria in written:
                for text in criteria:
                    c = Criterion.parse(text)
                    if not c.relative:
                        out.setdefault(o["counter"], []).append(
                            (f"objective {o['display_name']}: {o['aggregate']} {text} ({kind})", c.value, kind))
    return out


def history_svg(counter: str, points: list[Point], band: tuple[float, float] | None, *, width: int = 960,
                height: int = 280, limits: Sequence[tuple[str, float, str]] = ()) -> str:
    """The counter's run medians over the runs, oldest first, as an inline SVG element.

    x: the runs in order of start, evenly spaced (a night without runs leaves no gap); y: the
    medians, in the counter's unit; the baseline band as a shaded rectangle; a dashed line where
    the version changes, labelled with the new version; each point's ``<title>`` (its run, version,
    start, value and verdict) shows on hover; the objectives' absolute criteria on the counter
    (``limits``: label, bound, kind) as horizontal lines.  Everything from an archive is escaped."""
    esc = html.escape
    labs = list(dict.fromkeys(p.lab for p in points)) if len({p.lab for p in points}) > 1 else []
    left, right, top, bottom = 78.0, 12.0, 22.0, 34.0 + (10.0 if labs else 0.0)
    values = [p.value for p in points if p.value is not None and np.isfinite(p.value)]
    if band:
        values += [band[0], band[1]]
    if values:
        values += [bound for _, bound, _ in limits]
    if not values:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="40" role="img">'
                f'<text x="8" y="24" font-size="13">no value of {esc(counter)} in any run</text></svg>')
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.08 or max(abs(hi) * 0.05, 1e-9)
    lo, hi = lo - pad, hi + pad
    n = len(points)
    plot_w, plot_h = width - left - right, height - top - bottom

    def x(i: int) -> float:
        return left + (plot_w * (i + 0.5) / n)

    def y(v: float) -> float:
        return top + plot_h * (1.0 - (v - lo) / (hi - lo))

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(counter)} over the runs">',
             f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fff" stroke="#ddd"/>']
    if band:
        y1, y0 = y(band[1]), y(band[0])
        parts.append(f'<rect class="band" x="{left}" y="{y1:.1f}" width="{plot_w}" height="{max(y0 - y1, 1.0):.1f}" '
                     f'fill="#2980b9" fill-opacity="0.12"><title>baseline band of the latest night: '
                     f'{esc(with_unit(counter, band[0]))} to {esc(with_unit(counter, band[1]))}</title></rect>')
    for label, bound, kind in limits:
        colour = "#c0392b" if kind == "pass" else "#d68910"
        parts.append(f'<line class="objective {kind}" x1="{left}" x2="{left + plot_w}" y1="{y(bound):.1f}" '
                     f'y2="{y(bound):.1f}" stroke="{colour}" stroke-dasharray="6,3"><title>{esc(label)}</title></line>'
                     f'<text x="{left + plot_w - 4}" y="{y(bound) - 3:.1f}" font-size="10" text-anchor="end" '
                     f'fill="{colour}">{esc(label)}</text>')
    for v in _ticks(lo + pad, hi - pad):
        parts.append(f'<line x1="{left - 4}" x2="{left}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#999"/>'
                     f'<text x="{left - 6}" y="{y(v) + 4:.1f}" font-size="11" text-anchor="end">'
                     f'{esc(with_unit(counter, v))}</text>')
    previous = None
    for i, p in enumerate(points):
        if previous is not None and p.version != previous:
            parts.append(f'<line class="version" x1="{x(i) - plot_w / n / 2:.1f}" x2="{x(i) - plot_w / n / 2:.1f}" '
                         f'y1="{top}" y2="{top + plot_h}" stroke="#555" stroke-dasharray="3,3"/>'
                         f'<text x="{x(i) - plot_w / n / 2 + 3:.1f}" y="{top - 6}" font-size="10">'
                         f'{esc(str(p.version)[:24])}</text>')
        previous = p.version
    step = max(1, n // 8)
    for i in range(0, n, step):
        parts.append(f'<text x="{x(i):.1f}" y="{top + plot_h + 16}" font-size="10" text-anchor="middle">'
                     f'{esc(str(points[i].started_at)[:10])}</text>')
    for i, p in enumerate(points) if labs else ():
        colour = LAB_COLOURS[labs.index(p.lab) % len(LAB_COLOURS)]
        parts.append(f'<rect class="lab" x="{x(i) - plot_w / n / 2:.1f}" y="{top + plot_h + 24}" '
                     f'width="{plot_w / n:.1f}" height="6" fill="{colour}"><title>{esc(p.lab)}</title></rect>')
    line = [f"{x(i):.1f},{y(p.value):.1f}" for i, p in enumerate(points)
            if p.value is not None and np.isfinite(p.value)]
    if len(line) > 1:
        parts.append(f'<polyline fill="none" stroke="#7f8c8d" stroke-width="1.2" points="{" ".join(line)}"/>')
    for i, p in enumerate(points):
        if p.value is None or not np.isfinite(p.value):
            continue
        colour = STATUS.get(p.status, STATUS["unjudged"])[0]
        title = (f"{p.run_id} · {p.version}{' · ' + p.lab if p.lab else ''} · {p.started_at} · "
                 f"{with_unit(counter, p.value)} · {p.status}"
                 + (" · flagged" if p.flagged else ""))
        ring = (f'<circle class="flag" cx="{x(i):.1f}" cy="{y(p.value):.1f}" r="7" fill="none" '
                f'stroke="#c0392b" stroke-width="2"/>' if p.flagged else "")
        parts.append(f'<g class="point {p.status.replace(" ", "-")}">{ring}<circle cx="{x(i):.1f}" '
                     f'cy="{y(p.value):.1f}" r="4" fill="{colour}"/><title>{esc(title)}</title></g>')
    parts.append("</svg>")
    return "".join(parts)


def latest_band(medians: pd.DataFrame, counter: str, baseline_runs: list[str]) -> tuple[float, float] | None:
    """Smallest and largest median of ``counter`` over the baseline runs (None without two)."""
    if counter not in medians.columns:
        return None
    vals = medians.loc[[b for b in baseline_runs if b in medians.index], counter].dropna()
    return (float(vals.min()), float(vals.max())) if len(vals) >= 2 else None


# --------------------------------------------------------------------------- I/O shell


def system_dir(system: str) -> Path:
    return config.SYSTEM_REPORTS / slug(system)


def run_medians(system: str, runs: list[str], *, write: bool = True) -> pd.DataFrame:
    """Each run's median of every counter (rows: ``runs`` that have a normalised frame), read
    from ``medians.parquet`` where the run's frame key is unchanged, else from its frame; the
    cache is written again only with ``write`` (one writer: the system pages, not each run's report)."""
    from pipelines.storage import atomic, memo, store

    path = system_dir(system) / "medians.parquet"
    cached = pd.DataFrame()
    if path.exists():
        try:
            cached = pd.read_parquet(path)
        except Exception:             # noqa: BLE001 -- a torn cache is recomputed, never trusted
            cached = pd.DataFrame()
    rows, keys, fresh = {}, {}, 0
    for run in runs:
        key = memo.frame_key(run)
        if key is None or not config.frame_path(run).exists():
            continue
        keys[run] = key
        if run in cached.index and cached.at[run, KEY_COLUMN] == key:
            rows[run] = cached.loc[run].drop(KEY_COLUMN)
            continue
        rows[run] = store.load_normalized(run).median(numeric_only=True)
        fresh += 1
    frame = pd.DataFrame(rows).T.apply(pd.to_numeric, errors="coerce") if rows else pd.DataFrame()
    if write and (fresh or len(frame) != len(cached)):
        out = frame.copy()
        out[KEY_COLUMN] = pd.Series(keys, dtype=str)
        atomic.write_parquet_atomic(path, out)
    return frame


def _reports(runs: list[str]) -> dict[str, VerdictFile]:
    from pipelines.storage import atomic

    out = {}
    for run in runs:
        path = config.run_report_path(run)
        if path.exists():
            try:
                out[run] = atomic.read_json(path)
            except (OSError, ValueError):
                continue
    return out


def recent_runs(nights: int) -> set[str]:
    """The runs of the last ``nights`` nights' summaries (``reports/nights``)."""
    from pipelines.storage import atomic

    if not config.NIGHTS.exists():
        return set()
    out: set[str] = set()
    for path in sorted(config.NIGHTS.glob("*.json"))[-nights:]:
        try:
            out |= set(atomic.read_json(path).get("runs") or {})
        except (OSError, ValueError, AttributeError):
            continue
    return out


def write_system_pages(index: ValidIndex, targets: list[str], params: Mapping[str, Any]
                       ) -> dict[str, dict[str, int]]:
    """Every system's history pages (module docstring); per system, the counters and pages written."""
    from pipelines.reporting.pages import page_environment, style_sheet
    from pipelines.storage import atomic

    started = time.monotonic()
    top_n, nights = int(params["top_counters"]), int(params["history_nights"])
    asked = list(params.get("history_counters") or [])
    recent = recent_runs(nights) | set(targets)
    target_set = set(targets)
    summary: dict[str, dict[str, int]] = {}
    env, style = page_environment(), style_sheet()
    for system in sorted({str(row["system"]) for row in index.values() if row.get("system")}):
        runs = sorted((r for r, row in index.items() if row.get("system") == system),
                      key=lambda r: (str(index[r].get("started_at") or ""), r))
        medians = run_medians(system, runs)
        runs = [r for r in runs if r in medians.index]
        if not runs:
            continue
        docs = _reports(runs)
        flagged = {r: set(d.get("flagged_counters") or []) for r, d in docs.items()}
        folder = system_dir(system)
        existing = {p.stem for p in (folder / "counters").glob("*.html")} if (folder / "counters").exists() else set()
        slugs = {c: slug(c) for c in medians.columns}
        paged = set(asked) & set(medians.columns)
        for r in recent & set(docs):
            paged |= set(shown_counters(docs[r], top_n)) & set(medians.columns)
        paged |= {c for c, s in slugs.items() if s in existing}
        latest = next((r for r in reversed(runs) if r in docs and r in target_set), None) or \
            next((r for r in reversed(runs) if r in docs), None)
        latest_doc = docs.get(latest) if latest is not None else None
        baseline = [b["run_id"] for b in (latest_doc or {}).get("baseline_runs") or []]
        limits = objective_limits(latest_doc)
        paged |= set(limits) & set(medians.columns)
        status = {r: run_status(index[r], docs.get(r), r in target_set) for r in runs}
        labs = lab_labels({r: index[r].get("environment") or {} for r in runs})
        order = list(dict.fromkeys(labs[r] for r in runs))
        lab_legend = {lab: (f"lab {i + 1}", LAB_COLOURS[i % len(LAB_COLOURS)])
                      for i, lab in enumerate(order)} if len(order) > 1 else {}
        recent_flags = {c: sum(c in flagged.get(r, ()) for r in recent) for c in paged}
        for c in sorted(paged):
            points = [Point(r, str(index[r].get("started_at") or ""), str(index[r].get("version") or ""), status[r],
                            None if pd.isna(medians.at[r, c]) else float(medians.at[r, c]), c in flagged.get(r, ()),
                            labs[r]) for r in runs]
            page = env.get_template("counter.html.j2").render(
                style=style, system=system, counter=c, anchor=slugs[c],
                svg=history_svg(c, points, latest_band(medians, c, baseline), limits=limits.get(c, [])), latest=latest,
                rows=[{**p.__dict__, "text": "—" if p.value is None else with_unit(c, p.value),
                       "page": p.run_id in docs, "lab_name": lab_legend.get(p.lab, ("", ""))[0]}
                      for p in reversed(points[-20:])],
                legend=STATUS, labs=lab_legend, flagged_nights=sum(p.flagged for p in points))
            atomic.write_text_atomic(folder / "counters" / f"{slugs[c]}.html", page)
        last, last_n = medians.iloc[-1], int(params["trend_nights"])
        marks = [status[r].split(" ")[-1] for r in runs][-last_n:]
        listing = [{"counter": c, "slug": slugs[c], "page": c in paged,
                    "latest": None if pd.isna(last.get(c)) else with_unit(c, float(last[c])),
                    "flags": recent_flags.get(c, 0),
                    "trend": sparkline(medians[c].tolist()[-last_n:], marks=marks) if c in paged else None}
                   for c in sorted(medians.columns)]
        atomic.write_text_atomic(folder / "index.html", env.get_template("system.html.j2").render(
            style=style, system=system, runs=len(runs), first=index[runs[0]].get("started_at"),
            last=index[runs[-1]].get("started_at"), nights=nights, trend_runs=last_n,
            paged=sorted((row for row in listing if row["page"]), key=lambda row: (-row["flags"], row["counter"])),
            listing=listing))
        atomic.write_json_atomic(folder / "counters.json",
                                  [{"counter": row["counter"], "page": f"counters/{row['slug']}.html" if row["page"]
                                    else None, "anchor": f"c-{row['slug']}", "latest": row["latest"]}
                                   for row in listing])
        summary[system] = {"counters": len(listing), "pages": len(paged), "runs": len(runs)}
    log.info("[report] counter history: %s in %.1f s", ", ".join(f"{s}: {v['pages']} page(s) of {v['counters']} "
                                                                  f"counters over {v['runs']} runs"
                                                                  for s, v in summary.items()) or "no system",
             time.monotonic() - started)
    return summary
