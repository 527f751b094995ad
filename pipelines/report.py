"""report: the verdict file and the one-page HTML report of every target run, and the night's index.

Merges what the detectors found for a run — the association-rule ensembles (``detect``,
Foo et al. 2015), the control charts (``control_charts``, Nguyen 2017 ch. 3, 6-7) and the
probable cause (``predict_causes``, Nguyen 2017 ch. 8) — into ``reports/runs/<run_id>.json``
exactly as ``DATA_CONTRACT.md`` §2, renders ``reports/runs/<run_id>.html`` beside it and
``reports/index.html`` for the night.

Headline decision (``report.verdict_rule``): ``all`` (default) fails a run when every
detector that could judge it fails it.  The two detectors make different mistakes (rules
break on environment shifts the pruning did not catch; control charts on counters that
wander between runs), so requiring both removes most false alarms; each method's own
verdict stays in ``methods``.  ``any``, ``stacking`` and ``control_charts`` are the
alternatives.  The flagged counters of a failed run (``report.flag_rule``) are stacking's
(``rules``, default: its precision is the higher, README) or the union with the control
charts' (``union``).  The score is the mean of the methods' scores (stacking: the largest
counter score; control charts: twice the top-50 % average violation ratio, both in
[0, 1]); a counter's score is the mean of its stacked confidence change and its control
chart sum violation ratio.

Everything that came from an archive (run ids, counter names, environment values, rule
items) is HTML-escaped by Jinja2's autoescaping; plots are PNG images inlined as data
URIs, so a page works offline and carries no script.
"""
from __future__ import annotations

import base64
import io
import logging
from typing import Any

import numpy as np

from pipelines import archive, config, history
from pipelines.progress import Progress

log = logging.getLogger("regresslab.report")
RULE_METHODS = ("association_rules_stacking", "association_rules_bagging", "association_rules_single")


# --------------------------------------------------------------------------- pure core


def headline_verdict(verdicts: dict[str, str | None], rule: str) -> str:
    """The run's verdict from the methods' verdicts (None = the method could not judge)."""
    judged = {k: v for k, v in verdicts.items() if v in ("pass", "fail")}
    if not judged:
        return "pass"
    if rule in judged:
        return judged[rule]
    if rule == "any":
        return "fail" if "fail" in judged.values() else "pass"
    if rule == "all":
        return "fail" if all(v == "fail" for v in judged.values()) else "pass"
    raise ValueError(f"report.verdict_rule must be all, any, stacking or control_charts, not {rule!r}")


def combine_scores(*scores: dict[str, float]) -> dict[str, float]:
    """Per counter, the mean of the scores of the methods that scored it, most suspicious first."""
    counters = sorted({c for s in scores for c in s})
    out = {c: float(np.mean([s[c] for s in scores if c in s])) for c in counters}
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def cause_of(verdict: str, predicted: dict[str, Any] | None) -> dict[str, Any]:
    """The contract's ``cause`` for the headline verdict.

    A failed run gets the most probable fault cause; it is ``known`` only when the
    classifier's own top class is that cause with a probability of at least its ``tau``.
    A passed run's cause is ``none``.
    """
    if not predicted or predicted.get("label") is None:
        return {"label": None if verdict == "fail" else "none", "probability": None, "known": verdict != "fail"}
    if verdict == "pass":
        return {"label": "none", "probability": predicted.get("none_probability"), "known": True}
    fault = predicted.get("fault") or {}
    known = bool(predicted["known"] and predicted["label"] == fault.get("label"))
    return {"label": fault.get("label"), "probability": fault.get("probability"), "known": known}


