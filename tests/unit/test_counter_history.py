"""A counter across nights and versions (pipelines.reporting.counter_history): the SVG, the names
that become files, and the pages of a small tree written by hand."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from pipelines import config
from pipelines.reporting import counter_history as ch
from pipelines.reporting import links
from pipelines.storage import atomic, store

EVIL = '<script>alert(1)</script>'


def test_slug_keeps_safe_names_and_never_makes_a_path():
    assert links.slug("app.response_time_ms") == "app.response_time_ms"
    for name in ("a/b", "../x", ".hidden", EVIL, "a b", "é"):
        s = links.slug(name)
        assert config.is_identifier(s) and "/" not in s and not s.startswith(".")
    assert links.slug("a/b") != links.slug("a_b") != links.slug("a:b")           # the hash tells them apart
    assert re.fullmatch(r"a_b-[0-9a-f]{8}", links.slug("a/b"))


def _points():
    statuses = ["verified pass", "verified fail", "verified pass", "pass", "fail", "no_baseline"]
    versions = ["1.0", "1.0", "1.1", "1.1", "1.2", "1.2"]
    return [ch.Point(f"r{i}", f"2026-09-0{i + 1}T02:00:00Z", v, s, float(10 + i), i == 4)
            for i, (s, v) in enumerate(zip(statuses, versions))]


def test_svg_marks_each_run_its_verdict_the_versions_the_flags_and_the_band():
    svg = ch.history_svg("app.response_time_ms", _points(), (10.0, 12.0))
    assert svg.count('<g class="point ') == 6
    for status in ("verified-pass", "verified-fail", "pass", "fail", "no_baseline"):
        assert f'class="point {status}"' in svg
    assert svg.count(f'fill="{ch.STATUS["fail"][0]}"') == 1
    assert svg.count(f'fill="{ch.STATUS["verified pass"][0]}"') == 2
    assert svg.count('class="flag"') == 1                         # the one night that flagged it
    assert svg.count('class="version"') == 2                      # 1.0 -> 1.1 -> 1.2
    assert '<rect class="band"' in svg and "10 ms to 12 ms" in svg
    # y: 10..15 padded by 8 % of the range (0.4): 15 sits 0.4/5.8 of the plot below its top
    top, plot_h = 22.0, 280 - 22.0 - 34.0
    expected = top + plot_h * (1 - (15.0 - 9.6) / (15.4 - 9.6))
    assert f'cy="{expected:.1f}"' in svg


def test_an_objectives_absolute_criteria_are_lines_and_its_relative_ones_are_not():
    """The objectives of the latest run's verdict file on its counter: ``<20`` (pass) and ``<=25``
    (warning) drawn; ``<=+10%`` moves with each run's earlier results and is not.  The values run
    10..15 and the lines reach 25: y spans 10..25 padded by 8 % of 15 (1.2), so 20 sits at
    22 + 224 x (1 - (20 - 8.8) / (26.2 - 8.8))."""
    doc = {"objectives": {"objectives": [
        {"counter": "app.response_time_ms", "display_name": "P95 <x>", "aggregate": "p95",
         "pass": [["<=+10%", "<20"]], "warning": [["<=25"]]},
        {"counter": "app.throughput_rps", "display_name": "Throughput", "aggregate": "mean", "pass": [[">=-5%"]],
         "warning": []}]}}
    limits = ch.objective_limits(doc)
    assert limits == {"app.response_time_ms": [("objective P95 <x>: p95 <20 (pass)", 20.0, "pass"),
                                               ("objective P95 <x>: p95 <=25 (warning)", 25.0, "warning")]}
    svg = ch.history_svg("app.response_time_ms", _points(), None, limits=limits["app.response_time_ms"])
    assert svg.count('<line class="objective pass"') == 1 and svg.count('<line class="objective warning"') == 1
    assert "P95 &lt;x&gt;" in svg and "<x>" not in svg
    y20 = 22.0 + 224.0 * (1 - (20.0 - 8.8) / (26.2 - 8.8))
    assert f'y1="{y20:.1f}"' in svg
    assert ch.objective_limits({}) == {} and ch.objective_limits(None) == {}


def test_svg_escapes_what_came_from_an_archive_and_survives_missing_values():
    pts = [ch.Point(EVIL, "2026", EVIL, "pass", None, False), ch.Point("r1", "2026", "1", "pass", 3.0, False)]
    svg = ch.history_svg(EVIL, pts, None)
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    assert svg.count('<g class="point ') == 1
    assert "no value" in ch.history_svg("c", [ch.Point("r", "2026", "1", "pass", None, False)], None)


def test_run_status_verified_runs_by_history_targets_by_their_night():
    assert ch.run_status({"verdict": "fail"}, {"verdict": "pass"}, is_target=False) == "verified fail"
    assert ch.run_status({"verdict": None}, {"verdict": "no_baseline"}, is_target=True) == "no_baseline"
    assert ch.run_status({}, None, is_target=True) == "unjudged"


@pytest.fixture()
def small_tree(tree):
    """4 history runs and 2 targets of one system, 3 counters; the last target flagged one."""
    index = {}
    for i in range(6):
        run = f"shop-r{i}" if i < 4 else f"shop-t{i}"
        index[run] = {"system": "shop", "verdict": "pass" if i < 4 else None, "version": "1.0" if i < 3 else "1.1",
                      "started_at": f"2026-09-0{i + 1}T02:00:00Z", "environment": {}}
        frame = pd.DataFrame({"app.response_time_ms": [10.0 + i, 10.0 + i, 30.0],
                              "db.cpu_pct": [50.0, 50.0, 50.0], f"x{EVIL}": [1.0, 1.0, 1.0]})
        atomic.write_parquet_atomic(config.frame_path(run), frame)
        atomic.write_json_atomic(config.info_path(run), {"key": f"k-{run}"})
    for run, flagged in (("shop-t4", []), ("shop-t5", ["app.response_time_ms"])):
        atomic.write_json_atomic(config.run_report_path(run), {
            "run_id": run, "system": "shop", "verdict": "fail" if flagged else "pass", "flagged_counters": flagged,
            "counter_scores": {"app.response_time_ms": 0.9}, "baseline_runs": [
                {"run_id": f"shop-r{k}", "weight": 0.25} for k in range(4)]})
    atomic.write_json_atomic(config.NIGHTS / "2026-09-06.json", {"night": "2026-09-06", "runs": {"shop-t5": {}}})
    params = dict(config.load_params("report"), top_counters=1, history_nights=14, history_counters=["db.cpu_pct"])
    return index, params


def test_pages_for_the_counters_shown_or_asked_with_every_run_and_a_reused_cache(small_tree, monkeypatch):
    index, params = small_tree
    out = ch.write_system_pages(index, ["shop-t4", "shop-t5"], params)
    assert out == {"shop": {"counters": 3, "pages": 2, "runs": 6}}
    folder = config.REPORTS / "systems" / "shop"
    page = (folder / "counters" / "app.response_time_ms.html").read_text()
    assert page.count('<g class="point ') == 6 and page.count('class="flag"') == 1
    assert page.count('class="version"') == 1
    # the median of each run: 10 + i (two intervals of it, one of 30); the band: the baseline runs' 10..13
    assert "15 ms" in page and "10 ms to 13 ms" in page
    assert (folder / "counters" / "db.cpu_pct.html").exists()                 # asked for in params
    listing = json.loads((folder / "counters.json").read_text())
    assert [row["page"] is not None for row in listing] == [True, True, False]
    evil_row = listing[2]
    assert evil_row["page"] is None and evil_row["anchor"] == f"c-{links.slug('x' + EVIL)}"
    index_html = (folder / "index.html").read_text()
    assert f'id="c-{links.slug("x" + EVIL)}"' in index_html and "<script>" not in index_html
    assert 'href="counters/app.response_time_ms.html"' in index_html
    # a second night reads no frame whose key is unchanged
    monkeypatch.setattr(store, "load_normalized", lambda run: (_ for _ in ()).throw(AssertionError(run)))
    assert ch.write_system_pages(index, ["shop-t4", "shop-t5"], params) == out
    # a run normalised again (new key) is read again
    atomic.write_json_atomic(config.info_path("shop-r0"), {"key": "k-new"})
    with pytest.raises(AssertionError, match="shop-r0"):
        ch.write_system_pages(index, ["shop-t4", "shop-t5"], params)


def test_medians_cache_matches_the_frames(small_tree):
    index, _ = small_tree
    runs = sorted(index)
    medians = ch.run_medians("shop", runs)
    assert list(medians.index) == runs
    assert medians.loc["shop-r2", "app.response_time_ms"] == 12.0
    assert np.isnan(ch.latest_band(medians, "nope", runs) or np.nan)
    assert ch.latest_band(medians, "db.cpu_pct", ["shop-r0"]) is None             # one run: no band


def test_each_point_says_its_lab_when_the_runs_span_several():
    envs = {"r1": {"memory_gb": 16, "os": "rhel"}, "r2": {"memory_gb": 64, "os": "rhel"}, "r3": {"os": "rhel"}}
    assert ch.lab_labels(envs) == {"r1": "memory_gb=16", "r2": "memory_gb=64", "r3": "memory_gb=—"}
    assert set(ch.lab_labels({"a": {"os": "x"}, "b": {"os": "x"}}).values()) == {""}        # one lab: no label
    pts = [ch.Point(f"r{i}", "2026", "1", "pass", float(i), False, lab) for i, lab in enumerate(["A", "A", "B"])]
    svg = ch.history_svg("c", pts, None)
    assert svg.count('<rect class="lab"') == 3
    assert svg.count(f'fill="{ch.LAB_COLOURS[0]}"><title>A') == 2
    assert svg.count(f'fill="{ch.LAB_COLOURS[1]}"><title>B') == 1
    assert 'class="lab"' not in ch.history_svg("c", [ch.Point("r", "2026", "1", "pass", 1.0, False, "A")] * 2, None)
