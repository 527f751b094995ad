"""The documentation builds, every link in it resolves, and the README is a front door: short, its
links pointing at files that exist."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_site_builds_strictly(tmp_path):
    """``mkdocs build --strict``: a broken link or anchor, or a page left out of the navigation, fails."""
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (tmp_path / "site" / "methods" / "calibration" / "index.html").exists()


def test_the_readme_fits_and_its_links_resolve():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert targets, "the README links to the docs"
    missing = [t for t in targets if not t.startswith("http") and not (REPO / t).exists()]
    assert missing == []


def test_code_and_docs_speak_of_the_project_not_of_its_making():
    """No "issue N" or "session N" in the code, the tests or the docs: history is git log."""
    pattern = re.compile(r"\b(issue|session)s? \d+\b", re.IGNORECASE)
    found = []
    for folder in ("pipelines", "tests", "dags", "plugins", "bench", "docs"):
        for path in (REPO / folder).rglob("*"):
            if path.suffix in (".py", ".md", ".j2", ".yaml") and "data" not in path.relative_to(REPO).parts[1:2]:
                found += [f"{path.relative_to(REPO)}:{n}" for n, line in
                          enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
                          if pattern.search(line)]
    for name in ("README.md", "params.yaml", "dvc.yaml", "Makefile"):
        found += [f"{name}:{n}" for n, line in enumerate((REPO / name).read_text(encoding="utf-8").splitlines(), 1)
                  if pattern.search(line)]
    assert found == []
