"""CSV files of dict rows, one header line: written whole and read whole."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any


def write_csv_rows(path: Path, columns: Sequence[str], rows: Iterable[Mapping[str, Any]],
                   **options: Any) -> None:
    """`rows` under a header of `columns`; `options` go to `csv.DictWriter`."""
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=columns, **options)
        w.writeheader()
        w.writerows(rows)


def read_csv_rows(path: Path) -> list[dict[str, str]]:
    """Every row of the CSV file at `path`, keyed by its header."""
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))
