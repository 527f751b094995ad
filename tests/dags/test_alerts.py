"""The night's alert through Airflow's SMTP notifier, received by a real SMTP server (aiosmtpd)
started by the test; the Airflow connection comes from the environment, as in production."""
from __future__ import annotations

import email
import json
import socket
import sys
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller

from pipelines import config
from pipelines.reporting import alerts
from pipelines.storage import atomic

EVIL = "{{ 7*7 }}<b>x</b>"


class Inbox:
    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.content))
        return "250 Message accepted for delivery"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def plain_server():
    """A real SMTP server (aiosmtpd) on a free port: (its inbox, the port)."""
    port, inbox = free_port(), Inbox()
    server = Controller(inbox, hostname="127.0.0.1", port=port)
    server.start()
    yield inbox, port
    server.stop()


@pytest.fixture()
def smtp(plain_server, monkeypatch):
    """The same server as Airflow's connection ``smtp_default``, from the environment."""
    inbox, port = plain_server
    monkeypatch.setenv("AIRFLOW_CONN_SMTP_DEFAULT", json.dumps({
        "conn_type": "smtp", "host": "127.0.0.1", "port": port, "login": "", "password": "",
        "extra": {"disable_ssl": True, "disable_tls": True, "from_email": "regresslab@lab.example", "timeout": 10,
                  "retry_limit": 1}}))
    return inbox


def rows():
    return {
        "shop-t1": {"run_id": "shop-t1", "system": "shop", "verdict": "fail", "score": 0.9, "cause": "extra_db_query",
                    "probability": 0.78, "cause_known": True,
                    "top_change": "app.response_time_ms 24 ms → 32 ms (+33 %, worse)"},
        "shop-t2": {"run_id": "shop-t2", "system": "shop", "verdict": "fail", "score": 0.5, "cause": EVIL,
                    "probability": 0.2, "cause_known": False, "top_change": None, "top": ["db.cpu_pct"],
                    "insufficient_baseline": True},
        "shop-t3": {"run_id": "shop-t3", "system": "shop", "verdict": "pass", "score": 0.1},
    }


def test_a_failed_night_sends_one_mail_with_the_banner_top_runs_and_link(tree, smtp):
    config.NIGHTS.mkdir(parents=True)
    atomic.write_json_atomic(config.NIGHTS / "2026-11-22.json", {"night": "2026-11-22", "runs": rows()})
    params = {"enabled": True, "to": ["release@lab.example"], "smtp_conn_id": "smtp_default",
              "index_url": "https://airflow.lab.example/regresslab/index.html", "top_runs": 5}
    summary = {"night": "2026-11-22", "runs": 3, "failed": ["shop-t1", "shop-t2"], "quarantined": ["bad"]}
    said = alerts.notify_night(summary, params)
    assert "e-mail sent to release@lab.example through the Airflow connection smtp_default" in said
    assert len(smtp.messages) == 1
    sender, rcpts, content = smtp.messages[0]
    assert sender == "regresslab@lab.example" and rcpts == ["release@lab.example"]
    msg = email.message_from_bytes(content)
    assert msg["Subject"] == "regresslab night 2026-11-22: 2 of 3 runs regressed, 1 archive(s) quarantined"
    body = next(p for p in msg.walk() if p.get_content_type() == "text/html").get_payload(decode=True).decode()
    assert body.index("shop-t1") < body.index("shop-t2")                    # most suspicious first
    assert "app.response_time_ms 24 ms → 32 ms (+33 %, worse)" in body.replace("&#37;", "%")
    assert "probable cause extra_db_query (78 &#37;)" in body
    assert "cause unknown (nearest" in body and "new lab, verdict uncertain" in body
    assert 'href="https://airflow.lab.example/regresslab/index.html"' in body
    assert "49" not in body and "<b>x</b>" not in body                       # not rendered, escaped


def test_no_mail_when_off_or_nothing_failed(tree, smtp):
    summary = {"night": "2026-11-22", "runs": 3, "failed": ["shop-t1"], "quarantined": []}
    assert "off" in alerts.notify_night(summary, {"enabled": False, "to": ["a@b"]})
    assert "no failed run" in alerts.notify_night(dict(summary, failed=[]), {"enabled": True, "to": ["a@b"]})
    assert "no recipient" in alerts.notify_night(summary, {"enabled": True, "to": []})
    assert smtp.messages == []
    assert config.load_params("alerts")["enabled"] is False                   # off by default


# --------------------------------------------------------------------------- one notifier, every channel


