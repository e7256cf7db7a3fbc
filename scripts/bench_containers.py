#!/usr/bin/env python3
"""Entry point of the containers benchmark, whose code is tools/bench/containers.py."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

from tools.bench.containers import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
