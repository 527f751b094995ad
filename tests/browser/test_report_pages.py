"""The HTML reports in a real headless browser (Debian's chromium driven by chromedriver).

Pages are rendered by ``pipelines.reporting.pages`` from a verdict document shaped like the
pipeline's, with hostile strings from an "archive" in every field, then opened from disk
as a release manager would: no console error, the key elements present, no script run.
A page with a known console error and a missing image proves the check can fail.
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from pipelines import config
from pipelines.reporting.pages import NightIndex, RunPage, index_row, render_index, render_run
from pipelines.reporting.plots import night_trends, sparkline
from pipelines.reporting.summary import counter_changes, plain_summary

EVIL = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>'


def _chrome() -> webdriver.Chrome:
    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    assert binary and driver, "chromium and chromedriver are installed by `make test` (apt-get install chromium chromium-driver)"
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1600"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=options)


@pytest.fixture(scope="module")
def browser():
    drv = _chrome()
    yield drv
    drv.quit()


def _errors(drv) -> list[dict]:
    return [e for e in drv.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def _doc() -> dict:
    counters = [f"app.response_time_ms{EVIL}", "db01.cpu_pct", "tomcat.cpu_pct"]
    rules = {c: [{"model": f"run-{EVIL}", "premise": ["db01.cpu_pct=2"], "consequent": f"{c}=1..3",
                  "confidence_history": 0.97, "confidence_new": 0.1, "delta": 0.8, "premise_intervals": 40}]
             for c in counters[:2]}
    return {
        "schema_version": 1, "run_id": f"shop-t1{EVIL}", "system": "shop", "verdict": "fail", "score": 0.81,
        "flagged_counters": counters[:2], "counter_scores": {c: 0.9 - 0.1 * i for i, c in enumerate(counters)},
        "cause": {"label": f"extra_db_query{EVIL}", "probability": 0.78, "known": True},
        "baseline_runs": [{"run_id": "shop-r1", "weight": 0.6}, {"run_id": "shop-r2", "weight": 0.4}],
        "methods": {"association_rules_stacking": {"verdict": "fail", "flagged_counters": counters[:2]},
                    "control_charts": {"verdict": "fail", "violation_ratio": 0.31, "threshold": 0.05,
                                       "flagged_counters": counters[:1], "load_independent_counters": [],
                                       "baseline_runs": ["shop-r1"]}},
        "details": {"verdict_rule": "all", "n_intervals": 60, "interval_s": 30.0,
                    "stacking_score": {counters[0]: 1.0}, "bagging_votes": {counters[0]: 2},
                    "violated_rules": rules, "violation_intervals": {counters[0]: [3, 4, 5, 40], counters[1]: [7]},
                    "not_analysed": {"missing_in_target": [EVIL]},
                    "control_charts": {"ratios": {counters[0]: {"lower": 0.0, "upper": 0.9, "average": 0.45,
                                                                "sum": 0.9}}}},
    }


def _charts() -> dict:
    rng = np.random.default_rng(0)
    target = (100 + rng.normal(0, 5, 60)).round(2).tolist()
    return {"baseline_runs": ["shop-r1"], "charts": {
        f"app.response_time_ms{EVIL}": {"cl": [100.0] * 60, "lcl": [90.0] * 60, "ucl": [110.0] * 60,
                                        "target": target}}}


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    root = tmp_path_factory.mktemp("reports")
    (root / "runs").mkdir()
    doc = _doc()
    counters = doc["flagged_counters"] + ["tomcat.cpu_pct"]
    target = pd.Series({counters[0]: 32.0, counters[1]: 67.0, counters[2]: 380.0})
    base = pd.Series({counters[0]: 24.0, counters[1]: 41.0, counters[2]: 350.0})
    changes = counter_changes(counters, target, base, config.load_params("report")["directions"])
    doc["counter_changes"] = {c: changes[c] for c in doc["flagged_counters"]}
    doc["summary"] = plain_summary(doc, changes)
    trends = {c: sparkline([v * 0.9, v * 0.95, v, v * 1.3]) for c, v in base.items()}
    html = render_run(doc, {"version": EVIL, "started_at": "2026-11-21T02:00:00Z",
                                   "environment": {"cpu_model": EVIL, "db_version": "5.1"}}, _charts(),
                      RunPage(baseline_envs={"shop-r1": {"cpu_model": "Xeon", "db_version": "5.1"}},
                              raw_href="../../data/raw/shop-t1.tar.gz", raw_name="shop-t1.tar.gz",
                              changes=changes, trends=trends))
    run_page = root / "runs" / "run.html"
    run_page.write_text(html)
    rows = [index_row(doc) | {"change": "new"},
            {"run_id": "shop-t2", "system": "shop", "verdict": "pass", "score": 0.05, "cause": "none",
             "probability": 0.9, "cause_known": True, "top": [], "change": "unchanged"}]
    index = root / "index.html"
    nights = [(f"2026-11-{d}", {"x": {"system": "shop", "verdict": "fail" if d % 3 == 0 else "pass",
                                      "score": 0.1 * (d % 5)}}) for d in range(10, 23)]
    decisions = [{"run_id": "shop-t0", "verdict": "fail", "cause": f"missing_index{EVIL}", "by": "ana",
                  "at": "2026-11-21T09:00:00+00:00", "note": EVIL, "previous": {"verdict": None}}]
    index.write_text(render_index(rows, NightIndex(night="2026-11-22", generated="now", quarantined=[EVIL],
                                                   decisions=decisions, trends=night_trends(nights, last=30))))
    return run_page, index


def test_the_error_check_can_fail(browser, tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><img src="missing.png"><script>console.error("boom")</script></body></html>')
    browser.get(bad.as_uri())
    seen: list[dict] = []
    deadline = time.monotonic() + 20        # drain: the console entry may arrive after the image's
    while not any("boom" in e["message"] for e in seen) and time.monotonic() < deadline:
        seen += _errors(browser)
        time.sleep(0.1)
    time.sleep(0.5)
    seen += _errors(browser)                # nothing of this page is left for the next test's check
    assert any("boom" in e["message"] for e in seen), seen


def test_run_page_loads_cleanly_with_its_key_elements(browser, pages):
    run_page, _ = pages
    browser.get(run_page.as_uri())
    assert _errors(browser) == []
    banner = browser.find_element(By.ID, "verdict-banner")
    assert "FAIL" in banner.text and "Hold" in banner.text
    assert "Probable cause" in browser.find_element(By.ID, "cause").text
    assert not browser.find_element(By.ID, "methods").is_displayed()             # folded under Evidence
    browser.find_element(By.CSS_SELECTOR, "#evidence > summary").click()
    for element in ("methods", "top-counters", "violated-rules", "baseline", "timeline", "control-charts"):
        assert browser.find_element(By.ID, element).is_displayed(), element
    images = browser.find_elements(By.CSS_SELECTOR, "#control-charts img, #timeline")
    assert images and all(browser.execute_script("return arguments[0].naturalWidth", i) > 0 for i in images)
    # the hostile strings are shown as text, never run
    assert browser.execute_script("return window.__pwned") is None
    assert browser.execute_script("return document.scripts.length") == 0
    assert "<script>" in browser.find_element(By.ID, "top-counters").text
    # a release manager's first ten seconds: the summary with numbers and units, then the change
    summary = browser.find_element(By.ID, "summary").text
    # (the first counter's name ends in the hostile string, so it has no unit suffix)
    assert "24 → 32 (+33 %, worse)" in summary and "db01.cpu_pct 41 % → 67 % (+63 %, worse)" in summary
    assert "Probable cause: extra_db_query" in summary
    table = browser.find_element(By.ID, "top-counters")
    headers = [th.text for th in table.find_elements(By.TAG_NAME, "th")]
    assert headers[:4] == ["counter", "baseline", "now", "change"] and "stacking s" not in headers
    assert "350 %" in table.text and "380 %" in table.text                 # per-process CPU, 100 per core
    assert browser.find_element(By.ID, "method-details").is_displayed()
    assert "regresslab triage" in browser.find_element(By.ID, "triage").text
    sparks = browser.find_elements(By.CSS_SELECTOR, "#top-counters img.spark")
    assert len(sparks) == 3 and all(browser.execute_script(
        "return arguments[0].complete && arguments[0].naturalWidth", i) > 0 for i in sparks)


def test_index_page_loads_cleanly_and_links_every_run(browser, pages):
    _, index = pages
    browser.get(index.as_uri())
    assert _errors(browser) == []
    assert "1 of 2 runs regressed" in browser.find_element(By.ID, "night-banner").text
    links = [a.get_attribute("href") for a in browser.find_elements(By.CSS_SELECTOR, "#runs a")]
    assert len(links) == 2 and all("/runs/" in h for h in links)
    assert browser.execute_script("return window.__pwned") is None
    runs = browser.find_element(By.ID, "runs").text
    assert "24 → 32 (+33 %, worse)" in runs                                 # the top change of the failed run
    trend = browser.find_elements(By.CSS_SELECTOR, "#trends img.spark")
    assert len(trend) == 1 and browser.execute_script("return arguments[0].naturalWidth", trend[0]) > 0
    awaiting = browser.find_elements(By.CSS_SELECTOR, "#awaiting-triage a")
    assert len(awaiting) == 2 and all("/runs/" in a.get_attribute("href") for a in awaiting)
    decisions = browser.find_element(By.ID, "triage-decisions").text
    assert "ana" in decisions and "<script>" in decisions and browser.execute_script("return document.scripts.length") == 0


# --------------------------------------------------------------------------- counter history, compare


from tests.unit.test_counter_history import EVIL as TREE_EVIL  # noqa: E402 -- the small tree's hostile counter
from tests.unit.test_counter_history import small_tree  # noqa: E402,F401 -- the fixture, shared


def test_counter_history_and_compare_pages_in_the_browser(browser, small_tree):  # noqa: F811 -- the fixture
    """A system's counters over time and two runs side by side, from a small tree: no console
    error, the graph drawn with one point per run, the band, the version line, every counter
    reachable by its anchor, the links followed."""
    from pipelines.reporting import compare, counter_history, links

    index, params = small_tree
    counter_history.write_system_pages(index, ["shop-t4", "shop-t5"], params)
    system = config.REPORTS / "systems" / "shop" / "index.html"
    browser.get(system.as_uri())
    assert _errors(browser) == []
    assert "6 runs" in browser.find_element(By.ID, "system-summary").text
    evil = links.slug("x" + TREE_EVIL)
    browser.get(system.as_uri() + f"#c-{evil}")                         # a counter without a page: its anchor
    assert browser.find_element(By.ID, f"c-{evil}").is_displayed()
    assert browser.execute_script("return window.__pwned") is None
    browser.find_element(By.LINK_TEXT, "app.response_time_ms").click()
    assert browser.current_url.endswith("/counters/app.response_time_ms.html")
    assert _errors(browser) == []
    chart = browser.find_element(By.CSS_SELECTOR, "#history-chart svg")
    assert chart.size["width"] > 500 and chart.size["height"] > 200
    assert len(browser.find_elements(By.CSS_SELECTOR, "#history-chart g.point")) == 6
    assert len(browser.find_elements(By.CSS_SELECTOR, "#history-chart rect.band")) == 1
    assert len(browser.find_elements(By.CSS_SELECTOR, "#history-chart line.version")) == 1
    assert len(browser.find_elements(By.CSS_SELECTOR, "#history-runs tr")) == 7     # header + 6 runs
    assert browser.execute_script("return document.scripts.length") == 0

    result, html = compare.compare_runs("shop-r0", "shop-t5", index)
    page = compare.write_page("shop-r0", "shop-t5", html)
    browser.get(Path(page).as_uri())
    assert _errors(browser) == []
    rows = browser.find_elements(By.CSS_SELECTOR, "#compare tr")
    assert len(rows) == 1 + len(result["rows"])
    # 10 ms -> 15 ms, against max(10, 0.5 x the 95th percentile of 10, 10, 30 = 28) = 14: +35.7 %
    assert "app.response_time_ms" in rows[1].text and "+35.7 %" in rows[1].text
    assert "version: 1.0 → 1.1" in browser.find_element(By.ID, "differences").text
    assert browser.execute_script("return window.__pwned") is None
