"""A run's report, stored: its verdict file (contract §2: the headline decision, then the counters'
changes, the plain summary and the counters validation left out), its page and its compare pages,
kept while their input key (``memo``: the stages' result files, the run and its baseline, its
archive's name, the params and the code) is unchanged; and the night's index page.
"""
from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Mapping
from typing import AbstractSet, Any, NamedTuple, cast

import pandas as pd

from pipelines import config, parallel
from pipelines.safe_text import mask_urls
from pipelines.detection import registry, stage_results
from pipelines.objectives.gates import Evaluation
from pipelines.verdict import cause_signatures, counter_order, headline
from pipelines.stats import effects
from pipelines.systems import history, labs
from pipelines.reporting import compare, counter_history, links, release
from pipelines.reporting.pages import (NightIndex, RunPage, dropped_counters, index_row, render_index, render_run,
                                      templates_digest)
from pipelines.reporting.plots import night_trends, sparkline
from pipelines.reporting.summary import counter_changes, night_changes, novel_environment, plain_summary, summary_order
from pipelines.storage import archive, atomic, memo, store, triage_log
from pipelines.storage.run_records import DroppedCounter, ValidIndex
from pipelines.storage.stage_files import (CommitSummary, CounterChange, IndexRow, NightSummary, RuleDetection,
                                           VerdictFile, WeightedRun)

log = logging.getLogger("regresslab.report")


def commit_summary() -> CommitSummary | None:
    """What the night index says of the commit series (``commit_changes``): its page's changes."""
    path = config.COMMIT_REPORTS / "changes.json"
    if not path.exists():
        return None
    try:
        rows = atomic.read_json(path)
    except (OSError, ValueError):
        return {"unreadable": True}
    return {"changes": len(rows), "regressions": sum(r.get("direction") == "regression" for r in rows),
            "top": rows[0] if rows else None}


def evaluation_of(run_id: str) -> Evaluation | None:
    """The run's evaluation against its system's objectives (the ``objectives`` stage's), if it has one."""
    stored = store.read_optional(config.evaluation_path(run_id))
    return Evaluation.from_json(stored["evaluation"]) if stored else None


def raw_archives(run_id: str) -> list[str]:
    """The run's own archives in ``data/raw`` (``a`` never matches ``a.b.tar.gz``)."""
    return [name for name in (run_id + suffix for suffix in ("", *archive.ARCHIVE_SUFFIXES))
            if (config.RAW / name).exists()]


@dataclasses.dataclass(frozen=True)
class ReportParams:
    """The pages' share of the ``report`` block, typed: the counters a run page lists first
    (``top_counters``), how many of a failed run's first five the plain robust anchor fills
    (``anchor_places``: ``counter_order.with_anchor``), the intervals below which it warns (``few_intervals``), the compare
    pages per run (``compare_pages``), the nights the index's trend shows (``trend_nights``), the
    night's name (``night``, today when empty), the JUnit file (``junit``), the counters users
    feel (``user_facing``) and which way each counter gets worse (``directions``); the registered
    detectors (``detectors``, their readers imported once for the stage); ``block`` is the block as
    validated (the input keys hash it; the headline's rule, ``HeadlineRule``, and the systems'
    pages read it too)."""

    top_counters: int
    anchor_places: int
    few_intervals: int
    compare_pages: int
    trend_nights: int
    night: Any
    junit: str | None
    user_facing: Any
    directions: list[dict[str, str]]
    detectors: registry.Registry
    block: Mapping[str, Any] = dataclasses.field(compare=False, repr=False)
    # each registered reader's source digest, by detector name (those with a file of their own), read once a night
    readers: Mapping[str, str | None] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, block: Mapping[str, Any]) -> "ReportParams":
        anchor_places = int(block["anchor_places"])
        if anchor_places > counter_order.IN_FIVE:
            raise ValueError(f"report.anchor_places: {anchor_places} is more than the {counter_order.IN_FIVE} "
                             "first counters it fills")
        detectors = registry.registry(block["detectors"])
        return cls(top_counters=int(block["top_counters"]), anchor_places=anchor_places,
                   few_intervals=int(block["few_intervals"]),
                   compare_pages=int(block["compare_pages"]), trend_nights=int(block["trend_nights"]),
                   night=block["night"], junit=block["junit"], user_facing=block["user_facing"],
                   directions=block["directions"], detectors=detectors, block=dict(block),
                   readers={name: memo.file_digest(path) for name, path in registry.reader_files(detectors).items()})

    @classmethod
    def load(cls) -> "ReportParams":
        """The project's ``report`` block (``config.load_params``), typed: the stage's one loading site."""
        return cls.of(config.load_params("report"))


