"""Two runs side by side (pipelines.reporting.compare): every figure computed by hand."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pipelines.reporting import compare

DIRECTIONS = [{"counter": "(throughput|_rps$)", "worse": "down"}, {"counter": "(response|_ms$)", "worse": "up"}]


def test_benjamini_hochberg_by_hand():
    # sorted: 0.01, 0.03, 0.04, 0.5 -> m p / i = 0.04, 0.06, 0.0533, 0.5; the running minimum from
    # the right: 0.04, 0.0533, 0.0533, 0.5; back in the order given
    q = compare.benjamini_hochberg([0.01, 0.04, 0.03, 0.5])
    assert q == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.5])
    assert compare.benjamini_hochberg([0.9, 0.8]) == pytest.approx([0.9, 0.9])   # 2*0.8/1 = 1.6, 2*0.9/2 = 0.9
    assert compare.benjamini_hochberg([]) == []


def test_mann_whitney_by_hand_and_vectorised_alike():
    # 1,2,3 against 4,5,6: U = 0; mean n1 n2 / 2 = 4.5, sd sqrt(n1 n2 (n1 + n2 + 1) / 12) = sqrt(5.25);
    # with the continuity correction z = (0 - 4.5 + 0.5) / sqrt(5.25), two-sided p = 2 Phi(z)
    a, b = np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0])
    by_hand = 2 * 0.5 * math.erfc(4.0 / math.sqrt(5.25) / math.sqrt(2))
    assert compare.two_sample_p(a, b) == pytest.approx(by_hand) and by_hand == pytest.approx(0.0809, abs=1e-4)
    cols_a = np.column_stack([a, a, [1.0, np.nan, 3.0]])
    cols_b = np.column_stack([b, a, [4.0, 5.0, 6.0]])
    p = compare.two_sample_pvalues(cols_a, cols_b)
    assert p[0] == pytest.approx(by_hand)
    assert p[1] == pytest.approx(1.0)                    # the same values: nothing moved
    assert p[2] == pytest.approx(compare.two_sample_p(np.array([1.0, 3.0]), b))   # the NaN dropped, alone
    assert compare.two_sample_p(np.array([5.0]), b) == 1.0   # one value: nothing to test


def _frames():
    a = pd.DataFrame({"app.response_time_ms": [10.0, 10, 10, 10, 10, 11, 9, 10],
                      "app.throughput_rps": [100.0] * 8,
                      "idle.queue": [0.0, 0, 0, 0, 0, 0, 0, 2],
                      "only.a": [1.0] * 8})
    b = pd.DataFrame({"app.response_time_ms": [11.0, 11, 11, 11, 11, 12, 10, 11],
                      "app.throughput_rps": [101.0] * 8,
                      "idle.queue": [0.1] * 8,
                      "only.b": [1.0] * 8})
    return a, b


def test_every_counter_with_its_change_test_and_sort():
    a, b = _frames()
    out = compare.compare_frames(a, b, DIRECTIONS, min_effect_pct=5, floor_share=0.5, alpha=0.05)
    rows = {r["counter"]: r for r in out["rows"]}
    assert out["only_a"] == ["only.a"] and out["only_b"] == ["only.b"]
    rt = rows["app.response_time_ms"]
    assert (rt["a"], rt["b"], rt["change"]) == (10.0, 11.0, 1.0)
    assert rt["change_pct"] == pytest.approx(10.0) and rt["matters"] and rt["direction"] == "worse"
    tp = rows["app.throughput_rps"]
    assert tp["change_pct"] == pytest.approx(1.0) and not tp["matters"] and tp["direction"] == "better"
    # idling near zero: measured against half its 95th percentile, 0 + 0.65 * 2 = 1.3 -> 0.65
    iq = rows["idle.queue"]
    assert iq["change_pct"] == pytest.approx(100 * 0.1 / 0.65) and iq["matters"] and iq["direction"] == "changed"
    # q: BH over the three p-values; significant = q <= alpha
    q = compare.benjamini_hochberg([r["p"] for r in out["rows"]])
    assert [r["q"] for r in out["rows"]] == pytest.approx(q)
    assert all(r["significant"] == (r["q"] <= 0.05) for r in out["rows"])
    # what matters and is unlikely first, then what matters, then the small; by size within each
    keys = [(not (r["significant"] and r["matters"]), not r["matters"]) for r in out["rows"]]
    assert keys == sorted(keys)
    assert out["rows"][-1]["counter"] == "app.throughput_rps"


def test_differences_name_the_version_and_the_lab():
    ma = {"system": "shop", "version": "1.0", "environment": {"db": "pg14", "cpu": 8}}
    mb = {"system": "shop", "version": "1.1", "environment": {"db": "pg15", "cpu": 8}}
    assert compare.differences(ma, mb) == ["version: 1.0 → 1.1", "db: pg14 → pg15"]
    assert compare.differences(ma, ma) == []


def test_the_page_escapes_the_archive_and_no_id_becomes_a_path():
    a, b = _frames()
    evil = '<script>alert(1)</script>'
    a[evil], b[evil] = 1.0, 2.0
    out = compare.compare_frames(a, b, DIRECTIONS, min_effect_pct=5, floor_share=0.5, alpha=0.05)
    html = compare.render(out, ("shop-r1", "shop-t1"), ({"version": evil, "environment": {}},
                                                         {"version": "2", "environment": {"os": evil}}),
                          alpha=0.05, min_effect_pct=5, limit=2)
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert html.count('<tr class="flagged">') + html.count("<tr><td><code>") == 2        # limit rows shown
    assert "more counter(s) with smaller changes" in html
    assert compare.page_name("shop-r1", "shop-t1") == "shop-r1--shop-t1.html"
    for bad in ("../etc", "a/b", ".hidden"):
        with pytest.raises(ValueError):
            compare.page_name(bad, "shop-t1")
    assert math.isfinite(out["rows"][0]["q"])
