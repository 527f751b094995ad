"""links: where a counter's or a system's history page is, and which counters a run page lists.

Shared by the run and index pages (:mod:`pipelines.reporting.pages`) and the history pages
(:mod:`pipelines.reporting.counter_history`).  Counter and system names come from archives:
:func:`slug` makes each a safe file and anchor name, never a path.
"""
from __future__ import annotations

import hashlib
import re

from pipelines import config
from pipelines.storage.stage_files import VerdictFile


def slug(name: str) -> str:
    """A file and anchor name for a counter or system: the name itself when it is a safe
    identifier (``config.is_identifier``: letters, digits, ``._-``, not starting with a dot),
    else its safe characters (at most 80) and 8 hex digits of its hash, so no name becomes a path."""
    if config.is_identifier(name):
        return name
    safe = re.sub(r"^[^A-Za-z0-9]+", "", re.sub(r"[^A-Za-z0-9._-]", "_", name))[:80] or "c"
    return f"{safe}-{hashlib.sha1(name.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def shown_counters(doc: VerdictFile, top_n: int) -> list[str]:
    """The counters a run page lists (flagged first, then by score): they link to their history."""
    return list(dict.fromkeys(list(doc.get("flagged_counters") or []) + list(doc.get("counter_scores") or {})))[:top_n]


def counter_href(system: str, counter: str) -> str:
    """The link to a counter's history page from a run page (``reports/runs/``)."""
    return f"../systems/{slug(system)}/counters/{slug(counter)}.html"


def system_href(system: str) -> str:
    """The link to a system's history index from the night index (``reports/``)."""
    return f"systems/{slug(system)}/index.html"