def report_key(run_id: str, detection: RuleDetection, index: ValidIndex, params: ReportParams,
               rule: headline.HeadlineRule, raw: list[str],
               fault_labels: dict[str, cause_signatures.FaultLabel], features: str | None = None) -> str:
    """The input key of a run's report (``memo``): the stages' result files it composes and each
    registered detector's own result file (``registry.DetectorSpec.file``) and its reader's source, the run
    and its baseline runs (their frames give ``counter_changes``), its archive's name, the
    params, the counters the system's verified faults name (the order of a failed run's counters:
    ``cause_signatures``), the code and the page's templates (``pages.templates_digest``)."""
    inputs = {p.parent.name + "/" + p.name: memo.file_digest(p)
              for p in (config.detection_path(run_id), config.chart_path(run_id), config.cause_path(run_id),
                        config.cluster_path(run_id), config.evaluation_path(run_id))}
    inputs.update({f"detector:{name}": memo.file_digest(path)
                   for name, path in registry.own_files(run_id, params.detectors).items()})
    inputs.update({f"reader:{name}": digest for name, digest in params.readers.items()})
    baseline = [b["run_id"] for b in detection.get("baseline_runs") or []]
    labels = {r: dataclasses.asdict(lab) for r, lab in sorted(fault_labels.items())}
    runs = {"target": [run_id], "baseline": baseline}
    if fault_labels:            # the rankings' records (counter_order): the labelled faults, the passed runs, the charts'
        runs.update(labelled=sorted(fault_labels), passed=passed_runs(index, index[run_id]["system"]))
        inputs["features"] = features
    return memo.input_key("report", index, runs, report=params.block,
                          rule=dataclasses.asdict(rule), inputs=inputs, raw=raw, fault_labels=labels,
                          templates=templates_digest())


def passed_runs(index: ValidIndex, system: str) -> list[str]:
    """The system's verified passed runs, in order."""
    return [r for r in history.verified_runs(index, system) if index[r].get("verdict") == "pass"]


def anchor_of(run_id: str, passed: list[str], read: dict[str, pd.DataFrame]) -> list[str]:
    """The run's counters by the plain robust anchor against ``passed`` (:func:`counter_order.anchor_order`),
    from their normalised frames (``read``: run -> the whole frame, those read already; filled as read);
    [] when the run or every passed run has none."""
    def frame(run: str) -> pd.DataFrame | None:
        if run not in read and config.frame_path(run).exists():
            read[run] = store.load_normalized(run)
        return read.get(run)
    target = frame(run_id)
    pooled = [f for f in (frame(r) for r in passed if r != run_id) if f is not None]
    if target is None or not pooled:
        return []
    return counter_order.anchor_order(target, pd.concat(pooled))


@functools.lru_cache(maxsize=8)
def _records(system: str, labels: tuple, features: str | None, passed: tuple, lab_of: tuple
             ) -> dict[str, counter_order.RankingRecord]:
    """The rankings' records of one system (:func:`counter_order.records`), once per process for the
    same inputs (every failed target of the system reads the same)."""
    fault_labels = dict(labels)
    lab = dict(lab_of)

    def passed_for(run: str) -> list[str]:
        same = [p for p in passed if lab.get(p) == lab.get(run) and p != run]
        return same if len(same) >= 3 else [p for p in passed if p != run]
    medians = counter_history.run_medians(system, sorted(set(passed) | set(fault_labels)), write=False)
    frame = atomic.read_parquet(config.features_path(system)) if features else None
    return counter_order.records(fault_labels, medians, frame, {r: passed_for(r) for r in fault_labels})


