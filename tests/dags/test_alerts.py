"""The night's alert through Airflow's SMTP notifier, received by a real SMTP server (aiosmtpd)
started by the test; the Airflow connection comes from the environment, as in production."""
from __future__ import annotations

import email
import json
import socket

import pytest
from aiosmtpd.controller import Controller

from pipelines import config
from pipelines.reporting import alerts
from pipelines.storage import archive

EVIL = "{{ 7*7 }}<b>x</b>"


class Inbox:
    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.content))
        return "250 Message accepted for delivery"


@pytest.fixture()
def smtp(monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    inbox = Inbox()
    server = Controller(inbox, hostname="127.0.0.1", port=port)
    server.start()
    monkeypatch.setenv("AIRFLOW_CONN_SMTP_DEFAULT", json.dumps({
        "conn_type": "smtp", "host": "127.0.0.1", "port": port, "login": "", "password": "",
        "extra": {"disable_ssl": True, "disable_tls": True, "from_email": "regresslab@lab.example", "timeout": 10,
                  "retry_limit": 1}}))
    yield inbox
    server.stop()


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
    archive.write_json_atomic(config.NIGHTS / "2026-11-22.json", {"night": "2026-11-22", "runs": rows()})
    params = {"enabled": True, "to": ["release@lab.example"], "smtp_conn_id": "smtp_default",
              "index_url": "https://airflow.lab.example/regresslab/index.html", "top_runs": 5}
    summary = {"night": "2026-11-22", "runs": 3, "failed": ["shop-t1", "shop-t2"], "quarantined": ["bad"]}
    said = alerts.notify_night(summary, params)
    assert said.startswith("alert sent to release@lab.example")
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
