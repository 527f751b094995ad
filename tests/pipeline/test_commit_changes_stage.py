"""commit_changes main() on a small simulated history in a temporary tree: the contract's file,
the page (escaped), the metrics against the labels, the clusters kept between nights, and a
missing or unset series that does not stop the night."""
from __future__ import annotations

import gzip
import json

import pytest
import yaml

from pipelines import config
from pipelines.reporting import pages, run_reports
from pipelines.simulators import commitsim
from pipelines.stages import commit_changes
from pipelines.storage import atomic

pytestmark = pytest.mark.slow     # stages end to end


def _setup(tree, frame, truth, method="skia+mono"):
    series = tree / "series"
    series.mkdir()
    with gzip.open(series / "bench.csv.gz", "wt") as fh:
        frame.to_csv(fh, index=False)
    if truth is not None:
        atomic.write_json_atomic(series / "labels.json", truth)
    params = yaml.safe_load((tree / "params.yaml").read_text())
    params["commit_changes"]["source"] = str(series / "bench.csv.gz")
    params["commit_changes"]["labels"] = str(series / "labels.json") if truth is not None else None
    params["commit_changes"]["method"] = method
    (tree / "params.yaml").write_text(yaml.safe_dump(params))


def test_the_stage_writes_the_contracts_changes_page_and_metrics(tree, capsys):
    frame, truth = commitsim.simulate(commitsim.CommitHistory(seed=5, n_commits=80, n_groups=3, benchmarks_per_group=3, runs=4,
                                      measurements=8, warmup=2, changes_per_group=(1, 1), min_change=0.15,
                                      max_change=0.25, static_share=0.0, min_gap=15))
    hostile = "<script>alert(1)</script>"
    frame.loc[frame["benchmark"] == "group2.bench2", "benchmark"] = hostile
    truth["series"][f"{hostile}|default"] = truth["series"].pop("group2.bench2|default")
    _setup(tree, frame, truth)
    commit_changes.main()
    rows = json.loads((config.COMMIT_REPORTS / "changes.json").read_text())
    assert rows and all(set(r) == {"benchmark", "config", "commit", "direction", "magnitude_pct", "method",
                                   "evidence"} for r in rows)
    directions = [r["direction"] for r in rows]
    assert directions == sorted(directions, key=lambda d: d != "regression")       # regressions first
    metrics = json.loads((config.METRICS / "commit_changes.json").read_text())
    assert set(metrics) == {"skia", "mono", "no_change", "reported"} and metrics["skia"]["true_changes"] == 9
    assert metrics["reported"]["method"] == "skia+mono"
    assert metrics["mono"]["recall"] >= 0.5 and metrics["skia"]["recall"] >= 0.5       # 15-25 % steps are plain
    page = (config.COMMIT_REPORTS / "index.html").read_text()
    assert hostile not in page and "&lt;script&gt;" in page
    assert "Skia (step fits" in page and "Mono (confidence" in page and "PELT (" not in page
    assert page.count("data:image/svg+xml;base64,") >= 3
    first = json.loads(config.COMMIT_CLUSTERS.read_text())
    assert first and all(c["status"] == "untriaged" for c in first)
    # triage one from the command line, as the page says; the next night keeps its status and raises none
    commit_changes.triage_main([first[0]["id"], "--status", "negative", "--by", "ana", "--note", "noise"])
    with pytest.raises(SystemExit):
        commit_changes.triage_main(["c9999", "--status", "negative", "--by", "ana"])     # unknown: refused
    commit_changes.main()                                   # the next night: the same clusters, none new
    assert "(0 new)" in capsys.readouterr().out
    kept = json.loads(config.COMMIT_CLUSTERS.read_text())
    assert len(kept) == len(first)
    assert kept[0]["status"] == "negative" and kept[0]["triaged_by"] == "ana" and kept[0]["note"] == "noise"
    assert "New interesting clusters" not in (config.COMMIT_REPORTS / "index.html").read_text()
    summary = run_reports.commit_summary()
    assert summary["changes"] == len(rows) and summary["top"] == rows[0]
    page = pages.render_index([], pages.NightIndex(night="n", generated="g", quarantined=[], commits=summary))
    assert 'href="commits/index.html"' in page and f"{summary['regressions']} regression(s)" in page


