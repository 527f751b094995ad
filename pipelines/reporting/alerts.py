"""alerts: tell people when a night has failed runs, through Airflow's own notifiers.

The nightly DAG's last task (``alert``) calls :func:`notify_night`. It is off by default;
``params.yaml: alerts`` turns it on and names the recipients, and the Airflow connection
``alerts.smtp_conn_id`` (``smtp_default``) says which SMTP server to use, as for every Airflow
e-mail. The message carries the night's banner line, the failed runs with the most
suspicious on top (each with its top change and probable cause) and the link to the night
index. Everything from an archive is HTML-escaped and its braces are neutralised, because
Airflow renders a notifier's subject and body as Jinja templates.
"""
from __future__ import annotations

import html
from typing import Any

from pipelines import config
from pipelines.storage import archive

# --------------------------------------------------------------------------- pure core


def _safe(text: Any) -> str:
    """Archive-derived text for an HTML body that Airflow will render with Jinja."""
    return html.escape(str(text)).replace("{", "&#123;").replace("}", "&#125;").replace("%", "&#37;")


def night_message(night: str, rows: dict[str, dict[str, Any]], *, quarantined: int, index_url: str | None,
                  top: int) -> tuple[str, str]:
    """(subject, HTML body) of a night's alert: the banner line, then the failed runs by score."""
    failed = sorted((r for r in rows.values() if r.get("verdict") == "fail"), key=lambda r: -float(r.get("score") or 0))
    banner = f"regresslab night {night}: {len(failed)} of {len(rows)} runs regressed"
    subject = banner + (f", {quarantined} archive(s) quarantined" if quarantined else "")
    items = []
    for r in failed[:top]:
        if r.get("cause_known"):
            cause = f"probable cause {r.get('cause')} ({100 * float(r.get('probability') or 0):.0f} %)"
        else:
            cause = "cause unknown" + (f" (nearest {r.get('cause')})" if r.get("cause") else "")
        change = r.get("top_change") or ", ".join(r.get("top") or []) or "no single counter stands out"
        flag = " — new lab, verdict uncertain" if r.get("insufficient_baseline") else ""
        items.append(f"<li><b>{_safe(r['run_id'])}</b> ({_safe(r.get('system'))}): {_safe(change)}; "
                     f"{_safe(cause)}{_safe(flag)}</li>")
    more = f"<p>… and {len(failed) - top} more failed run(s).</p>" if len(failed) > top else ""
    link = (f'<p><a href="{_safe(index_url)}">Night index</a></p>' if index_url else
            "<p>Night index: reports/index.html</p>")
    body = (f"<p><b>{_safe(banner)}</b>. Do not ship before the failed runs are triaged.</p>"
            f"<ol>{''.join(items)}</ol>{more}{link}")
    # the subject holds no archive text (the night label and counts); braces would still be Jinja
    return subject.replace("{", "(").replace("}", ")"), body


# --------------------------------------------------------------------------- I/O shell


def notify_night(summary: dict[str, Any], params: dict[str, Any] | None = None, context: dict | None = None) -> str:
    """Send the night's alert when it has failed runs and alerts are on; what was done, as text.

    ``summary`` is what ``stages.report.write_index`` returned (the nightly DAG's ``night_index``)."""
    params = params if params is not None else config.load_params("alerts")
    if not params.get("enabled"):
        return "alerts are off (params.yaml: alerts.enabled)"
    if not summary.get("failed"):
        return "no failed run: no alert"
    if not params.get("to"):
        return "alerts on but no recipient (params.yaml: alerts.to)"
    night_file = config.NIGHTS / f"{summary['night']}.json"
    rows = archive.read_json(night_file)["runs"] if night_file.exists() else {
        r: {"run_id": r, "verdict": "fail"} for r in summary["failed"]}
    subject, body = night_message(summary["night"], rows, quarantined=len(summary.get("quarantined") or []),
                                  index_url=params.get("index_url"), top=int(params.get("top_runs", 5)))
    from airflow.providers.smtp.notifications.smtp import SmtpNotifier

    SmtpNotifier(smtp_conn_id=params.get("smtp_conn_id") or "smtp_default", to=list(params["to"]),
                 from_email=params.get("from_email"), subject=subject, html_content=body).notify(context or {})
    return f"alert sent to {', '.join(params['to'])}: {subject}"
