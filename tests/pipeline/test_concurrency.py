"""Two nights on one data folder.  Real processes and a real flock: a pull that
finds the folder locked waits and says by whom, gives up with the holder named, and two pulls
started together leave one manifest line per archive and no refusal."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

import pytest

from pipelines import config
from pipelines.storage import locks, manifest
from tests.conftest import REPO, stage_env
from tests.pipeline.test_pull_validate import set_source

pytestmark = pytest.mark.slow     # stages end to end

HOLD = """
import sys, time
from pathlib import Path
from pipelines.storage import locks, manifest
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
    assert set(manifest.read_manifest()) == set(truth)


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