def compose(detection: dict[str, Any], charts: dict[str, Any] | None, predicted: dict[str, Any] | None,
            *, verdict_rule: str, flag_rule: str = "union") -> dict[str, Any]:
    """The verdict file of one run (DATA_CONTRACT.md §2) from the stages' results.

    ``flag_rule`` names the flagged counters of a failed run: ``union`` (stacking's and the
    control charts'), or ``rules`` (stacking's when it failed the run, else the charts')."""
    if flag_rule not in ("union", "rules"):
        raise ValueError(f"report.flag_rule must be union or rules, not {flag_rule!r}")
    methods = {k: detection["methods"][k] for k in RULE_METHODS}
    rule_scores = detection.get("counter_scores", {})
    verdicts = {"stacking": methods["association_rules_stacking"]["verdict"]}
    scores = [float(max(rule_scores.values(), default=0.0))]
    cc_scores: dict[str, float] = {}
    if charts and charts.get("verdict"):
        methods["control_charts"] = {k: charts[k] for k in ("verdict", "violation_ratio", "threshold",
                                                            "flagged_counters", "load_independent_counters")}
        methods["control_charts"]["baseline_runs"] = charts["baseline_runs"]
        verdicts["control_charts"] = charts["verdict"]
        scores.append(min(1.0, 2.0 * float(charts["violation_ratio"])))
        cc_scores = charts["counter_scores"]
    verdict = headline_verdict(verdicts, verdict_rule)
    counter_scores = combine_scores(rule_scores, cc_scores)
    flagged: list[str] = []
    if verdict == "fail":
        rules = set(methods["association_rules_stacking"]["flagged_counters"])
        charted = set(methods.get("control_charts", {}).get("flagged_counters", []))
        chosen = rules | charted if flag_rule == "union" else rules or charted
        flagged = [c for c in counter_scores if c in chosen]
    doc = {
        "schema_version": 1,
        "run_id": detection["run_id"],
        "system": detection["system"],
        "verdict": verdict,
        "score": round(float(np.mean(scores)), 4),
        "flagged_counters": flagged,
        "counter_scores": {c: round(v, 4) for c, v in counter_scores.items()},
        "cause": cause_of(verdict, predicted),
        "baseline_runs": detection["baseline_runs"],
        "methods": methods,
        "details": {**detection.get("details", {}), "verdict_rule": verdict_rule, "flag_rule": flag_rule,
                    "control_charts": {k: charts.get(k) for k in ("ratios", "multimodal", "counters_over_limit")}
                    if charts and charts.get("verdict") else None,
                    "cause_prediction": predicted},
    }
    return doc


