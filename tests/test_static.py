"""The house rules that tools can check: ruff clean, and the packages type-check."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT

# the installed package, and tools/ (fakes and probes for tests and benchmarks)
PACKAGES = ["fogsdn", "tools"]


def _tool(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", name, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def test_ruff_clean() -> None:
    r = _tool("ruff", "check", ".")
    assert r.returncode == 0, r.stdout + r.stderr


def test_packages_type_check() -> None:
    r = _tool("mypy", *PACKAGES)
    assert r.returncode == 0, r.stdout + r.stderr
