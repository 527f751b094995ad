"""report: the verdict file and the one-page HTML report of every target run, and the night's index.

Merges what the detectors found for a run — the association-rule ensembles (``detect``,
Foo et al. 2015), the control charts (``control_charts``, Nguyen 2017 ch. 3, 6-7), the
clustered regression models (``clusters``, Shang et al. 2015) and the
probable cause (``predict_causes``, Nguyen 2017 ch. 8) — into ``reports/runs/<run_id>.json``
exactly as ``DATA_CONTRACT.md`` §2, renders ``reports/runs/<run_id>.html`` beside it and
``reports/index.html`` for the night.

The headline decision (verdict, score, flagged counters, cause) is ``headline.compose``,
the same function ``evaluate`` scores in leave-one-out.  Pages are Jinja2 templates in
``pipelines/templates/`` with one style sheet, shared with the Airflow plugin.

Everything that came from an archive (run ids, counter names, environment values, rule
items) is HTML-escaped by Jinja2's autoescaping; plots are PNG images inlined as data
URIs, so a page works offline and carries no script.
"""
from __future__ import annotations

import base64
import io
import logging
import re
from typing import Any

import numpy as np
import pandas as pd

from pipelines import archive, config, headline, history, locks, memo, store, triage
from pipelines.progress import Progress

log = logging.getLogger("regresslab.report")


# --------------------------------------------------------------------------- pure core