def environment_differences(target_env: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """``key: theirs -> ours`` for every environment component that differs."""
    keys = sorted(set(target_env) | set(other))
    return [f"{k}: {other.get(k, '—')} → {target_env.get(k, '—')}" for k in keys if other.get(k) != target_env.get(k)]


def novel_environment(target_env: dict[str, Any], baseline_envs: list[dict[str, Any]]) -> dict[str, Any]:
    """The environment components whose value no baseline run shares: the run is on a lab the
    history has not seen, so part of any difference may be the lab's, not the build's."""
    return {k: v for k, v in sorted(target_env.items()) if not any(env.get(k) == v for env in baseline_envs)}


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


# ---- HTML

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;background:#fafafa}
main{max-width:1100px;margin:0 auto;padding:16px 24px}
h1{font-size:1.4em;margin:.2em 0} h2{font-size:1.1em;margin-top:1.6em;border-bottom:1px solid #ddd}
.banner{padding:14px 20px;border-radius:6px;color:#fff;display:flex;justify-content:space-between;align-items:center}
.banner.fail{background:#c0392b}.banner.pass{background:#27ae60}
.banner .v{font-size:1.8em;font-weight:700}.banner .s{font-size:1.1em}
table{border-collapse:collapse;width:100%;font-size:.88em;background:#fff}
th,td{border:1px solid #e0e0e0;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0} td.num{text-align:right;font-variant-numeric:tabular-nums}
.tag{display:inline-block;padding:1px 6px;border-radius:3px;font-size:.85em;color:#fff}
.tag.fail{background:#c0392b}.tag.pass{background:#27ae60}.tag.na{background:#999}
.cause{padding:10px 14px;border-left:5px solid #2980b9;background:#eef5fb;margin:12px 0}
.cause.unknown{border-color:#e67e22;background:#fdf2e9}
.grid{display:flex;flex-wrap:wrap;gap:8px} .grid img{border:1px solid #ddd;background:#fff}
.muted{color:#777;font-size:.85em} code{font-size:.9em}
"""

RUN_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{ doc.run_id }} — {{ doc.verdict|upper }}</title>
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'">
<style>{{ style }}</style></head><body><main>
<p class="muted"><a href="../index.html">← night index</a></p>
<div class="banner {{ doc.verdict }}" id="verdict-banner">
  <div><div class="v">{{ doc.verdict|upper }}</div><div>{{ doc.run_id }} · {{ doc.system }} {{ meta.version }}</div></div>
  <div class="s">score {{ '%.2f'|format(doc.score) }}<br><span class="muted" style="color:#fff">started {{ meta.started_at }}</span></div>
</div>
<div class="cause {{ 'unknown' if not doc.cause.known and doc.verdict == 'fail' else '' }}" id="cause">
{% if doc.verdict == 'pass' %}
  <strong>No regression found.</strong> Every detector that could judge this run is listed below.
{% elif doc.cause.label is none %}
  <strong>Probable cause: unknown</strong> — no cause model for this system yet.
{% elif doc.cause.known %}
  <strong>Probable cause: {{ doc.cause.label }}</strong> (probability {{ '%.0f'|format(100 * doc.cause.probability) }} %)
{% else %}
  <strong>Unknown cause</strong> — this run matches no cause seen in the history well enough.
  Nearest: {{ doc.cause.label }} ({{ '%.0f'|format(100 * (doc.cause.probability or 0)) }} %), not to be taken as certain.
{% endif %}
</div>

{% if doc.details.get('environment_not_in_baseline') %}
<div class="cause unknown" id="new-environment"><strong>New lab environment.</strong> No baseline run shares
{% for k, v in doc.details.environment_not_in_baseline.items() %}<code>{{ k }}={{ v }}</code>{% if not loop.last %}, {% endif %}{% endfor %}:
part of what differs may be the lab, not the build. Confirm against a run of this lab before acting.</div>
{% endif %}

<h2>Methods</h2>
<table id="methods"><tr><th>method</th><th>verdict</th><th>evidence</th></tr>
{% for name, m in doc.methods.items() %}
<tr><td>{{ name }}</td><td><span class="tag {{ m.verdict or 'na' }}">{{ m.verdict or 'n/a' }}</span></td>
<td>{% if m.violation_ratio is defined %}top-50 % average violation ratio {{ '%.3f'|format(m.violation_ratio) }}
 (threshold {{ '%.3f'|format(m.threshold) }}); {% endif %}{{ m.flagged_counters|length }} counters flagged</td></tr>
{% endfor %}
</table>
<p class="muted">Headline rule: <code>{{ doc.details.verdict_rule }}</code>, flagged counters: <code>{{ doc.details.get("flag_rule") or "union" }}</code> (see README). Flagged counters: {{ doc.flagged_counters|length }}.</p>

<h2>Top counters</h2>
<table id="top-counters"><tr><th>counter</th><th>score</th><th>stacking s</th><th>bagging votes</th>
<th>CC lower</th><th>CC upper</th><th>flagged by</th></tr>
{% for c in top %}
<tr><td><code>{{ c.name }}</code></td><td class="num">{{ '%.3f'|format(c.score) }}</td>
<td class="num">{{ c.s }}</td><td class="num">{{ c.votes }}</td><td class="num">{{ c.lower }}</td><td class="num">{{ c.upper }}</td>
<td>{{ c.by|join(', ') }}</td></tr>
{% endfor %}
</table>

{% if timeline %}
<h2>When the rules were violated</h2>
<p class="muted">Each mark is an interval of the run in which a rule about the counter was violated (Foo et al. 2015, Fig. 3).</p>
<img id="timeline" alt="violation time-line" src="{{ timeline }}">
{% endif %}

{% if rules %}
<h2>Violated rules of the flagged counters</h2>
<table id="violated-rules"><tr><th>counter</th><th>rule (prior run's model)</th><th>confidence then → now</th><th>Δ</th><th>premise intervals</th></tr>
{% for c, rs in rules %}{% for r in rs %}
<tr><td><code>{{ c }}</code></td><td><code>{{ r.premise|join(' ∧ ') or '∅' }} ⇒ {{ r.consequent }}</code><br><span class="muted">{{ r.model }}</span></td>
<td class="num">{{ '%.2f'|format(r.confidence_history) }} → {{ '%.2f'|format(r.confidence_new) }}</td>
<td class="num">{{ '%.2f'|format(r.delta) }}</td><td class="num">{{ r.premise_intervals }}</td></tr>
{% endfor %}{% endfor %}
</table>
{% endif %}

{% if charts %}
<h2>Control charts of the top counters</h2>
<p class="muted">Grey band: the baseline runs' LCL–UCL; crosses: this run, red outside the limits (Nguyen 2017 §3.2).</p>
<div class="grid" id="control-charts">{% for name, img in charts %}<img alt="control chart {{ name }}" src="{{ img }}">{% endfor %}</div>
{% endif %}

<h2>Baseline runs</h2>
<table id="baseline"><tr><th>run</th><th>stacking weight</th><th>environment differences (baseline → this run)</th></tr>
{% for b in baselines %}
<tr><td>{{ b.run_id }}{% if b.chart %} <span class="muted">(control-chart baseline)</span>{% endif %}</td>
<td class="num">{{ '%.3f'|format(b.weight) }}</td><td>{{ b.diff|join('; ') or 'same environment' }}</td></tr>
{% endfor %}
</table>

<h2>Not analysed</h2>
<ul>{% for k, v in not_analysed %}<li>{{ k }}: {{ v|join(', ') or 'none' }}</li>{% endfor %}
{% if load_independent %}<li>load-independent counters (left out of the control-chart verdict): {{ load_independent|join(', ') }}</li>{% endif %}
{% if small %}<li>broke their rules but moved less than the practical threshold (detect.min_rel_change), not flagged: {% for c, m in small %}{{ c }} ({{ '%.1f'|format(100 * m) }} %){% if not loop.last %}, {% endif %}{% endfor %}</li>{% endif %}</ul>

<h2>Data</h2>
<ul><li>raw archive: <a href="{{ raw_href }}">{{ raw_name }}</a></li>
<li>validation: <a href="../validation/index.html">Great Expectations Data Docs</a></li>
<li>machine-readable verdict: <a href="{{ doc.run_id }}.json">{{ doc.run_id }}.json</a></li></ul>
<p class="muted">Environment: {% for k, v in env %}{{ k }}={{ v }}{% if not loop.last %}, {% endif %}{% endfor %}</p>
</main></body></html>
"""

INDEX_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>regresslab — night {{ night }}</title>
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'">
<style>{{ style }}</style></head><body><main>
<h1>regresslab — night {{ night }}</h1>
<div class="banner {{ 'fail' if failed else 'pass' }}" id="night-banner">
 <div class="v">{{ failed|length }} of {{ rows|length }} runs regressed</div>
 <div class="s">{% if failed %}do not ship before the failed runs are triaged{% else %}no regression found{% endif %}</div>
</div>
{% if quarantined %}<p id="quarantined">{{ quarantined|length }} archive(s) quarantined by validation:
{% for q in quarantined %}<code>{{ q }}</code>{% if not loop.last %}, {% endif %}{% endfor %} — see <a href="validation/index.html">Data Docs</a>.</p>{% endif %}
<table id="runs"><tr><th>run</th><th>system</th><th>verdict</th><th>score</th><th>probable cause</th><th>top counters</th><th>since previous night</th></tr>
{% for r in rows %}
<tr><td><a href="runs/{{ r.run_id }}.html">{{ r.run_id }}</a></td><td>{{ r.system }}</td>
<td><span class="tag {{ r.verdict }}">{{ r.verdict }}</span>{% if r.get('new_lab') %} <span class="muted" title="no baseline run in this lab environment">new lab</span>{% endif %}</td><td class="num">{{ '%.2f'|format(r.score) }}</td>
<td>{% if r.verdict == 'fail' %}{% if r.cause_known %}{{ r.cause }} ({{ '%.0f'|format(100 * r.probability) }} %){% else %}unknown{% if r.cause %} (nearest {{ r.cause }}){% endif %}{% endif %}{% endif %}</td>
<td>{{ r.top|join(', ') }}</td><td>{{ r.change }}</td></tr>
{% endfor %}
</table>
<p class="muted">Generated {{ generated }}. Accuracy of the detectors on the labelled history: <code>dvc metrics show</code>.</p>
</main></body></html>
"""


def _env():
    import jinja2
    return jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)


def render_run(doc: dict[str, Any], meta: dict[str, Any], charts: dict[str, Any] | None, *,
               baseline_envs: dict[str, dict[str, Any]], raw_href: str, raw_name: str, top_n: int = 15) -> str:
    """The one-page HTML report of one run."""
    d = doc["details"]
    cc_ratios = (d.get("control_charts") or {}).get("ratios") or {}
    by: dict[str, list[str]] = {}
    for name, m in doc["methods"].items():
        for c in m.get("flagged_counters", []):
            by.setdefault(c, []).append(name.replace("association_rules_", "rules/"))
    top = []
    for c in list(doc["counter_scores"])[:top_n]:
        r = cc_ratios.get(c) or {}
        top.append({"name": c, "score": doc["counter_scores"][c],
                    "s": d.get("stacking_score", {}).get(c, 0), "votes": d.get("bagging_votes", {}).get(c, 0),
                    "lower": r.get("lower", "—"), "upper": r.get("upper", "—"), "by": by.get(c, [])})
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
    return _env().from_string(RUN_TEMPLATE).render(
        doc=doc, meta=meta, style=STYLE, top=top, timeline=timeline,
        rules=[(c, d["violated_rules"][c][:3]) for c in flagged_rules[:10]], charts=plots, baselines=baselines,
        not_analysed=sorted((d.get("not_analysed") or {}).items()), load_independent=cc.get("load_independent_counters", []),
        small=sorted((d.get("below_min_rel_change") or {}).items()),
        raw_href=raw_href, raw_name=raw_name, env=sorted(target_env.items()))


def render_index(rows: list[dict[str, Any]], *, night: str, generated: str, quarantined: list[str]) -> str:
    failed = [r for r in rows if r["verdict"] == "fail"]
    return _env().from_string(INDEX_TEMPLATE).render(rows=rows, failed=failed, night=night, generated=generated,
                                                     quarantined=quarantined, style=STYLE)


def index_row(doc: dict[str, Any]) -> dict[str, Any]:
    return {"run_id": doc["run_id"], "system": doc["system"], "verdict": doc["verdict"], "score": doc["score"],
            "cause": doc["cause"]["label"], "probability": doc["cause"]["probability"] or 0.0,
            "cause_known": doc["cause"]["known"], "top": doc["flagged_counters"][:3],
            "new_lab": bool(doc.get("details", {}).get("environment_not_in_baseline"))}


# --------------------------------------------------------------------------- I/O shell


def read_optional(path) -> dict[str, Any] | None:
    return archive.read_json(path) if path.exists() else None


def report_run(run_id: str, index: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Compose, write and render one run's report; return its verdict document."""
    from pipelines import control_charts, predict_causes
    detection = archive.read_json(config.DETECTIONS / f"{run_id}.json")
    charts = read_optional(control_charts.result_path(run_id))
    predicted = read_optional(predict_causes.result_path(run_id))
    doc = compose(detection, charts, predicted, verdict_rule=params["verdict_rule"],
                  flag_rule=params.get("flag_rule", "union"))
    doc["details"]["environment_not_in_baseline"] = novel_environment(
        index[run_id].get("environment") or {},
        [(index.get(b["run_id"]) or {}).get("environment") or {} for b in doc["baseline_runs"]])
    archive.write_json_atomic(config.RUN_REPORTS / f"{run_id}.json", doc)
    raw = sorted(config.RAW.glob(f"{run_id}.*"))
    raw_name = raw[0].name if raw else f"{run_id} (not in data/raw)"
    html = render_run(doc, index[run_id], charts,
                      baseline_envs={b["run_id"]: (index.get(b["run_id"]) or {}).get("environment") or {}
                                     for b in doc["baseline_runs"]},
                      raw_href=f"../../data/raw/{raw_name}", raw_name=raw_name, top_n=int(params["top_counters"]))
    archive.write_text_atomic(config.RUN_REPORTS / f"{run_id}.html", html)
    return doc


def run_one(run_id: str) -> dict[str, Any]:
    """Write one target's verdict file and page; its index row (the per-run task of the nightly DAG)."""
    index = archive.read_json(config.VALID_INDEX)["valid"]
    return index_row(report_run(run_id, index, config.load_params("report")))


def write_index(rows: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The night's index page and summary from the targets' verdict files; the summary (DAG task)."""
    import pandas as pd
    params = config.load_params("report")
    index = archive.read_json(config.VALID_INDEX)["valid"]
    if rows is None:
        rows = {r: index_row(archive.read_json(config.RUN_REPORTS / f"{r}.json")) for r in history.targets(index)
                if (config.RUN_REPORTS / f"{r}.json").exists()}
    now = pd.Timestamp.now(tz="UTC")
    night = str(params.get("night") or now.date())
    nights = config.REPORTS / "nights"
    earlier = sorted(p for p in nights.glob("*.json") if p.stem < night) if nights.exists() else []
    previous = archive.read_json(earlier[-1])["runs"] if earlier else None
    changes = night_changes(rows, previous)
    ordered = sorted(rows.values(), key=lambda r: (r["verdict"] != "fail", -r["score"], r["run_id"]))
    for r in ordered:
        r["change"] = changes[r["run_id"]]
    quarantined = sorted(p.stem for p in config.QUARANTINE.glob("*.json")) if config.QUARANTINE.exists() else []
    archive.write_json_atomic(nights / f"{night}.json", {"night": night, "runs": rows})
    archive.write_text_atomic(config.REPORTS / "index.html",
                              render_index(ordered, night=night, generated=now.strftime("%Y-%m-%d %H:%M UTC"),
                                           quarantined=quarantined))
    failed = sorted(r["run_id"] for r in rows.values() if r["verdict"] == "fail")
    return {"night": night, "runs": len(rows), "failed": failed, "quarantined": quarantined}


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    index = archive.read_json(config.VALID_INDEX)["valid"]
    todo = history.targets(index)
    progress = Progress(log, "report", len(todo))
    rows = {}
    for i, run_id in enumerate(todo, 1):
        rows[run_id] = run_one(run_id)
        progress.step(i, f"{run_id} -> {rows[run_id]['verdict']}")
    summary = write_index(rows)
    print(f"[report] {summary['runs']} runs, {len(summary['failed'])} regressed -> {config.REPORTS / 'index.html'}")


if __name__ == "__main__":
    main()
