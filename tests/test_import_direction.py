"""Dependency direction, enforced by reading every module's imports (lazy ones too).

fogsdn/ is the base; pure modules (policies, models, the topology graph, the wire
protocol, the service queue) import only fogsdn/ and each other; engines import pure
modules, never each other's internals the wrong way (the simulator nothing of the live
runner); no package imports scripts/.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

PACKAGES = ("fogsdn", "controller", "topologies", "nodes", "analysis", "sim", "runner", "agents")
PURE = ("fogsdn", "controller.policies", "controller.fabric", "controller.cluster",
        "controller.config", "analysis", "controller.pipeline", "nodes.protocol",
        "nodes.service_queue", "nodes.ncs", "topologies.city_latency",
        "topologies.city_layout", "topologies.city_net", "agents.rnn_rl")
FORBIDDEN: dict[str, tuple[str, ...]] = {
    # engine -> what it must not import
    "sim": ("runner", "nodes.worker", "nodes.client", "controller.app", "topologies.mininet_net"),
    "controller": ("runner", "sim", "nodes.worker", "nodes.client", "topologies"),
    "nodes": ("runner", "sim", "controller", "topologies"),
    "topologies": ("controller", "runner", "sim", "nodes"),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
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


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _project(name: str) -> bool:
    return name.split(".")[0] in (*PACKAGES, "scripts", "bootstrap") or name.startswith("bench_")


def _modules() -> dict[str, set[str]]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            out[_module_name(path)] = {m for m in _imports(path) if _project(m)}
    return out


def test_no_package_imports_scripts() -> None:
    bad = {m: sorted(i for i in imps if i.split(".")[0] in ("scripts", "bootstrap")
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


def test_engines_do_not_import_the_wrong_way() -> None:
    bad = {}
    for mod, imps in _modules().items():
        for engine, banned in FORBIDDEN.items():
            if _within(mod, (engine,)) and not _within(mod, PURE):
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
