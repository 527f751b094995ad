"""A system's cause models, versioned and stored (Nguyen 2017 ch. 8-9, seed 004; the learners are
:mod:`pipelines.detectors.causes.classifiers`): a version per training data, params and code, kept for ever
(``data/processed/cause_models/<system>/``, skops, written reproducibly), the verified history it
learned from, and what ``metrics/causes.json`` says of it.
"""
from __future__ import annotations

import hashlib
import json
import logging
from typing import Any, cast

import pandas as pd

from pipelines import config
from pipelines.systems import history
from pipelines.detectors.causes import features as cause_features
from pipelines.detectors.causes.classifiers import CODE_VERSION, CauseParams
from pipelines.detectors.causes.training import train_system
from pipelines.progress import Progress
from pipelines.storage import atomic
from pipelines.storage.run_records import ValidIndex
from pipelines.storage.cause_files import CauseModelMeta

log = logging.getLogger("regresslab.train_causes")


def verified_history_digest(index: ValidIndex, system: str) -> str:
    """A hash of a system's verified runs (id, verdict, cause, validated content)."""
    rows = [(r, index[r].get("verdict"), index[r].get("cause"), index[r].get("_validation_key"))
            for r in history.verified_runs(index, system)]
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


def current_model(system: str, frame: pd.DataFrame, params: CauseParams, index: ValidIndex) -> CauseModelMeta:
    """The metadata of the system's model for this training data and these params: the stored
    version when it exists, else a model trained, saved (skops) and described now."""
    digest = cause_features.frame_digest(frame)
    version = hashlib.sha256(json.dumps([digest, params.block, CODE_VERSION], sort_keys=True).encode()).hexdigest()[:16]
    folder = config.cause_models_dir(system)
    meta_file = folder / f"{version}.json"
    if meta_file.exists() and (folder / f"{version}.skops").exists():
        meta = atomic.read_json(meta_file)
        log.info("train_causes %s: model %s is current (training data unchanged)", system, version)
        if meta.get("verified_history") != verified_history_digest(index, system):
            meta["verified_history"] = verified_history_digest(index, system)
            atomic.write_json_atomic(meta_file, meta)
        return meta
    import skops.io as sio          # only to save a model trained now

    prog = Progress(log, f"train_causes {system}", 1, what="learners")

    def phase(name: str, items: int):      # each leave-out loop's lines: a quarter at a time
        return Progress(log, f"train_causes {system} {name}", items, what="left out", every=max(1, items // 4)).each()
    result = train_system(frame, params, progress=lambda i, n, name, acc: prog.step(i, f"{name} LOO accuracy {acc:.3f}"),
                          progress_for=phase)
    model = result.pop("model")
    fault_model = result.pop("fault_model")
    if fault_model is not None:        # before the meta file, which names it
        result["fault_model_file"] = f"{version}.faults.skops"
        atomic.write_bytes_atomic(folder / result["fault_model_file"],
                                   atomic.reproducible_skops(sio.dumps(fault_model)))
    atomic.write_bytes_atomic(folder / f"{version}.skops", atomic.reproducible_skops(sio.dumps(model)))
    trained = cast(CauseModelMeta, {"system": system, "version": version, "training_data_sha256": digest,      # model, fault_model popped
                                     "verified_history": verified_history_digest(index, system),
                                     "trained_at": pd.Timestamp.now(tz="UTC").isoformat(),
                                     "params": dict(params.block), **result})
    atomic.write_json_atomic(meta_file, trained)
    return trained


def system_metrics(meta: CauseModelMeta) -> dict[str, Any]:
    """What ``metrics/causes.json`` says of one system's model."""
    best = meta["learners"][meta["best"]]
    return {"best": meta["best"], "accuracy": best["accuracy"], "gain": best["gain"],
            "random_accuracy": meta["random_accuracy"], "runs": meta["runs"],
            "fault_runs": meta["fault_runs"], "fault_nearest_accuracy": meta["fault_nearest_accuracy"],
            "fault_model_from": meta.get("fault_model_from", "all_runs"),
            "fault_nearest_accuracy_all_runs": meta.get("fault_nearest_accuracy_all_runs"),
            "fault_nearest_accuracy_faults_only": meta.get("fault_nearest_accuracy_faults_only"),
            "feature_blocks": meta["feature_blocks"], "design_scores": meta.get("design_scores"),
            "balance_classes": meta["balance_classes"],
            "per_cause": meta["per_cause"], "confusion": meta["confusion"],
            "learners": meta["learners"], "unknown_cause": {
                k: meta["unknown"][k] for k in ("tau", "unknown_recall", "known_called_unknown")},
            "model_version": meta["version"]}