def environment_differences(target_env: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """``key: theirs -> ours`` for every environment component that differs."""
    keys = sorted(set(target_env) | set(other))
    return [f"{k}: {other.get(k, '—')} → {target_env.get(k, '—')}" for k in keys if other.get(k) != target_env.get(k)]


def novel_environment(target_env: dict[str, Any], baseline_envs: list[dict[str, Any]]) -> dict[str, Any]:
    """The environment components whose value no baseline run shares: the run is on a lab the
    history has not seen, so part of any difference may be the lab's, not the build's."""
    return {k: v for k, v in sorted(target_env.items()) if not any(env.get(k) == v for env in baseline_envs)}


def worse_direction(counter: str, directions: list[dict[str, str]]) -> str | None:
    """``up`` or ``down``: which way the counter gets worse, by the first rule of
    ``report.directions`` whose regex ``counter`` it contains; ``None`` when no rule knows it."""
    for rule in directions:
        if re.search(rule["counter"], counter):
            return rule["worse"]
    return None


def counter_changes(counters: list[str], target: pd.Series, baseline: pd.Series,
                    directions: list[dict[str, str]]) -> dict[str, dict[str, Any]]:
    """What a person reads first (DATA_CONTRACT §2 ``counter_changes``): per counter, the baseline
    runs' median and this run's, in the counter's own unit, the signed change in % of the
    baseline (``None`` when the baseline is 0), and ``worse``, ``better`` or ``changed`` (the
    counter's direction unknown, or no change)."""
    out: dict[str, dict[str, Any]] = {}
    for c in counters:
        b, t = baseline.get(c), target.get(c)
        if b is None or t is None or not np.isfinite(b) or not np.isfinite(t):
            continue
        pct = None if b == 0 else 100.0 * (t - b) / abs(b)
        worse = worse_direction(c, directions)
        if worse is None or t == b:
            direction = "changed"
        else:
            direction = "worse" if (t > b) == (worse == "up") else "better"
        out[c] = {"baseline": _round(b), "target": _round(t),
                  "change_pct": None if pct is None else round(pct, 1), "direction": direction}
    return out


def _round(x: float) -> float:
    """Four significant digits: what a reader uses, in the counter's unit."""
    return float(f"{float(x):.4g}")


UNITS = (("_ms", "ms"), ("_pct", "%"), ("_percent", "%"), ("_rps", "req/s"), ("_bytes_per_s", "B/s"),
         ("_bytes", "B"), ("_per_s", "/s"), ("_per_min", "/min"), ("_mb", "MB"), ("_kb", "kB"))


def with_unit(counter: str, value: float) -> str:
    """``value`` as text in the counter's unit, read from its name (``_ms`` -> ms, ``_pct`` -> %):
    three significant digits, thousands grouped (``13,700 MB``), bytes in KiB/MiB/GiB."""
    unit = next((u for suffix, u in UNITS if counter.endswith(suffix)), "")
    if unit in ("B", "B/s") and abs(value) >= 1024:
        for prefix in ("KiB", "MiB", "GiB", "TiB"):
            value /= 1024.0
            if abs(value) < 1024:
                return f"{value:.3g} {prefix}{'/s' if unit == 'B/s' else ''}"
    number = f"{float(f'{value:.3g}'):,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    return f"{number} {unit}".strip() if unit != "%" else f"{number} %"


def change_text(counter: str, change: dict[str, Any]) -> str:
    """``app.response_time_ms 24 ms → 32 ms (+33 %, worse)``."""
    pct = "" if change["change_pct"] is None else f"{change['change_pct']:+.0f} %, "
    return (f"{counter} {with_unit(counter, change['baseline'])} → {with_unit(counter, change['target'])} "
            f"({pct}{change['direction']})")


def summary_order(flagged: list[str], changes: dict[str, dict[str, Any]], *, user_facing: str) -> list[str]:
    """The flagged counters in the order a person reads them: what users feel first (response
    times, throughput, errors: ``report.user_facing``), then the other worsened counters by the
    size of their change, then those that only changed, and the improved last."""
    rank = {"worse": 0, "changed": 1, "better": 2}

    def key(c: str) -> tuple:
        ch = changes[c]
        return (not re.search(user_facing, c), rank[ch["direction"]], -abs(ch["change_pct"] or 1e9))
    return sorted((c for c in flagged if c in changes), key=key)


def plain_summary(doc: dict[str, Any], changes: dict[str, dict[str, Any]], *, top: int = 3,
                  user_facing: str = "(response|latency|throughput|_rps$|error)") -> str:
    """The sentence a release manager came for: the verdict, the top changes in their units
    (:func:`summary_order`), the probable cause (or unknown), and whether a new lab makes the
    verdict uncertain."""
    if doc["verdict"] == "pass":
        text = "No regression found"
        pattern = doc.get("details", {}).get("fault_pattern")
        if pattern:
            text += (f", but the cause classifier sees the pattern of {pattern['label']} "
                     f"({100 * (pattern.get('probability') or 0):.0f} %): worth a look")
    else:
        moved = [change_text(c, changes[c]) for c in summary_order(doc["flagged_counters"], changes,
                                                                   user_facing=user_facing)][:top]
        text = "Regression: " + ("; ".join(moved) if moved else "the detectors' combined evidence; no single "
                                 "counter stands out")
        cause = doc["cause"]
        if cause.get("label") and cause.get("known"):
            text += f". Probable cause: {cause['label']} ({100 * (cause.get('probability') or 0):.0f} %)"
        else:
            text += ". Cause unknown" + (f" (nearest: {cause['label']}, not certain)" if cause.get("label") else "")
    if doc.get("baseline_status") == "insufficient":
        text += ". New lab with no baseline of its own: this verdict is uncertain"
    elif doc.get("details", {}).get("environment_not_in_baseline"):
        text += ". New lab environment: part of any difference may be the lab's"
    return text + "."


def night_changes(current: dict[str, dict[str, Any]], previous: dict[str, dict[str, Any]] | None) -> dict[str, str]:
    """Per run, what changed since the previous night's index: new, verdict changed, or unchanged."""
    out = {}
    for run_id, row in current.items():
        if previous is None or run_id not in previous:
            out[run_id] = "new"
        elif previous[run_id]["verdict"] != row["verdict"]:
            out[run_id] = f"{previous[run_id]['verdict']} → {row['verdict']}"
        elif previous[run_id].get("cause") != row.get("cause"):
            out[run_id] = f"cause {previous[run_id].get('cause')} → {row.get('cause')}"
        else:
            out[run_id] = "unchanged"
    return out


# ---- plots (PNG data URIs: self-contained, no script)


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


# ---- HTML (templates and the one style sheet in pipelines/templates/, shared with the plugin)


def page_environment():
    """The Jinja2 environment of every page: the template files, autoescaping, strict undefined."""
    import jinja2
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(config.TEMPLATES)), autoescape=True,
                              undefined=jinja2.StrictUndefined)


