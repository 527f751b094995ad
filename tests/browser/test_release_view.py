"""A night read as a release manager reads it, in a real browser at 1200 × 900: the index's release
rows (one per system and build: Hold, Needs a look, Ship) as the night's verdict files say, worked
out here; and on every run page, the decision on the first screen (the verdict, the sentence, the
objectives or the key indicators, and for an uncertain verdict what was not judged and why), with
no statistical term above the Evidence fold."""
from __future__ import annotations

import json
import shutil

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

pytestmark = pytest.mark.slow     # reads a whole night

# the words of the evidence, which a release manager should not have to read to decide
STATISTICS = ("p =", "p-value", "p ≤", "violation ratio", "stacking score", " null", "LCL", "UCL", "KS p", "⇒",
              "confidence", "Simes", "binomial", "McNemar", "standard deviation")
ORDER = ("hold", "look", "ship")


@pytest.fixture(scope="module")
def screen():
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,900",
                 "--hide-scrollbars"):
        options.add_argument(flag)
    drv = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    drv.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",        # the page's viewport, whatever the window's frame
                        {"width": 1200, "height": 900, "deviceScaleFactor": 1, "mobile": False})
    yield drv
    drv.quit()


def status_by_hand(doc: dict) -> str:
    """A run's release status from its verdict file: a failure the objectives decided, or one of a
    history that weighs the detectors, holds; an uncertain verdict (not judged, judged against itself
    for want of runs, a new lab) or a warning needs a look; anything else ships."""
    details = doc["details"]
    uncertain = doc["verdict"] == "no_baseline" or doc.get("baseline_status") == "insufficient" \
        or (details.get("trust") or {}).get("basis") in ("small_history", "new_lab", "silent_null") \
        or (details.get("decision") or {}).get("statistical_verdict") == "no_baseline"
    by_objectives = str((details.get("decision") or {}).get("decided_by", "")).startswith("objectives")
    if doc["verdict"] == "fail" and (by_objectives or not uncertain):
        return "hold"
    if uncertain or (doc.get("objectives") or {}).get("result") == "warning":
        return "look"
    return "ship"


def test_a_nights_release_rows_and_first_screens(screen, night_with_model):
    tree = night_with_model.result(timeout=900)
    docs = {p.stem: json.loads(p.read_text()) for p in (tree / "reports" / "runs").glob("*.json")}
    index = json.loads((tree / "data" / "interim" / "valid_runs.json").read_text())["valid"]
    statuses = {r: status_by_hand(d) for r, d in docs.items()}
    wanted: dict[tuple[str, str], str] = {}
    for run_id, doc in docs.items():
        key = (doc["system"], str(index[run_id].get("build") or index[run_id]["version"]))
        wanted[key] = min(wanted.get(key, "ship"), statuses[run_id], key=ORDER.index)
    assert docs and set(statuses.values()) - {"ship"}            # the night has something to look at

    screen.get((tree / "reports" / "index.html").as_uri())
    rows = screen.find_elements(By.CSS_SELECTOR, "#builds tr.build")
    got = {}
    for row in rows:
        system, build = row.find_element(By.CSS_SELECTOR, "td").text.split("\n")[0].split(" ", 1)
        got[(system, build)] = next(k for k in ORDER if k in row.get_attribute("class").split())
        assert {a.text for a in row.find_elements(By.CSS_SELECTOR, "td.runs a")} == \
            {r for r, d in docs.items() if (d["system"], str(index[r]["version"])) == (system, build)}
    assert got == wanted
    banner = screen.find_element(By.ID, "night-banner").text
    held = sum(s == "hold" for s in statuses.values())
    assert f"{held} of {len(docs)} runs regressed" in banner
    uncertain = [r for r, d in docs.items() if statuses[r] == "look" and d["verdict"] in ("fail", "pass", "no_baseline")
                 and "warning" != (d.get("objectives") or {}).get("result")]
    if uncertain:
        assert f"{len(uncertain)} uncertain, not counted" in banner

    height = screen.execute_script("return window.innerHeight")
    assert height == 900
    for run_id, doc in docs.items():
        screen.get((tree / "reports" / "runs" / f"{run_id}.html").as_uri())
        first = ["verdict-banner", "summary", "objectives" if doc.get("objectives") else "key-indicators"]
        if statuses[run_id] == "look" and "warning" != (doc.get("objectives") or {}).get("result"):
            first.append("uncertain")
        for element in first:
            rect = screen.find_element(By.ID, element).rect
            assert rect["height"] > 0 and rect["y"] + rect["height"] <= height, (run_id, element, rect)
        above = screen.execute_script(
            "const main = document.querySelector('main'); let text = '';"
            "for (const node of main.children) { if (node.id === 'evidence') break; text += node.innerText + '\\n'; }"
            "return text;")
        assert [t for t in STATISTICS if t in above] == [], (run_id, above[:2000])
        assert not screen.find_element(By.ID, "methods").is_displayed()       # the statistics wait, folded
