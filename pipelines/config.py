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


def use_root(root: str | Path) -> None:
    """Point every path of the pipeline at another tree (tests, Airflow workers, a second lab)."""
    g = globals()
    g["ROOT"] = root = Path(root)
    g["DATA"] = data = root / "data"
    g["EXAMPLE"] = data / "example"                # simulated lab archives (labsim stage)
    g["COMMIT_EXAMPLE"] = data / "example_commits"  # simulated benchmark history per commit (commitsim)
    g["RAW"] = raw = data / "raw"                  # immutable copies of pulled archives
    g["MANIFEST"] = raw / "manifest.jsonl"         # run_id, sha256, size, first seen
    g["INTERIM"] = interim = data / "interim"
    g["PULL_SUMMARY"] = interim / "pull_summary.json"
    g["VALID"] = interim / "valid"                 # validated runs, one parquet per host
    g["VALID_INDEX"] = interim / "valid_runs.json"
    g["GX"] = interim / "gx"                       # the Great Expectations project (results store)
    g["QUARANTINE"] = data / "quarantine"          # rejected runs with their reason
    g["TRIAGE"] = triage = data / "triage"          # analysts' decisions (an input, like data/raw)
    g["TRIAGE_LOG"] = triage / "log.jsonl"         # append-only, one decision or undo per line
    g["NORMALIZED"] = interim / "normalized"
    g["NORMALIZED_INDEX"] = interim / "normalized_runs.json"
    g["PROCESSED"] = processed = data / "processed"
    g["EDGES"] = processed / "edges"               # bin edges per system
    g["MODELS"] = processed / "models"             # rule models per system and run
    g["DETECTIONS"] = processed / "detections"    # association-rule results per target run
    g["SINGLE_MODELS"] = processed / "single_models"  # pooled rule models of the targets' baselines
    g["STACKING_CALIBRATION"] = processed / "stacking_calibration"  # normal runs' stacking scores per system
    g["CONTROL_CHARTS"] = processed / "control_charts"   # calibrations per system, charts per target
    g["CLUSTERS"] = processed / "clusters"         # clustered regression models per target (seed 000)
    g["FEATURES"] = processed / "features"         # violation-ratio features per system
    g["CAUSE_MODELS"] = processed / "cause_models"  # every cause-model version, per system
    g["CAUSES"] = processed / "causes"             # predicted cause per target run
    g["LOO_CACHE"] = data / "cache" / "loo"        # rule models of the leave-one-out evaluation
    g["COMMIT_CLUSTERS"] = processed / "commit_clusters.json"  # Skia's interesting clusters, kept between nights
    g["REPORTS"] = reports = root / "reports"
    g["VALIDATION_DOCS"] = reports / "validation"
    g["RUN_REPORTS"] = reports / "runs"
    g["NIGHTS"] = reports / "nights"
    g["NIGHT_INDEX"] = reports / "index.html"
    g["COMMIT_REPORTS"] = reports / "commits"      # changes.json (contract §3) and index.html
    g["SYSTEM_REPORTS"] = reports / "systems"      # each system's counters over time
    g["COMPARE_REPORTS"] = reports / "compare"     # two runs side by side
    g["METRICS"] = root / "metrics"
    g["PARAMS"] = root / "params.yaml"


ROOT: Path
DATA: Path
EXAMPLE: Path
COMMIT_EXAMPLE: Path
COMMIT_CLUSTERS: Path
COMMIT_REPORTS: Path
SYSTEM_REPORTS: Path
COMPARE_REPORTS: Path
RAW: Path
MANIFEST: Path
INTERIM: Path
PULL_SUMMARY: Path
VALID: Path
VALID_INDEX: Path
GX: Path
QUARANTINE: Path
TRIAGE: Path
TRIAGE_LOG: Path
NORMALIZED: Path
NORMALIZED_INDEX: Path
PROCESSED: Path
EDGES: Path
MODELS: Path
DETECTIONS: Path
SINGLE_MODELS: Path
STACKING_CALIBRATION: Path
CONTROL_CHARTS: Path
CLUSTERS: Path
FEATURES: Path
CAUSE_MODELS: Path
CAUSES: Path
LOO_CACHE: Path
REPORTS: Path
VALIDATION_DOCS: Path
RUN_REPORTS: Path
NIGHTS: Path
NIGHT_INDEX: Path
METRICS: Path
PARAMS: Path
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


use_root(default_root())


_PARSED: dict[bytes, dict[str, Any]] = {}


def _config_error_hook(kind, value, tb, _previous=sys.excepthook):
    """A command that stops on a bad ``params.yaml`` says what is wrong, not a traceback."""
    if issubclass(kind, params_schema.ConfigError):
        print(f"regresslab: configuration error\n{value}", file=sys.stderr)
        return
    _previous(kind, value, tb)


