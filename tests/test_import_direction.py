"""Dependency direction, enforced by reading every module's imports (lazy ones too).

One installed package, `fogsdn`, whose subpackages are layers (docs/architecture.md,
"Layers"): a module imports its own subpackage and the layers below it, never one above
and never a sibling of its own layer. No cycle between modules or subpackages, with no
exceptions; the pure modules import only pure modules; no package imports scripts/ or
tools/ (benchmarks' and tests' rigs).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

from conftest import ROOT

# bottom to top; the subpackages of one layer do not import each other
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core",),  # the scenario schema, traces, topology, processes and signals
    ("models",),  # pure models: power, sizes, RNN scorer, service queues
    ("policies",),  # pure dispatch policies
    ("exact",),  # chains, solvers, predictions, the optimum
    ("measure",),  # metrics, fidelity, measured vs exact
    ("controller", "nodes", "netem"),  # the processes' code and the network's glue
    ("sim",),  # the simulator
    ("view",),  # the view's state document, server, replay
    ("live",),  # the live core: network, supervisor, the queueing run
    ("agents", "studies"),  # learning; the study framework and its plug-ins
    ("city",),  # seed 003, whole
    ("cli",),  # the commands
)
PACKAGES = ("fogsdn",)
CHECKED = (*PACKAGES, "tools")  # tools/ may import any layer, and must not form cycles
PURE = ("fogsdn.core",  # as before the move: the base layer, no engine
        "fogsdn.models", "fogsdn.policies", "fogsdn.exact", "fogsdn.measure",
        "fogsdn.controller.flow_tables", "fogsdn.controller.cluster",
        "fogsdn.controller.config", "fogsdn.controller.pipeline",
        "fogsdn.controller.rt_measure", "fogsdn.controller.policy_guard",
        "fogsdn.controller.of_messages", "fogsdn.controller.policy_swap",
        "fogsdn.controller.path_choice", "fogsdn.controller.learner_reports",
        "fogsdn.controller.running_policy", "fogsdn.nodes.protocol", "fogsdn.nodes.ncs",
        "fogsdn.city.geo_latency", "fogsdn.city.layout", "fogsdn.city.study_spec",
        "fogsdn.city.mobility_traces", "fogsdn.netem.link_params", "fogsdn.sim.rows",
        "fogsdn.sim.policy_tables", "fogsdn.sim.trace_text", "fogsdn.view.state",
        "fogsdn.legacy_names")


def layer_of(module: str) -> int | None:
    """The layer of `fogsdn.<sub>...`; None for `fogsdn` itself and what is outside."""
    parts = module.split(".")
    if len(parts) < 2 or parts[0] != "fogsdn":
        return None
    return next((i for i, layer in enumerate(LAYERS) if parts[1] in layer), None)


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
    """Package (fogsdn's subpackages, and any other top-level one) -> the other packages
    its modules import."""
    def top(m: str) -> str:  # fogsdn's subpackages are its packages
        parts = m.split(".")
        return ".".join(parts[:2]) if parts[0] == "fogsdn" and len(parts) > 1 else parts[0]

    out: dict[str, set[str]] = {top(m): set() for m in graph}
    for mod, targets in graph.items():
        out[top(mod)].update(top(t) for t in targets if top(t) != top(mod))
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
    bad = {m: sorted(i for i in imps if i.split(".")[0] in ("scripts", "bootstrap", "tools")
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


def test_layers_import_only_downward_and_not_their_siblings() -> None:
    bad = {}
    for mod, imps in _modules().items():
        own = layer_of(mod)
        if own is None:
            continue
        sub = mod.split(".")[1]
        wrong = sorted(i for i in imps if (lay := layer_of(i)) is not None
                       and (lay > own or (lay == own and i.split(".")[1] != sub)))
        if wrong:
            bad[mod] = wrong
    assert bad == {}


def test_every_subpackage_has_a_layer() -> None:
    subs = {p.name for p in (ROOT / "fogsdn").iterdir()
            if p.is_dir() and (p / "__init__.py").exists()}
    placed = {s for layer in LAYERS for s in layer}
    assert subs == placed
    # and fogsdn/ holds no module of its own but its face and the old names' aliases
    assert sorted(p.name for p in (ROOT / "fogsdn").glob("*.py")) == ["__init__.py",
                                                                    "legacy_names.py"]


def test_one_top_level_package_is_installed() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert 'include = ["fogsdn*"]' in text


def test_the_rules_name_modules_that_exist() -> None:
    """Each rule above holds vacuously for a name that matches nothing (a package or a
    module moved without its rule): every package, pure module and engine they name has
    modules here."""
    modules = set(_modules())
    named = {*PACKAGES, *PURE, *(f"fogsdn.{s}" for layer in LAYERS for s in layer)}
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
