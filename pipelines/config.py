"""Paths, identifiers and parameters, in one place.

Every input and output path of the pipeline is spelled here (and mirrored in
``dvc.yaml``); stage modules, the DAGs and the plugin import these names instead of
writing paths.  Per-run and per-system files are reached through the small functions at
the end, which take the identifier and nothing else.  ``REGRESSLAB_ROOT`` moves the whole
tree (the tests and the Airflow DAGs use it); an installed package without it works on the
current directory (:func:`default_root`).
"""
from __future__ import annotations

import copy
import hashlib
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pipelines import params_schema

# The grammar of run_ids and systems (contract §1), also applied to host names: each becomes
# part of a file name.  It starts with a letter or digit (never "." or ".."), has no "/" and, with \Z
# rather than $, no trailing newline.  ASCII only.
RUN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z", re.ASCII)


def host_component(host: str) -> str:
    """The component name of a host-level counter (``<component>.<counter>``, contract §1):
    the host's name with every character outside ``[A-Za-z0-9_-]`` as ``_`` (a dot would split it)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", str(host))


def is_identifier(value: Any) -> bool:
    """Whether ``value`` is a string in the identifier grammar (safe as a file-name part)."""
    return isinstance(value, str) and RUN_ID_RE.match(value) is not None


def identifier(value: Any, what: str = "identifier") -> str:
    """``value`` when it is an identifier; otherwise ``ValueError``.  Every path built from a run_id,
    system or host goes through this check (the path functions below), so no archive can name a
    path outside the tree."""
    if not is_identifier(value):
        raise ValueError(f"{what} {value!r:.80} is not an identifier ([A-Za-z0-9][A-Za-z0-9._-]{{0,127}})")
    return value

# The Airflow asset the nightly DAG emits when verified runs were added; the retraining DAG listens.
VERIFIED_RUNS_ASSET = "regresslab://history/verified-runs"

# Where the page templates and their one style sheet live (shared by `report` and the plugin).
TEMPLATES = Path(__file__).resolve().parent / "reporting" / "templates"


@dataclass(frozen=True)
class Paths:
    """Every fixed path of a project, from its root (:meth:`at`).  The module's upper-case names
    (``config.VALID``, ...) read the current project's (:func:`use_root`, :func:`paths`)."""

    root: Path
    data: Path
    example: Path  # simulated lab archives (labsim stage)
    commit_example: Path  # simulated benchmark history per commit (commitsim)
    raw: Path  # immutable copies of pulled archives
    manifest: Path  # run_id, sha256, size, first seen
    interim: Path
    pull_summary: Path
    valid: Path  # validated runs, one parquet per host
    valid_index: Path
    gx: Path  # the Great Expectations project (results store)
    quarantine: Path  # rejected runs with their reason
    triage: Path  # analysts' decisions (an input, like data/raw)
    triage_log: Path  # append-only, one decision or undo per line
    normalized: Path
    normalized_index: Path
    processed: Path
    edges: Path  # bin edges per system
    models: Path  # rule models per system and run
    detections: Path  # association-rule results per target run
    single_models: Path  # pooled rule models of the targets' baselines
    stacking_calibration: Path  # normal runs' stacking scores per system
    control_charts: Path  # calibrations per system, charts per target
    clusters: Path  # clustered regression models per target (seed 000)
    features: Path  # violation-ratio features per system
    cause_models: Path  # every cause-model version, per system
    causes: Path  # predicted cause per target run
    loo_cache: Path  # rule models of the leave-one-out evaluation
    commit_clusters: Path  # Skia's interesting clusters, kept between nights
    objectives_config: Path  # the team's objectives: objectives/<system>/slo.yaml and sli.yaml (an input)
    objectives: Path  # each run's evaluation against its system's objectives
    reports: Path
    validation_docs: Path
    run_reports: Path
    nights: Path
    night_index: Path
    commit_reports: Path  # changes.json (contract §3) and index.html
    system_reports: Path  # each system's counters over time
    compare_reports: Path  # two runs side by side
    metrics: Path
    params: Path

    @classmethod
    def at(cls, root: str | Path) -> "Paths":
        root = Path(root)
        data = root / "data"
        raw = data / "raw"
        interim = data / "interim"
        triage = data / "triage"
        processed = data / "processed"
        reports = root / "reports"
        return cls(
            root=root, data=data, example=data / "example", commit_example=data / "example_commits", raw=raw,
            manifest=raw / "manifest.jsonl", interim=interim, pull_summary=interim / "pull_summary.json",
            valid=interim / "valid", valid_index=interim / "valid_runs.json", gx=interim / "gx",
            quarantine=data / "quarantine", triage=triage, triage_log=triage / "log.jsonl",
            normalized=interim / "normalized", normalized_index=interim / "normalized_runs.json",
            processed=processed, edges=processed / "edges", models=processed / "models",
            detections=processed / "detections", single_models=processed / "single_models",
            stacking_calibration=processed / "stacking_calibration",
            control_charts=processed / "control_charts", clusters=processed / "clusters",
            features=processed / "features", cause_models=processed / "cause_models",
            causes=processed / "causes", loo_cache=data / "cache" / "loo",
            commit_clusters=processed / "commit_clusters.json", objectives_config=root / "objectives",
            objectives=processed / "objectives", reports=reports,
            validation_docs=reports / "validation", run_reports=reports / "runs", nights=reports / "nights",
            night_index=reports / "index.html", commit_reports=reports / "commits",
            system_reports=reports / "systems", compare_reports=reports / "compare",
            metrics=root / "metrics", params=root / "params.yaml")


