"""The DVC graph cannot go stale: every stage lists each project module it imports, directly or
through others, and every params block its module reads; the modules import no circle.

Imports are read from the code with ``ast`` (module-level and inside functions alike), so a
new import that ``dvc.yaml`` misses fails here instead of letting ``dvc repro`` call stale
results current.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from pipelines import codebase

REPO = Path(__file__).resolve().parents[2]
MODULES = codebase.module_files()
GRAPH = codebase.import_graph()
STAGES = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]


def params_read(path: Path) -> set[str]:
    """The params blocks a module reads: the literal argument of every ``config.load_params("...")``."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "load_params"
                and node.args and isinstance(node.args[0], ast.Constant)):
            out.add(node.args[0].value)
    return out


def stage_module(stage: dict) -> str:
    cmd = stage["cmd"] if isinstance(stage["cmd"], str) else " ".join(stage["cmd"])
    return cmd.split("-m ", 1)[1].split()[0]


def covered(path: str, deps: list[str]) -> bool:
    return any(path == d.rstrip("/") or path.startswith(d.rstrip("/") + "/") for d in deps)


def test_the_import_reader_sees_imports_inside_functions(tmp_path):
    code = ("from pipelines import config\n\ndef f():\n    from pipelines.storage.store import read_info\n"
            "    import pipelines.systems.history\n")
    assert codebase.project_imports(code, MODULES) == {"pipelines.config", "pipelines.storage.store",
                                                       "pipelines.systems.history"}


@pytest.mark.parametrize("name", sorted(STAGES))
def test_a_stage_is_one_module_of_its_own_name(name):
    assert stage_module(STAGES[name]) == codebase.stage_module(name) == f"pipelines.stages.{name}"
    assert codebase.stage_module(name) in MODULES


def test_no_library_imports_a_stage_or_a_command_line_tool():
    """The folders show the architecture: stages and tools call the libraries, never the reverse."""
    shells = ("pipelines.stages.", "pipelines.cli.")
    wrong = sorted(f"{m} imports {n}" for m, deps in GRAPH.items() if not m.startswith(shells)
                   for n in deps if n.startswith(shells))
    assert wrong == []


def test_no_import_circle_among_the_pipeline_modules():
    circular = sorted(m for m in GRAPH if any(m in codebase.closure(n, GRAPH) for n in GRAPH[m]))
    assert circular == [], f"modules that import each other in a circle: {circular}"


@pytest.mark.parametrize("name", sorted(STAGES))
def test_every_stage_lists_each_project_module_it_imports(name):
    stage = STAGES[name]
    module = stage_module(stage)
    deps = [str(d) for d in stage.get("deps", [])]
    needed = sorted(str(MODULES[m].relative_to(REPO)) for m in codebase.closure(module, GRAPH))
    missing = [p for p in needed if not covered(p, deps)]
    assert missing == [], f"dvc.yaml stage {name} imports but does not list {missing}"
    # the page templates are code too: a stage whose modules read them lists the folder
    if any("TEMPLATES" in MODULES[m].read_text(encoding="utf-8") and m != "pipelines.config"
           for m in codebase.closure(module, GRAPH)):
        assert covered("pipelines/reporting/templates/run.html.j2", deps), \
            f"stage {name} renders pages: list pipelines/reporting/templates"


@pytest.mark.parametrize("name", sorted(STAGES))
def test_every_stage_lists_the_params_blocks_its_module_reads(name):
    stage = STAGES[name]
    listed = {p if isinstance(p, str) else next(iter(p)) for p in stage.get("params", [])}
    missing = sorted(params_read(MODULES[stage_module(stage)]) - listed)
    assert missing == [], f"dvc.yaml stage {name} reads params {missing} without listing them"


def test_no_stage_lists_a_module_that_does_not_exist():
    for name, stage in STAGES.items():
        for dep in stage.get("deps", []):
            if str(dep).startswith("pipelines/"):
                assert (REPO / dep).exists(), f"stage {name} lists {dep}"


# the outputs DVC may delete before a stage runs: the example's own simulated data (only DVC
# writes it) and the metrics (no stage or task reads them)
DVC_ONLY_OUTPUTS = {"data/example", "data/example_commits"}


def test_dvc_never_deletes_an_output_a_night_may_be_reading():
    """``dvc repro`` deletes a stage's non-``persist`` outputs before the
    stage's command runs, that is before the command takes the data lock: an Airflow night's
    per-run task (holding the lock shared) that was reading them met a missing calibration (seen
    in the Airflow-beside-dvc test).  So every output the stages read is ``persist``, and each
    stage prunes its own stale files under the lock (``atomic.prune_outputs``)."""
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    deletable = []
    for name, stage in stages.items():
        for out in stage.get("outs") or []:
            path, opts = (out, {}) if isinstance(out, str) else next(iter(out.items()))
            if path not in DVC_ONLY_OUTPUTS and not opts.get("persist"):
                deletable.append(f"{name}: {path}")
    assert deletable == []


def test_no_package_file_holds_code():
    """``codebase`` leaves each package's ``__init__.py`` out of a stage's deps and its input keys
    (it runs on every import, but holds nothing): so none may hold code, which an edit would then
    slip past DVC and the stored results."""
    held = {str(p.relative_to(REPO)): p.read_text(encoding="utf-8") for p in (REPO / "pipelines").rglob("__init__.py")}
    assert len(held) >= 15 and {p for p, text in held.items() if text.strip()} == set()
