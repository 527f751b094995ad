"""pull and validate main() on a tiny lab in a temporary tree, with bad archives mixed in."""
from __future__ import annotations

import pytest

import io
import json
import re
from xml.etree import ElementTree
import shutil
from pathlib import Path

import pandas as pd
import yaml

from pipelines import config
from pipelines.stages import pull, validate
from pipelines.storage import archive, manifest
from tests.conftest import ONE_DESIGN
from tests.helpers import good_frames, good_meta, members, run_stages, write_tgz

pytestmark = pytest.mark.slow     # stages end to end


def set_source(tree, *sources, quick_training: bool = False):
    """Point the tree's pull at ``sources``; ``quick_training``: one fast learner and short curves,
    for tests of a night's data path in which the cause model's choice is not under test."""
    params = yaml.safe_load((tree / "params.yaml").read_text())
    params["pull"]["source"] = [str(s) for s in sources]
    if quick_training:
        params["train_causes"].update(learners=["decision_tree"], learning_curve_repeats=2,
                                      learning_curve_learners=1, feature_designs=ONE_DESIGN)
    (tree / "params.yaml").write_text(yaml.safe_dump(params))


def test_pull_is_incremental_and_refuses_changed_archives(tree, tiny_lab, tmp_path):
    lab, truth = tiny_lab
    src = tmp_path / "src"
    shutil.copytree(lab, src)
    set_source(tree, src, tmp_path / "no-such-dir")
    pull.main()
    entries = manifest.read_manifest()
    assert set(entries) == set(truth)
    summary = json.loads((config.INTERIM / "pull_summary.json").read_text())
    assert summary["missing_sources"][0]["source"].endswith("no-such-dir")
    first = {p.name: p.read_bytes() for p in config.RAW.glob("*.tar.gz")}
    some = sorted(truth)[0]
    assert entries[some].sha256 == archive.sha256_file(src / f"{some}.tar.gz")

    # a new archive arrives, and an old one is replaced at the source with other content
    write_tgz(src / "shop-new-1.tar.gz", members(good_meta("shop-new-1"), good_frames()))
    (src / f"{some}.tar.gz").write_bytes(b"tampered")
    pull.main()
    summary = json.loads((config.INTERIM / "pull_summary.json").read_text())
    assert summary["new"] == ["shop-new-1"]
    assert [r["run_id"] for r in summary["refused"]] == [some]
    assert "content changed" in summary["refused"][0]["reason"]
    assert (config.RAW / f"{some}.tar.gz").read_bytes() == first[f"{some}.tar.gz"]   # raw untouched
    assert len(manifest.read_manifest()) == len(truth) + 1
    assert not list(config.RAW.glob(".incoming-*"))


def test_a_second_night_reads_only_what_is_new_and_a_missing_package_skips_only_its_source(tree, tiny_lab,
                                                                                           tmp_path, monkeypatch):
    """The second night knows every old archive from the listing (name, size, mtime) without
    reading a byte of it; one new archive is all it reads.  An archive touched with its content
    unchanged is read once, then known by its new mtime.  An s3:// source without s3fs (made
    unimportable here: it is installed for the S3 test) is skipped with the extra to install, and
    the local source is pulled all the same."""
    import os
    import sys

    import fsspec  # noqa: F401 -- loads fsspec.registry, whose class cache is emptied below
    monkeypatch.setitem(sys.modules, "s3fs", None)                   # `import s3fs` raises ImportError
    monkeypatch.delitem(sys.modules["fsspec.registry"]._registry, "s3", raising=False)   # no class cached
    lab, truth = tiny_lab
    src = tmp_path / "src"
    shutil.copytree(lab, src)
    set_source(tree, "s3://lab-bucket/runs", src)
    pull.main()
    first = json.loads((config.INTERIM / "pull_summary.json").read_text())
    assert sorted(first["new"]) == sorted(truth)
    assert first["bytes_read"] == sum(p.stat().st_size for p in src.glob("*.tar.gz"))
    (skipped,) = first["missing_sources"]
    assert skipped["source"] == "s3://lab-bucket/runs"
    assert "s3fs" in skipped["reason"] and "pip install 'regresslab[s3]'" in skipped["reason"]

    new = write_tgz(src / "shop-new-1.tar.gz", members(good_meta("shop-new-1"), good_frames()))
    touched = sorted(src.glob("*.tar.gz"))[0]
    os.utime(touched, ns=(touched.stat().st_atime_ns, touched.stat().st_mtime_ns + 10**9))
    pull.main()
    second = json.loads((config.INTERIM / "pull_summary.json").read_text())
    assert second["new"] == ["shop-new-1"]
    assert second["listed_known"] == len(truth) - 1                  # every old archive but the touched one
    assert second["bytes_read"] == new.stat().st_size + touched.stat().st_size
    pull.main()
    third = json.loads((config.INTERIM / "pull_summary.json").read_text())
    assert third["new"] == [] and third["bytes_read"] == 0 and third["listed_known"] == len(truth) + 1