_PATHS: Paths | None = None


def use_root(root: str | Path) -> None:
    """Point every path of the pipeline at another tree (tests, Airflow workers, a second lab)."""
    global _PATHS
    _PATHS = Paths.at(root)


def paths() -> Paths:
    """The current project's paths: :func:`use_root`'s, else :func:`default_root`'s (found on first use)."""
    global _PATHS
    if _PATHS is None:
        _PATHS = Paths.at(default_root())
    return _PATHS


_NAMES = {f.upper() for f in Paths.__dataclass_fields__}


def __getattr__(name: str) -> Path:
    """``config.VALID`` and the other upper-case names: the current project's path (PEP 562)."""
    if name in _NAMES:
        return getattr(paths(), name.lower())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def project_around(start: Path) -> Path | None:
    """The nearest directory from ``start`` up that ``regresslab init`` made (it holds
    ``.regresslab/version``), or ``None``."""
    for folder in (start, *start.parents):
        if (folder / ".regresslab" / "version").is_file():
            return folder
    return None


def default_root() -> Path:
    """The project: ``REGRESSLAB_ROOT`` when set; else the lab's project the current directory is
    in (made by ``regresslab init``: a checkout installed in editable mode must not run its own
    example night there); else the checkout this package lives in (it holds ``dvc.yaml``); else,
    for an installed package, the current directory."""
    if os.environ.get("REGRESSLAB_ROOT"):
        return Path(os.environ["REGRESSLAB_ROOT"])
    project = project_around(Path.cwd())
    if project is not None:
        return project
    checkout = Path(__file__).resolve().parent.parent
    return checkout if (checkout / "dvc.yaml").is_file() else Path.cwd()



_PARSED: dict[bytes, dict[str, Any]] = {}


def install_error_hook() -> None:
    """For a command's entry point (a stage run as ``python -m``): when it stops on a bad
    ``params.yaml`` it says what is wrong, not a traceback; and every log record has a location's
    credentials masked (``safe_text.mask_logging``).  Importing this module changes nothing."""
    from pipelines.safe_text import mask_logging

    mask_logging()
    previous = sys.excepthook
    if getattr(previous, "regresslab", False):
        return

    def hook(kind, value, tb):
        if issubclass(kind, params_schema.ConfigError):
            print(f"regresslab: configuration error\n{value}", file=sys.stderr)
            return
        previous(kind, value, tb)

    setattr(hook, "regresslab", True)
    sys.excepthook = hook


