"""Dependency direction, enforced by reading every module's imports (lazy ones too).

The layers, imported downward only (docs/architecture.md, "Dependency direction"):
fogsdn/ (scenario schema and types) -> models/ (pure models) -> controller.policies ->
analysis/ (models and predictions, may use the policies) -> engines (sim/, runner/,
the controller app, nodes/, topologies/) -> agents/ (studies, training) -> scripts/.
No cycle between modules or between packages, with no exceptions; engines never
import each other's internals the wrong way (the simulator nothing of the live
runner); no package imports scripts/ or rigs/ (fakes and probes for tests).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

from conftest import ROOT

PACKAGES = ("fogsdn", "models", "controller", "topologies", "nodes", "analysis", "sim", "runner",
            "agents")
CHECKED = (*PACKAGES, "rigs")  # rigs/ may import any package, and must not form cycles
PURE = ("fogsdn", "models", "controller.policies", "controller.flow_tables",
        "controller.cluster", "controller.config", "analysis", "controller.pipeline",
        "controller.rt_measure", "controller.policy_guard", "controller.of_messages",
        "nodes.protocol", "nodes.service_queue", "nodes.ncs", "topologies.city_latency",
        "topologies.city_layout", "topologies.city_net", "topologies.mobility_traces",
        "topologies.link_params", "sim.rows", "sim.policy_tables",
        "controller.policy_swap", "runner.view_state", "controller.path_choice",
        "controller.learner_reports", "controller.running_policy")
FORBIDDEN: dict[str, tuple[str, ...]] = {
    # importer -> what it must not import
    "fogsdn": ("models", "controller", "analysis", "sim", "runner", "nodes", "topologies",
               "agents"),
    "models": ("controller", "analysis", "sim", "runner", "nodes", "topologies", "agents"),
    "controller.policies": ("controller.app", "analysis", "sim", "runner", "agents"),
    "analysis": ("sim", "runner", "agents", "controller.app"),
    "sim": ("runner", "agents", "nodes.worker", "nodes.task_server", "nodes.client",
            "controller.app", "topologies.mininet_net"),
    "controller": ("runner", "sim", "analysis", "agents", "nodes.worker", "nodes.task_server",
                   "nodes.client", "topologies"),
    "nodes": ("runner", "sim", "controller", "topologies", "agents"),
    "topologies": ("controller", "runner", "sim", "nodes", "agents"),
    "runner": ("agents",),
}


# -- the checker (a function of a tree, so a test can run it on a made-up one) -------------
def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def _project(name: str) -> bool:
    return (name.split(".")[0] in (*CHECKED, "scripts", "bootstrap")
            or name.startswith("bench_"))


def module_imports(root: Path, packages: Iterable[str]) -> dict[str, set[str]]:
    """Every module of `packages` under `root` -> the project names it imports."""
    out = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            out[_module_name(root, path)] = set(_imports(path))
    return out


def module_graph(imports: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """Module -> the modules it imports: `from a.b import c` is a.b.c where that is a
    module, else a.b; a package's own __init__ counts as the package."""

    def resolve(name: str) -> str | None:
        while name and name not in imports:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in imports}
    for mod, names in imports.items():
        for name in names:
            target = resolve(name)
            if target is not None and target != mod:
                graph[mod].add(target)
    return graph


def package_graph(graph: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """Top-level package -> the other top-level packages its modules import."""
    out: dict[str, set[str]] = {m.split(".")[0]: set() for m in graph}
    for mod, targets in graph.items():
        top = mod.split(".")[0]
        out[top].update(t.split(".")[0] for t in targets if t.split(".")[0] != top)
    return out


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one member (Tarjan), each
    sorted: every dependency cycle lies inside one of them."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def import_cycles(root: Path, packages: Iterable[str]) -> tuple[list[list[str]], list[list[str]]]:
    """(module cycles, package cycles) of the tree at `root`."""
    graph = module_graph(module_imports(root, packages))
    return cycles(graph), cycles(package_graph(graph))


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _modules() -> dict[str, set[str]]:
    return {m: {i for i in imps if _project(i)}
            for m, imps in module_imports(ROOT, PACKAGES).items()}


# -- the tree's own rules ------------------------------------------------------------------
def test_no_module_cycles() -> None:
    assert import_cycles(ROOT, CHECKED)[0] == []


def test_no_package_cycles() -> None:
    assert import_cycles(ROOT, CHECKED)[1] == []


def test_the_checker_finds_a_cycle_made_on_purpose(tmp_path: Path) -> None:
    for pkg in ("low", "high"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "low" / "a.py").write_text("x = 1\n\ndef f():\n    import high.b  # lazy\n")
    (tmp_path / "high" / "b.py").write_text("from low.a import x\n")
    (tmp_path / "high" / "c.py").write_text("import low\n")
    module_cycles, package_cycles = import_cycles(tmp_path, ("low", "high"))
    assert module_cycles == [["high.b", "low.a"]]
    assert package_cycles == [["high", "low"]]
    # and without the lazy import neither cycle is there
    (tmp_path / "low" / "a.py").write_text("x = 1\n")
    assert import_cycles(tmp_path, ("low", "high")) == ([], [])


def test_no_package_imports_scripts_or_rigs() -> None:
    bad = {m: sorted(i for i in imps if i.split(".")[0] in ("scripts", "bootstrap", "rigs")
                     or i.startswith("bench_"))
           for m, imps in _modules().items()}
    assert {m: v for m, v in bad.items() if v} == {}


def test_pure_modules_import_only_pure_modules() -> None:
    bad = {}
    for mod, imps in _modules().items():
        if not _within(mod, PURE):
            continue
        # a package's name imported with `from pkg import x` counts as the package itself
        wrong = sorted(i for i in imps if not _within(i, PURE)
                       and not any(i == p.split(".")[0] for p in PURE))
        if wrong:
            bad[mod] = wrong
    assert bad == {}


def test_fogsdn_is_the_base() -> None:
    bad = {m: sorted(i for i in imps if not _within(i, ("fogsdn",)))
           for m, imps in _modules().items() if _within(m, ("fogsdn",))}
    assert {m: v for m, v in bad.items() if v} == {}


def test_layers_do_not_import_upward() -> None:
    bad = {}
    for mod, imps in _modules().items():
        for importer, banned in FORBIDDEN.items():
            if _within(mod, (importer,)):
                wrong = sorted(i for i in imps if _within(i, banned))
                if wrong:
                    bad[mod] = wrong
    assert bad == {}


def test_the_rules_name_modules_that_exist() -> None:
    """Each rule above holds vacuously for a name that matches nothing (a package or a
    module moved without its rule): every package, pure module and engine they name has
    modules here."""
    modules = set(_modules())
    named = {*PACKAGES, *PURE, *FORBIDDEN}
    assert sorted(n for n in named if not any(_within(m, (n,)) for m in modules)) == []


def test_module_file_names_are_unique_across_the_packages() -> None:
    """One name, one module: `power.py` in two packages meant two concepts under one
    name (`__init__` and `__main__` are the package's own)."""
    seen: dict[str, list[str]] = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            if path.stem not in ("__init__", "__main__"):
                seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert len(seen) > 50  # the packages were found
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}
