"""The Airflow 3 plugin that serves the reports: registered by Airflow, behind its login, lists nights,
refuses traversal."""
from __future__ import annotations

import importlib.util
import json
import secrets
import subprocess
import sys
import urllib.error
import urllib.request
from contextlib import ExitStack
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from pipelines import config
from pipelines.storage import atomic
from tests.dags.test_celery_scale_out import free_port, stop, wait_until
from tests.dags.test_nightly_dag import migrated_home

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
    (config.REPORTS / "systems" / "shop" / "counters").mkdir(parents=True)
    (config.REPORTS / "systems" / "shop" / "index.html").write_text("<html>system</html>")
    (config.REPORTS / "systems" / "shop" / "counters" / "app.cpu_pct.html").write_text("<html>counter</html>")
    (config.REPORTS / "systems" / "shop" / "counters.json").write_text("[]")
    (config.REPORTS / "systems" / "shop" / "medians.parquet").write_text("not served")
    (config.REPORTS / "compare").mkdir()
    (config.REPORTS / "compare" / "shop-r1--shop-t1.html").write_text("<html>compare</html>")
    atomic.write_json_atomic(config.REPORTS / "nights" / "2026-11-22.json", {"night": "2026-11-22", "runs": {
        "shop-t1": {"run_id": "shop-t1", "system": "shop", "verdict": "fail", "score": 0.8, "cause": "<b>x</b>",
                    "cause_known": False},
        "shop-t2": {"run_id": "shop-t2", "system": "shop", "verdict": "pass", "score": 0.1, "cause": "none",
                    "cause_known": True}}})
    # the routes' own behaviour, Airflow's login aside (test_every_route_is_behind_airflows_login)
    module.app.dependency_overrides[module.reader] = lambda: None
    return TestClient(module.app)


def test_lists_nights_and_runs_with_verdicts_and_links(client):
    page = client.get("/").text
    assert "2026-11-22: 1 of 2 runs regressed" in page
    assert 'href="runs/shop-t1.html"' in page and "unknown (nearest &lt;b&gt;x&lt;/b&gt;)" in page
    assert client.get("/runs/shop-t1.html").text == "<html>run page</html>"
    assert client.get("/runs/shop-t1.json").headers["content-type"].startswith("application/json")
    assert client.get("/index.html").text == "<html>index</html>"
    assert client.get("/validation/index.html").text == "<html>docs</html>"
    assert client.get("/systems/shop/index.html").text == "<html>system</html>"
    assert client.get("/systems/shop/counters/app.cpu_pct.html").text == "<html>counter</html>"
    assert client.get("/systems/shop/counters.json").headers["content-type"].startswith("application/json")
    assert client.get("/compare/shop-r1--shop-t1.html").text == "<html>compare</html>"


@pytest.mark.parametrize("path", ["/runs/..%2F..%2Fsecret.txt", "/runs/shop-t1.txt", "/runs/missing.html",
                                  "/validation/..%2F..%2Fsecret.txt", "/validation/../../secret.txt",
                                  "/systems/..%2F..%2Fsecret.txt", "/systems/shop/medians.parquet",
                                  "/systems/../../secret.txt", "/compare/..%2F..%2Fsecret.txt",
                                  "/compare/shop-r1.html", "/compare/..--shop-t1.html"])
def test_refuses_anything_outside_the_reports(client, path):
    response = client.get(path)
    assert response.status_code == 404 and "secret" not in response.text


def test_symlinks_nul_bytes_and_long_paths_are_404_not_500(client, tree):
    """A symlink under reports/runs is not served; %00 and very long paths
    give 404, never an unhandled 500."""
    (config.RUN_REPORTS / "shop-t9.html").symlink_to(tree / "secret.txt")
    for path in ["/runs/shop-t9.html", "/validation/%00", "/validation/a%00b.html", "/validation/" + "a" * 5000,
                 "/runs/" + "a" * 300 + ".html"]:
        response = client.get(path)
        assert response.status_code == 404 and "secret" not in response.text, path


def test_a_bad_night_file_does_not_take_the_list_down_and_nights_are_paged(client):
    nights = config.REPORTS / "nights"
    (nights / "2026-11-23.json").write_text('{"night": "2026-11-23", "runs": [1, 2]}')     # parses, wrong shape
    (nights / "2026-11-24.json").write_text('{"night": ')                                   # does not parse
    atomic.write_json_atomic(nights / "2026-11-25.json", {"night": "2026-11-25", "runs": {
        "shop-t3": {"run_id": "shop-t3", "verdict": "fail", "score": "high"}}})           # score not a number
    page = client.get("/")
    assert page.status_code == 200
    assert page.text.count("unreadable night file") == 3 and "2026-11-22: 1 of 2 runs regressed" in page.text
    for day in range(1, 31):                                                              # 34 nights in all
        atomic.write_json_atomic(nights / f"2026-10-{day:02d}.json", {"night": f"2026-10-{day:02d}", "runs": {}})
    first, second = client.get("/").text, client.get("/?page=2").text
    assert "Page 1 of 2" in first and 'href="?page=2"' in first and "2026-10-01" not in first
    assert "Page 2 of 2" in second and "2026-10-01" in second and "2026-11-25" not in second


