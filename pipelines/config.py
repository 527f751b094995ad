"""Paths and parameters, in one place.

Every input and output path of the pipeline is spelled here (and mirrored in
``dvc.yaml``); stage modules import these names instead of writing paths.
``REGRESSLAB_ROOT`` moves the whole tree (the tests and the Airflow DAGs use it).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml



# The Airflow asset the nightly DAG emits when verified runs were added; the retraining DAG listens.
VERIFIED_RUNS_ASSET = "regresslab://history/verified-runs"


def use_root(root: str | Path) -> None:
    """Point every path of the pipeline at another tree (tests, Airflow workers, a second lab)."""
    g = globals()
    g["ROOT"] = root = Path(root)
    g["DATA"] = data = root / "data"
    g["EXAMPLE"] = data / "example"                # simulated lab archives (labsim stage)
    g["RAW"] = raw = data / "raw"                  # immutable copies of pulled archives
    g["MANIFEST"] = raw / "manifest.jsonl"         # run_id, sha256, size, first seen
    g["INTERIM"] = interim = data / "interim"
    g["VALID"] = interim / "valid"                 # validated runs, one parquet per host
    g["VALID_INDEX"] = interim / "valid_runs.json"
    g["QUARANTINE"] = data / "quarantine"          # rejected runs with their reason
    g["NORMALIZED"] = interim / "normalized"
    g["PROCESSED"] = processed = data / "processed"
    g["DETECTIONS"] = processed / "detections"    # association-rule results per target run
    g["CAUSE_MODELS"] = processed / "cause_models"  # every cause-model version, per system
    g["REPORTS"] = reports = root / "reports"
    g["VALIDATION_DOCS"] = reports / "validation"
    g["RUN_REPORTS"] = reports / "runs"
    g["METRICS"] = root / "metrics"
    g["PARAMS"] = root / "params.yaml"


ROOT: Path
DATA: Path
EXAMPLE: Path
RAW: Path
MANIFEST: Path
INTERIM: Path
VALID: Path
VALID_INDEX: Path
QUARANTINE: Path
NORMALIZED: Path
PROCESSED: Path
DETECTIONS: Path
CAUSE_MODELS: Path
REPORTS: Path
VALIDATION_DOCS: Path
RUN_REPORTS: Path
METRICS: Path
PARAMS: Path
use_root(os.environ.get("REGRESSLAB_ROOT", Path(__file__).resolve().parent.parent))


def load_params(stage: str | None = None, path: Path | None = None) -> dict[str, Any]:
    """Read ``params.yaml`` (or ``path``); return one stage's block when ``stage`` is given."""
    with open(path or PARAMS, encoding="utf-8") as fh:
        params = yaml.safe_load(fh) or {}
    return params.get(stage, {}) if stage else params
