"""The pages' SVG pictures: round ticks, a control chart and the violation time-line, by hand."""
from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET

from pipelines.reporting import plots

NS = "{http://www.w3.org/2000/svg}"


def _svg(uri: str) -> ET.Element:
    assert uri.startswith("data:image/svg+xml;base64,")
    return ET.fromstring(base64.b64decode(uri.split(",", 1)[1]))       # well-formed XML, or this raises


def test_round_ticks_and_their_labels():
    # steps of 1, 2 or 5 times a power of ten, at least (hi - lo) / 5 apart, inside lo..hi
    assert plots.nice_ticks(0, 60) == [0, 20, 40, 60]                 # 60 / 5 = 12 -> 20
    assert plots.nice_ticks(7, 13) == [8, 10, 12]                     # 6 / 5 = 1.2 -> 2
    assert plots.nice_ticks(0.76, 5.24) == [1, 2, 3, 4, 5]            # 4.48 / 5 = 0.896 -> 1
    assert plots.nice_ticks(0.0131, 0.0279) == [0.015, 0.02, 0.025]   # 0.00296 -> 0.005
    assert plots.nice_ticks(5, 5) == [5]
    assert plots.tick_labels([2.0e6, 2.5e6, 3.0e6]) == ["2.0M", "2.5M", "3.0M"]
    assert plots.tick_labels([0, 5000, 10000, 15000]) == ["0k", "5k", "10k", "15k"]   # k from 10,000
    assert plots.tick_labels([0.015, 0.02, 0.025]) == ["0.015", "0.020", "0.025"]
    assert plots.tick_labels([-20.0, 0.0, 20.0]) == ["-20", "0", "20"]
    assert plots.tick_labels([]) == [] and plots.tick_labels([1234.5]) == ["1.23e+03"]


def test_control_chart_by_hand():
    """Three one-minute intervals: target 1, 5, 3 against LCL 2, UCL 4, centre 3.

    y runs over 1..5 padded by 6 % of 4 (0.76..5.24) onto 150..18; x over 0..2 minutes onto 44..332.
    The band is a step per interval, edges at 0, 0.5, 1.5 and 2 minutes (x 44, 116, 260, 332); UCL 4
    at y 150 - 132 * 3.24 / 4.48 = 54.5, LCL 2 at 113.5.  Points 1 and 5 are out of the band (red),
    3 is in it, at (332, 84)."""
    svg = _svg(plots.control_chart_plot("web.cpu_pct", {"target": [1, 5, 3], "lcl": [2, 2, 2], "ucl": [4, 4, 4],
                                                        "cl": [3, 3, 3]}, 60.0))
    band = svg.find(f"{NS}polygon").get("points")
    assert band == ("44.0,54.5 116.0,54.5 116.0,54.5 260.0,54.5 260.0,54.5 332.0,54.5 "
                    "332.0,113.5 260.0,113.5 260.0,113.5 116.0,113.5 116.0,113.5 44.0,113.5")
    assert svg.find(f"{NS}polyline").get("points") == "44.0,84.0 188.0,84.0 332.0,84.0"   # centre line at 3
    marks = {p.get("class"): re.findall(r"M([\d.]+) ([\d.]+)", p.get("d")) for p in svg.iter(f"{NS}path")}
    # each x mark starts 2.2 up and left of its point
    assert marks["out"] == [("41.8", "140.7"), ("185.8", "22.9")]     # (44, 142.9) and (188, 25.1), red
    assert marks["in"] == [("329.8", "81.8")]                         # (332, 84)
    texts = [t.text for t in svg.iter(f"{NS}text")]
    assert texts[0] == "web.cpu_pct" and ["1", "2", "3", "4", "5"] == texts[1:6]
    assert {"baseline LCL–UCL", "centre line", "target", "target, out of limits", "minutes"} <= set(texts)


def test_control_chart_without_a_band_or_values_and_a_hostile_name():
    evil = '<script>alert("x")</script>" onload="x'
    svg = _svg(plots.control_chart_plot(evil, {"target": [None, None]}, 30.0))
    assert svg.find(f"{NS}polygon") is None and "baseline LCL–UCL" not in [t.text for t in svg.iter(f"{NS}text")]
    assert [t.text for t in svg.iter(f"{NS}text")][0] == evil[:60]            # escaped: read back as text
    assert not list(svg.iter(f"{NS}script"))
    # a band with a gap: one polygon each side of it, the target's points where no limit is set stay dark
    svg = _svg(plots.control_chart_plot("c", {"target": [9, 9, 9, 9], "lcl": [0, None, 0, 0],
                                              "ucl": [1, None, 1, 1], "cl": [0.5, None, 0.5, 0.5]}, 60.0))
    assert len(svg.findall(f"{NS}polygon")) == 2
    assert len(svg.findall(f"{NS}polyline")) == 1                   # a centre line needs two points
    marks = {p.get("class"): len(re.findall("M", p.get("d"))) for p in svg.iter(f"{NS}path") if p.get("class") != "key"}
    assert marks == {"out": 3, "in": 1}                             # three out of the band; one with no limits


def test_violation_timeline_by_hand():
    """Two counters over 4 intervals of 30 s (2 minutes): counter a violated in intervals 0 and 2.
    Label column 10 + 5.2 * 4 = 30.8 px (the longest name, b<y>), plot to 708: interval 2 is minute
    1, x = 30.8 + 677.2 / 2 = 369.4; interval 3 minute 1.5, x = 30.8 + 677.2 * 0.75 = 538.7."""
    svg = _svg(plots.timeline_plot({"a.x": [0, 2], "b<y>": [3], "quiet": []}, ["a.x", "b<y>", "quiet"], 4, 30.0))
    assert svg.get("height") == str(round(8 + 18 * 2 + 34))                  # two rows: quiet has no violation
    rows = [p.get("d") for p in svg.iter(f"{NS}path")]
    assert rows == ["M30.8 11.0v12M369.4 11.0v12", "M538.7 29.0v12"]         # minutes 0, 1 and 1.5
    texts = [t.text for t in svg.iter(f"{NS}text")]
    assert {"a.x", "b<y>", "minutes into the load phase"} <= set(texts) and "quiet" not in texts
    assert plots.timeline_plot({"a": []}, ["a"], 4, 30.0) is None