def counters_in_order(run_id: str, doc: VerdictFile, index: ValidIndex, inputs: "ReportInputs",
                      lab_of: Mapping[str, str], min_effect_pct: float, *, anchor_places: int,
                      read: dict[str, pd.DataFrame] | None = None) -> tuple[list[str], dict[str, Any] | None]:
    """A failed run's counters in the order the better record on the system's labelled faults
    chooses (:mod:`pipelines.verdict.counter_order`), and both records (None when no ranking was
    chosen): the detectors' order, its five filled by the plain robust anchor's counters whose change
    matters (:func:`counter_order.with_anchor`), stays unless the robust distance's record is the
    better.  ``lab_of``: the lab of each run of the system (``labs.lab_key``); ``anchor_places``: the
    places of the five the anchor fills (0: none); ``read``: the normalised frames read (run -> whole
    frame), filled with those the anchor reads, for the counter changes to use again."""
    fault_labels = inputs.fault_labels
    flagged = list(doc["flagged_counters"])
    if doc["verdict"] != "fail":
        return flagged, None
    changes = doc["details"].get("effects") or {}
    baseline = [b["run_id"] for b in doc["baseline_runs"]]

    def anchored() -> list[str]:
        if not anchor_places:
            return flagged
        anchor = anchor_of(run_id, baseline, {} if read is None else read)
        return counter_order.with_anchor(flagged, effects.measured_and_mattering(anchor, changes, min_effect_pct),
                                         lead=counter_order.IN_FIVE - anchor_places)
    if not fault_labels:
        return anchored(), None
    system = index[run_id]["system"]
    passed = tuple(passed_runs(index, system))
    labs_of = tuple(sorted((r, lab_of[r]) for r in set(passed) | set(fault_labels)))
    recorded = _records(system, tuple(sorted(fault_labels.items())), inputs.features, passed, labs_of)
    chosen = counter_order.choose(recorded)
    ordering = {"ranking": chosen, "records": {k: v.to_json() for k, v in recorded.items()}}
    if chosen != "robust":
        return anchored(), ordering
    medians = counter_history.run_medians(system, [run_id, *baseline], write=False)
    baseline = [b for b in baseline if b in medians.index]
    if run_id not in medians.index or not baseline:
        return flagged, ordering
    sig = cause_signatures.signature(fault_labels, doc["cause"].get("label"), leave_out=run_id)
    order = cause_signatures.explain_order(counter_order.robust_order(medians.loc[run_id], medians.loc[baseline]), sig)
    kept = effects.measured_and_mattering(order, changes, min_effect_pct)
    return (kept[:max(len(flagged), counter_order.IN_FIVE)] if kept else flagged), ordering


class ReportInputs(NamedTuple):
    """What a run's report is made from, read once: its detection result, its own archives in
    ``data/raw``, its system's verified fault labels (``cause_signatures``), the hash of its
    system's feature table when they exist (the counters' rankings replay them on it:
    ``counter_order``) and the input key they give (:func:`report_key`)."""
    detection: RuleDetection
    raw: list[str]
    fault_labels: dict[str, cause_signatures.FaultLabel]
    features: str | None
    key: str


def report_inputs(run_id: str, index: ValidIndex, params: ReportParams, rule: headline.HeadlineRule
                  ) -> ReportInputs:
    detection = atomic.read_json(config.detection_path(run_id))
    raw = raw_archives(run_id)
    labels = cause_signatures.fault_labels(index, index[run_id]["system"])
    features = memo.file_digest(config.features_path(index[run_id]["system"])) if labels else None
    return ReportInputs(detection, raw, labels, features,
                        report_key(run_id, detection, index, params, rule, raw, labels, features))


def kept_report(run_id: str, inputs: ReportInputs) -> VerdictFile | None:
    """The run's verdict document when its page was written under the input key of ``inputs`` and
    its verdict file is there; else None (the report is written again)."""
    if memo.reuse_html(config.run_report_path(run_id, "html"), inputs.key) and config.run_report_path(run_id).exists():
        return atomic.read_json(config.run_report_path(run_id))
    return None