def style_sheet() -> str:
    """The CSS every page inlines (the pages' Content-Security-Policy allows inline styles only)."""
    return (config.TEMPLATES / "style.css").read_text(encoding="utf-8")


def render_run(doc: dict[str, Any], meta: dict[str, Any], charts: dict[str, Any] | None, *,
               baseline_envs: dict[str, dict[str, Any]], raw_href: str, raw_name: str, top_n: int = 15,
               changes: dict[str, dict[str, Any]] | None = None, trends: dict[str, str | None] | None = None,
               few_intervals: int = 20) -> str:
    """The one-page HTML report of one run: the plain summary first, the top counters with
    baseline -> now and the change in their units, the methods' figures in a details section."""
    changes = changes if changes is not None else (doc.get("counter_changes") or {})
    d = doc["details"]
    cc_ratios = (d.get("control_charts") or {}).get("ratios") or {}
    by: dict[str, list[str]] = {}
    for name, m in doc["methods"].items():
        for c in m.get("flagged_counters", []):
            by.setdefault(c, []).append(name.replace("association_rules_", "rules/"))
    top = []
    for c in list(dict.fromkeys(doc["flagged_counters"] + list(doc["counter_scores"])))[:top_n]:
        r = cc_ratios.get(c) or {}
        ch = changes.get(c)
        top.append({"name": c, "score": doc["counter_scores"].get(c, 0.0), "flagged": c in doc["flagged_counters"],
                    "s": d.get("stacking_score", {}).get(c, 0), "votes": d.get("bagging_votes", {}).get(c, 0),
                    "lower": r.get("lower", "—"), "upper": r.get("upper", "—"), "by": by.get(c, []),
                    "baseline": with_unit(c, ch["baseline"]) if ch else "—",
                    "now": with_unit(c, ch["target"]) if ch else "—",
                    "change": "—" if not ch or ch["change_pct"] is None else f"{ch['change_pct']:+.1f} %",
                    "direction": ch["direction"] if ch else "", "trend": (trends or {}).get(c)})
    flagged_rules = [c for c in doc["flagged_counters"] if c in d.get("violated_rules", {})] or \
        list(d.get("violated_rules", {}))
    timeline = timeline_plot(d.get("violation_intervals", {}), flagged_rules, d.get("n_intervals", 0),
                             d.get("interval_s", 30.0))
    plots = [(c, control_chart_plot(c, s, d.get("interval_s", 30.0))) for c, s in (charts or {}).get("charts", {}).items()]
    target_env = meta.get("environment") or {}
    chart_base = set((charts or {}).get("baseline_runs", []))
    baselines = [{"run_id": b["run_id"], "weight": b["weight"], "chart": b["run_id"] in chart_base,
                  "diff": environment_differences(target_env, baseline_envs.get(b["run_id"], {}))}
                 for b in sorted(doc["baseline_runs"], key=lambda b: -b["weight"])]
    cc = doc["methods"].get("control_charts", {})
    return page_environment().get_template("run.html.j2").render(
        doc=doc, meta=meta, style=style_sheet(), top=top, timeline=timeline,
        rules=[(c, d["violated_rules"][c][:3]) for c in flagged_rules[:10]], charts=plots, baselines=baselines,
        not_analysed=sorted((d.get("not_analysed") or {}).items()), load_independent=cc.get("load_independent_counters", []),
        small=sorted((d.get("below_min_rel_change") or {}).items()),
        raw_href=raw_href, raw_name=raw_name, env=sorted(target_env.items()),
        dropped=doc.get("dropped_counters") or meta.get("_dropped_counters") or [],
        short=0 < int(d.get("n_intervals") or 0) < few_intervals)