class Hook:
    """A real local HTTP server that receives webhook posts (Slack's incoming-webhook format)."""

    def __init__(self, status: int = 200):
        from tests.helpers import QuietHandler, serve

        self.posts, hook = [], self

        class Handler(QuietHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.posts.append((self.path, self.headers["Content-Type"], json.loads(body)))
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"ok")

        self.server, base = serve(Handler)
        self.url = f"{base}/services/T000/B000/XXX"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def hook(monkeypatch):
    server = Hook()
    monkeypatch.setenv("REGRESSLAB_ALERT_WEBHOOK", server.url)
    yield server
    server.close()


def enable_alerts(path: Path) -> None:
    import yaml

    params = yaml.safe_load(path.read_text())
    params["alerts"]["enabled"] = True
    path.write_text(yaml.safe_dump(params, sort_keys=False))


def plain_smtp(port: int, **kw) -> dict:
    """alerts params for SMTP without Airflow (the report stage under dvc repro)."""
    return {"enabled": True, "to": ["release@lab.example"], "smtp_host": "127.0.0.1", "smtp_port": port,
            "smtp_starttls": False, "smtp_user": None, "from_email": "night@lab.example",
            "webhook_url_env": "REGRESSLAB_ALERT_WEBHOOK", "index_url": "https://lab.example/reports/index.html",
            "top_runs": 5, **kw}


def test_a_failed_night_by_plain_smtp_and_webhook_alike(tree, plain_server, hook):
    inbox, port = plain_server
    config.NIGHTS.mkdir(parents=True)
    atomic.write_json_atomic(config.NIGHTS / "2026-11-22.json", {"night": "2026-11-22", "runs": rows()})
    summary = {"night": "2026-11-22", "runs": 3, "failed": ["shop-t1", "shop-t2"], "quarantined": []}
    said = alerts.notify_night(summary, plain_smtp(port))
    assert "e-mail sent to release@lab.example through 127.0.0.1" in said and "webhook: posted (200)" in said
    sender, rcpts, content = inbox.messages[0]
    msg = email.message_from_bytes(content)
    assert sender == "night@lab.example" and msg["Subject"] == "regresslab night 2026-11-22: 2 of 3 runs regressed"
    kinds = {p.get_content_type() for p in msg.walk()}
    assert {"text/plain", "text/html"} <= kinds                               # both bodies, for every reader
    path, ctype, payload = hook.posts[0]
    assert path == "/services/T000/B000/XXX" and ctype == "application/json"
    text = payload["text"]
    assert text.index("shop-t1") < text.index("shop-t2")
    assert "<https://lab.example/reports/index.html|Night index>" in text
    assert "&lt;b&gt;x&lt;/b&gt;" in text and "<b>" not in text                # Slack's escaping of archive text


def test_a_failed_or_skipped_night_names_the_stage_and_the_reason(tree, hook):
    params = plain_smtp(1, to=[])                                            # webhook only
    said = alerts.notify_stopped("detect", "ValueError: frame <x> is torn", where="dvc repro", params=params)
    assert said.startswith("regresslab night FAILED at detect") and "no recipient" in said
    text = hook.posts[-1][2]["text"]
    assert "*regresslab night FAILED at detect* (dvc repro)" in text and "frame &lt;x&gt; is torn" in text
    said = alerts.notify_stopped("validate", "LockTimeout: the data folder stayed locked for 600 s", where="DAG run x",
                                 params=params)
    assert "skipped at validate" in said and "another night held the data folder" in hook.posts[-1][2]["text"]
    assert "off" in alerts.notify_stopped("detect", "boom", where="x", params=dict(params, enabled=False))
    assert len(hook.posts) == 2


def test_a_broken_channel_is_reported_and_never_fails_the_night(tree, monkeypatch):
    broken = Hook(status=500)
    monkeypatch.setenv("REGRESSLAB_ALERT_WEBHOOK", broken.url)
    closed = free_port()                                                     # a port nobody listens on
    try:
        said = alerts.notify_stopped("detect", "boom", where="dvc repro", params=plain_smtp(closed))
    finally:
        broken.close()
    assert "e-mail: FAILED (ConnectionRefusedError" in said and "webhook: FAILED (HTTPError" in said
    monkeypatch.setenv("REGRESSLAB_ALERT_WEBHOOK", "file:///etc/passwd")
    assert "not an http(s) URL" in alerts.notify_stopped("detect", "boom", where="x", params=plain_smtp(1, to=[]))


def test_the_dag_failure_callback_alerts_with_the_task_and_its_exception(tree, hook, monkeypatch):
    """Airflow calls ``on_failure_callback`` with the task's context (a mapping holding the task
    instance, the run id and the exception): here a plain dict with an object standing for the
    task instance, the two attributes the callback reads."""
    from types import SimpleNamespace

    from pipelines.orchestration import tasks

    enable_alerts(config.PARAMS)
    tasks.notify_failure({"task_instance": SimpleNamespace(task_id="analyse_run.detect", map_index=2),
                          "run_id": "scheduled__2026-11-25", "exception": KeyError("shop-t9")})
    text = hook.posts[-1][2]["text"]
    assert "FAILED at analyse_run.detect (mapped run #2)" in text and "DAG run scheduled__2026-11-25" in text
    assert "KeyError: &#x27;shop-t9&#x27;" in text or "KeyError: 'shop-t9'" in text


