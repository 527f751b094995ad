"""
### Nightly regression analysis

Every night: pull the new test-run archives, validate them with Great Expectations,
evaluate every run against its system's objectives (Keptn's quality gates), normalise the new runs (mapped over batches of runs), learn the bin edges, mine the
association-rule model of each prior passed run not mined yet (mapped over batches), calibrate
the control charts and stacking (each normal run of the history judged against the others), then
**one mapped task group per batch of target runs**: association-rule detection, control charts,
clustered regression models, probable cause, and each run's report (`reports/runs/<run_id>.json`
+ `.html`).  A batch holds at most `orchestration.runs_per_task` runs (params.yaml), spread over `compute.jobs`
processes: each task instance pays a process start and loads the history it reads, so few large
batches are fastest on one machine (docs/operations/airflow.md).  A run
that fails does not stop the others of its batch; the batch then fails naming it, and its retry
runs the batch again (every per-run step is idempotent). Beside them, `commit_changes` looks for changes in the benchmark history per commit
(Skia and Mono; a page saying so when no series is configured). The night ends with
`reports/index.html` and a summary line.

Each task calls the function the DVC stage of the same name calls (`pipelines/stages/<stage>.py`:
`run_one(run_id)` on each run of a batch, task id = the stage name; `main()` for the whole stage, task id
= the stage name, or `<stage>_all` where the stage is also mapped per run), so a night run by Airflow and a
`dvc repro` afterwards compute the same files, and per-run results are cached by content:
neither redoes the other's work. Set `REGRESSLAB_ROOT` on the workers to the checkout the
stages read and write (a shared volume when the workers are several machines).

When the set of verified runs changed, `announce_verified_runs` emits the
`regresslab://history/verified-runs` asset and the `retrain_cause_models` DAG runs.
"""
from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import dag, task, task_group

from pipelines.orchestration.tasks import batch_task, night_batches, notify_failure, stage_task, verified_runs_asset

VERIFIED_RUNS = verified_runs_asset()
TIMEOUT = timedelta(hours=2)
PER_BATCH_TIMEOUT = timedelta(hours=2)


def _stage(name: str, trigger_rule: str = "all_success", task_id: str | None = None):
    return stage_task(name, timeout=TIMEOUT, trigger_rule=trigger_rule, task_id=task_id)


def _per_batch(name: str, trigger_rule: str = "all_success"):
    return batch_task(name, timeout=PER_BATCH_TIMEOUT, trigger_rule=trigger_rule)


@task(execution_timeout=TIMEOUT)
def new_runs() -> list[list[str]]:
    from pipelines.stages import normalize
    return night_batches(normalize.pending_runs())


@task(execution_timeout=TIMEOUT)
def new_models() -> list[list[str]]:
    from pipelines.stages import mine_rules
    return night_batches(mine_rules.pending_models())


@task(task_id="calibrate_control_charts", execution_timeout=TIMEOUT)
def calibrate_control_charts() -> list[str]:
    from pipelines.stages import control_charts
    return control_charts.calibrate_all()


@task(task_id="calibrate_clusters", execution_timeout=TIMEOUT)
def calibrate_clusters() -> list[str]:
    from pipelines.stages import clusters
    return clusters.calibrate_all()


@task(task_id="calibrate_stacking", execution_timeout=TIMEOUT)
def calibrate_stacking() -> list[str]:
    from pipelines.stages import detect
    return detect.calibrate_all()


@task(execution_timeout=TIMEOUT)
def target_runs() -> list[list[str]]:
    from pipelines.systems import history
    from pipelines.storage import manifest
    return night_batches(history.targets(manifest.read_valid_index()))


@task(task_id="announce_verified_runs", outlets=[VERIFIED_RUNS], execution_timeout=TIMEOUT)
def announce_verified_runs() -> list[str]:
    """Emit the asset (and so trigger retraining) only when verified runs were added or changed."""
    from airflow.exceptions import AirflowSkipException

    from pipelines.stages import train_causes
    changed = train_causes.verified_runs_changed()
    if not changed:
        raise AirflowSkipException("no new verified runs: the cause models are current")
    return changed


@task_group
def analyse_run(run_names: list[str]):
    """Everything about a batch of target runs; their reports once the analyses are done (the four
    families and the registered detectors the night computes, ``detectors``)
    (``all_done``: a run one analysis failed on does not keep the others of its batch unreported)."""
    [_per_batch("detect")(run_names), _per_batch("control_charts")(run_names), _per_batch("clusters")(run_names),
     _per_batch("detectors")(run_names), _per_batch("predict_causes")(run_names)] \
        >> _per_batch("report", "all_done")(run_names)


@task(task_id="night_index", execution_timeout=TIMEOUT, trigger_rule="none_failed")
def night_index() -> dict:
    from pipelines.stages import report
    return report.write_index()


@task(task_id="summary", execution_timeout=TIMEOUT)
def summary(night: dict) -> str:
    line = (f"regresslab night {night['night']}: {len(night['failed'])} of {night['runs']} runs regressed"
            f"{': ' + ', '.join(night['failed']) if night['failed'] else ''}; "
            f"{len(night['quarantined'])} archive(s) quarantined")
    print(line)
    return line


@task(task_id="alert", execution_timeout=TIMEOUT)
def alert(night: dict) -> str:
    """E-mail the night's failed runs through Airflow's SMTP notifier (off by default: params.yaml alerts)."""
    from airflow.sdk import get_current_context

    from pipelines.reporting import alerts
    return alerts.notify_night(night, context=get_current_context())


@dag(
    dag_id="nightly_regression_analysis",
    schedule="0 2 * * *",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    doc_md=__doc__,
    tags=["regresslab", "nightly"],
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=5), "retry_exponential_backoff": True,
                  "on_failure_callback": notify_failure},
)
def nightly_regression_analysis():
    validated = _stage("pull")() >> _stage("validate")()
    runs = new_runs()
    validated >> [runs, announce_verified_runs()]
    normalized = (_per_batch("normalize").expand(run_names=runs)
                  >> _stage("normalize", "none_failed", task_id="normalize_all")() >> _stage("discretize")())
    history_runs = new_models()
    normalized >> history_runs
    mined = (_per_batch("mine_rules").expand(run_names=history_runs)
             >> _stage("mine_rules", "none_failed", task_id="mine_rules_all")())
    targets = target_runs()                       # listed while the calibrations run: one task less in a row
    validated >> _stage("objectives")() >> targets   # the team's objectives, judged before any run's report
    calibrations = [calibrate_control_charts(), calibrate_clusters(), calibrate_stacking()]
    mined >> [*calibrations, targets]
    night = night_index()
    validated >> _stage("commit_changes")() >> night   # the benchmark history per commit, linked to the runs
    calibrations >> analyse_run.expand(run_names=targets) >> night
    summary(night)                                # the summary line and the e-mail, side by side
    alert(night)


nightly_regression_analysis()