def test_security_headers_on_every_page_the_data_docs_included(client):
    for path in ("/", "/runs/shop-t1.html", "/index.html", "/validation/index.html"):
        headers = client.get(path).headers
        assert headers["x-content-type-options"] == "nosniff" and headers["referrer-policy"] == "no-referrer"
        assert "default-src 'none'" in headers["content-security-policy"]
        assert "script-src" not in headers["content-security-policy"]          # no script of any origin


PAGES = ("/", "/runs/shop-t1.html", "/runs/shop-t1.json", "/index.html", "/systems/shop/counters/app.cpu_pct.html",
         "/compare/shop-r1--shop-t1.html", "/validation/index.html")


def _get(url: str, token: str | None = None, accept: str = "application/json") -> tuple[int, str, dict]:
    """(status, body, headers) of a GET that follows no redirect."""
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None
    headers = {"Accept": accept, **({"Authorization": f"Bearer {token}"} if token else {})}
    try:
        with urllib.request.build_opener(NoRedirect).open(urllib.request.Request(url, headers=headers),
                                                          timeout=30) as answer:
            return answer.status, answer.read().decode(), dict(answer.headers)
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(), dict(err.headers)


def _token(api: int, user: str, password: str) -> str:
    body = json.dumps({"username": user, "password": password}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{api}/auth/token", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())["access_token"]


def test_every_route_is_behind_airflows_login(client, tree, tmp_path, migrated_airflow_db):
    """A real ``airflow api-server`` with the plugin and the simple auth manager: Airflow registers
    the plugin from its plugins folder and mounts its app at ``/regresslab`` (the night list below
    is the app's own page), anonymous callers get nothing of the reports (401; a browser is sent to
    Airflow's login page), a viewer logged in through Airflow's own token endpoint reads every
    page, a user whose role the auth manager does not know is refused (403), and traversal is
    still refused behind the login."""
    env = migrated_home(tmp_path / "home", tree, migrated_airflow_db)
    api = free_port()
    env.update({"AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"), "AIRFLOW__API__PORT": str(api),
                "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(16),
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "reader:viewer,stranger:",
                "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '')}"})
    base = f"http://127.0.0.1:{api}/regresslab"
    with ExitStack() as stack:
        log = open(tmp_path / "api-server.log", "w")
        stack.callback(log.close)
        proc = subprocess.Popen([str(Path(sys.executable).parent / "airflow"), "api-server", "--port", str(api)],
                                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        stack.callback(stop, proc)
        passwords = tmp_path / "home" / "simple_auth_manager_passwords.json.generated"
        wait_until(passwords.exists, "the API server's generated passwords", 180, 0.5)

        def listening() -> bool:
            try:
                return _get(base + "/")[0] in (200, 401, 403)
            except OSError:
                return False
        wait_until(listening, "the API server", 180, 0.5)
        known = json.loads(passwords.read_text())
        for path in PAGES:
            status, body, _ = _get(base + path)
            assert status == 401 and "shop" not in body and "docs" not in body, (path, status, body)
        status, _, headers = _get(base + "/runs/shop-t1.html", accept="text/html,application/xhtml+xml")
        assert status == 303 and "login" in headers["location"] and "regresslab" in headers["location"]
        viewer = _token(api, "reader", known["reader"])
        assert _get(base + "/", viewer)[0] == 200 and "2026-11-22: 1 of 2 runs regressed" in _get(base + "/", viewer)[1]
        for path in PAGES[1:]:
            status, body, _ = _get(base + path, viewer)
            assert status == 200 and body, (path, status)
        assert _get(base + "/runs/shop-t1.html", viewer)[1] == "<html>run page</html>"
        assert _get(base + "/runs/shop-t1.html", "not-a-token")[0] in (401, 403)
        stranger = _token(api, "stranger", known["stranger"])
        for path in PAGES:
            status, body, _ = _get(base + path, stranger)
            assert status == 403 and "shop" not in body, (path, status)
        for path in ("/runs/..%2F..%2Fsecret.txt", "/validation/..%2F..%2Fsecret.txt", "/systems/shop/medians.parquet"):
            status, body, _ = _get(base + path, viewer)
            assert status == 404 and "secret" not in body, path
