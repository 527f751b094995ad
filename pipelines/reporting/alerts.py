"""alerts: tell people what the night found, or that it did not finish, whichever way it ran.

One notifier for every way of running the night: the ``report`` stage (so ``dvc repro`` alerts
too), the nightly DAG's ``alert`` task and its failure callback, and ``regresslab run`` when a
stage fails.  Off by default (``params.yaml: alerts.enabled``).  Two channels, each used when
configured:

- **e-mail** to ``alerts.to``, through ``alerts.smtp_host`` (plain SMTP, optionally STARTTLS and a
  login whose password is read from the environment variable ``alerts.smtp_password_env``), or,
  when no host is set and the night runs under Airflow, through Airflow's own ``SmtpNotifier``
  and its connection ``alerts.smtp_conn_id``, as every Airflow e-mail;
- **a webhook** in Slack's incoming-webhook format (``{"text": ...}``, also read by Mattermost,
  Rocket.Chat and Teams' Slack-compatible connectors), to the URL in the environment variable
  ``alerts.webhook_url_env`` (a webhook URL is a secret: it never sits in ``params.yaml``).

Three messages: a night with failed runs (the banner line, the failed runs with the most
suspicious on top, each with its top change and probable cause), a night that **failed** (the
stage and the reason) and a night that was **skipped** (another night held the data folder).
Every message links the night index (``alerts.index_url``, else its path).  A channel that fails
is logged and named in the returned text; an alert never fails the night.  Everything from an
archive is escaped: HTML for e-mail (with braces neutralised, because Airflow renders a
notifier's subject and body as Jinja templates), Slack's ``&``, ``<``, ``>`` for the webhook.
"""
from __future__ import annotations

import html
import json
import logging
import os
import smtplib
import socket
import urllib.request
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Any, Mapping

from pipelines import config
from pipelines.safe_text import mask_urls
from pipelines.storage import atomic
from pipelines.storage.stage_files import IndexRow, NightSummary

log = logging.getLogger("regresslab.alerts")

# --------------------------------------------------------------------------- pure core


@dataclass
class Message:
    """One alert: its subject, an HTML body (e-mail) and a plain-text body in Slack's markup (webhook)."""
    subject: str
    html: str
    text: str


def _safe(text: Any) -> str:
    """Archive-derived text for an HTML body that Airflow will render with Jinja."""
    return html.escape(str(text)).replace("{", "&#123;").replace("}", "&#125;").replace("%", "&#37;")


