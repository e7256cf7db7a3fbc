"""What the benchmarks share with the scripts that run them, standard library only (a
module may be imported before the set-up, to parse its arguments first)."""

from __future__ import annotations

from pathlib import Path

from fogsdn.core.cli_args import OneLineParser, fail  # noqa: F401 (the benchmarks' own)

ROOT = Path(__file__).resolve().parents[2]  # the repository root


def script(name: str) -> Path:
    """The entry point `scripts/<name>`: what a benchmark runs again in a child process."""
    return ROOT / "scripts" / name