def test_validate_quarantines_bad_runs_and_keeps_the_rest(tree, tiny_lab, tmp_path):
    lab, truth = tiny_lab
    src = tmp_path / "src"
    shutil.copytree(lab, src)
    bad = good_frames()
    bad["web01"]["web01.cpu_pct"] = bad["web01"]["web.cpu_pct"] * 10       # host-level percentages above 100
    bad["web01"]["web.cpu_pct"] = "n/a"                                    # ... and text: 2 of 4 counters ...
    bad["lg01"]["app.response_time_ms"] = -1.0                             # ... a negative time: 3 of 5 > 0.5
    write_tgz(src / "shop-bad-pct.tar.gz", members(good_meta("shop-bad-pct"), bad))
    one = good_frames()
    one["web01"]["web01.cpu_pct"] = one["web01"]["web.cpu_pct"] * 10       # one impossible counter of 5
    one["web01"]["tomcat.cpu_pct"] = one["web01"]["web.cpu_pct"] * 10      # 200-400 on 4 cores: possible
    write_tgz(src / "shop-one-bad.tar.gz", members(good_meta("shop-one-bad"), one))
    files = members(good_meta("shop-evil"), good_frames())
    files["../../etc/cron.d/x"] = b"* * * * * root rm -rf /"
    write_tgz(src / "shop-evil.tar.gz", files)
    set_source(tree, src)
    pull.main()
    validate.main()
    index = json.loads(config.VALID_INDEX.read_text())
    assert set(index["valid"]) == set(truth) | {"shop-one-bad"}
    assert set(index["quarantined"]) == {"shop-bad-pct", "shop-evil"}
    reason = json.loads((config.QUARANTINE / "shop-bad-pct.json").read_text())
    assert reason["archive"] == "data/raw/shop-bad-pct.tar.gz"
    assert any(f["kwargs"].get("column") == "dropped_counter_share" for f in reason["failed_expectations"])
    assert "3 counters dropped" in reason["reason"] and "counter web01.cpu_pct" in reason["reason"]
    assert {d["counter"] for d in reason["dropped_counters"]} == {"web01.cpu_pct", "web.cpu_pct",
                                                                  "app.response_time_ms"}
    # one impossible counter: dropped, listed with its reason, the run analysed without it
    dropped = index["valid"]["shop-one-bad"]["_dropped_counters"]
    assert [(d["host"], d["counter"]) for d in dropped] == [("web01", "web01.cpu_pct")]
    assert "values impossible for its unit (share_pct, allowed 0 to 101" in dropped[0]["reason"]
    web_one = pd.read_parquet(config.VALID / "shop-one-bad" / "web01.parquet")
    assert "web01.cpu_pct" not in web_one.columns and web_one["tomcat.cpu_pct"].max() > 100
    evil = json.loads((config.QUARANTINE / "shop-evil.json").read_text())
    assert "unsafe member path" in evil["reason"]
    assert (config.RAW / "shop-evil.tar.gz").exists()                          # quarantined, never deleted
    assert not (tree.parent / "etc").exists()
    # valid runs are stored per host with parsed timestamps
    run_id = sorted(truth)[0]
    meta = json.loads((config.VALID / run_id / "meta.json").read_text())
    web = pd.read_parquet(config.VALID / run_id / "web01.parquet")
    assert web["ts"].is_monotonic_increasing and web["ts"].dtype == float
    assert meta["_hosts"] == ["db01", "lg01", "web01"]
    assert (config.VALIDATION_DOCS / "index.html").exists()
    docs = (config.VALIDATION_DOCS / "index.html").read_text()
    assert "counter_values" in docs

    # a second night with nothing new validates nothing again, and opens no Great Expectations
    # context: the Data Docs are current and not rebuilt
    stamp = (config.VALID / run_id / "meta.json").stat().st_mtime_ns
    docs_stamp = (config.VALIDATION_DOCS / "index.html").stat().st_mtime_ns
    validate.main()
    assert (config.VALID / run_id / "meta.json").stat().st_mtime_ns == stamp
    assert (config.VALIDATION_DOCS / "index.html").stat().st_mtime_ns == docs_stamp
    shutil.rmtree(config.VALIDATION_DOCS)                     # a site someone deleted is built again
    validate.main()
    assert "counter_values" in (config.VALIDATION_DOCS / "index.html").read_text()


