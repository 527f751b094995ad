"""Measurements of the pipeline: timing benches and the robustness protocol, each run as a module
from the repository's root (``python -m bench.robustness --help``); docs/operations/performance.md
and docs/results/ give each one's command and what it measured."""
