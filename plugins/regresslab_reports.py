"""Airflow 3 plugin: the nightly reports inside the Airflow UI.

A FastAPI app mounted by the Airflow API server at ``/regresslab`` lists the nights
(``reports/nights/*.json``) and their runs with verdict, score and cause, and serves each
run's page (``reports/runs/<run_id>.html``), the night index, the counter histories
(``reports/systems``), the compare pages (``reports/compare``) and the Great Expectations
Data Docs.  An external view puts "Regression reports" in the UI's navigation.  Paths and
the run-id grammar come from ``pipelines.config``; the list page is the project's template
``pipelines/reporting/templates/nights.html.j2`` with the reports' style sheet.

Set ``REGRESSLAB_ROOT`` (and ``PYTHONPATH``) on the API server to the checkout the DAGs
write to.

**Every route is behind Airflow's own login.**  A plugin's app is mounted beside Airflow's core
API, outside its router-level authentication, so each request here is checked as the core API
checks its own (:func:`reader`): the caller's token (the Airflow UI's cookie, or
``Authorization: Bearer`` from ``POST /auth/token``) becomes a user through Airflow's configured
auth manager, which must then allow that user to read the runs of the nightly DAG
(``is_authorized_dag``, GET, the DAG's runs) — the same users, roles and single sign-on as the
Airflow UI, with no secret or user list of regresslab's own.  Anonymous: 401, or for a browser a
redirect to the auth manager's login page; a user the auth manager denies: 403.
"""
from __future__ import annotations

import json
from pathlib import Path

from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from pipelines import config

NIGHTLY_DAG = "nightly_regression_analysis"     # reading its runs is reading the reports it writes
bearer = HTTPBearer(auto_error=False)


