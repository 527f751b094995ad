"""No secret in a file, a page or a mail; ``init`` never writes over a user's files; triage and
compare inputs checked.  A password is put everywhere a source location can reach, and looked for
in every output."""
from __future__ import annotations

import email
import json
import os
import stat

import pytest
import yaml

from pipelines import config, params_schema, safe_text
from pipelines.cli import main as cli
from pipelines.cli import project
from pipelines.reporting import alerts, compare, pages
from pipelines.storage import atomic, sources
from tests.dags.test_alerts import hook, plain_server, plain_smtp  # noqa: F401 -- fixtures

PASSWORD = "S3cr3tPw"
LEAKY = f"https://alice:{PASSWORD}@127.0.0.1:9/lab/"             # port 9 (discard): nothing listens


def test_masking_by_hand():
    assert safe_text.mask_url(LEAKY) == "https://***@127.0.0.1:9/lab/"
    assert safe_text.mask_urls(f"cannot list {LEAKY!r}: refused; also s3://KEY:SECRET@bucket/x") == \
        "cannot list 'https://***@127.0.0.1:9/lab/': refused; also s3://***@bucket/x"
    assert safe_text.mask_url("https://h/x?X-Amz-Signature=abc&b=1") == "https://h/x?X-Amz-Signature=***&b=1"
    assert safe_text.mask_url("/mnt/lab@night/archives") == "/mnt/lab@night/archives"     # a path, not a URL
    assert safe_text.has_credentials(LEAKY) and not safe_text.has_credentials("https://host/lab/")
    assert safe_text.has_credentials("https://token@host/") and not safe_text.has_credentials("/a@b")


@pytest.mark.parametrize("source", [LEAKY, [f"s3://AKIA:{PASSWORD}@bucket/runs/"],
                                    [{"path": f"https://h/x?sig={PASSWORD}", "ingest": True}]])
def test_the_schema_refuses_a_source_with_credentials_and_its_message_holds_none(source):
    with pytest.raises(params_schema.ConfigError) as caught:
        params_schema.check({"pull": {"source": source}})
    said = str(caught.value)
    assert "holds credentials" in said and "netrc" in said and "AWS" in said and PASSWORD not in said


def test_a_password_in_a_source_reaches_no_file_page_mail_or_webhook(tree, plain_server, hook, capsys, caplog):
    """Past the schema (a client's error quoting the location, an older summary): pull's summary,
    manifest and log, the night index's banner and missing-source line, the failed-night mail
    (a real SMTP server) and webhook (a real HTTP server), and what `regresslab run` echoes."""
    import logging

    config.install_error_hook()                 # what every entry point installs: log records masked
    caplog.set_level(logging.DEBUG)             # fsspec logs the URL it is given at DEBUG
    summary = sources.pull([LEAKY], config.RAW, max_archive_bytes=10**6)
    assert summary["missing_sources"] and summary["missing_sources"][0]["source"] == safe_text.mask_url(LEAKY)
    atomic.write_json_atomic(config.PULL_SUMMARY, summary)
    reason = f"no pull source could be listed ({LEAKY}: ClientConnectorError: Cannot connect to host {LEAKY})"
    pages.write_failed_night("pull", reason)
    from pipelines.reporting.run_reports import ReportParams, write_night_index

    write_night_index({}, ReportParams.load(), {})                # the index names the missing source
    pages.write_failed_night("pull", reason)
    inbox, port = plain_server
    said = alerts.notify_stopped("pull", reason, where="dvc repro", params=plain_smtp(port))
    assert "e-mail sent" in said and "webhook: posted" in said
    mail = email.message_from_bytes(inbox.messages[0][2])
    assert "FAILED at pull" in mail["Subject"]
    outputs = {"summary": config.PULL_SUMMARY.read_text(), "index": config.NIGHT_INDEX.read_text(),
               "mail": inbox.messages[0][2].decode(errors="replace"), "webhook": json.dumps(hook.posts),
               "log": caplog.text, "said": said, "printed": "".join(capsys.readouterr())}
    if config.MANIFEST.exists():
        outputs["manifest"] = config.MANIFEST.read_text()
    assert "127.0.0.1:9" in outputs["index"] and "***@127.0.0.1" in outputs["mail"]   # the place is still said
    for name, text in outputs.items():
        assert PASSWORD not in text, name