sys.excepthook = _config_error_hook


def load_params(stage: str | None = None, path: Path | None = None) -> dict[str, Any]:
    """Read ``params.yaml`` (or ``path``); return one stage's block when ``stage`` is given.

    The file is checked against its schema first (``params_schema``: types, ranges, allowed
    values, no unknown key) and completed with the defaults of every key it leaves out; a
    problem is a ``params_schema.ConfigError`` naming the file, the key and what is allowed.

    Each version of the file (by its bytes' hash) is parsed once: a stage reads several blocks,
    and parsing the whole file took 0.15 s each time.  Each call returns its own copy, so a
    caller may change what it gets."""
    source = Path(path or PARAMS)
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
            raise params_schema.ConfigError(f"{source.name}: not valid YAML ({exc})") from None
        _PARSED[digest] = params_schema.check(parsed, source=source.name)
    params = copy.deepcopy(_PARSED[digest])
    return params.get(stage, {}) if stage else params


# --------------------------------------------------------------------------- per-run and per-system files


def valid_dir(run_id: str) -> Path:
    """A validated run: one parquet per host and ``meta.json``."""
    return VALID / identifier(run_id, "run_id")


def quarantine_path(run_id: str) -> Path:
    return QUARANTINE / f"{identifier(run_id, 'run_id')}.json"


def normalize_failed_path(run_id: str) -> Path:
    """Why a valid run could not be normalised (within its budget): the run is then not analysed."""
    return NORMALIZED / f"{identifier(run_id, 'run_id')}.failed.json"


def frame_path(run_id: str) -> Path:
    """The interval frame of a normalised run."""
    return NORMALIZED / f"{identifier(run_id, 'run_id')}.parquet"


def info_path(run_id: str) -> Path:
    """What normalisation decided for a run (interval, counters, load fits, key)."""
    return NORMALIZED / f"{identifier(run_id, 'run_id')}.json"


def ensure_dirs(*dirs: Path) -> None:
    """Create a stage's output folders: DVC expects every declared output to exist, also after a
    night with nothing to analyse."""
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)


def edges_path(system: str) -> Path:
    return EDGES / f"{identifier(system, 'system')}.json"


def models_dir(system: str) -> Path:
    return MODELS / identifier(system, "system")


def single_models_dir(system: str) -> Path:
    """``detect``'s own cache of pooled models (not in ``models_dir``: that is ``mine_rules``' output)."""
    return SINGLE_MODELS / identifier(system, "system")


def stacking_calibration_path(system: str) -> Path:
    return STACKING_CALIBRATION / f"{identifier(system, 'system')}.json"


def pruning_masks_path(system: str) -> Path:
    """The rule masks of pruning between a system's passed runs (``rule_ensemble.save_pruning``)."""
    return STACKING_CALIBRATION / f"{identifier(system, 'system')}.pruning.npz"


def detection_path(run_id: str) -> Path:
    return DETECTIONS / f"{identifier(run_id, 'run_id')}.json"


def calibration_path(system: str) -> Path:
    return CONTROL_CHARTS / "calibration" / f"{identifier(system, 'system')}.json"


def chart_path(run_id: str) -> Path:
    return CONTROL_CHARTS / "runs" / f"{identifier(run_id, 'run_id')}.json"


def cluster_path(run_id: str) -> Path:
    return CLUSTERS / f"{identifier(run_id, 'run_id')}.json"


def cluster_calibration_path(system: str) -> Path:
    return CLUSTERS / "calibration" / f"{identifier(system, 'system')}.json"


def features_path(system: str) -> Path:
    return FEATURES / f"{identifier(system, 'system')}.parquet"


def cause_models_dir(system: str) -> Path:
    return CAUSE_MODELS / identifier(system, "system")


def latest_cause_model(system: str) -> Path:
    """The file naming a system's current cause-model version (its model and metadata files)."""
    return cause_models_dir(system) / "latest.json"


def cause_path(run_id: str) -> Path:
    return CAUSES / f"{identifier(run_id, 'run_id')}.json"


def run_report_path(run_id: str, ext: str = "json") -> Path:
    """The verdict file (``json``) or the page (``html``) of an analysed run."""
    if ext not in ("json", "html"):
        raise ValueError(f"a run report is .json or .html, not .{ext!r:.20}")
    return RUN_REPORTS / f"{identifier(run_id, 'run_id')}.{ext}"


def loo_cache_dir(system: str) -> Path:
    return LOO_CACHE / identifier(system, "system")