def report_run(run_id: str, index: ValidIndex, params: ReportParams, rule: headline.HeadlineRule
               ) -> VerdictFile:
    """One run's report: the one written under the same input key, with its verdict file, when
    there is one (:func:`kept_report`), else :func:`write_report`; its verdict document."""
    inputs = report_inputs(run_id, index, params, rule)
    kept = kept_report(run_id, inputs)
    return kept if kept is not None else write_report(run_id, inputs, index, params, rule)


def write_report(run_id: str, inputs: ReportInputs, index: ValidIndex, params: ReportParams,
                 rule: headline.HeadlineRule) -> VerdictFile:
    """Compose, write and render one run's report; return its verdict document."""
    detection, raw, labels, _, key = inputs
    charts = store.read_optional(config.chart_path(run_id))
    predicted = store.read_optional(config.cause_path(run_id))
    clustered = store.read_optional(config.cluster_path(run_id))
    system = index[run_id]["system"]
    lab_of = {r: labs.lab_key(row.get("environment")) for r, row in index.items() if row.get("system") == system}
    stages = stage_results.StageDocs(detection, charts, predicted, clustered=clustered)
    composed = stage_results.verdict_of(stages, rule,
                                        lab_of=lab_of, fault_labels=labels, detectors=params.detectors,
                                        objectives=evaluation_of(run_id))
    read: dict[str, pd.DataFrame] = {}          # whole normalised frames, read once for the anchor and the changes
    flagged, ordering = counters_in_order(run_id, composed, index, inputs, lab_of, rule.min_effect_pct,
                                          anchor_places=params.anchor_places, read=read)
    details = {**composed["details"], **({"counter_order": ordering} if ordering is not None else {}),
               "environment_not_in_baseline": novel_environment(
                   index[run_id].get("environment") or {},
                   [(index.get(b["run_id"]) or {}).get("environment") or {} for b in composed["baseline_runs"]])}
    top_n = params.top_counters
    indicators = release.key_indicators(composed, index[run_id], composed["counter_scores"])
    shown = list(dict.fromkeys(flagged + list(composed["counter_scores"])[:top_n] + indicators))
    by_start = sorted((b["run_id"] for b in composed["baseline_runs"]),
                      key=lambda b: ((index.get(b) or {}).get("started_at") or "", b))
    changes, trends, frames = run_changes(run_id, by_start, shown, params.directions,
                                          whole=set(compared_baselines(composed["baseline_runs"], params.compare_pages)),
                                          read=read)
    explained: VerdictFile = {**composed, "flagged_counters": flagged, "details": details,
                              "counter_changes": {c: changes[c] for c in summary_order(flagged, changes,
                                                                                      user_facing=params.user_facing)}}
    # the verdict file, once: the composed decision, its counters in order and what the page adds to it (the
    # summary sentence, and the counters validation left out of this run, with the reason)
    doc: VerdictFile = {**explained, "summary": plain_summary(explained, changes, user_facing=params.user_facing,
                                                              directions=params.directions),
                        "dropped_counters": [cast(DroppedCounter, {k: d.get(k) for k in ("host", "counter", "reason")})
                                             for d in index[run_id].get("_dropped_counters") or []]}
    atomic.write_json_atomic(config.run_report_path(run_id), doc)
    raw_name = raw[0] if raw else f"{run_id} (not in data/raw)"
    compared = compare_baselines(run_id, doc, index, frames, params.compare_pages)
    page = RunPage(baseline_envs={b["run_id"]: (index.get(b["run_id"]) or {}).get("environment") or {}
                                  for b in doc["baseline_runs"]},
                   raw_href=f"../../data/raw/{raw_name}", raw_name=raw_name, top_n=top_n, changes=changes,
                   trends=trends, few_intervals=params.few_intervals, compare_pages=compared, history=True,
                   key_counters=indicators)
    html = render_run(doc, index[run_id], charts, page)
    atomic.write_text_atomic(config.run_report_path(run_id, "html"), memo.stamp_html(html, key))
    return doc


