"""The Airflow 3 plugin that serves the reports: registered by Airflow, lists nights, refuses traversal."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from pipelines import archive, config

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def client(tree):
    spec = importlib.util.spec_from_file_location("regresslab_reports", REPO / "plugins" / "regresslab_reports.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    runs = config.RUN_REPORTS
    runs.mkdir(parents=True)
    (runs / "shop-t1.html").write_text("<html>run page</html>")
    (runs / "shop-t1.json").write_text("{}")
    (config.REPORTS / "index.html").write_text("<html>index</html>")
    (config.VALIDATION_DOCS).mkdir(parents=True)
    (config.VALIDATION_DOCS / "index.html").write_text("<html>docs</html>")
    (tree / "secret.txt").write_text("secret")
    archive.write_json_atomic(config.REPORTS / "nights" / "2026-11-22.json", {"night": "2026-11-22", "runs": {
        "shop-t1": {"run_id": "shop-t1", "system": "shop", "verdict": "fail", "score": 0.8, "cause": "<b>x</b>",
                    "cause_known": False},
        "shop-t2": {"run_id": "shop-t2", "system": "shop", "verdict": "pass", "score": 0.1, "cause": "none",
                    "cause_known": True}}})
    return TestClient(module.app)


def test_lists_nights_and_runs_with_verdicts_and_links(client):
    page = client.get("/").text
    assert "2026-11-22: 1 of 2 runs regressed" in page
    assert 'href="runs/shop-t1.html"' in page and "unknown (nearest &lt;b&gt;x&lt;/b&gt;)" in page
    assert client.get("/runs/shop-t1.html").text == "<html>run page</html>"
    assert client.get("/runs/shop-t1.json").headers["content-type"].startswith("application/json")
    assert client.get("/index.html").text == "<html>index</html>"
    assert client.get("/validation/index.html").text == "<html>docs</html>"


@pytest.mark.parametrize("path", ["/runs/..%2F..%2Fsecret.txt", "/runs/shop-t1.txt", "/runs/missing.html",
                                  "/validation/..%2F..%2Fsecret.txt", "/validation/../../secret.txt"])
def test_refuses_anything_outside_the_reports(client, path):
    response = client.get(path)
    assert response.status_code == 404 and "secret" not in response.text


def test_airflow_registers_the_plugin(tmp_path):
    env = {"AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "PYTHONPATH": str(REPO), "PATH": str(Path(sys.executable).parent),
           "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path / 'a.db'}"}
    out = subprocess.run([str(Path(sys.executable).parent / "airflow"), "plugins", "--output", "json"], env=env,
                         capture_output=True, text=True, timeout=300, check=True)
    plugins = json.loads(out.stdout[out.stdout.index("["):])
    mine = [p for p in plugins if p["name"] == "regresslab_reports"]
    assert mine, out.stdout[-2000:]
    assert "/regresslab" in json.dumps(mine[0])