def regresslab_run_in(root: Path) -> int:
    """``regresslab run`` (a real ``dvc repro``) in ``root``, made a DVC repository first; its exit code."""
    import subprocess

    from pipelines.cli import main as cli

    subprocess.run([str(Path(sys.executable).parent / "dvc"), "init", "--no-scm", "-q"], cwd=root, check=True)
    old = config.ROOT
    config.use_root(root)
    try:
        return cli.main(["run"])
    finally:
        config.use_root(old)


def test_regresslab_run_alerts_when_a_dvc_stage_fails(tmp_path, hook, monkeypatch):
    """A real ``dvc repro`` in a small project whose one stage fails: ``regresslab run`` passes
    its output through, returns its code and alerts with the stage and the stage's last words."""
    import shutil

    shutil.copy(Path(__file__).resolve().parents[2] / "params.yaml", tmp_path / "params.yaml")
    enable_alerts(tmp_path / "params.yaml")
    (tmp_path / "fail.py").write_text("raise SystemExit('disk full: 0 bytes left on /data')\n")
    (tmp_path / "dvc.yaml").write_text("stages:\n  validate:\n    cmd: python fail.py\n")
    assert regresslab_run_in(tmp_path) != 0
    text = hook.posts[-1][2]["text"]
    assert "FAILED at validate* (dvc repro)" in text and "disk full: 0 bytes left on /data" in text


def test_the_stage_and_reason_read_from_dvc_output():
    from pipelines.cli.main import failed_stage

    lines = ["Running stage 'detect':\n", "> python -m pipelines.stages.detect\n",
             "Traceback (most recent call last):\n", "ValueError: no baseline\n",
             "ERROR: failed to reproduce 'detect': failed to run: python -m pipelines.stages.detect, exited with 1\n"]
    stage, reason = failed_stage(lines)
    assert stage == "detect" and reason.splitlines()[-2] == "ValueError: no baseline"
    assert failed_stage(["ERROR: unexpected error - dvc.yaml missing\n"]) == (
        "dvc repro", "ERROR: unexpected error - dvc.yaml missing")


def test_a_night_whose_only_source_is_gone_fails_says_so_on_the_index_and_alerts(tmp_path, plain_server, monkeypatch):
    """``pull.source`` at a folder that does not exist: the real pull stage under a real ``dvc
    repro`` fails, ``regresslab run`` returns non-zero, the night index (which still shows an earlier
    night) opens with the failure and the source, and the failed-night mail reaches the SMTP server."""
    import yaml

    inbox, port = plain_server
    repo = Path(__file__).resolve().parents[2]
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["pull"]["source"] = str(tmp_path / "mount" / "gone")
    params["report"]["night"] = "2026-11-26"
    params["alerts"].update(plain_smtp(port, webhook_url_env="NO_SUCH_WEBHOOK_VARIABLE"))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (tmp_path / "dvc.yaml").write_text(f"stages:\n  pull:\n    cmd: {sys.executable} -m pipelines.stages.pull\n")
    (tmp_path / "reports").mkdir()
    earlier = "<!DOCTYPE html><html><head><title>regresslab — night 2026-11-25</title></head><body><main>\n" \
              "<h1>regresslab — night 2026-11-25</h1><p>3 of 9 runs regressed</p></main></body></html>"
    (tmp_path / "reports" / "index.html").write_text(earlier)
    monkeypatch.setenv("REGRESSLAB_ROOT", str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(repo))
    assert regresslab_run_in(tmp_path) != 0
    page = (tmp_path / "reports" / "index.html").read_text()
    first = page[page.index("<main>") + len("<main>"):].strip().splitlines()[0]
    assert "Night 2026-11-26 FAILED at pull" in first and str(tmp_path / "mount" / "gone") in first
    assert "no pull source could be listed" in first and "last night analysed" in first
    assert "night 2026-11-25" in page and "<title>regresslab — night 2026-11-26 FAILED</title>" in page
    assert len(inbox.messages) == 1
    mail = email.message_from_bytes(inbox.messages[0][2])
    assert "FAILED at pull" in mail["Subject"]
    body = "".join(part.get_payload(decode=True).decode() for part in mail.walk() if part.get_content_maintype() == "text")
    assert "gone" in body and "no pull source could be listed" in body
    assert not (tmp_path / "dvc.lock").exists()         # the real dvc ran, and recorded no success