def _validated_bytes() -> dict[str, bytes]:
    """Every file validate writes that a later stage reads: run directories, quarantine, index."""
    roots = [config.VALID, config.QUARANTINE]
    files = {str(p.relative_to(r.parent)): p.read_bytes() for r in roots for p in sorted(r.rglob("*")) if p.is_file()}
    files["index"] = config.VALID_INDEX.read_bytes()
    return files


def test_validate_on_two_workers_writes_what_one_writes(tree, tiny_lab, tmp_path):
    """The archives judged by two budgeted children at once: the same run directories, quarantine
    files and index (its rows in the archives' order) as one child judging them in turn."""
    lab, truth = tiny_lab
    src = tmp_path / "src"
    shutil.copytree(lab, src)
    bad = good_frames()
    bad["web01"]["web.cpu_pct"] = "n/a"                                    # dropped counter
    write_tgz(src / "shop-aa-dropped.tar.gz", members(good_meta("shop-aa-dropped"), bad))
    files = members(good_meta("shop-zz-evil"), good_frames())
    files["../x"] = b"x"
    write_tgz(src / "shop-zz-evil.tar.gz", files)                          # quarantined
    set_source(tree, src)
    pull.main()
    made = {}
    for jobs in (2, 1):
        for d in (config.VALID, config.QUARANTINE):
            shutil.rmtree(d, ignore_errors=True)
        config.VALID_INDEX.unlink(missing_ok=True)
        params = yaml.safe_load((tree / "params.yaml").read_text())
        params["compute"]["jobs"] = jobs
        (tree / "params.yaml").write_text(yaml.safe_dump(params))
        validate.main()
        made[jobs] = _validated_bytes()
    index = json.loads(made[2]["index"])
    assert list(index["valid"]) == sorted(set(truth) | {"shop-aa-dropped"})
    assert list(index["quarantined"]) == ["shop-zz-evil"]
    assert index["valid"]["shop-aa-dropped"]["_dropped_counters"][0]["counter"] == "web.cpu_pct"
    assert sorted(made[2]) == sorted(made[1])
    assert [k for k in made[2] if made[2][k] != made[1][k]] == []


def test_pull_reads_a_file_url_through_fsspec(tree, tiny_lab):
    lab, truth = tiny_lab
    set_source(tree, lab.as_uri())                      # file:///... goes through fsspec
    pull.main()
    assert set(manifest.read_manifest()) == set(truth)
    some = sorted(truth)[0]
    assert (config.RAW / f"{some}.tar.gz").read_bytes() == (lab / f"{some}.tar.gz").read_bytes()