def test_an_unset_or_unreadable_series_does_not_stop_the_night(tree):
    params = yaml.safe_load((tree / "params.yaml").read_text())
    params["commit_changes"]["source"] = None
    (tree / "params.yaml").write_text(yaml.safe_dump(params))
    commit_changes.main()
    assert json.loads((config.COMMIT_REPORTS / "changes.json").read_text()) == []
    assert "No commit series is configured" in (config.COMMIT_REPORTS / "index.html").read_text()
    params["commit_changes"]["source"] = str(tree / "nowhere.csv")
    (tree / "params.yaml").write_text(yaml.safe_dump(params))
    commit_changes.main()
    page = (config.COMMIT_REPORTS / "index.html").read_text()
    assert "could not be read" in page and "nowhere.csv" in page
    (tree / "bad.csv").write_text("commit,value\na,1\n")
    params["commit_changes"]["source"] = str(tree / "bad.csv")
    (tree / "params.yaml").write_text(yaml.safe_dump(params))
    commit_changes.main()
    assert "missing column(s) commit_time, benchmark, config, run" in (config.COMMIT_REPORTS / "index.html").read_text()


def test_one_value_per_commit_is_judged_by_level_shifts(tree, capsys):
    """A nightly history (one value per commit): ``auto`` runs the level-shift test (steps beyond
    the series' own course); Skia, Mono and PELT do not run; no step on a quiet series."""
    frame, truth = commitsim.realistic(seed=4, n_commits=200, series_per_class=2, classes=("quiet", "steps", "trend"))
    _setup(tree, frame, truth, method="auto")
    commit_changes.main()
    metrics = json.loads((config.METRICS / "commit_changes.json").read_text())
    assert metrics["reported"]["method"] == "level_shift" and set(metrics) == {"level_shift", "no_change", "reported"}
    assert metrics["reported"]["f1_tcpd"] > metrics["no_change"]["f1_tcpd"]
    rows = json.loads((config.COMMIT_REPORTS / "changes.json").read_text())
    assert {r["method"] for r in rows} == {"level_shift"}
    assert not any(r["benchmark"].startswith(("quiet", "trend")) for r in rows)
    page = (config.COMMIT_REPORTS / "index.html").read_text()
    assert "level shifts (steps beyond" in page and "<code>commit_changes.method</code>: level_shift" in page
    assert "Skia (" not in page and "Mono (" not in page and "impact factor" not in page   # only what ran is named


def test_a_series_too_irregular_to_call_is_named_on_the_page(tree):
    """A strong slow cycle (8 noise sd, 200 commits) is too irregular to call: no change on it,
    and the page lists it with how far its step tests spread beyond chance."""
    import numpy as np
    import pandas as pd

    n = 600
    rng = np.random.default_rng(0)
    commits = [f"{i:040x}" for i in range(n)]
    times = pd.date_range("2026-01-01", periods=n, freq="6h").strftime("%Y-%m-%dT%H:%M:%S")
    cyc = 100 + 8 * np.sin(2 * np.pi * np.arange(n) / 200) + rng.normal(0, 1, n)
    flat = 50 + rng.normal(0, 0.5, n)
    frame = pd.concat([pd.DataFrame({"commit": commits, "commit_time": times, "benchmark": name, "config": "d",
                                     "run": 0, "value": v}) for name, v in (("cyclic", cyc), ("flat", flat))])
    _setup(tree, frame, None, method="auto")
    commit_changes.main()
    assert json.loads((config.COMMIT_REPORTS / "changes.json").read_text()) == []
    page = (config.COMMIT_REPORTS / "index.html").read_text()
    assert 'id="irregular-series"' in page and "<code>cyclic|d</code>" in page and "flat|d" not in page