def render_index(rows: list[dict[str, Any]], *, night: str, generated: str, quarantined: list[str],
                 reasons: dict[str, str] | None = None, valid_runs: int | None = None,
                 dropped: list[tuple[str, dict[str, Any]]] = (), decisions: list[dict[str, Any]] = (),
                 trends: list[dict[str, Any]] = (), commits: dict[str, Any] | None = None) -> str:
    """The night index: the targets, failed first; the quarantined archives with their reasons;
    the counters validation left out of valid runs, with theirs; and, when there is no target,
    a sentence that says why (nothing new, or everything quarantined)."""
    failed = [r for r in rows if r["verdict"] == "fail"]
    return page_environment().get_template("index.html.j2").render(
        rows=rows, failed=failed, night=night, generated=generated, quarantined=quarantined,
        reasons=reasons or {}, valid_runs=valid_runs, style=style_sheet(), dropped=list(dropped),
        dropped_runs=len({run_id for run_id, _ in dropped}), decisions=list(decisions), trends=list(trends),
        commits=commits)


def commit_summary() -> dict[str, Any] | None:
    """What the night index says of the commit series (``commit_changes``): its page's changes."""
    path = config.COMMIT_REPORTS / "changes.json"
    if not path.exists():
        return None
    try:
        rows = archive.read_json(path)
    except (OSError, ValueError):
        return {"unreadable": True}
    return {"changes": len(rows), "regressions": sum(r.get("direction") == "regression" for r in rows),
            "top": rows[0] if rows else None}


