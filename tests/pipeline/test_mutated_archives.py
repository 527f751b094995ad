"""A night of mutated archives: every stage analyses each run or sets it aside with a reason.

Hypothesis mutates a valid archive of the tiny lab the way real collectors and hands break them:
``run.json`` fields deleted or given values of any JSON type (identifiers with ``..`` and
slashes, durations of every sign, nested objects), CSV headers renamed (empty, repeated, the
timestamp's name, path-like, non-ASCII), timestamps shuffled, repeated, shifted by years, turned to
text, and values turned to NaN, infinities, negatives, enormous numbers or words.  Several mutated
runs join the lab's own archives and one night runs, ``pull`` to ``report``.  For each mutated run:
it is analysed (a verdict file, or a place in the history when its ``verdict`` says it is verified)
or it is quarantined with a reason (by ``validate``, or by ``normalize`` within its budget); no
stage raises; the lab's own targets are all judged; nothing is written outside the project's
``data/``, ``reports/`` and ``metrics/``.  Derandomised and bounded: CI sees the same examples.
"""
from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
from pathlib import Path

import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from pipelines import config
from tests.helpers import QUICK_SETTLE_S, rooted_at, run_stages, write_tgz

pytestmark = pytest.mark.slow     # whole nights

# nights (REGRESSLAB_MUTATION_NIGHTS explores further); each judges MUTANTS mutated archives beside the lab's own
EXAMPLES = int(os.environ.get("REGRESSLAB_MUTATION_NIGHTS", "1"))
MUTANTS = 8
REPO = Path(__file__).resolve().parents[2]
FIELDS = ("schema_version", "run_id", "system", "version", "started_at", "duration_s", "workload", "environment",
          "baseline", "verdict", "cause", "regressed_counters")
ODD_TEXT = st.sampled_from(["", "..", "../evil", "a/b", "x" * 200, "shop", "pass", "fail", "none", "é\u2028",
                            "2026-09-01T00:00:00Z", "1e309", "NaN", "app.response_time_ms"])
JSON = st.recursive(st.none() | st.booleans() | st.integers(-10**15, 10**15)
                    | st.floats(allow_nan=True, allow_infinity=True) | ODD_TEXT | st.text(max_size=12),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(ODD_TEXT | st.text(max_size=6), c, max_size=3),
                    max_leaves=6)
HEADERS = ODD_TEXT | st.text(max_size=20) | st.sampled_from(["timestamp", "web.cpu_pct", "a.b,c", "a.b\nc", " "])
CELLS = (st.floats(allow_nan=True, allow_infinity=True).map(repr) | st.sampled_from(["", "abc", "-1", "1e400", "0x1f"])
         | st.integers(-10**20, 10**20).map(str))


@st.composite
def mutations(draw) -> list[tuple]:
    """One to three mutations of one archive, each a tuple the :func:`mutate` below applies."""
    out = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["field", "header", "timestamps", "values"]))
        if kind == "field":
            out.append(("field", draw(st.sampled_from(FIELDS)), draw(st.booleans()), draw(JSON)))
        elif kind == "header":
            out.append(("header", draw(st.integers(0, 10**6)), draw(st.integers(0, 10**6)), draw(HEADERS)))
        elif kind == "timestamps":
            how = draw(st.sampled_from(["shuffle", "repeat", "years", "text", "empty", "no_offset", "epoch_ms"]))
            out.append(("timestamps", draw(st.integers(0, 10**6)), how, draw(st.integers(0, 2**31))))
        else:
            out.append(("values", draw(st.integers(0, 10**6)), draw(st.integers(0, 10**6)),
                        draw(st.floats(0.01, 1.0)), draw(CELLS)))
    return out


