"""Measured vs exact for one results directory: updates summary.json, writes comparison.png.

    python scripts/compare.py RESULTS_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bootstrap  # noqa: E402  (first run: set-up; outside .venv: re-run inside it)

bootstrap.bootstrap(needs_network_stack=False, extras="")

from analysis.compare import compare_run  # noqa: E402
from fogsdn.scenario import ScenarioError  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python scripts/compare.py RESULTS_DIR", file=sys.stderr)
        return 2
    run_dir = Path(args[0])
    for need in ("scenario.yaml", "trace.csv"):
        if not (run_dir / need).is_file():
            print(f"compare.py: error: {run_dir / need} not found", file=sys.stderr)
            return 2
    try:
        print(compare_run(run_dir))
    except (ScenarioError, ValueError) as err:
        print(f"compare.py: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
