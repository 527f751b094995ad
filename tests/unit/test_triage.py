"""The triage log: decisions, undo, the log winning over the archives (pipelines/storage/triage_log.py)."""
from __future__ import annotations

import json

import pytest

from pipelines.systems import history
from pipelines.storage import triage_log

PREV = {"verdict": None, "cause": None, "regressed_counters": []}


def dec(run, verdict, cause=None, at="2026-11-22T08:00:00+00:00", by="ana"):
    return triage_log.decision(run, verdict=verdict, cause=cause, counters=["db.cpu_pct"], note="", by=by, at=at,
                           previous=PREV)


def test_a_decision_records_what_it_replaces():
    rec = dec("shop-t1", "fail", "missing_index")
    assert rec["action"] == "decide" and rec["cause"] == "missing_index" and rec["previous"] == PREV
    assert rec["regressed_counters"] == ["db.cpu_pct"]
    passed = dec("shop-t1", "pass", "ignored")
    assert passed["cause"] == "none" and passed["regressed_counters"] == []     # a passed run has no cause
    assert dec("shop-t1", "fail")["cause"] == "unknown"
    with pytest.raises(ValueError):
        dec("shop-t1", "maybe")
    with pytest.raises(ValueError):
        dec("../etc", "fail")
    with pytest.raises(ValueError):
        dec("shop-t1", "fail", "rm -rf /")


def test_state_replays_decisions_and_undos_in_order():
    log = [dec("a", "fail", "x"), dec("b", "pass"), dec("a", "fail", "y"),
           triage_log.undo("a", by="ana", at="t"), triage_log.undo("b", by="ana", at="t"), triage_log.undo("b", by="ana", at="t")]
    state = triage_log.triage_state(log)
    assert set(state) == {"a"} and state["a"]["cause"] == "x"       # y taken back; b back to its archive
    assert triage_log.triage_state(log[:3])["a"]["cause"] == "y"


def test_the_log_wins_over_the_archive():
    index = {"a": {"system": "s", "verdict": None, "cause": None, "started_at": "1"},
             "b": {"system": "s", "verdict": "pass", "cause": "none", "started_at": "0"}}
    state = triage_log.triage_state([dec("a", "fail", "missing_index"), dec("b", "fail", "cpu_hot_path"),
                                 dec("zz", "pass")])
    out = triage_log.apply_triage(index, state)
    assert out["a"]["verdict"] == "fail" and out["a"]["cause"] == "missing_index"
    assert out["a"]["_triage"]["archive_verdict"] is None and out["a"]["_triage"]["by"] == "ana"
    assert out["b"]["verdict"] == "fail" and out["b"]["_triage"]["archive_cause"] == "none"
    assert "zz" not in out and index["a"]["verdict"] is None                 # waits; the input is not mutated
    assert history.targets(out) == [] and history.targets(index) == ["a"]     # a triaged run awaits nothing


def test_the_log_is_append_only_and_a_torn_line_is_skipped(tmp_path):
    path = tmp_path / "log.jsonl"
    triage_log.append(dec("a", "fail", "x"), path)
    triage_log.append(triage_log.undo("a", by="ana", at="t"), path)
    first = path.read_bytes()
    with open(path, "a") as fh:
        fh.write('{"action": "decide", "run_id": "a", "verd')              # an append killed midway
    assert [r["action"] for r in triage_log.read_log(path)] == ["decide", "undo"]
    triage_log.append(dec("b", "pass"), path)
    assert path.read_bytes().startswith(first)                               # nothing rewritten
    assert [(r["action"], r["run_id"]) for r in triage_log.read_log(path)] == [("decide", "a"), ("undo", "a"),
                                                                         ("decide", "b")]
    assert json.loads(path.read_text().splitlines()[0])["cause"] == "x"


def test_help_list_and_a_mistake_never_wait_for_a_running_nights_lock(tmp_path):
    """A night holds the data lock (another process, exclusive): triage's --help and --list answer,
    and a wrong argument is named, without touching the lock; a decision does wait for it (and
    here, with REGRESSLAB_LOCK_WAIT_S of 3, gives up with the lock's own message)."""
    import os
    import subprocess
    import sys

    from pipelines import config

    (tmp_path / "params.yaml").write_text("{}\n")
    env = {**os.environ, "REGRESSLAB_ROOT": str(tmp_path), "PYTHONPATH": str(config.ROOT),
           "REGRESSLAB_LOCK_WAIT_S": "3"}
    night = subprocess.Popen([sys.executable, "-c", "import time; from pipelines.storage import locks\n"
                              "with locks.data_lock('night'):\n    print('held', flush=True); time.sleep(60)"],
                             env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert night.stdout.readline().strip() == "held"

        def triage(*args):
            return subprocess.run([sys.executable, "-m", "pipelines.cli.triage", *args], env=env,
                                  capture_output=True, text=True, timeout=60)

        for args in (["--help"], ["--list"]):
            proc = triage(*args)
            assert proc.returncode == 0 and "gave up after" not in proc.stderr, (args, proc.stderr)
        mistake = triage("shop-1", "--verdict", "maybe")
        assert mistake.returncode == 2 and "invalid choice: 'maybe'" in mistake.stderr
        assert "gave up after" not in mistake.stderr
        decision = triage("shop-1", "--verdict", "pass", "--by", "ana")
        assert decision.returncode != 0 and "LockTimeout" in decision.stderr and "gave up after" in decision.stderr
    finally:
        night.kill()