def mutate(files: dict[str, bytes], run_id: str, changes: list[tuple]) -> dict[str, bytes]:
    """The archive ``files`` under ``run_id`` with ``changes`` applied (``run.json`` as JSON, the
    CSVs as text tables)."""
    meta = json.loads(files["run.json"])
    meta["run_id"] = run_id
    csvs = {name: pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)
            for name, data in files.items() if name.endswith(".csv")}
    hosts = sorted(csvs)
    for change in changes:
        if change[0] == "field":
            _, name, delete, value = change
            if delete:
                meta.pop(name, None)
            else:
                meta[name] = value
            continue
        frame = csvs[hosts[change[1] % len(hosts)]]
        if change[0] == "header":
            columns = list(frame.columns)
            columns[change[2] % len(columns)] = change[3]
            frame.columns = columns
        elif change[0] == "timestamps":
            _, _, how, seed = change
            stamps = frame.iloc[:, 0]
            if how == "shuffle":
                stamps = stamps.sample(frac=1.0, random_state=seed % 2**31).to_numpy()
            elif how == "repeat":
                stamps = [stamps.iloc[0]] * len(stamps)
            elif how == "years":
                stamps = [str(float(s) + 3.2e8) if _is_number(s) else s.replace("2026", "2036") for s in stamps]
            elif how == "text":
                stamps = ["yesterday"] * len(stamps)
            elif how == "empty":
                stamps = [""] * len(stamps)
            elif how == "no_offset":
                stamps = [s[:19] if not _is_number(s) else s for s in stamps]
            else:
                stamps = [str(int(float(s) * 1000)) if _is_number(s) else s for s in stamps]
            frame.iloc[:, 0] = list(stamps)
        else:
            _, _, column, share, cell = change
            col = 1 + column % max(1, frame.shape[1] - 1)
            if col < frame.shape[1]:
                rows = frame.index[: max(1, int(share * len(frame)))]
                frame.iloc[rows, col] = cell
    out = {"run.json": json.dumps(meta).encode()}
    for name, frame in csvs.items():
        out[name] = frame.to_csv(index=False).encode()
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tf:
        return {m.name: tf.extractfile(m).read() for m in tf if m.isfile()}


def written_files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


@settings(derandomize=True, max_examples=EXAMPLES, deadline=None, database=None, phases=[Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(batch=st.lists(mutations(), min_size=MUTANTS, max_size=MUTANTS))
def test_every_mutated_run_is_analysed_or_quarantined_with_a_reason_and_the_night_goes_on(tiny_lab, tmp_path_factory,
                                                                                        batch):
    lab, truth = tiny_lab
    work = tmp_path_factory.mktemp("mutated")
    src, tree = work / "src", work / "tree"
    shutil.copytree(lab, src)
    tree.mkdir()
    base = read_members(lab / f"{sorted(r for r in truth if '-t' in r)[0]}.tar.gz")
    mutants = []
    for i, changes in enumerate(batch):
        run_id = f"shop-2026-09-30-m{i:02d}"
        write_tgz(src / f"{run_id}.tar.gz", mutate(base, run_id, changes))
        mutants.append(run_id)
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["pull"].update(source=str(src), settle_s=QUICK_SETTLE_S)
    params["train_causes"].update(learners=["decision_tree"], learning_curve_repeats=2, learning_curve_learners=1)
    (tree / "params.yaml").write_text(yaml.safe_dump(params))
    around = {p for p in written_files(work) if not p.startswith("tree/")}

    with rooted_at(tree):
        run_stages("pull", through="report", skip=("features", "train_causes"))     # no stage may raise
        index = json.loads(config.VALID_INDEX.read_text())
        for run_id in mutants:
            if run_id in index["quarantined"]:
                reason = index["quarantined"][run_id]
                assert reason.strip() and "could not be judged" not in reason, (run_id, reason)   # a check, not a crash
            elif config.normalize_failed_path(run_id).exists():
                assert json.loads(config.normalize_failed_path(run_id).read_text()).get("reason"), run_id
            else:
                row = index["valid"][run_id]
                if row.get("verdict") is None:          # a target: judged, or said why not
                    doc = json.loads(config.run_report_path(run_id).read_text())
                    assert doc["verdict"] in ("pass", "fail", "no_baseline") and doc["run_id"] == run_id
                    assert config.run_report_path(run_id, "html").exists()
                else:                                   # verified by its own run.json: in the history
                    assert row["verdict"] in ("pass", "fail")
        for run_id in (r for r in truth if "-t" in r):     # the rest of the night went on
            assert json.loads(config.run_report_path(run_id).read_text())["verdict"] in ("pass", "fail", "no_baseline")
    assert {p for p in written_files(work) if not p.startswith("tree/")} == around      # nothing escaped the project
    assert {p.split("/", 1)[0] for p in written_files(tree)} <= {"params.yaml", "data", "reports", "metrics"}
