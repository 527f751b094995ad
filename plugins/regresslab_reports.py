"""Airflow 3 plugin: the nightly reports inside the Airflow UI.

A FastAPI app mounted by the Airflow API server at ``/regresslab`` lists the nights
(``reports/nights/*.json``) and their runs with verdict, score and cause, and serves each
run's page (``reports/runs/<run_id>.html``), the night index and the Great Expectations
Data Docs.  An external view puts "Regression reports" in the UI's navigation.

Set ``REGRESSLAB_ROOT`` (and ``PYTHONPATH``) on the API server to the checkout the DAGs
write to.  Like every FastAPI plugin, these endpoints are not behind Airflow's login:
deploy the API server where the reports may be read, or add authentication.
"""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

from airflow.plugins_manager import AirflowPlugin
from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse, HTMLResponse

RUN_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")        # DATA_CONTRACT.md §1
NIGHT = re.compile(r"^[A-Za-z0-9._-]{1,64}$")

app = FastAPI(title="regresslab reports", docs_url=None, redoc_url=None, openapi_url=None)


def _reports() -> Path:
    from pipelines import config
    return Path(config.REPORTS)


def _nights() -> list[dict]:
    out = []
    for path in sorted((_reports() / "nights").glob("*.json"), reverse=True):
        try:
            out.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return out


def _row(run: dict) -> str:
    e = html.escape
    rid = str(run.get("run_id", ""))
    link = f'<a href="runs/{e(rid)}.html">{e(rid)}</a>' if RUN_ID.match(rid) else e(rid)
    cause = ""
    if run.get("verdict") == "fail":
        cause = e(str(run.get("cause"))) if run.get("cause_known") else f"unknown (nearest {e(str(run.get('cause')))})"
    return (f"<tr><td>{link}</td><td>{e(str(run.get('system', '')))}</td><td>{e(str(run.get('verdict', '')))}</td>"
            f"<td>{float(run.get('score') or 0):.2f}</td><td>{cause}</td></tr>")


@app.get("/", response_class=HTMLResponse)
def list_nights() -> str:
    """Every night, newest first, with its runs."""
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>regresslab reports</title></head><body>",
             "<h1>regresslab — nightly regression reports</h1>",
             "<p><a href='index.html'>latest night</a> · <a href='validation/index.html'>Data Docs</a></p>"]
    nights = _nights()
    if not nights:
        parts.append("<p>No night analysed yet.</p>")
    for night in nights:
        runs = sorted(night.get("runs", {}).values(), key=lambda r: (r.get("verdict") != "fail", -(r.get("score") or 0)))
        failed = sum(r.get("verdict") == "fail" for r in runs)
        parts.append(f"<h2>{html.escape(str(night.get('night', '')))}: {failed} of {len(runs)} runs regressed</h2>")
        parts.append("<table border='1'><tr><th>run</th><th>system</th><th>verdict</th><th>score</th><th>cause</th></tr>")
        parts.extend(_row(r) for r in runs)
        parts.append("</table>")
    parts.append("</body></html>")
    return "".join(parts)


@app.get("/index.html")
def night_index() -> FileResponse:
    path = _reports() / "index.html"
    if not path.is_file():
        raise HTTPException(404, "no night analysed yet")
    return FileResponse(path, media_type="text/html")


@app.get("/runs/{name}")
def run_file(name: str) -> FileResponse:
    """A run's page or verdict JSON; the name is checked against the run-id grammar (no traversal)."""
    stem, dot, ext = name.rpartition(".")
    if not dot or ext not in ("html", "json") or not RUN_ID.match(stem):
        raise HTTPException(404, "no such report")
    path = _reports() / "runs" / f"{stem}.{ext}"
    if not path.is_file():
        raise HTTPException(404, "no such report")
    return FileResponse(path, media_type="text/html" if ext == "html" else "application/json")


@app.get("/validation/{rest:path}")
def data_docs(rest: str) -> FileResponse:
    """Great Expectations Data Docs, confined to ``reports/validation``."""
    base = (_reports() / "validation").resolve()
    path = (base / (rest or "index.html")).resolve()
    if base not in path.parents and path != base or not path.is_file():
        raise HTTPException(404, "no such page")
    return FileResponse(path)


class RegresslabReportsPlugin(AirflowPlugin):
    name = "regresslab_reports"
    fastapi_apps = [{"app": app, "url_prefix": "/regresslab", "name": "regresslab reports"}]
    external_views = [{"name": "Regression reports", "href": "regresslab/", "destination": "nav",
                       "category": "browse", "url_route": "regresslab"}]
