"""The layers of ``pipelines/`` (``.importlinter``, docs/architecture.md) hold: ``lint-imports``
(import-linter) on this checkout keeps every contract, and on a copy of the package where a
lower layer imports a higher one it names the import it breaks."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).parent / "lint-imports"


def lint(root: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` with ``root``'s ``.importlinter``, the package imported from ``root``."""
    return subprocess.run([str(LINT), "--config", str(root / ".importlinter"), "--no-cache"], cwd=root,
                          capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(root), "PATH": ""})


def test_every_layer_imports_only_the_layers_below_it():
    done = lint(REPO)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "4 kept, 0 broken" in done.stdout


def test_statistics_importing_the_verdict_breaks_the_contract_and_is_named(tmp_path):
    shutil.copytree(REPO / "pipelines", tmp_path / "pipelines", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / ".importlinter", tmp_path / ".importlinter")
    pvalues = tmp_path / "pipelines" / "stats" / "pvalues.py"
    pvalues.write_text(pvalues.read_text() + "\n\ndef _late():\n    from pipelines.verdict import record\n"
                       "    return record\n")
    done = lint(tmp_path)
    assert done.returncode == 1 and "3 kept, 1 broken" in done.stdout, done.stdout[-4000:]
    assert "pipelines.stats.pvalues -> pipelines.verdict.record" in done.stdout


def test_a_detector_family_importing_another_breaks_their_independence_and_is_named(tmp_path):
    """The association rules reaching into the cluster models' package: the families' independence
    contract breaks (the layers hold: both are detectors) and names the import."""
    shutil.copytree(REPO / "pipelines", tmp_path / "pipelines", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / ".importlinter", tmp_path / ".importlinter")
    verdict = tmp_path / "pipelines" / "detectors" / "rules" / "verdict.py"
    verdict.write_text(verdict.read_text() + "\n\ndef _late():\n    from pipelines.detectors.clusters import models\n"
                       "    return models\n")
    done = lint(tmp_path)
    assert done.returncode == 1 and "3 kept, 1 broken" in done.stdout, done.stdout[-4000:]
    assert "pipelines.detectors.rules.verdict -> pipelines.detectors.clusters.models" in done.stdout


def mypy(root: Path, cache: Path) -> subprocess.CompletedProcess:
    """mypy with ``root``'s pyproject.toml (its ``[tool.mypy]``: which modules, how strict)."""
    return subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(cache)], cwd=root, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory) -> Path:
    """One cache for the module's checks: the copy with one module changed is checked again where it
    differs (mypy compares each file's hash with the cache's), not from nothing."""
    return tmp_path_factory.mktemp("mypy_cache")


def test_the_contract_the_verdict_and_what_they_rest_on_type_check(mypy_cache):
    """The whole package type checks, no module left out of the check."""
    assert "ignore_errors" not in (REPO / "pyproject.toml").read_text()
    done = mypy(REPO, mypy_cache)
    assert done.returncode == 0 and "Success: no issues found" in done.stdout, done.stdout[-4000:] + done.stderr


def test_a_p_value_that_may_be_missing_used_as_a_number_is_a_type_error(tmp_path, mypy_cache):
    """The checker reads the strict modules as configured: a copy where the record combines a
    p-value that may be None (a detector that could not judge) fails, naming the line."""
    shutil.copytree(REPO / "pipelines", tmp_path / "pipelines", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    record = tmp_path / "pipelines" / "verdict" / "record.py"
    record.write_text(record.read_text() + "\n\ndef _doubled(p_values: Mapping[str, float | None], d: str) -> float:\n"
                      "    return 2.0 * p_values[d]\n")
    done = mypy(tmp_path, mypy_cache)
    assert done.returncode == 1 and "pipelines/verdict/record.py" in done.stdout and "[operator]" in done.stdout, \
        done.stdout[-3000:]


def test_no_module_of_the_package_is_over_600_lines():
    """A module over 600 lines holds more than one concern: split it (docs/architecture.md)."""
    long = {str(p.relative_to(REPO)): n for p in sorted((REPO / "pipelines").rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 600}
    assert long == {}