def load_params(stage: str | None = None, path: Path | None = None) -> dict[str, Any]:
    """Read ``params.yaml`` (or ``path``); return one stage's block when ``stage`` is given.

    The file is checked against its schema first (``params_schema``: types, ranges, allowed
    values, no unknown key) and completed with the defaults of every key it leaves out; a
    problem is a ``params_schema.ConfigError`` naming the file, the key and what is allowed.

    Each version of the file (by its bytes' hash) is parsed once: a stage reads several blocks,
    and parsing the whole file took 0.15 s each time.  Each call returns its own copy, so a
    caller may change what it gets."""
    source = Path(path or paths().params)
    try:
        data = source.read_bytes()
    except FileNotFoundError:
        raise params_schema.ConfigError(f"{source}: no such file (the pipeline's parameters; "
                                        f"pipelines/params_defaults.yaml holds every default)") from None
    digest = hashlib.sha1(data).digest()
    if digest not in _PARSED:
        try:
            parsed = yaml.safe_load(data.decode("utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            from pipelines.safe_text import mask_urls
            raise params_schema.ConfigError(mask_urls(f"{source.name}: not valid YAML ({exc})")) from None
        _PARSED[digest] = params_schema.check(parsed, source=source.name)
    params = copy.deepcopy(_PARSED[digest])
    return params.get(stage, {}) if stage else params


# --------------------------------------------------------------------------- per-run and per-system files


def valid_dir(run_id: str) -> Path:
    """A validated run: one parquet per host and ``meta.json``."""
    return paths().valid / identifier(run_id, "run_id")


def quarantine_path(run_id: str) -> Path:
    return paths().quarantine / f"{identifier(run_id, 'run_id')}.json"


def normalize_failed_path(run_id: str) -> Path:
    """Why a valid run could not be normalised (within its budget): the run is then not analysed."""
    return paths().normalized / f"{identifier(run_id, 'run_id')}.failed.json"


def frame_path(run_id: str) -> Path:
    """The interval frame of a normalised run."""
    return paths().normalized / f"{identifier(run_id, 'run_id')}.parquet"


def info_path(run_id: str) -> Path:
    """What normalisation decided for a run (interval, counters, load fits, key)."""
    return paths().normalized / f"{identifier(run_id, 'run_id')}.json"


def ensure_dirs(*dirs: Path) -> None:
    """Create a stage's output folders: DVC expects every declared output to exist, also after a
    night with nothing to analyse."""
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)


def edges_path(system: str) -> Path:
    return paths().edges / f"{identifier(system, 'system')}.json"


def models_dir(system: str) -> Path:
    return paths().models / identifier(system, "system")


def single_models_dir(system: str) -> Path:
    """``detect``'s own cache of pooled models (not in ``models_dir``: that is ``mine_rules``' output)."""
    return paths().single_models / identifier(system, "system")


def stacking_calibration_path(system: str) -> Path:
    return paths().stacking_calibration / f"{identifier(system, 'system')}.json"


def pruning_masks_path(system: str) -> Path:
    """The rule masks of pruning between a system's passed runs (``rule_detection.save_pruning``)."""
    return paths().stacking_calibration / f"{identifier(system, 'system')}.pruning.npz"


def run_summaries_path(system: str) -> Path:
    """The medians and peaks of a system's passed runs (``rule_detection.save_summaries``)."""
    return paths().stacking_calibration / f"{identifier(system, 'system')}.levels.npz"


def detection_path(run_id: str) -> Path:
    return paths().detections / f"{identifier(run_id, 'run_id')}.json"


def calibration_path(system: str) -> Path:
    return paths().control_charts / "calibration" / f"{identifier(system, 'system')}.json"


def chart_path(run_id: str) -> Path:
    return paths().control_charts / "runs" / f"{identifier(run_id, 'run_id')}.json"


def cluster_path(run_id: str) -> Path:
    return paths().clusters / f"{identifier(run_id, 'run_id')}.json"


def cluster_calibration_path(system: str) -> Path:
    return paths().clusters / "calibration" / f"{identifier(system, 'system')}.json"


def features_path(system: str) -> Path:
    return paths().features / f"{identifier(system, 'system')}.parquet"


def cause_models_dir(system: str) -> Path:
    return paths().cause_models / identifier(system, "system")


def latest_cause_model(system: str) -> Path:
    """The file naming a system's current cause-model version (its model and metadata files)."""
    return cause_models_dir(system) / "latest.json"


def cause_path(run_id: str) -> Path:
    return paths().causes / f"{identifier(run_id, 'run_id')}.json"


def objectives_dir(system: str) -> Path:
    """A system's objectives: ``slo.yaml`` and ``sli.yaml`` (Keptn's v1 files)."""
    return paths().objectives_config / identifier(system, "system")


def evaluation_path(run_id: str) -> Path:
    """A run's evaluation against its system's objectives."""
    return paths().objectives / f"{identifier(run_id, 'run_id')}.json"


def run_report_path(run_id: str, ext: str = "json") -> Path:
    """The verdict file (``json``) or the page (``html``) of an analysed run."""
    if ext not in ("json", "html"):
        raise ValueError(f"a run report is .json or .html, not .{ext!r:.20}")
    return paths().run_reports / f"{identifier(run_id, 'run_id')}.{ext}"


def loo_cache_dir(system: str) -> Path:
    return paths().loo_cache / identifier(system, "system")