def dropped_counters(index: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(run_id, dropped counter) for every valid run: the counters validation left out (DATA_CONTRACT §1)."""
    return [(run_id, d) for run_id, row in sorted(index.items()) for d in row.get("_dropped_counters") or []]


def index_row(doc: dict[str, Any]) -> dict[str, Any]:
    return {"run_id": doc["run_id"], "system": doc["system"], "verdict": doc["verdict"], "score": doc["score"],
            "cause": doc["cause"]["label"], "probability": doc["cause"]["probability"] or 0.0,
            "cause_known": doc["cause"]["known"], "top": doc["flagged_counters"][:3],
            "new_lab": bool(doc.get("details", {}).get("environment_not_in_baseline")),
            "insufficient_baseline": doc.get("baseline_status") == "insufficient",
            "dropped": len(doc.get("dropped_counters") or []),
            # counter_changes is written in the summary's order (report_run): its first is the top change
            "top_change": next((change_text(c, ch) for c, ch in (doc.get("counter_changes") or {}).items()), None)}


# --------------------------------------------------------------------------- I/O shell


def raw_archives(run_id: str) -> list[str]:
    """The run's own archives in ``data/raw`` (``a`` never matches ``a.b.tar.gz``)."""
    return [name for name in (run_id + suffix for suffix in ("", *archive.ARCHIVE_SUFFIXES))
            if (config.RAW / name).exists()]


def report_key(run_id: str, detection: dict[str, Any], index: dict[str, Any], params: dict[str, Any],
               raw: list[str]) -> str:
    """The input key of a run's report (``memo``): the stages' result files it composes, the run
    and its baseline runs (their frames give ``counter_changes``), its archive's name, the
    params and the code."""
    inputs = {p.parent.name + "/" + p.name: memo.file_digest(p)
              for p in (config.detection_path(run_id), config.chart_path(run_id), config.cause_path(run_id),
                        config.cluster_path(run_id))}
    baseline = [b["run_id"] for b in detection.get("baseline_runs") or []]
    return memo.input_key("report", index, {"target": [run_id], "baseline": baseline}, report=params,
                          inputs=inputs, raw=raw)


def report_run(run_id: str, index: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Compose, write and render one run's report; return its verdict document.  A page written
    under the same input key (:func:`report_key`) is kept, with its verdict file."""
    detection = archive.read_json(config.detection_path(run_id))
    raw = raw_archives(run_id)
    key = report_key(run_id, detection, index, params, raw)
    if memo.reuse_html(config.run_report_path(run_id, "html"), key) and config.run_report_path(run_id).exists():
        return archive.read_json(config.run_report_path(run_id))
    charts = store.read_optional(config.chart_path(run_id))
    predicted = store.read_optional(config.cause_path(run_id))
    clustered = store.read_optional(config.cluster_path(run_id))
    doc = headline.compose(detection, charts, predicted, clustered=clustered, detectors=params["headline_detectors"],
                           verdict_rule=params["verdict_rule"],
                           flag_rule=params["flag_rule"], false_alarm_rate=float(params["false_alarm_rate"]),
                           classifier_resolution=float(params["classifier_resolution"]),
                           combination=params["combination"])
    doc["details"]["environment_not_in_baseline"] = novel_environment(
        index[run_id].get("environment") or {},
        [(index.get(b["run_id"]) or {}).get("environment") or {} for b in doc["baseline_runs"]])
    top_n = int(params["top_counters"])
    shown = list(dict.fromkeys(doc["flagged_counters"] + list(doc["counter_scores"])[:top_n]))
    by_start = sorted((b["run_id"] for b in doc["baseline_runs"]),
                      key=lambda b: ((index.get(b) or {}).get("started_at") or "", b))
    changes, trends = run_changes(run_id, by_start, shown, params["directions"])
    doc["counter_changes"] = {c: changes[c] for c in summary_order(doc["flagged_counters"], changes,
                                                                   user_facing=params["user_facing"])}
    doc["summary"] = plain_summary(doc, changes, user_facing=params["user_facing"])
    # counters validation left out of this run, with the reason (check, host, counter, examples)
    doc["dropped_counters"] = [{k: d.get(k) for k in ("host", "counter", "reason")}
                               for d in index[run_id].get("_dropped_counters") or []]
    archive.write_json_atomic(config.run_report_path(run_id), doc)
    raw_name = raw[0] if raw else f"{run_id} (not in data/raw)"
    html = render_run(doc, index[run_id], charts,
                      baseline_envs={b["run_id"]: (index.get(b["run_id"]) or {}).get("environment") or {}
                                     for b in doc["baseline_runs"]},
                      raw_href=f"../../data/raw/{raw_name}", raw_name=raw_name, top_n=top_n, changes=changes,
                      trends=trends, few_intervals=int(params["few_intervals"]))
    archive.write_text_atomic(config.run_report_path(run_id, "html"), memo.stamp_html(html, key))
    return doc


def run_changes(run_id: str, baseline_runs: list[str], counters: list[str], directions: list[dict[str, str]],
                ) -> tuple[dict[str, dict[str, Any]], dict[str, str | None]]:
    """:func:`counter_changes` on the normalised runs as recorded (not load-scaled: the units are
    the collector's): this run's median per counter, and the median of the baseline runs'
    intervals; and per counter a sparkline of the baseline runs' medians (oldest first) then
    this run's, so a slow drift over releases is visible."""
    target_frame = store.load_normalized(run_id)
    frames = {b: store.load_normalized(b) for b in baseline_runs if config.frame_path(b).exists()}
    if not frames:
        return {}, {}
    baseline = pd.concat(list(frames.values()), ignore_index=True).median()
    changes = counter_changes(counters, target_frame.median(), baseline, directions)
    medians = {b: f.median() for b, f in frames.items()}
    trends = {c: sparkline([medians[b].get(c) for b in frames] + [target_frame[c].median()
                                                                   if c in target_frame else None])
              for c in counters}
    return changes, trends


@locks.holding("report", shared=True)
def run_one(run_id: str) -> dict[str, Any]:
    """Write one target's verdict file and page; its index row (the per-run task of the nightly DAG)."""
    return index_row(report_run(run_id, archive.read_valid_index(), config.load_params("report")))


def quarantine_reasons(limit: int = 400) -> dict[str, str]:
    """Every archive quarantined by ``validate`` or refused by ``pull``, with its reason (shortened)."""
    out: dict[str, str] = {}
    for path in sorted(config.QUARANTINE.glob("*.json")) if config.QUARANTINE.exists() else []:
        try:
            out[path.stem] = str(archive.read_json(path).get("reason") or "")[:limit]
        except (OSError, ValueError) as exc:
            out[path.stem] = f"(quarantine file unreadable: {exc})"
    summary = store.read_optional(config.PULL_SUMMARY) or {}
    for refused in summary.get("refused") or []:
        out.setdefault(str(refused.get("run_id")), f"refused by pull: {str(refused.get('reason'))[:limit]}")
    return out


@locks.holding("report index")
def write_index(rows: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The night's index page and summary from the targets' verdict files; the summary (DAG task)."""
    import pandas as pd
    params = config.load_params("report")
    index = archive.read_valid_index()
    if rows is None:
        rows = {r: index_row(archive.read_json(config.run_report_path(r))) for r in history.targets(index)
                if config.run_report_path(r).exists()}
    now = pd.Timestamp.now(tz="UTC")
    night = str(params["night"] or now.date())
    earlier = sorted(p for p in config.NIGHTS.glob("*.json") if p.stem < night) if config.NIGHTS.exists() else []
    previous = archive.read_json(earlier[-1])["runs"] if earlier else None
    changes = night_changes(rows, previous)
    ordered = sorted(rows.values(), key=lambda r: (r["verdict"] != "fail", -r["score"], r["run_id"]))
    for r in ordered:
        r["change"] = changes[r["run_id"]]
    reasons = quarantine_reasons()
    quarantined = sorted(reasons)
    archive.write_json_atomic(config.NIGHTS / f"{night}.json", {"night": night, "runs": rows})
    history_nights = []
    for path in earlier[-(int(params["trend_nights"]) - 1):]:
        try:
            history_nights.append((path.stem, archive.read_json(path)["runs"]))
        except (OSError, ValueError, KeyError):
            continue                                   # an unreadable old night is left out of the trend
    trends = night_trends(history_nights + [(night, rows)], last=int(params["trend_nights"]))
    archive.write_text_atomic(config.NIGHT_INDEX,
                              render_index(ordered, night=night, generated=now.strftime("%Y-%m-%d %H:%M UTC"),
                                           quarantined=quarantined, reasons=reasons, valid_runs=len(index),
                                           dropped=dropped_counters(index),
                                           decisions=sorted(triage.triage_state(triage.read_log()).values(),
                                                            key=lambda d: d.get("at") or "", reverse=True),
                                           trends=trends, commits=commit_summary()))
    failed = sorted(r["run_id"] for r in rows.values() if r["verdict"] == "fail")
    return {"night": night, "runs": len(rows), "failed": failed, "quarantined": quarantined}


@locks.holding("report")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config.ensure_dirs(config.RUN_REPORTS, config.NIGHTS)
    params = config.load_params("report")
    index = archive.read_valid_index()
    todo = history.targets(index)
    progress = Progress(log, "report", len(todo))
    rows = {}
    for i, run_id in enumerate(todo, 1):
        rows[run_id] = index_row(report_run(run_id, index, params))
        progress.step(i, f"{run_id} -> {rows[run_id]['verdict']}")
    summary = write_index(rows)
    print(f"[report] {summary['runs']} runs, {len(summary['failed'])} regressed -> {config.NIGHT_INDEX}")


if __name__ == "__main__":
    main()
