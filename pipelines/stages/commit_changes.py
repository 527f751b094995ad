"""commit_changes: changes in the benchmark history per commit (Skia, Mono).

Reads ``commit_changes.source`` (contract §3), runs the detectors of
:mod:`pipelines.commit_series.series`, and writes ``reports/commits/changes.json`` and
its page, the coalesced clusters (``data/processed/commit_clusters.json``) and, when the
history is labelled, ``metrics/commit_changes.json``.  ``triage`` records an analyst's
decision on a cluster.
"""
from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from pipelines import config
from pipelines.commit_series.series import all_changes, check_frame, contract_rows, detect_all, read_series, score_against
from pipelines.commit_series.skia import TRIAGE_STATUSES, coalesce, triage_cluster
from pipelines.progress import Progress
from pipelines.reporting.commit_pages import RunAt, RunLinks, render_page
from pipelines.storage import atomic, locks

log = logging.getLogger("regresslab.commit_changes")


def load_test_runs() -> list[RunAt]:
    """The validated load-test runs, for the page's links from a change to the runs around it (none
    before the first night's validation)."""
    if not config.VALID_INDEX.exists():
        return []
    index = atomic.read_json(config.VALID_INDEX).get("valid") or {}
    return [RunAt(run_id, str(row.get("started_at") or ""), str(row.get("system") or ""),
                  str(row.get("version") or ""), target=row.get("verdict") is None)
            for run_id, row in index.items() if row.get("started_at")]


@locks.holding("commit_changes")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    params = config.load_params("commit_changes")
    config.ensure_dirs(config.COMMIT_REPORTS)
    source = params.get("source")
    metrics_path = config.METRICS / "commit_changes.json"
    if not config.COMMIT_CLUSTERS.exists():          # every output DVC expects, whatever happens below
        atomic.write_json_atomic(config.COMMIT_CLUSTERS, [])
    if not source:
        atomic.write_json_atomic(config.COMMIT_REPORTS / "changes.json", [])
        atomic.write_text_atomic(config.COMMIT_REPORTS / "index.html",
                                  render_page([], None, source=None, new_clusters=[], metrics=None, top_series=0))
        atomic.write_json_atomic(metrics_path, {})
        print("[commit_changes] no commit series configured (commit_changes.source): nothing to do")
        return
    path = Path(source) if Path(source).is_absolute() else config.ROOT / source
    try:
        frame = check_frame(read_series(path))
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        # a missing or unreadable series must not stop the night: the page says what is wrong
        problem = f"{type(exc).__name__}: {exc}"[:500]
        log.error("commit_changes: cannot read the commit series %s: %s", path, problem)
        atomic.write_json_atomic(config.COMMIT_REPORTS / "changes.json", [])
        atomic.write_text_atomic(config.COMMIT_REPORTS / "index.html",
                                  render_page([], None, source=str(source), new_clusters=[], metrics=None,
                                              top_series=0, problem=problem))
        atomic.write_json_atomic(metrics_path, {})
        return
    n_series = int(frame[["benchmark", "config"]].drop_duplicates().shape[0])
    prog = Progress(log, "commit_changes mono", n_series, what="series", every=max(1, n_series // 20))
    result = detect_all(frame, params, progress=lambda i, n, s: prog.step(i, s))
    rows = contract_rows(all_changes(result), list(params["higher_is_better"]))
    known = atomic.read_json(config.COMMIT_CLUSTERS) if config.COMMIT_CLUSTERS.exists() else []
    registry, new_ids = coalesce(known, result["clusters"])
    atomic.write_json_atomic(config.COMMIT_CLUSTERS, registry)
    metrics = None
    labels_file = params.get("labels")
    if labels_file:
        lpath = Path(labels_file) if Path(labels_file).is_absolute() else config.ROOT / labels_file
        if lpath.exists():
            metrics = score_against(result, atomic.read_json(lpath), int(params["match_margin"]))
    atomic.write_json_atomic(config.COMMIT_REPORTS / "changes.json", rows)
    times = dict(zip(frame["commit"].astype(str), frame["commit_time"].astype(str)))
    atomic.write_text_atomic(config.COMMIT_REPORTS / "index.html",
                              render_page(rows, result, source=str(source),
                                          new_clusters=[c for c in registry if c["id"] in new_ids],
                                          metrics=metrics, top_series=int(params["page_series"]),
                                          links=RunLinks(times, load_test_runs())))
    atomic.write_json_atomic(metrics_path, metrics or {})
    print(f"[commit_changes] {len(result['table'])} series x {len(result['commits'])} commits: "
          f"skia {len(result['skia'])} change(s) in {len(result['clusters'])} interesting cluster(s) "
          f"({len(new_ids)} new), mono {len(result['mono'])}, pelt {len(result['pelt'])}, "
          f"level_shift {len(result['level_shift'])} ({len(result['irregular'])} series too irregular to call) "
          f"(method {result['method']}); "
          f"{sum(r['direction'] == 'regression' for r in rows)} "
          f"regression(s) -> {config.COMMIT_REPORTS / 'index.html'}")
    if metrics:
        print(f"[commit_changes] against the labels: {metrics}")


@locks.holding("commit_changes triage")
def triage_main(argv: list[str]) -> None:
    """``python -m pipelines.stages.commit_changes triage CLUSTER --status positive|negative|untriaged --by NAME``."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m pipelines.stages.commit_changes triage",
                                     description="Triage an interesting Skia cluster of the commit page.")
    parser.add_argument("cluster", help="the cluster's id on the commit page, e.g. c0003")
    parser.add_argument("--status", required=True, choices=TRIAGE_STATUSES)
    parser.add_argument("--by", required=True, help="who triaged it")
    parser.add_argument("--note", default=None)
    args = parser.parse_args(argv)
    from pipelines.safe_text import text_problem

    problem = text_problem("--by", args.by, 200, required=True) or text_problem("--note", args.note, 2000)
    if problem:
        parser.error(problem)
    known = atomic.read_json(config.COMMIT_CLUSTERS) if config.COMMIT_CLUSTERS.exists() else []
    try:
        registry = triage_cluster(known, args.cluster, args.status, by=args.by, note=args.note,
                                  at=pd.Timestamp.now(tz="UTC").isoformat(timespec="seconds"))
    except ValueError as exc:
        parser.error(str(exc))
    atomic.write_json_atomic(config.COMMIT_CLUSTERS, registry)
    print(f"[commit_changes] cluster {args.cluster}: {args.status} (by {args.by})")


if __name__ == "__main__":
    config.install_error_hook()
    import sys

    if sys.argv[1:2] == ["triage"]:
        triage_main(sys.argv[2:])
    else:
        main()