def compare_baselines(run_id: str, doc: VerdictFile, index: ValidIndex, frames: dict[str, pd.DataFrame],
                      pages: int) -> dict[str, str]:
    """The compare pages of the run against its ``pages`` heaviest baseline runs (baseline = A, this
    run = B), written to ``reports/compare``; baseline run -> the link from the run page.  The
    pages are written on every core when the run's report is written in the stage's own
    process (one at a time inside a worker)."""
    chosen = [b for b in compared_baselines(doc["baseline_runs"], pages) if b in frames]

    def page(baseline: str) -> str:
        _, html = compare.compare_runs(baseline, run_id, index, frames, written=frozenset({run_id}))
        compare.write_page(baseline, run_id, html)
        return f"../compare/{compare.page_name(baseline, run_id)}"
    return dict(zip(chosen, parallel.map_ordered(page, chosen)))


def compared_baselines(baseline_runs: list[WeightedRun], pages: int) -> list[str]:
    """The ``pages`` heaviest runs of a verdict's ``baseline_runs``: those a compare page shows."""
    return [b["run_id"] for b in sorted(baseline_runs, key=lambda b: (-b["weight"], b["run_id"]))[:pages]]


def run_changes(run_id: str, baseline_runs: list[str], counters: list[str], directions: list[dict[str, str]],
                whole: AbstractSet[str] = frozenset(), read: Mapping[str, pd.DataFrame] | None = None,
                ) -> tuple[dict[str, CounterChange], dict[str, str | None], dict[str, pd.DataFrame]]:
    """:func:`counter_changes` on the normalised runs as recorded (not load-scaled: the units are
    the collector's): this run's median per counter, and the median of the baseline runs'
    intervals; and per counter a sparkline of the baseline runs' medians (oldest first) then
    this run's, so a slow drift over releases is visible; and the whole frames read (run ->
    frame): this run's and those of the baseline runs in ``whole`` (the others are read for the
    counters shown alone); ``read``: whole frames already read (run -> frame), used again, not read twice."""
    read = read or {}
    target_frame = read[run_id] if run_id in read else store.load_normalized(run_id)

    def shown(frame: pd.DataFrame) -> pd.DataFrame:     # the medians of the counters shown, not of all 2,000
        return frame[[c for c in counters if c in frame.columns]]

    def frame_of(b: str) -> pd.DataFrame:
        if b in read:
            return read[b]
        if b in whole:
            return store.load_normalized(b)
        return atomic.read_parquet(config.frame_path(b), columns=counters)
    frames = {b: frame_of(b) for b in baseline_runs if config.frame_path(b).exists()}
    if not frames:
        return {}, {}, {run_id: target_frame}
    baseline = pd.concat([shown(f) for f in frames.values()], ignore_index=True).median()
    target = shown(target_frame).median()
    changes = counter_changes(counters, target, baseline, directions)
    medians = {b: shown(f).median() for b, f in frames.items()}
    trends = {c: sparkline([medians[b].get(c) for b in frames] + [target.get(c)]) for c in counters}
    return changes, trends, {**{b: f for b, f in frames.items() if b in whole}, run_id: target_frame}


def quarantine_reasons(limit: int = 400) -> dict[str, str]:
    """Every archive quarantined by ``validate`` or refused by ``pull``, with its reason (shortened)."""
    out: dict[str, str] = {}
    for path in sorted(config.QUARANTINE.glob("*.json")) if config.QUARANTINE.exists() else []:
        try:
            out[path.stem] = mask_urls(str(atomic.read_json(path).get("reason") or ""))[:limit]
        except (OSError, ValueError) as exc:
            out[path.stem] = f"(quarantine file unreadable: {exc})"
    summary = store.read_optional(config.PULL_SUMMARY) or {}
    for refused in summary.get("refused") or []:
        out.setdefault(str(refused.get("run_id")), f"refused by pull: {mask_urls(str(refused.get('reason')))[:limit]}")
    return out


