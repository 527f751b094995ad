"""The pages: one report per run and the night's index, from Jinja2 templates with one style sheet.

Templates live in ``pipelines/reporting/templates/`` with ``style.css``, shared with the Airflow
plugin.  Everything that came from an archive (run ids, counter names, environment values, rule
items) is HTML-escaped by Jinja2's autoescaping; pictures are data URIs (:mod:`pipelines.reporting.plots`),
so a page works offline and carries no script.
"""
from __future__ import annotations

import functools
import hashlib
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from pipelines import config
from pipelines.reporting.links import counter_href, shown_counters
from pipelines.reporting.plots import control_chart_plot, timeline_plot
from pipelines.reporting.release import Build, run_status, uncertainty
from pipelines.reporting.summary import environment_differences, signed_pct, top_change, with_unit
from pipelines.storage.run_records import DroppedCounter, Environment, RunRecord, ValidIndex
from pipelines.storage.stage_files import CommitSummary, CounterChange, IndexRow, VerdictFile

log = logging.getLogger("regresslab.report")




@functools.lru_cache(maxsize=1)
def page_environment():
    """The Jinja2 environment of every page: the template files, autoescaping, strict undefined.

    One per process: Jinja2 keeps each template it compiled (a run page's costs about 0.1 s to
    compile, more than rendering it) and compiles a template again only when its file changed."""
    import jinja2
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(config.TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["unit"] = lambda value, counter: with_unit(counter, float(value))   # 612 ms, 13,700 MB
    return env


def compile_run_templates() -> None:
    """Compile the templates of a run's pages (its page, its compare pages) in this process, so
    that the workers a stage forks after it render with them instead of each compiling its own."""
    env = page_environment()
    for name in ("run.html.j2", "compare.html.j2"):
        env.get_template(name)


@functools.lru_cache(maxsize=None)
def templates_digest(directory: Path = config.TEMPLATES) -> str:
    """A hash of every template and the style sheet (names and bytes): part of a run page's input
    key, so that a new template renders every page again while the runs' results are kept."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(directory).rglob("*") if p.is_file()):
        digest.update(path.relative_to(directory).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def style_sheet() -> str:
    """The CSS every page inlines (the pages' Content-Security-Policy allows inline styles only)."""
    return (config.TEMPLATES / "style.css").read_text(encoding="utf-8")


def change_cell(change: CounterChange | None, effect: float | None) -> str:
    """A top counter's change as the page shows it: the medians' change in %, and, for a flagged
    counter (``effect`` given), the size judged for practical significance when it differs from
    that by a point or more (``details.effects``: the larger of the whole run's and its strongest
    window's change against the reference level), since it is what made the flag count."""
    pct = change.get("change_pct") if change else None
    if pct is None:
        return "—"
    text = f"{pct:+.1f} %"
    if effect is not None and math.isfinite(effect) and abs(100.0 * effect - pct) >= 1.0:
        text += f" ({signed_pct(100.0 * effect)} at its strongest)"
    return text


@dataclass(frozen=True)
class RunPage:
    """What a run's page shows beside its verdict file: the baselines' environments, the link to
    its raw archive, the top ``top_n`` counters, their ``changes`` (default: the verdict file's) and
    ``trends`` (sparklines), a run shorter than ``few_intervals`` intervals said to be short,
    ``compare_pages`` (baseline run -> its compare page, ``reports/compare``), and ``history``: each
    counter row linked to its history page (``reports/systems``,
    :mod:`pipelines.reporting.counter_history`)."""
    baseline_envs: dict[str, Environment]
    raw_href: str
    raw_name: str
    top_n: int = 15
    changes: dict[str, CounterChange] | None = None
    trends: dict[str, str | None] | None = None
    few_intervals: int = 20
    compare_pages: dict[str, str] | None = None
    history: bool = False
    key_counters: Sequence[str] = ()


def render_run(doc: VerdictFile, meta: RunRecord, charts: dict[str, Any] | None, page: RunPage) -> str:
    """The one-page HTML report of one run: the plain summary first, the top counters with
    baseline -> now and the change in their units, the methods' figures in a details section."""
    baseline_envs, raw_href, raw_name, top_n = page.baseline_envs, page.raw_href, page.raw_name, page.top_n
    changes, trends, few_intervals = page.changes, page.trends, page.few_intervals
    compare_pages, history = page.compare_pages, page.history
    changes = changes if changes is not None else (doc.get("counter_changes") or {})
    d = doc["details"]
    cc_ratios = (d.get("control_charts") or {}).get("ratios") or {}
    by: dict[str, list[str]] = {}
    for name, m in doc["methods"].items():
        for c in m.get("flagged_counters", []):
            by.setdefault(c, []).append(name.replace("association_rules_", "rules/"))
    top = []
    for c in shown_counters(doc, top_n):
        r = cc_ratios.get(c) or {}
        ch = changes.get(c)
        top.append({"name": c, "score": doc["counter_scores"].get(c, 0.0), "flagged": c in doc["flagged_counters"],
                    "s": d.get("stacking_score", {}).get(c, 0), "votes": d.get("bagging_votes", {}).get(c, 0),
                    "lower": r.get("lower", "—"), "upper": r.get("upper", "—"), "by": by.get(c, []),
                    "baseline": with_unit(c, ch["baseline"]) if ch else "—",
                    "now": with_unit(c, ch["target"]) if ch else "—",
                    "change": change_cell(ch, (d.get("effects") or {}).get(c) if c in doc["flagged_counters"] else None),
                    "direction": ch["direction"] if ch else "", "trend": (trends or {}).get(c),
                    "history": counter_href(doc["system"], c) if history else None})
    flagged_rules = [c for c in doc["flagged_counters"] if c in d.get("violated_rules", {})] or \
        list(d.get("violated_rules", {}))
    timeline = timeline_plot(d.get("violation_intervals", {}), flagged_rules, d.get("n_intervals", 0),
                             d.get("interval_s", 30.0))
    plots = [(c, control_chart_plot(c, s, d.get("interval_s", 30.0))) for c, s in (charts or {}).get("charts", {}).items()]
    target_env = meta.get("environment") or {}
    chart_base = set((charts or {}).get("baseline_runs", []))
    baselines = [{"run_id": b["run_id"], "weight": b["weight"], "chart": b["run_id"] in chart_base,
                  "compare": (compare_pages or {}).get(b["run_id"]),
                  "diff": environment_differences(target_env, baseline_envs.get(b["run_id"], {}))}
                 for b in sorted(doc["baseline_runs"], key=lambda b: -b["weight"])]
    cc = doc["methods"].get("control_charts", {})
    dependent = list((d.get("not_analysed") or {}).get("environment_dependent_in_new_environment") or [])
    key = [{"name": c, "flagged": c in doc["flagged_counters"],
            "baseline": with_unit(c, changes[c]["baseline"]) if c in changes else "—",
            "now": with_unit(c, changes[c]["target"]) if c in changes else "—",
            "change": change_cell(changes.get(c), None), "direction": changes[c].get("direction", "") if c in changes else "",
            "history": counter_href(doc["system"], c) if history else None} for c in page.key_counters]
    return page_environment().get_template("run.html.j2").render(
        release=run_status({**doc, "top_change": top_change(doc)}), uncertainty=uncertainty(doc), key=key,
        lab_dependent=dependent, lab_dependent_key=[c for c in page.key_counters if c in dependent],
        doc=doc, meta=meta, style=style_sheet(), top=top, timeline=timeline,
        rules=[(c, d["violated_rules"][c][:3]) for c in flagged_rules[:10]], charts=plots, baselines=baselines,
        not_analysed=sorted((d.get("not_analysed") or {}).items()), load_independent=cc.get("load_independent_counters", []),
        small=sorted((d.get("below_min_rel_change") or {}).items()),
        set_aside=list((d.get("set_aside_small") or {}).items()),
        raw_href=raw_href, raw_name=raw_name, env=sorted(target_env.items()),
        dropped=doc.get("dropped_counters") or meta.get("_dropped_counters") or [],
        short=0 < int(d.get("n_intervals") or 0) < few_intervals)


@dataclass(frozen=True)
class NightIndex:
    """What the night index shows beside its targets' rows: the night and when it was written,
    the quarantined archives with their ``reasons``, the systems' history pages, the valid runs,
    the counters validation left out (``dropped``), the analysts' ``decisions``, the nights'
    ``trends``, the commit series' changes, the sources that could not be read, and the archives
    still ``waiting`` at a source or ``retaken`` in place of an unreadable copy (``arriving``: the
    pull summary's lists)."""
    night: str
    generated: str
    quarantined: list[str]
    systems: dict[str, str] | None = None
    reasons: dict[str, str] | None = None
    valid_runs: int | None = None
    dropped: Sequence[tuple[str, DroppedCounter]] = ()
    decisions: Sequence[Mapping[str, Any]] = ()
    trends: Sequence[dict[str, Any]] = ()
    commits: CommitSummary | None = None
    missing_sources: Sequence[dict[str, str]] = ()
    arriving: dict[str, list[dict[str, str]]] | None = None
    builds: Sequence[Build] = ()


def render_index(rows: list[IndexRow], page: NightIndex) -> str:
    """The night index: the targets, failed first; the quarantined archives with their reasons;
    the counters validation left out of valid runs, with theirs; and, when there is no target,
    a sentence that says why (nothing new, or everything quarantined)."""
    failed = [r for r in rows if r["verdict"] == "fail"]
    return page_environment().get_template("index.html.j2").render(
        rows=rows, failed=failed, unjudged=[r for r in rows if r["verdict"] == "no_baseline"], night=page.night,
        generated=page.generated, quarantined=page.quarantined, reasons=page.reasons or {}, valid_runs=page.valid_runs,
        style=style_sheet(), dropped=list(page.dropped), dropped_runs=len({run_id for run_id, _ in page.dropped}),
        decisions=list(page.decisions), trends=list(page.trends), commits=page.commits, systems=page.systems or {},
        missing_sources=list(page.missing_sources), waiting=(page.arriving or {}).get("waiting") or [],
        retaken=(page.arriving or {}).get("retaken") or [], builds=list(page.builds),
        tonight=[b for b in page.builds if b.tonight], certain=[r for r in rows if r.get("status") == "hold"],
        uncertain=[r for r in rows if not r.get("certain", True)],
        news=any(r.get("change") not in (None, "new") for r in rows), gated=any(r.get("objectives") for r in rows))


BANNER_START, BANNER_END = "<!-- regresslab:night-failed -->", "<!-- /regresslab:night-failed -->"


def without_failed_banner(html: str) -> str:
    """``html`` with every failed-night banner (each between its own markers) taken out whole."""
    while (start := html.find(BANNER_START)) >= 0:
        end = html.find(BANNER_END, start)
        if end < 0:                                  # a torn banner: its start marker and what follows it
            return html[:start]
        end += len(BANNER_END)
        html = html[:start] + html[end + 1 if html[end:end + 1] == "\n" else end:]
    return html


def mark_night_failed(html: str | None, *, night: str, stage: str, reason: str) -> str:
    """The night index of a night that failed at ``stage``: its first line says so, and that the
    runs below, if any, are of the last night analysed (``html``: the index as it stands, None when
    no night was ever analysed).  The banner is one element between markers of its own, replaced
    whole each time: the page holds one banner, the latest, however many nights failed in a row.
    The reason is shown with credentials masked and its control characters replaced."""
    from markupsafe import escape

    from pipelines.safe_text import mask_urls, one_line

    said = one_line(" ".join(mask_urls(reason).split())[-600:])
    banner = (f'{BANNER_START}<div class="banner fail" id="night-failed"><div class="v">Night {escape(night)} FAILED '
              f'at {escape(stage)}</div><div class="s">{escape(said)}. No run was analysed tonight'
              + ('; what follows is the last night analysed, not tonight.' if html else '.') + f'</div></div>{BANNER_END}\n')
    title = f"<title>regresslab — night {escape(night)} FAILED</title>"
    if not html or "<main>" not in html:
        return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">{title}'
                f'<style>{style_sheet()}</style></head><body><main>\n{banner}</main></body></html>\n')
    html = without_failed_banner(html)
    opened, closed = html.find("<title>"), html.find("</title>")
    if 0 <= opened < closed:
        html = html[:opened] + title + html[closed + len("</title>"):]
    at = html.index("<main>") + len("<main>")
    return html[:at] + "\n" + banner + html[at:].removeprefix("\n")


def write_failed_night(stage: str, reason: str) -> Path:
    """A night that stopped at ``stage``: the night index (``config.NIGHT_INDEX``) opens with it
    (:func:`mark_night_failed`; the night's label is ``report.night``, else today's UTC date)."""
    from datetime import datetime, timezone

    from pipelines.storage import atomic

    night = str(config.load_params("report")["night"] or datetime.now(timezone.utc).date())
    current = config.NIGHT_INDEX.read_text(encoding="utf-8") if config.NIGHT_INDEX.is_file() else None
    config.ensure_dirs(config.NIGHT_INDEX.parent)
    atomic.write_text_atomic(config.NIGHT_INDEX, mark_night_failed(current, night=night, stage=stage, reason=reason))
    return config.NIGHT_INDEX


def dropped_counters(index: ValidIndex) -> list[tuple[str, DroppedCounter]]:
    """(run_id, dropped counter) for every valid run: the counters validation left out (contract §1)."""
    return [(run_id, d) for run_id, row in sorted(index.items()) for d in row.get("_dropped_counters") or []]


def index_row(doc: VerdictFile) -> IndexRow:
    """The run's row of the night index: what the runs table shows, and its release status
    (:func:`pipelines.reporting.release.run_status`)."""
    top = top_change(doc)
    release = run_status({**doc, "top_change": top})
    return {"run_id": doc["run_id"], "system": doc["system"], "verdict": doc["verdict"], "score": doc["score"],
            "cause": doc["cause"]["label"], "probability": doc["cause"]["probability"] or 0.0,
            "cause_known": doc["cause"]["known"], "top": doc["flagged_counters"][:3],
            "new_lab": bool(doc.get("details", {}).get("environment_not_in_baseline")),
            "insufficient_baseline": doc.get("baseline_status") == "insufficient",
            "dropped": len(doc.get("dropped_counters") or []),
            "top_change": top,
            "objectives": gate["result"] if (gate := doc.get("objectives")) else None,
            "objectives_score": gate["score_pct"] if gate else None,
            "status": release.status, "reason": release.reason, "certain": release.certain}


# --------------------------------------------------------------------------- I/O shell