def _slack(text: Any) -> str:
    """Text for Slack's markup: its three control characters escaped (api.slack.com, formatting)."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _subject(text: str) -> str:
    return text.replace("{", "(").replace("}", ")").replace("\n", " ")


def _link(index_url: str | None) -> tuple[str, str]:
    if index_url:
        return f'<p><a href="{_safe(index_url)}">Night index</a></p>', f"<{_slack(index_url)}|Night index>"
    return "<p>Night index: reports/index.html</p>", "Night index: reports/index.html"


def night_message(night: str, rows: dict[str, IndexRow], *, quarantined: int, index_url: str | None,
                  top: int) -> Message:
    """A night with failed runs: the banner line, then the failed runs by score."""
    failed = sorted((r for r in rows.values() if r.get("verdict") == "fail"), key=lambda r: -float(r.get("score") or 0))
    banner = f"regresslab night {night}: {len(failed)} of {len(rows)} runs regressed"
    subject = banner + (f", {quarantined} archive(s) quarantined" if quarantined else "")
    items, lines = [], []
    for r in failed[:top]:
        if r.get("cause_known"):
            cause = f"probable cause {r.get('cause')} ({100 * float(r.get('probability') or 0):.0f} %)"
        else:
            cause = "cause unknown" + (f" (nearest {r.get('cause')})" if r.get("cause") else "")
        change = r.get("top_change") or ", ".join(r.get("top") or []) or "no single counter stands out"
        flag = " — new lab, verdict uncertain" if r.get("insufficient_baseline") else ""
        items.append(f"<li><b>{_safe(r['run_id'])}</b> ({_safe(r.get('system'))}): {_safe(change)}; "
                     f"{_safe(cause)}{_safe(flag)}</li>")
        lines.append(f"• *{_slack(r['run_id'])}* ({_slack(r.get('system'))}): {_slack(change)}; {_slack(cause)}"
                     f"{_slack(flag)}")
    more = len(failed) - top
    html_link, text_link = _link(index_url)
    body = (f"<p><b>{_safe(banner)}</b>. Do not ship before the failed runs are triaged.</p>"
            f"<ol>{''.join(items)}</ol>" + (f"<p>… and {more} more failed run(s).</p>" if more > 0 else "") + html_link)
    text = "\n".join([f"*{_slack(subject)}*. Do not ship before the failed runs are triaged.", *lines]
                     + ([f"… and {more} more failed run(s)."] if more > 0 else []) + [text_link])
    return Message(_subject(subject), body, text)


def stopped_message(stage: str, reason: str, *, skipped: bool, where: str, index_url: str | None,
                    limit: int = 600) -> Message:
    """A night that failed (a stage raised) or was skipped (another night held the data): the stage,
    the reason (shortened to ``limit`` characters) and what to do."""
    reason = reason.strip()[-limit:] or "no reason given"
    if skipped:
        subject = f"regresslab night skipped at {stage}: another night held the data folder"
        advice = "Nothing was analysed; the next night takes these runs. Check that nights do not overlap."
    else:
        subject = f"regresslab night FAILED at {stage}"
        advice = "No verdict was written for this night: the last reports are the previous night's."
    html_link, text_link = _link(index_url)
    body = (f"<p><b>{_safe(subject)}</b> ({_safe(where)}).</p><p>Reason:</p><pre>{_safe(reason)}</pre>"
            f"<p>{_safe(advice)}</p>{html_link}")
    text = f"*{_slack(subject)}* ({_slack(where)})\n```{_slack(reason)}```\n{_slack(advice)}\n{text_link}"
    return Message(_subject(subject), body, text)


def is_skip(reason: str) -> bool:
    """Whether a stage stopped because another night held the data folder (``locks.LockTimeout``)."""
    return "LockTimeout" in reason or "stayed locked" in reason


# --------------------------------------------------------------------------- channels (I/O)


@dataclass(frozen=True)
class AlertParams:
    """The ``alerts`` block, typed (``params.yaml``: each key's meaning beside it).  :meth:`of` fills
    a key a caller leaves out with its default, as the schema does for ``params.yaml``."""

    enabled: bool = False
    to: tuple[str, ...] = ()
    smtp_host: str | None = None
    smtp_port: int = 25
    smtp_starttls: bool = False
    smtp_user: str | None = None
    smtp_password_env: str = ""
    smtp_conn_id: str = "smtp_default"
    from_email: str | None = None
    webhook_url_env: str = ""
    index_url: str | None = None
    top_runs: int = 5

    @classmethod
    def of(cls, block: Mapping[str, Any]) -> "AlertParams":
        def text(key: str) -> str | None:
            return str(block[key]) if block.get(key) else None
        return cls(enabled=bool(block.get("enabled")), to=tuple(str(t) for t in block.get("to") or ()),
                   smtp_host=text("smtp_host"), smtp_port=int(block.get("smtp_port") or 25),
                   smtp_starttls=bool(block.get("smtp_starttls")), smtp_user=text("smtp_user"),
                   smtp_password_env=text("smtp_password_env") or "",
                   smtp_conn_id=text("smtp_conn_id") or "smtp_default",
                   from_email=text("from_email"), webhook_url_env=text("webhook_url_env") or "",
                   index_url=text("index_url"), top_runs=int(block.get("top_runs", 5)))

    @classmethod
    def load(cls, params: Mapping[str, Any] | None = None) -> "AlertParams":
        """``params`` (an alerts block) typed, or the project's block when None."""
        return cls.of(config.load_params("alerts") if params is None else params)


def send_email(message: Message, params: AlertParams, context: dict | None = None) -> str:
    """The message to ``alerts.to``; what was done."""
    to = list(params.to)
    if not to:
        return "e-mail: no recipient (alerts.to)"
    if not params.smtp_host:
        try:
            from airflow.providers.smtp.notifications.smtp import SmtpNotifier
        except ImportError:
            return "e-mail: no SMTP server (alerts.smtp_host) and no Airflow connection to fall back on"
        SmtpNotifier(smtp_conn_id=params.smtp_conn_id, to=to, from_email=params.from_email, subject=message.subject,
                     html_content=message.html).notify(context or {})
        return f"e-mail sent to {', '.join(to)} through the Airflow connection {params.smtp_conn_id}"
    mail = EmailMessage()
    mail["Subject"] = message.subject
    mail["From"] = params.from_email or f"regresslab@{socket.getfqdn()}"
    mail["To"] = ", ".join(to)
    mail.set_content(message.text)
    mail.add_alternative(message.html, subtype="html")
    with smtplib.SMTP(params.smtp_host, params.smtp_port, timeout=30) as smtp:
        if params.smtp_starttls:
            smtp.starttls()
        if params.smtp_user:
            smtp.login(params.smtp_user, os.environ.get(params.smtp_password_env, ""))
        smtp.send_message(mail)
    return f"e-mail sent to {', '.join(to)} through {params.smtp_host}"


def send_webhook(message: Message, params: AlertParams) -> str:
    """The message to the webhook whose URL is in the environment variable ``alerts.webhook_url_env``."""
    name = params.webhook_url_env
    url = os.environ.get(name, "") if name else ""
    if not url:
        return f"webhook: none (the environment variable {name or '(alerts.webhook_url_env)'} is not set)"
    if not url.startswith(("https://", "http://")):
        return f"webhook: {name} is not an http(s) URL; not sent"
    request = urllib.request.Request(url, data=json.dumps({"text": message.text}).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:       # noqa: S310 -- http(s) checked above
        status = response.status
    return f"webhook: posted ({status})"


def deliver(message: Message, params: AlertParams, context: dict | None = None) -> str:
    """Send ``message`` on every configured channel; one line per channel.  A failing channel is
    logged and reported, never raised: an alert must not fail the night it reports.  Every field
    is masked first (a location's credentials, quoted by a reason, never leave in a mail)."""
    message = Message(mask_urls(message.subject), mask_urls(message.html), mask_urls(message.text))
    said = []
    for name, send in (("e-mail", lambda: send_email(message, params, context)),
                       ("webhook", lambda: send_webhook(message, params))):
        try:
            said.append(send())
        except Exception as exc:        # noqa: BLE001 -- a broken channel is reported, the night goes on
            log.warning("alert by %s failed: %s: %s", name, type(exc).__name__, mask_urls(str(exc)))
            said.append(f"{name}: FAILED ({type(exc).__name__}: {mask_urls(str(exc))})")
    return "; ".join(said)


# --------------------------------------------------------------------------- the three alerts


def notify_night(summary: NightSummary, params: Mapping[str, Any] | None = None, context: dict | None = None) -> str:
    """The night's alert when it has failed runs and alerts are on; what was done, as text.

    ``summary`` is what ``stages.report.write_index`` returned (the nightly DAG's ``night_index``);
    ``params`` an alerts block (None: the project's)."""
    alerts = AlertParams.load(params)
    if not alerts.enabled:
        return "alerts are off (params.yaml: alerts.enabled)"
    if not summary.get("failed"):
        return "no failed run: no alert"
    night_file = config.NIGHTS / f"{summary['night']}.json"
    rows: dict[str, IndexRow] = atomic.read_json(night_file)["runs"] if night_file.exists() else {
        r: {"run_id": r, "verdict": "fail"} for r in summary["failed"]}
    message = night_message(summary["night"], rows, quarantined=len(summary.get("quarantined") or []),
                            index_url=alerts.index_url, top=alerts.top_runs)
    return f"{message.subject}: " + deliver(message, alerts, context)


def notify_stopped(stage: str, reason: str, *, where: str, params: Mapping[str, Any] | None = None,
                   context: dict | None = None) -> str:
    """The alert of a night that did not finish: failed at ``stage`` for ``reason``, or skipped
    (:func:`is_skip`); ``where`` names the run (the DAG run, or ``dvc repro``)."""
    try:
        alerts = AlertParams.load(params)
    except Exception as exc:            # noqa: BLE001 -- a broken params.yaml is what failed: say so in the log
        return f"alerts: params.yaml unreadable ({exc}); no alert"
    if not alerts.enabled:
        return "alerts are off (params.yaml: alerts.enabled)"
    message = stopped_message(stage, reason, skipped=is_skip(reason), where=where, index_url=alerts.index_url)
    return f"{message.subject}: " + deliver(message, alerts, context)