def test_poison_pills_are_quarantined_with_a_specific_reason(tree, tiny_lab, tmp_path):
    """Archives that crash a careless reader (bad zip CRC,
    encrypted or unknown-method members, xz under a gzip name, run.json 200,000 levels deep), to
    exhaust it (2,000 directory entries, a 300 KB PAX header, 25,000 columns), to write outside
    the tree (a system naming a path) or to pass silently (a started_at of digits, +inf samples,
    duplicate keys or run.json members, NaN in JSON), beside good runs: every stage's ``main()``
    runs, each hostile archive is quarantined with the fault named, the good runs are analysed,
    and nothing is written anywhere beside the tree (the whole tree of its parent is compared).
    A run_id that is no file name (``..tar.gz``, ``...tar.gz``) is refused by pull; a system that
    would become a path (``../../../../escaped``, an absolute path, a newline, NUL) is quarantined."""
    from tests.hostile_corpus import ESCAPED_ABSOLUTE, write_corpus

    lab, truth = tiny_lab
    src = tmp_path / "src"
    shutil.copytree(lab, src)
    expected = write_corpus(src)
    for stem in (".", ".."):                               # "..tar.gz" and "...tar.gz"
        write_tgz(src / f"{stem}.tar.gz", members(good_meta(stem), good_frames()))
    set_source(tree, src, quick_training=True)
    before = sorted(p.relative_to(tmp_path.parent) for p in tmp_path.parent.rglob("*") if tree not in p.parents
                    and p != tree)
    assert not Path(ESCAPED_ABSOLUTE).exists()
    pull.main()
    assert {r["run_id"] for r in json.loads(config.PULL_SUMMARY.read_text())["refused"]} == {".", ".."}
    validate.main()
    index = json.loads(config.VALID_INDEX.read_text())
    assert set(index["valid"]) == set(truth)
    assert set(index["quarantined"]) == set(expected)
    for run_id, words in expected.items():
        reason = json.loads((config.QUARANTINE / f"{run_id}.json").read_text())
        text = json.dumps(reason)
        assert all(w in text for w in words), (run_id, words, reason["reason"][:300])
        assert (config.RAW / reason["archive"].split("/")[-1]).exists()        # raw kept
    run_stages("normalize", also=("commit_changes",))      # the night goes on with the good runs
    assert {p.stem for p in config.EDGES.glob("*.json")} == {"shop"}        # no model of a hostile system
    targets = {r for r, row in json.loads(config.VALID_INDEX.read_text())["valid"].items() if row["verdict"] is None}
    assert targets and {p.stem for p in config.REPORTS.joinpath("runs").glob("*.json")} == targets
    page = config.NIGHT_INDEX.read_text()
    assert "runs regressed" in page and all(run_id in page for run_id in expected)   # each listed with its reason
    # whatever the archives held, every output a parser reads parses: the index (no character XML and
    # HTML forbid), the JUnit file CI servers read, and (below) every JSON file
    assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", page)
    from pipelines.cli import main as cli

    junit_file = tmp_path / "night.xml"
    assert cli.main(["report", "--junit", str(junit_file)]) == 0
    cases = ElementTree.parse(junit_file).getroot()
    assert {c.get("name") for c in cases.iter("testcase")} == targets
    for path in [p for p in tree.rglob("*.json") if p.is_file() and config.RAW not in p.parents
                 and src not in p.parents]:   # ours, not the lab's
        try:
            json.loads(path.read_text(), parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        except ValueError as exc:
            raise AssertionError(f"{path}: {exc}") from exc
    for path in config.QUARANTINE.glob("*.json"):          # bounded: no value of an archive copied whole
        assert path.stat().st_size < 200_000, path.name
    after = sorted(p.relative_to(tmp_path.parent) for p in tmp_path.parent.rglob("*") if tree not in p.parents
                   and p != tree)
    assert after == before and not Path(ESCAPED_ABSOLUTE).exists()              # nothing written beside the tree


def test_a_night_with_every_archive_quarantined_still_ends_with_a_night_index(tree, tmp_path):
    """Nothing valid to analyse.  Every stage ends cleanly, every output DVC
    expects exists (``dvc repro`` failed at discretize: "output 'data/processed/edges' does not
    exist"), and the night index says what happened and lists each quarantined archive with
    its reason."""
    from tests.hostile_corpus import write_corpus

    src = tmp_path / "src"
    expected = write_corpus(src)
    set_source(tree, src)
    run_stages("pull", also=("commit_changes",))
    stages = yaml.safe_load((config.ROOT.parent / "dvc.yaml").read_text())["stages"] \
        if (config.ROOT.parent / "dvc.yaml").exists() else None
    from tests.conftest import REPO
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    missing = []
    for name, stage in stages.items():
        if name in ("labsim", "commitsim"):          # the examples' generators
            continue
        for out in [*stage.get("outs", []), *stage.get("metrics", [])]:
            path = next(iter(out)) if isinstance(out, dict) else out
            if not (tree / path).exists():
                missing.append(f"{name}: {path}")
    assert missing == []
    page = config.NIGHT_INDEX.read_text()
    assert "0 runs" in page or "No run" in page or "no run" in page
    for run_id in expected:
        assert run_id in page
    reason = json.loads((config.QUARANTINE / "sys-zip-enc.json").read_text())["reason"]
    assert "encrypted" in reason and "encrypted" in page


def _pull_killed_at_manifest_append(tree) -> int:
    """Run pull in a child process that dies (os._exit, no cleanup) right after the first archive
    was renamed into data/raw, before its manifest line is written."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO
    code = ("import os; from pipelines.stages import pull; from pipelines.storage import sources; "
            "sources._append_manifest = lambda entry, path: os._exit(3); pull.main()")
    env = {**os.environ, "REGRESSLAB_ROOT": str(tree), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True).returncode


def test_a_pull_killed_between_the_copy_and_its_manifest_line_resumes(tree, tiny_lab):
    """An archive renamed into data/raw without its manifest line is taken back, not refused
    every later night ("already in data/raw but not in the manifest")."""
    lab, truth = tiny_lab
    set_source(tree, lab)
    assert _pull_killed_at_manifest_append(tree) == 3
    # the archive renamed in, and perhaps copies still under their staging names (the next ones, read
    # concurrently), which the next pull removes
    stranded = sorted(p.name for p in config.RAW.glob("*.tar.gz") if not p.name.startswith(".incoming-"))
    assert len(stranded) == 1 and not manifest.read_manifest()
    pull.main()
    summary = json.loads(config.PULL_SUMMARY.read_text())
    assert summary["refused"] == [] and summary["recovered"] == [stranded[0].removesuffix(".tar.gz")]
    assert set(manifest.read_manifest()) == set(truth)
    assert not list(config.RAW.glob(".incoming-*"))
    validate.main()
    assert set(json.loads(config.VALID_INDEX.read_text())["valid"]) == set(truth)


def test_a_torn_manifest_line_stops_nothing(tree, tiny_lab):
    """A pull killed inside its manifest write leaves a torn last line, which must not
    stop pull and validate for good (json.loads on the partial line)."""
    lab, truth = tiny_lab
    set_source(tree, lab)
    pull.main()
    with open(config.MANIFEST, "ab") as fh:
        fh.write(b'{"run_id": "shop-x", "fi')
    validate.main()                                        # the torn line is ignored
    assert set(json.loads(config.VALID_INDEX.read_text())["valid"]) == set(truth)
    pull.main()                                            # and cut off by the next pull
    text = config.MANIFEST.read_text()
    assert text.endswith("\n") and all(json.loads(line) for line in text.splitlines())
    assert set(manifest.read_manifest()) == set(truth)


def test_pull_refuses_what_is_not_a_plain_archive_and_keeps_pulling(tree, tiny_lab, tmp_path):
    """Two archives of one run_id, a symlinked archive (to a secret), and
    directory archives with a symlink, a FIFO, 600 levels of folders or too many bytes are each
    refused with a reason; nothing of them reaches data/raw; the good runs are pulled."""
    import os

    from tests.helpers import write_zip
    lab, truth = tiny_lab
    src = tmp_path / "src"
    shutil.copytree(lab, src)
    write_tgz(src / "shop-dupe.tar.gz", members(good_meta("shop-dupe"), good_frames()))
    write_zip(src / "shop-dupe.zip", members(good_meta("shop-dupe"), good_frames()))
    secret = tmp_path / "secret"
    secret.mkdir()
    write_tgz(secret / "x.tar.gz", members(good_meta("shop-link"), good_frames()))
    (src / "shop-link.tar.gz").symlink_to(secret / "x.tar.gz")

    def directory(name: str) -> Path:
        d = src / name
        (d / "counters").mkdir(parents=True)
        for member, data in members(good_meta(name), good_frames()).items():
            (d / member).write_bytes(data)
        return d
    directory("shop-dir-ok")
    (directory("shop-dir-link") / "counters" / "db01.csv").symlink_to(secret / "x.tar.gz")
    os.mkfifo(directory("shop-dir-fifo") / "counters" / "fifo.csv")
    deep = directory("shop-dir-deep")
    for _ in range(600):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (directory("shop-dir-big") / "counters" / "big.csv").write_bytes(b"0" * 2_000_000)
    params = yaml.safe_load((tree / "params.yaml").read_text())
    params["pull"]["source"] = [str(src)]
    params["pull"]["max_archive_bytes"] = 1_000_000
    (tree / "params.yaml").write_text(yaml.safe_dump(params))
    pull.main()
    summary = json.loads(config.PULL_SUMMARY.read_text())
    reasons = {r["run_id"]: r["reason"] for r in summary["refused"]}
    assert "two archives" in reasons["shop-dupe"] and "shop-dupe.tar.gz | shop-dupe.zip" in reasons["shop-dupe"]
    assert "symbolic link" in reasons["shop-link"] and "symbolic link" in reasons["shop-dir-link"]
    assert "FIFO" in reasons["shop-dir-fifo"] and "deeper than" in reasons["shop-dir-deep"]
    assert "larger than" in reasons["shop-dir-big"]
    assert set(summary["new"]) == set(truth) | {"shop-dir-ok"}
    assert not any(p.is_symlink() for p in config.RAW.rglob("*"))
    assert not list(config.RAW.glob("shop-dupe*")) and not list(config.RAW.glob("shop-link*"))


def test_a_lab_whose_process_cpu_runs_above_100_percent_is_analysed(tree, tmp_path):
    """Per-process CPU at 100 per busy core (top, pidstat, PerfMon) is what real labs
    write; such a lab is analysed, not quarantined, and one impossible counter in one run is
    left out of that run and named on its page and the night index."""
    from tests.conftest import write_lab

    src = tmp_path / "percore"
    truth = write_lab(src, process_cpu="per_core")
    target = sorted(r for r in truth if "-t" in r)[0]
    # one run whose host-level CPU reads above 100: an impossible value for that counter
    path = src / f"{target}.tar.gz"
    members = archive.read_archive(path).csv_bytes
    web = pd.read_csv(io.BytesIO(members["web01"]))
    web["web01.cpu_pct"] = web["web01.cpu_pct"] + 150.0
    raw = archive.read_archive(path)
    files = {"run.json": json.dumps(raw.meta).encode()}
    files.update({f"counters/{h}.csv": b for h, b in members.items()})
    files["counters/web01.csv"] = web.to_csv(index=False).encode()
    path.unlink()
    write_tgz(path, files)
    set_source(tree, src, quick_training=True)
    pull.main()
    validate.main()
    index = json.loads(config.VALID_INDEX.read_text())
    assert index["quarantined"] == {} and set(index["valid"]) == set(truth)
    some = sorted(r for r in truth if "-r" in r)[0]
    tomcat = pd.read_parquet(config.VALID / some / "web01.parquet")["tomcat.cpu_pct"]
    assert tomcat.max() > 100                        # per core: above 100 on an 8-core server
    assert [d["counter"] for d in index["valid"][target]["_dropped_counters"]] == ["web01.cpu_pct"]
    assert all(not row["_dropped_counters"] for r, row in index["valid"].items() if r != target)
    run_stages("normalize", through="report")
    doc = json.loads(config.run_report_path(target).read_text())
    assert [d["counter"] for d in doc["dropped_counters"]] == ["web01.cpu_pct"]
    assert "web01.cpu_pct" not in doc["counter_scores"] and "tomcat.cpu_pct" in doc["counter_scores"]
    page = config.run_report_path(target, "html").read_text()
    assert 'id="dropped-counters"' in page and "host web01, counter web01.cpu_pct" in page
    night = config.NIGHT_INDEX.read_text()
    assert "1 counter(s) left out of 1 valid run(s)" in night and "(1 counter(s) dropped)" in night


def test_pull_takes_a_labs_own_run_directories_as_they_are(tree, tmp_path):
    """A source holding run directories (run.yaml beside the collectors'
    files), or a run directory itself ({path: ..., ingest: true}), needs no conversion step:
    the files go to data/raw untouched and validate reads them through pipelines.importers.run_directory."""
    from tests.unit.test_ingest import FORMATS

    folder = tmp_path / "lab"
    runs = {"vm-run-1": ["generated_sadf-dh_u-r-q-b-w.csv", "generated_pidstat_h-u-r-d-w.txt"],
            "vm-run-2": ["generated_sadf-d_u-r-q-b-nDEV.csv"]}
    for name, files in runs.items():
        d = folder / name
        d.mkdir(parents=True)
        for f in files:
            shutil.copy(FORMATS / "sysstat" / f, d / f)
        shutil.copy(FORMATS / "prometheus" / "generated_query_range_node_cpu_rate_1s.json", d / "node_cpu.json")
        (d / "run.yaml").write_text(
            "system: vmlab\nversion: '1.0'\nstarted_at: '2026-11-22T10:32:19Z'\nduration_s: 140\ntimezone: UTC\n"
            "hosts: {'127.0.0.1': vm}\nenvironment: {os: debian-12}\nworkload: {profile: loopback, load_counter: null}\n"
            "verdict: pass\ncause: none\n")
    single = tmp_path / "vm-run-3"
    shutil.copytree(folder / "vm-run-2", single)
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    params = yaml.safe_load((tree / "params.yaml").read_text())
    params["pull"]["source"] = [str(folder), {"path": str(single), "ingest": True}]
    (tree / "params.yaml").write_text(yaml.safe_dump(params))
    pull.main()
    validate.main()
    index = json.loads(config.VALID_INDEX.read_text())
    assert index["quarantined"] == {} and set(index["valid"]) == {"vm-run-1", "vm-run-2", "vm-run-3"}
    assert (config.RAW / "vm-run-1" / "run.yaml").is_file()                 # raw holds what the tools wrote
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before
    vm = pd.read_parquet(config.VALID / "vm-run-1" / "vm.parquet")
    assert {"vm.cpu_user_pct", "python3.cpu_pct", "vm.node_cpu_cpu_0_mode_idle"} <= set(vm.columns)
    meta = json.loads((config.VALID / "vm-run-1" / "meta.json").read_text())
    assert meta["environment"] == {"os": "debian-12", "vm.cpu_cores": 2} and meta["system"] == "vmlab"
    assert index["valid"]["vm-run-1"]["_dropped_counters"] == []