def release_builds(rows: dict[str, IndexRow], nights: list[tuple[str, dict[str, IndexRow]]],
                   index: ValidIndex) -> list[release.Build]:
    """The release view (:mod:`pipelines.reporting.release`): tonight's runs and those of the earlier
    nights shown in the trend, one row per system and build; an earlier run's status from its row
    (or, for a night written before rows held it, from its verdict file)."""
    runs: dict[str, tuple[str, release.RunStatus]] = {}
    for _, earlier in nights:
        for run_id, row in earlier.items():
            if row.get("status"):
                runs[run_id] = (row["system"], release.RunStatus.of_row(run_id, row))
            elif config.is_identifier(run_id) and config.run_report_path(run_id).exists():
                doc = atomic.read_json(config.run_report_path(run_id))
                runs[run_id] = (doc["system"], release.run_status(doc))
    for run_id, row in rows.items():
        runs[run_id] = (row["system"], release.RunStatus.of_row(run_id, row))
    return release.builds(runs, index, rows)


def write_night_index(rows: dict[str, IndexRow] | None, params: ReportParams,
                      index: ValidIndex) -> NightSummary:
    """The night's index page and summary from the targets' verdict files (``rows``: their index
    rows, read from the verdict files when None); the summary."""
    config.ensure_dirs(config.NIGHTS, config.SYSTEM_REPORTS, config.COMPARE_REPORTS)
    if rows is None:
        rows = {r: index_row(atomic.read_json(config.run_report_path(r))) for r in history.targets(index)
                if config.run_report_path(r).exists()}
    now = pd.Timestamp.now(tz="UTC")
    night = str(params.night or now.date())
    earlier = sorted(p for p in config.NIGHTS.glob("*.json") if p.stem < night) if config.NIGHTS.exists() else []
    previous = atomic.read_json(earlier[-1])["runs"] if earlier else None
    changes = night_changes(rows, previous)
    for run_id, r in rows.items():
        known = index.get(run_id) or {}
        r["version"] = str(known.get("version") or "")
        r["build"] = release.build_of(known)
    ordered = sorted(rows.values(), key=lambda r: (release.RANK.get(r.get("status") or "ship", 2),
                                                   -(r["score"] or 0.0), r["run_id"]))
    for r in ordered:
        r["change"] = changes[r["run_id"]]
    reasons = quarantine_reasons()
    quarantined = sorted(reasons)
    pulled = store.read_optional(config.PULL_SUMMARY) or {}
    missing = [{"source": mask_urls(str(m.get("source"))), "reason": mask_urls(str(m.get("reason")))}
               for m in pulled.get("missing_sources") or []]
    arriving = {key: [{"run_id": str(a.get("run_id")), "reason": mask_urls(str(a.get("reason")))}
                      for a in pulled.get(key) or []] for key in ("waiting", "retaken")}
    atomic.write_json_atomic(config.NIGHTS / f"{night}.json", {"night": night, "runs": rows})
    history_nights = []
    for path in earlier[-(params.trend_nights - 1):]:
        try:
            history_nights.append((path.stem, atomic.read_json(path)["runs"]))
        except (OSError, ValueError, KeyError):
            continue                                   # an unreadable old night is left out of the trend
    trends = night_trends(history_nights + [(night, rows)], last=params.trend_nights)
    systems = counter_history.write_system_pages(index, history.targets(index), params.block)
    decisions = sorted(triage_log.triage_state(triage_log.read_log()).values(), key=lambda d: d.get("at") or "",
                       reverse=True)
    page = NightIndex(night=night, generated=now.strftime("%Y-%m-%d %H:%M UTC"), quarantined=quarantined,
                      systems={s: links.system_href(s) for s in systems}, reasons=reasons, valid_runs=len(index),
                      dropped=dropped_counters(index), decisions=decisions, trends=trends, commits=commit_summary(),
                      missing_sources=missing, arriving=arriving,
                      builds=release_builds(rows, history_nights, index))
    atomic.write_text_atomic(config.NIGHT_INDEX, render_index(ordered, page))
    failed = sorted(r["run_id"] for r in rows.values() if r["verdict"] == "fail")
    return {"night": night, "runs": len(rows), "failed": failed, "quarantined": quarantined,
            "missing_sources": [m.get("source") for m in missing]}
