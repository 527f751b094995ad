"""The registry of the detectors the verdict weighs: ``report.detectors`` in params.yaml, each entry
one :class:`DetectorSpec` (its name, the function reading its result of a run, its own result file
and the class computing it, when it has them), in the order the verdict lists them
(docs/architecture.md, "The detector protocol").
"""
from __future__ import annotations

import functools
import importlib
import inspect
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, cast

from pipelines import config, params_schema
from pipelines.protocol import ResultReader

NAME = re.compile(r"^[a-z][a-z0-9_]*$")
READER = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
# a detector's own result file: a path of the project (no '..', not absolute) naming the run once
RESULT_FILE = re.compile(r"^(?!/)(?!.*(?:^|/)\.\.(?:/|$))[\w./-]*\{run_id\}[\w./-]*\.json$")
ENTRY_KEYS = ("name", "result", "file", "detector")
# where the ``detectors`` stage writes each registered detector's results (dvc.yaml: its out, the report's dep)
OWN_RESULTS = "data/processed/detectors"
STAGE_DOCS = ("detect", "control_charts", "clusters", "predict_causes")   # RunFiles.docs of every reader


@dataclass(frozen=True)
class DetectorSpec:
    """One entry of the registry (``report.detectors``): the detector's ``name`` (its key in the
    verdict file's ``p_values`` and ``details.trust``), the function that reads its result of a run
    (``read``, :data:`~pipelines.protocol.ResultReader`) and, for a detector whose stage writes a
    result file of its own, that file (``file``: a path of the project with ``{run_id}``).  The
    edge reads that file into the reader's ``RunFiles.docs[name]``, and a run's report key hashes
    it (``run_reports.report_key``): a new result of the detector makes the run's report again.
    A detector computed by the night's ``detectors`` stage names the class that computes it
    (``detector``: called without arguments, a :class:`~pipelines.protocol.Detector` whose
    ``judge`` returns the run's result document); that stage writes the document to ``file``,
    which is then ``data/processed/detectors/<name>/{run_id}.json`` (:func:`own_results`, the
    folder the stage prunes to the night's targets), and the nightly DAG's
    ``detectors`` task does so per batch.  The project's own detectors read the four stages'
    documents (``detect``, ``control_charts``, ``clusters``, ``predict_causes``), which every
    report key hashes; their ``file`` and ``detector`` are None."""

    name: str
    read: ResultReader
    file: str | None = None
    detector: Callable[[], Any] | None = None

    def result_path(self, run_id: str) -> Path | None:
        """The run's own result file of this detector (None: it has none); the run id checked."""
        if self.file is None:
            return None
        return config.ROOT / self.file.replace("{run_id}", config.identifier(run_id, "run_id"))


Registry = Sequence[DetectorSpec]


def registry(entries: Sequence[Mapping[str, Any]]) -> Registry:
    """The detectors of ``report.detectors`` (each ``{name, result: "module:function", file?,
    detector?: "module:class"}``), their readers and classes imported, in the list's order; a
    ValueError that names the entry when one is wrong.  A module of the project's own folder is found there (as the stages, run from it, find
    it), after the installed packages."""
    import sys

    if str(config.ROOT) not in sys.path:
        sys.path.append(str(config.ROOT))
    out: list[DetectorSpec] = []
    for i, entry in enumerate(entries):
        name, where, own, computes = entry.get("name"), entry.get("result"), entry.get("file"), entry.get("detector")
        if set(entry) - set(ENTRY_KEYS):
            raise ValueError(f"params.yaml: report.detectors[{i}]: unknown keys {sorted(set(entry) - set(ENTRY_KEYS))}"
                             " (each entry is {name, result} and, for a detector with a result file of its own, file;"
                             " for one the night computes, detector)")
        if not isinstance(name, str) or not NAME.match(name):
            raise ValueError(f"params.yaml: report.detectors[{i}].name must be a lower-case identifier, not {name!r}")
        if name in {spec.name for spec in out}:
            raise ValueError(f"params.yaml: report.detectors: {name!r} is registered twice")
        if own is not None and (not isinstance(own, str) or not RESULT_FILE.match(own)):
            raise ValueError(f"params.yaml: report.detectors[{i}].file must be a .json path of the project naming "
                             f"{{run_id}} (e.g. data/processed/{name}/{{run_id}}.json), not {own!r}")
        if computes is not None:
            computed_file = f"{OWN_RESULTS}/{name}/{{run_id}}.json"
            if own not in (None, computed_file):
                raise ValueError(f"params.yaml: report.detectors[{i}] ({name}): the detectors stage writes its "
                                 f"results under {OWN_RESULTS}/{name}/ as <run_id>.json, so its file is "
                                 f"{computed_file} (or left out), not {own!r}")
            own = computed_file
        if own is not None and name in STAGE_DOCS:
            raise ValueError(f"params.yaml: report.detectors[{i}] ({name}): a detector with a file of its own cannot "
                             f"take the name of a stage's document ({', '.join(STAGE_DOCS)})")
        entry_name = f"report.detectors[{i}] ({name})"
        out.append(DetectorSpec(name, imported(where, entry_name, "result", "module:function"), own,
                                None if computes is None else imported(computes, entry_name, "detector", "module:class")))
    return tuple(out)


def imported(where: Any, entry: str, key: str, form: str) -> Callable[..., Any]:
    """The callable ``where`` names (``module:attribute``, the ``key`` of a registry's ``entry``); a
    ValueError that names the entry when it is not such a name (``form`` says which) or cannot be imported."""
    if not isinstance(where, str) or not READER.match(where):
        raise ValueError(f"params.yaml: {entry}.{key} must be '{form}', not {where!r}")
    module, attribute = where.split(":")
    try:
        found = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"params.yaml: {entry}: cannot read {where}: {exc}") from None
    if not callable(found):
        raise ValueError(f"params.yaml: {entry}.{key}: {where} is not callable")
    return cast(Callable[..., Any], found)


def own_results(name: str) -> Path:
    """The folder the ``detectors`` stage writes a computed detector's results to (one
    ``<run_id>.json`` each)."""
    return config.ROOT / OWN_RESULTS / name


def computed(detectors: Registry) -> list[DetectorSpec]:
    """The registered detectors the night's ``detectors`` stage computes (those naming ``detector``)."""
    return [spec for spec in detectors if spec.detector is not None]


def own_files(run_id: str, detectors: Registry) -> dict[str, Path]:
    """Each registered detector's own result file of the run, by name (those with one)."""
    return {spec.name: path for spec in detectors if (path := spec.result_path(run_id)) is not None}


def reader_files(detectors: Registry) -> dict[str, Path]:
    """The source file of each reader of a detector with a result file of its own, by name: the
    project's code keys hash the modules they import, not a reader named in params.yaml."""
    out = {}
    for spec in detectors:
        source = inspect.getsourcefile(spec.read) if spec.file is not None else None
        if source is not None:
            out[spec.name] = Path(source)
    return out


def read_own(path: Path) -> Any:
    """A detector's own result file, None when its stage wrote none for the run; a ValueError that
    names the file when it is not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: a detector's result file that is not JSON: {exc}") from None


@functools.lru_cache(maxsize=1)
def default_registry() -> Registry:
    """The registry of the defaults file (``pipelines/params_defaults.yaml``)."""
    return registry(params_schema.defaults()["report"]["detectors"])