def test_check_and_init_refuse_a_source_with_a_password_and_print_none(tree, tmp_path, capsys):
    params = yaml.safe_load((tree / "params.yaml").read_text())
    params["pull"]["source"] = LEAKY
    (tree / "params.yaml").write_text(yaml.safe_dump(params))
    assert cli.main(["check"]) == 2
    assert cli.main(["run"]) == 2                          # before dvc starts: nothing echoed, no banner
    assert project.init([str(tmp_path / "lab"), "--source", LEAKY]) == 2
    assert not (tmp_path / "lab").exists()                 # nothing written
    printed = "".join(capsys.readouterr())
    assert printed.count("holds credentials") == 3 and PASSWORD not in printed
    assert project.init([str(tmp_path / "lab"), "--source", "/data/lab\n[alerts]"]) == 2     # a newline


@pytest.fixture()
def quiet_init(monkeypatch):
    """``init`` without its git and DVC repositories (what is checked here is the files it writes)."""
    real = project.subprocess.run
    monkeypatch.setattr(project.subprocess, "run", lambda cmd, **kw: None if cmd[1:2] == ["init"] else real(cmd, **kw))


def test_init_in_a_users_folder_keeps_their_files_and_merges_gitignore(tmp_path, capsys, quiet_init):
    root = tmp_path / "theirs"
    (root / "data" / "triage").mkdir(parents=True)
    (root / "README.md").write_text("# Our lab\n")
    (root / ".gitignore").write_text(".env\nsecrets.txt\n")
    (root / "data" / "triage" / "README.md").write_text("our notes\n")
    assert project.init([str(root), "--source", str(tmp_path / "archives")]) == 0
    assert (root / "README.md").read_text() == "# Our lab\n"
    assert (root / "data" / "triage" / "README.md").read_text() == "our notes\n"
    ignored = (root / ".gitignore").read_text().splitlines()
    assert ignored[:2] == [".env", "secrets.txt"] and "/data/raw" in ignored and "/reports/" in ignored
    printed = capsys.readouterr().out
    assert "kept your README.md" in printed and "kept your data/triage/README.md" in printed
    assert (root / "params.yaml").exists() and (root / "dvc.yaml").exists()
    before = (root / ".gitignore").read_text()
    assert project.init([str(root), "--source", str(tmp_path / "archives")]) == 1      # a project now
    assert project.init([str(root), "--source", str(tmp_path / "other"), "--force"]) == 0
    assert (root / ".gitignore").read_text() == before                     # merged again: nothing to add
    assert (root / "README.md.orig").read_text() == "# Our lab\n"          # replaced under --force, kept
    assert str(tmp_path / "archives") in (root / "params.yaml.orig").read_text()          # the old source, kept
    assert "regresslab" in (root / "README.md").read_text() and not (root / "dvc.yaml.orig").exists()  # same text


def test_init_on_a_file_or_a_folder_it_cannot_make_says_so_in_one_line(tmp_path, capsys, quiet_init):
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert project.init([str(afile), "--source", "/data"]) == 2
    assert project.init([str(afile / "sub"), "--source", "/data"]) == 2           # under a file: cannot make it
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "is a file, not a folder" in err[0] and "cannot make the folder" in err[1]
    if os.geteuid() != 0:                                                # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
        assert project.init([str(locked), "--source", "/data"]) == 2


def test_compare_pages_of_runs_with_double_dashes_never_share_a_file():
    assert compare.page_name("x--y", "z") != compare.page_name("x", "y--z")
    assert compare.page_name("shop-r1", "shop-t1") == "shop-r1--shop-t1.html"
    long_a, long_b = "a" * 128, "b" * 128
    assert len(compare.page_name(long_a, long_b).encode()) <= 255


def test_triage_refuses_a_missing_blank_unprintable_or_huge_author_or_note(capsys):
    from pipelines.cli import triage

    for argv in (["r1", "--verdict", "pass"], ["r1", "--verdict", "pass", "--by", " "],
                 ["r1", "--verdict", "pass", "--by", "ana\x1b[2J"], ["r1", "--verdict", "pass", "--by", "a" * 201],
                 ["r1", "--verdict", "pass", "--by", "ana", "--note", "x" * 2001],
                 ["r1", "--verdict", "pass", "--by", "ana", "--note", "ok\x1b]0;pwned\x07"]):
        with pytest.raises(SystemExit) as caught:
            triage.main(argv)
        assert caught.value.code == 2, argv
    err = capsys.readouterr().err
    assert "--by is required" in err and "control characters" in err and "at most 2000" in err
