"""Airflow 3 plugin: the nightly reports inside the Airflow UI.

A FastAPI app mounted by the Airflow API server at ``/regresslab`` lists the nights
(``reports/nights/*.json``) and their runs with verdict, score and cause, and serves each
run's page (``reports/runs/<run_id>.html``), the night index and the Great Expectations
Data Docs.  An external view puts "Regression reports" in the UI's navigation.  Paths and
the run-id grammar come from ``pipelines.config``; the list page is the project's template
``pipelines/templates/nights.html.j2`` with the reports' style sheet.

Set ``REGRESSLAB_ROOT`` (and ``PYTHONPATH``) on the API server to the checkout the DAGs
write to.  Like every FastAPI plugin, these endpoints are not behind Airflow's login:
deploy the API server where the reports may be read, or add authentication.
"""
from __future__ import annotations

import json
from pathlib import Path

from airflow.plugins_manager import AirflowPlugin
from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse, HTMLResponse

from pipelines import config

app = FastAPI(title="regresslab reports", docs_url=None, redoc_url=None, openapi_url=None)


def _nights() -> list[dict]:
    out = []
    nights = Path(config.NIGHTS)
    for path in sorted(nights.glob("*.json"), reverse=True) if nights.exists() else []:
        try:
            out.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return out


def _row(run: dict) -> dict:
    rid = str(run.get("run_id", ""))
    return {"run_id": rid, "linkable": bool(config.RUN_ID_RE.match(rid)), "system": str(run.get("system", "")),
            "verdict": str(run.get("verdict", "")), "score": float(run.get("score") or 0),
            "cause": str(run.get("cause")), "cause_known": bool(run.get("cause_known"))}


@app.get("/", response_class=HTMLResponse)
def list_nights() -> str:
    """Every night, newest first, with its runs."""
    from pipelines.report import page_environment, style_sheet

    nights = []
    for night in _nights():
        runs = sorted(night.get("runs", {}).values(), key=lambda r: (r.get("verdict") != "fail", -(r.get("score") or 0)))
        nights.append({"night": str(night.get("night", "")), "runs": [_row(r) for r in runs],
                       "failed": sum(r.get("verdict") == "fail" for r in runs)})
    return page_environment().get_template("nights.html.j2").render(nights=nights, style=style_sheet())


@app.get("/index.html")
def night_index() -> FileResponse:
    path = Path(config.NIGHT_INDEX)
    if not path.is_file():
        raise HTTPException(404, "no night analysed yet")
    return FileResponse(path, media_type="text/html")


@app.get("/runs/{name}")
def run_file(name: str) -> FileResponse:
    """A run's page or verdict JSON; the name is checked against the run-id grammar (no traversal)."""
    stem, dot, ext = name.rpartition(".")
    if not dot or ext not in ("html", "json") or not config.RUN_ID_RE.match(stem):
        raise HTTPException(404, "no such report")
    path = config.run_report_path(stem, ext)
    if not path.is_file():
        raise HTTPException(404, "no such report")
    return FileResponse(path, media_type="text/html" if ext == "html" else "application/json")


@app.get("/validation/{rest:path}")
def data_docs(rest: str) -> FileResponse:
    """Great Expectations Data Docs, confined to ``reports/validation``."""
    base = Path(config.VALIDATION_DOCS).resolve()
    path = (base / (rest or "index.html")).resolve()
    if base not in path.parents and path != base or not path.is_file():
        raise HTTPException(404, "no such page")
    return FileResponse(path)


class RegresslabReportsPlugin(AirflowPlugin):
    name = "regresslab_reports"
    fastapi_apps = [{"app": app, "url_prefix": "/regresslab", "name": "regresslab reports"}]
    external_views = [{"name": "Regression reports", "href": "regresslab/", "destination": "nav",
                       "category": "browse", "url_route": "regresslab"}]