async def reader(request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
    """The caller as Airflow's core API authenticates it (``get_user``: the bearer token, else the
    UI's cookie), allowed by the configured auth manager to read the nightly DAG's runs; 401
    (a browser: a redirect to the login page) or 403 otherwise."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
    from airflow.api_fastapi.core_api.security import get_user
    from airflow.configuration import conf

    try:
        user = await get_user(request, None, credentials)
    except HTTPException as exc:
        if exc.status_code == 401 and "text/html" in request.headers.get("accept", ""):
            login = get_auth_manager().get_url_login(next_url=str(request.url))
            raise HTTPException(303, "log in to Airflow first", headers={"Location": login}) from None
        raise
    team = None
    if conf.getboolean("core", "multi_team", fallback=False):      # the DAG's team, as the core API asks
        from airflow.models.dag import DagModel
        team = DagModel.get_team_name(NIGHTLY_DAG)
    allowed = get_auth_manager().is_authorized_dag(method="GET", access_entity=DagAccessEntity.RUN,
                                                   details=DagDetails(id=NIGHTLY_DAG, team_name=team), user=user)
    if not allowed:
        raise HTTPException(403, "Forbidden: Airflow's auth manager does not let this user read the nightly runs")


app = FastAPI(title="regresslab reports", docs_url=None, redoc_url=None, openapi_url=None,
              dependencies=[Depends(reader)])
NIGHTS_PER_PAGE = 30            # the list page shows this many nights; older ones on the next pages
MAX_PATH = 512                  # a longer request path is no report
# every page, the Data Docs included: nothing runs, nothing is fetched (the Data Docs load their
# scripts and styles from CDNs; without them their tables stay readable, and a value from an
# archive can never run in the Airflow UI's origin)
OWN_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; frame-ancestors 'self'"


@app.middleware("http")
async def security_headers(request: Request, call_next):
    """No MIME sniffing, no referrer, framing only by the Airflow UI itself; a strict content
    policy on every page."""
    response = await call_next(request)
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["X-Frame-Options"] = "SAMEORIGIN"
    response.headers["Content-Security-Policy"] = OWN_CSP
    return response


def _nights() -> list[tuple[str, dict | None]]:
    """(file stem, parsed night or None when the file is unreadable), newest first."""
    out = []
    nights = Path(config.NIGHTS)
    for path in sorted(nights.glob("*.json"), reverse=True) if nights.exists() else []:
        if path.is_symlink() or not path.is_file():
            continue
        try:
            out.append((path.stem, json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError):
            out.append((path.stem, None))
    return out


def _row(run: dict) -> dict:
    rid = str(run.get("run_id", ""))
    return {"run_id": rid, "linkable": config.is_identifier(rid), "system": str(run.get("system", "")),
            "verdict": str(run.get("verdict", "")), "score": float(run.get("score") or 0),
            "cause": str(run.get("cause")), "cause_known": bool(run.get("cause_known"))}


def _night(stem: str, night: dict | None) -> dict:
    """One night of the list; a night file that is not what ``report`` writes is shown as unreadable
    instead of taking the page down."""
    try:
        if not isinstance(night, dict) or not isinstance(night.get("runs"), dict):
            raise ValueError("not a night file")
        runs = sorted(night["runs"].values(), key=lambda r: (r.get("verdict") != "fail", -float(r.get("score") or 0)))
        return {"night": str(night.get("night", stem)), "runs": [_row(r) for r in runs],
                "failed": sum(r.get("verdict") == "fail" for r in runs), "unreadable": False}
    except (AttributeError, TypeError, ValueError):
        return {"night": stem, "runs": [], "failed": 0, "unreadable": True}


@app.get("/", response_class=HTMLResponse)
def list_nights(page: int = 1) -> str:
    """The nights, newest first, with their runs; ``NIGHTS_PER_PAGE`` per page."""
    from pipelines.reporting.pages import page_environment, style_sheet

    every = _nights()
    pages = max(1, -(-len(every) // NIGHTS_PER_PAGE))
    page = min(max(1, page), pages)
    shown = every[(page - 1) * NIGHTS_PER_PAGE: page * NIGHTS_PER_PAGE]
    return page_environment().get_template("nights.html.j2").render(
        nights=[_night(stem, night) for stem, night in shown], page=page, pages=pages, style=style_sheet())


def _served(path: Path, base: Path) -> Path:
    """``path`` when it is a regular file inside ``base`` reached without a symbolic link; else 404."""
    try:
        base = base.resolve()
        resolved = path.resolve()
        if path.is_symlink() or not resolved.is_file() or (base not in resolved.parents):
            raise HTTPException(404, "no such page")
    except (OSError, ValueError) as exc:              # NUL bytes, names too long for the file system
        raise HTTPException(404, "no such page") from exc
    return resolved


@app.get("/index.html")
def night_index() -> FileResponse:
    path = Path(config.NIGHT_INDEX)
    if not path.is_file() or path.is_symlink():
        raise HTTPException(404, "no night analysed yet")
    return FileResponse(path, media_type="text/html")


@app.get("/runs/{name}")
def run_file(name: str) -> FileResponse:
    """A run's page or verdict JSON; the name is checked against the run-id grammar (no traversal)."""
    stem, dot, ext = name.rpartition(".")
    if not dot or ext not in ("html", "json") or not config.is_identifier(stem):
        raise HTTPException(404, "no such report")
    path = _served(config.run_report_path(stem, ext), Path(config.RUN_REPORTS))
    return FileResponse(path, media_type="text/html" if ext == "html" else "application/json")


@app.get("/systems/{rest:path}")
def system_pages(rest: str) -> FileResponse:
    """A system's counter index, a counter's history page or ``counters.json``, confined to
    ``reports/systems`` (the run medians' Parquet file is not served)."""
    if len(rest) > MAX_PATH or "\x00" in rest or not rest.endswith((".html", ".json")):
        raise HTTPException(404, "no such page")
    base = Path(config.SYSTEM_REPORTS)
    path = _served(base / rest, base)
    return FileResponse(path, media_type="text/html" if rest.endswith(".html") else "application/json")


@app.get("/compare/{name}")
def compare_page(name: str) -> FileResponse:
    """Two runs side by side (``<run_a>--<run_b>.html``, each id checked against the run-id grammar)."""
    stem, dot, ext = name.rpartition(".")
    run_a, sep, run_b = stem.partition("--")
    if ext != "html" or not sep or not config.is_identifier(run_a) or not config.is_identifier(run_b):
        raise HTTPException(404, "no such page")
    base = Path(config.COMPARE_REPORTS)
    return FileResponse(_served(base / name, base), media_type="text/html")


@app.get("/validation/{rest:path}")
def data_docs(rest: str) -> FileResponse:
    """Great Expectations Data Docs, confined to ``reports/validation``."""
    if len(rest) > MAX_PATH or "\x00" in rest:
        raise HTTPException(404, "no such page")
    base = Path(config.VALIDATION_DOCS)
    return FileResponse(_served(base / (rest or "index.html"), base))


class RegresslabReportsPlugin(AirflowPlugin):
    name = "regresslab_reports"
    fastapi_apps = [{"app": app, "url_prefix": "/regresslab", "name": "regresslab reports"}]
    external_views = [{"name": "Regression reports", "href": "regresslab/", "destination": "nav",
                       "category": "browse", "url_route": "regresslab"}]
