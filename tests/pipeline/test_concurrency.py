"""Two nights on one data folder.  Real processes and a real flock: a pull that
finds the folder locked waits and says by whom, gives up with the holder named, and two pulls
started together leave one manifest line per archive and no refusal."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines import config
from pipelines.storage import archive, locks
from tests.conftest import REPO, stage_env
from tests.pipeline.test_pull_validate import set_source

pytestmark = pytest.mark.slow     # stages end to end

HOLD = """
import sys, time
from pathlib import Path
from pipelines.storage import locks
with locks.data_lock("holder-test", shared={shared}):
    Path(sys.argv[1]).write_text("held")
    while not Path(sys.argv[2]).exists():
        time.sleep(0.05)
"""


def _env(tree, **extra):
    return {**stage_env(tree), **extra}


def _hold(tree, tmp_path, *, shared=False, name="h"):
    """A child process that takes the lock and keeps it until ``release`` is touched."""
    held, release = tmp_path / f"{name}.held", tmp_path / f"{name}.release"
    proc = subprocess.Popen([sys.executable, "-c", HOLD.format(shared=shared), str(held), str(release)],
                            env=_env(tree), cwd=REPO)
    deadline = time.monotonic() + 60
    while not held.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the holder never took the lock"
        time.sleep(0.05)
    return proc, release


def _pull(tree, **env):
    return subprocess.Popen([sys.executable, "-m", "pipelines.stages.pull"], env=_env(tree, **env), cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_a_pull_gives_up_on_a_locked_data_folder_naming_the_holder(tree, tiny_lab, tmp_path):
    lab, _ = tiny_lab
    set_source(tree, lab)
    holder, release = _hold(tree, tmp_path)
    try:
        out, _ = _pull(tree, REGRESSLAB_LOCK_WAIT_S="1").communicate(timeout=120)
    finally:
        release.touch()
        holder.wait(timeout=60)
    assert "LockTimeout" in out and "gave up after" in out
    assert f"pid {holder.pid}" in out and "holder-test" in out
    assert not config.MANIFEST.exists()                       # it touched nothing


def test_a_pull_waits_for_the_lock_says_why_then_pulls(tree, tiny_lab, tmp_path):
    lab, truth = tiny_lab
    set_source(tree, lab)
    holder, release = _hold(tree, tmp_path)
    proc = _pull(tree)
    time.sleep(3)
    assert proc.poll() is None                                # still waiting
    assert not config.MANIFEST.exists()
    release.touch()
    out, _ = proc.communicate(timeout=120)
    holder.wait(timeout=60)
    assert proc.returncode == 0, out
    assert "pull: waiting for the data folder" in out and f"pid {holder.pid}" in out and "holder-test" in out
    assert set(archive.read_manifest()) == set(truth)


def test_two_pulls_at_once_pull_each_archive_once_and_refuse_nothing(tree, tiny_lab, tmp_path):
    lab, _ = tiny_lab
    src = tmp_path / "src"                                    # enough archives for the two to overlap
    src.mkdir()
    first = sorted(lab.glob("*.tar.gz"))[0]
    truth = [f"copy-{i:03d}" for i in range(60)]
    for run_id in truth:
        shutil.copy(first, src / f"{run_id}.tar.gz")
    set_source(tree, src)
    procs = [_pull(tree) for _ in range(2)]
    outs = [p.communicate(timeout=180)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    lines = [json.loads(x) for x in config.MANIFEST.read_text().splitlines()]
    assert sorted(e["run_id"] for e in lines) == sorted(truth)      # one line per archive
    assert json.loads(config.PULL_SUMMARY.read_text())["refused"] == []
    assert not list(config.RAW.glob(".incoming-*"))


def test_per_run_work_shares_the_lock_and_whole_stage_work_waits(tree, tmp_path):
    """Two shared holders at once (a night's mapped per-run tasks); an exclusive stage waits for
    both and gives up naming one of them."""
    a, release_a = _hold(tree, tmp_path, shared=True, name="a")
    b, release_b = _hold(tree, tmp_path, shared=True, name="b")    # did not wait for a
    try:
        said: list[str] = []
        with pytest.raises(locks.LockTimeout, match="holder-test, shared"):
            with locks.data_lock("validate", wait_s=1, poll_s=0.1, say=said.append):
                pass
        assert said and said[0].startswith("validate: waiting for the data folder")
        with locks.data_lock("normalize r1", shared=True, wait_s=1):
            pass                                                  # shared beside shared
    finally:
        release_a.touch()
        release_b.touch()
        a.wait(timeout=60)
        b.wait(timeout=60)
    with locks.data_lock("validate", wait_s=1):                  # free again
        with locks.data_lock("normalize r1", shared=True):       # re-entrant inside exclusive
            pass


def test_a_shared_hold_cannot_become_exclusive_in_the_same_process(tree):
    with locks.data_lock("report r1", shared=True):
        with pytest.raises(RuntimeError, match="exclusively inside a shared hold"):
            with locks.data_lock("report index"):
                pass


# ---- real `dvc repro`, on a checkout of its own ------------------------------------------------------------
TINY_EXAMPLE = {"labsim": {"systems": ["shop"], "n_normal": 3, "n_per_cause": 1, "history_causes": ["cpu_hot_path"],
                           "target_causes": ["extra_db_query"], "n_targets_normal": 1},
                "commitsim": {"n_commits": 40, "n_groups": 1, "benchmarks_per_group": 2, "runs": 3,
                              "measurements": 6, "min_gap": 8}}


def dvc_checkout(root) -> "os.PathLike":
    """A DVC project made of this repository's ``dvc.yaml``, ``pipelines/`` and ``params.yaml``
    (``dvc init --no-scm``), with a smaller embedded example (labsim, commitsim) so that a whole
    ``dvc repro`` takes a minute or two.  Its stages run ``python -m pipelines.stages.<stage>`` with the
    checkout as the working directory, hence as the project root, as on a user's clone."""
    import yaml

    root.mkdir(parents=True)
    shutil.copytree(REPO / "pipelines", root / "pipelines", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "dvc.yaml", root / "dvc.yaml")
    (root / "data" / "triage").mkdir(parents=True)
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    for block, values in TINY_EXAMPLE.items():
        params[block].update(values)
    params["train_causes"]["learning_curve_repeats"] = 1
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    subprocess.run([*_dvc(), "init", "--no-scm", "-q"], cwd=root, check=True, env=_dvc_env(root))
    return root


def _dvc() -> list[str]:
    """DVC of the interpreter running the tests (not whatever ``dvc`` is on the PATH)."""
    return [sys.executable, "-m", "dvc"]


def _dvc_env(root, **extra):
    env = {k: v for k, v in os.environ.items() if k not in ("REGRESSLAB_ROOT", "PYTHONPATH")}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"     # the stages' `python`
    return {**env, "PYTHONWARNINGS": "ignore", **extra}


def _repro(root, log, *args):
    return subprocess.Popen([*_dvc(), "repro", *args], cwd=root, env=_dvc_env(root), stdout=open(log, "w"),
                            stderr=subprocess.STDOUT)


def _wait_for(path, text, proc, timeout=600):
    deadline = time.monotonic() + timeout
    while text not in (path.read_text() if path.exists() else ""):
        assert proc.poll() is None, f"ended before {text!r}: {path.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"no {text!r} after {timeout} s: {path.read_text()[-3000:]}"
        time.sleep(0.2)


def strict_json_files(root) -> int:
    """Parse every JSON file under ``root`` (not DVC's own) with a parser that refuses NaN and
    Infinity; how many."""
    def refuse(token):
        raise ValueError(f"non-strict JSON constant {token}")
    n = 0
    for path in root.rglob("*.json"):
        if ".dvc" not in path.relative_to(root).parts:
            json.loads(path.read_text(), parse_constant=refuse)
            n += 1
    return n


def leftovers(root) -> list[str]:
    """Temporary files a stage left behind (``archive``'s atomic writes name them
    ``.<name>.<pid>.<random>.tmp``, pull's incoming archives ``.incoming-*``)."""
    return [str(p.relative_to(root)) for p in root.rglob(".*")
            if (p.name.endswith(archive.TMP_SUFFIX) or p.name.startswith(".incoming"))
            and ".dvc" not in p.relative_to(root).parts]


def test_two_dvc_repro_at_once_the_second_says_why_and_nothing_is_corrupted(tmp_path):
    """Two ``dvc repro report`` (the night, not the analysts' ``evaluate``) on one checkout.  DVC
    releases its repository lock while a stage's command runs but keeps a lock on the stage's
    outputs: the second stops at the first stage the other is running, naming its process.  Here
    a process holds the data folder, so the first waits in its first stage that locks it (the
    overlap is certain) and says so; the second gives up naming the first, and once the folder is
    free the first completes; a third then finds every output as ``dvc.lock`` recorded it (only
    ``pull``, always changed, runs), every JSON parses strictly and no temporary file is left."""
    root = dvc_checkout(tmp_path / "checkout")
    holder, release = _hold(root, tmp_path)
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    try:
        first = _repro(root, first_log, "report")
        _wait_for(first_log, ": waiting for the data folder", first)
        second = _repro(root, second_log, "report")
        assert second.wait(timeout=300) != 0
        said = second_log.read_text()
        assert "is busy, it is being blocked by" in said and f"(PID {first.pid})" in said, said
    finally:
        release.touch()
        holder.wait(timeout=60)
    assert first.wait(timeout=900) == 0, first_log.read_text()[-5000:]
    said = first_log.read_text()
    assert f"locked by pid {holder.pid}" in said and "holder-test" in said
    third = subprocess.run([*_dvc(), "repro", "report"], cwd=root, env=_dvc_env(root), capture_output=True,
                           text=True, timeout=900)
    assert third.returncode == 0, third.stdout[-3000:] + third.stderr[-3000:]
    ran = [line.split("'")[1] for line in third.stdout.splitlines() if line.startswith("Running stage")]
    assert ran == ["pull"], third.stdout
    assert strict_json_files(root) > 10
    assert leftovers(root) == []
    valid = json.loads((root / "data" / "interim" / "valid_runs.json").read_text())["valid"]
    targets = {r for r, row in valid.items() if row["verdict"] is None}
    assert len(targets) >= 2 and {p.stem for p in (root / "reports" / "runs").glob("*.json")} == targets
