"""The static import graph of certify, solvers and models (issue 28): no circular imports, data
flowing one way.

Every import statement counts, top-level or deferred inside a function (a deferred import only
hides a cycle until the function runs). An edge into a package's `__init__` is left out, as
Python runs the `__init__` of every parent package anyway; edges between modules are what makes a
cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("certify", "solvers", "models")


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = path
    return mods


def _imported_names(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = module.split(".")
        if path.name != "__init__.py":
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        head = ".".join(base + ([node.module] if node.module else []))
    else:
        head = node.module or ""
    return [head] + [f"{head}.{a.name}" for a in node.names]


def _graph(include_packages: bool = False) -> dict[str, set[str]]:
    """module -> the project modules it imports (the nearest existing module of each imported name)."""
    mods = _modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for module, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for name in _imported_names(module, path, node):
                while name and name not in mods:
                    name = name.rpartition(".")[0]
                if not name or name == module or module.startswith(name + "."):
                    continue
                if include_packages or mods[name].name != "__init__.py":
                    edges[module].add(name)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            advanced = False
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_circular_imports():
    edges = _graph()
    assert len(edges) > 100  # the walk found the packages
    cycles = _cycles(edges)
    assert cycles == [], "circular imports: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_data_flows_one_way():
    """models -> solvers -> certify: solvers never imports certify, models imports neither."""
    edges = _graph(include_packages=True)
    upward = sorted(f"{m} -> {d}" for m, targets in edges.items() for d in targets
                    if (m.startswith("solvers") and d.startswith("certify"))
                    or (m.startswith("models") and d.split(".")[0] in ("certify", "solvers")))
    assert upward == []


def test_classifier_robustness_lives_in_robustness():
    """LDP imports the classifier certificates from certify.robustness, never the other way."""
    edges = _graph(include_packages=True)
    back = sorted(f"{m} -> {d}" for m, targets in edges.items() for d in targets
                  if m.startswith("certify.robustness") and d.startswith("certify.ldp"))
    assert back == []


# the one exception: the linf radius of image-sized nets bisects by verifications (issue 29: the
# ReLU-splitting engine serves the radius rather than a second copy of it in certify/robustness)
VERIFY_USERS = {"certify.robustness.split_radius"}


def test_questions_do_not_import_verify():
    """certify/lipschitz, certify/ptr and certify/robustness use solvers/bounds, not certify/verify
    (except VERIFY_USERS, whose probes are verification questions)."""
    edges = _graph(include_packages=True)
    users = sorted(f"{m} -> {d}" for m, targets in edges.items() for d in targets
                   if m.split(".")[:2] in (["certify", "lipschitz"], ["certify", "ptr"], ["certify", "robustness"])
                   and (d == "certify.verify" or d.startswith("certify.verify.")) and m not in VERIFY_USERS)
    assert users == []
