"""The project's own modules and which of them import which.

A stage's results depend on its module and on every project module it imports, directly or
through others.  Two places need that set: ``dvc.yaml`` lists it as each stage's ``deps``
(``tests/unit/test_dvc_graph.py`` checks it against this module), and ``storage.memo`` hashes
it into the input key of every stored result, so that an edit to the code a result came from
computes the result again, and nothing else does (an edit to a comment, a docstring or the layout
is no edit to the code: :func:`code_form`).  Imports are read with ``ast``, at module level
and inside functions alike.  A package's ``__init__.py`` holds no code and is left out.
"""
from __future__ import annotations

import ast
import functools
import hashlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
ROOT = PACKAGE.parent


@functools.lru_cache(maxsize=1)
def module_files() -> dict[str, Path]:
    """``pipelines.<...>`` -> its file, for every module of the package and its subpackages."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__init__.py":
            continue
        out[".".join(path.relative_to(ROOT).with_suffix("").parts)] = path
    return out


def project_imports(source: str, known: set[str] | dict[str, Path]) -> set[str]:
    """The project modules a source imports: ``from pipelines.a import b`` (``b`` a module of
    ``pipelines.a`` or a name in it), ``from pipelines import a``, ``import pipelines.a``."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "pipelines" or node.module.startswith("pipelines."):
                out.add(node.module)
                out |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("pipelines.")}
    return {m for m in out if m in known}


@functools.lru_cache(maxsize=None)
def imports_of(module: str) -> frozenset[str]:
    """The project modules ``module`` imports (itself left out); read once per process."""
    files = module_files()
    return frozenset(project_imports(files[module].read_text(encoding="utf-8"), files) - {module})


def import_graph() -> dict[str, frozenset[str]]:
    """Every project module -> the project modules it imports (itself left out)."""
    return {m: imports_of(m) for m in module_files()}


def closure(module: str, graph: dict[str, frozenset[str]] | None = None) -> set[str]:
    """``module`` and every project module it imports, directly or through others (only those
    modules are read: a stage's key does not parse the whole package)."""
    known, imports = (module_files(), imports_of) if graph is None else (graph, graph.__getitem__)
    seen, todo = set(), [module]
    while todo:
        name = todo.pop()
        if name not in seen and name in known:
            seen.add(name)
            todo += imports(name)
    return seen


def stage_module(stage: str) -> str:
    """The module of a ``dvc.yaml`` stage."""
    return f"pipelines.stages.{stage}"


def code_form(source: str) -> str:
    """What of a module's source can change what it computes: its syntax tree without comments,
    docstrings, line numbers or layout (``ast.dump`` of the tree with every docstring removed)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                node.body = node.body[1:] or [ast.Pass()]
    return ast.dump(tree)


@functools.lru_cache(maxsize=None)
def form_digest(module: str) -> bytes:
    """The hash of one module's :func:`code_form`, parsed once per process (stages share modules)."""
    return hashlib.sha256(code_form(module_files()[module].read_text(encoding="utf-8")).encode()).digest()


@functools.lru_cache(maxsize=None)
def code_digest(module: str) -> str:
    """A hash of the code of ``module`` and of every project module it imports (:func:`code_form`:
    an edit to a comment or a docstring computes nothing again)."""
    digest = hashlib.sha256()
    for name in sorted(closure(module)):
        digest.update(name.encode() + b"\0" + form_digest(name))
    return digest.hexdigest()
