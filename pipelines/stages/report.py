"""report: the verdict file and the one-page HTML report of every target run, and the night's index.

The headline decision is :func:`pipelines.detection.stage_results.verdict_of`; a run's report (its
verdict file, page and compare pages) and the night's index are :mod:`pipelines.reporting.run_reports`,
the pages :mod:`pipelines.reporting.pages`.  This stage writes each target's verdict file
(``reports/runs/<run_id>.json``, contract §2) and page, the night index with the quarantined
archives and the triage decisions, the JUnit XML of the night, and the alerts.
"""
from __future__ import annotations

import logging

from pipelines import config, parallel
from pipelines.stats import effects
from pipelines.verdict import headline
from pipelines.systems import history
from pipelines.progress import Progress
from pipelines.reporting import alerts, junit
from pipelines.reporting.pages import compile_run_templates, index_row
from pipelines.reporting.run_reports import (ReportParams, kept_report, report_inputs, report_run, write_night_index,
                                             write_report)
from pipelines.storage import atomic, locks, manifest
from pipelines.storage.stage_files import IndexRow, NightSummary

log = logging.getLogger("regresslab.report")


@locks.holding("report", shared=True)
def run_one(run_id: str) -> IndexRow:
    """Write one target's verdict file and page; its index row (the per-run task of the nightly DAG)."""
    params = ReportParams.load()
    significance = effects.Significance.load()
    rule = headline.HeadlineRule.from_params(params.block, significance)
    return index_row(report_run(run_id, manifest.read_valid_index(), params, rule))


@locks.holding("report index")
def write_index(rows: dict[str, IndexRow] | None = None) -> NightSummary:
    """The night's index page and summary from the targets' verdict files; the summary (DAG task)."""
    return write_night_index(rows, ReportParams.load(), manifest.read_valid_index())


@locks.holding("report")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config.ensure_dirs(config.RUN_REPORTS, config.NIGHTS, config.SYSTEM_REPORTS, config.COMPARE_REPORTS)
    params = ReportParams.load()
    significance = effects.Significance.load()
    rule = headline.HeadlineRule.from_params(params.block, significance)
    index = manifest.read_valid_index()
    todo = history.targets(index)
    progress = Progress(log, "report", len(todo))
    tick = progress.each(lambda run_id, out: f"{run_id} -> {out[0]['verdict']}" + (" (unchanged, reused)"
                                                                                   if out[1] else ""))
    inputs = {run_id: report_inputs(run_id, index, params, rule) for run_id in todo}
    rows: dict[str, IndexRow] = {}
    for run_id in todo:
        kept = kept_report(run_id, inputs[run_id])
        if kept is not None:
            rows[run_id] = index_row(kept)
            tick(0, run_id, (rows[run_id], True))
    fresh = [r for r in todo if r not in rows]
    # each run's files are its own (its verdict file, page and compare pages): runs on every core;
    # fewer new runs than cores (a second night's one new archive): one at a time here, and each
    # run's compare pages on every core
    one_by_one = len(fresh) < parallel.configured_jobs()
    if fresh:
        compile_run_templates()
    written = parallel.map_ordered(
        lambda run_id: (index_row(write_report(run_id, inputs[run_id], index, params, rule)), False), fresh,
        jobs=1 if one_by_one else None, progress=tick)
    rows.update({r: row for r, (row, _) in zip(fresh, written)})
    summary = write_index({r: rows[r] for r in todo})
    print(f"[report] {summary['runs']} runs, {len(summary['failed'])} regressed -> {config.NIGHT_INDEX}")
    if params.junit:
        target = config.ROOT / params.junit
        docs = {r: atomic.read_json(config.run_report_path(r)) for r in todo}
        atomic.write_text_atomic(target, junit.night_xml(summary["night"], docs, index=config.NIGHT_INDEX))
        print(f"[report] JUnit XML of the night: {target}")
    print(f"[report] alerts: {alerts.notify_night(summary)}")


if __name__ == "__main__":
    config.install_error_hook()
    main()

