"""The city's shared state on a server whose clients run away from the runner
(docs/scale-out.md, "The city over several machines").

On one machine the city's clients read three things the runner and the fog daemons
write under the run's folder: the member board (every fog node's client count, for the
load term), each client's truth file, and the point's epoch. On a server those files
are not the head's, and a shared filesystem would not keep the board coherent. The
runner sends each change here over its master ssh connection, one JSON line each, and
this process writes it under the same path on the server:

    {"mkdir": PATH}
    {"board": PATH, "counts": [int, ...]}      every node's count, in the board's order
    {"files": {PATH: OBJECT, ...}}             each written whole (readers see all or none)

It ends at the end of its stdin (the run's end, or the runner's death). A line it cannot
apply, or a path outside `--root`, ends it with one line naming it: the runner
supervises it, so that is an incident of the run.

    python -m fogsdn.city.site_mirror --root /run/fogsdn/TAG
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from fogsdn.core.local_rpc import write_json_atomic


class MirrorError(ValueError):
    """A line that cannot be applied: one line naming the field."""


def _under(root: Path, path: object) -> Path:
    if not isinstance(path, str):
        raise MirrorError(f"path: a string, got {path!r}"[:200])
    p = Path(os.path.normpath(path))
    if not p.is_absolute() or root not in p.parents:
        raise MirrorError(f"path {path!r}: not under {root}"[:200])
    return p


def apply(root: Path, msg: object) -> None:
    """One message's change under `root`."""
    if not isinstance(msg, dict):
        raise MirrorError("a message is a JSON object")
    if "mkdir" in msg:
        _under(root, msg["mkdir"]).mkdir(parents=True, exist_ok=True)
    elif "board" in msg:
        counts = msg.get("counts")
        if (not isinstance(counts, list)
                or any(type(c) is not int or not 0 <= c < 2**31 for c in counts)):
            raise MirrorError("counts: a list of counts (ints >= 0)")
        board = _under(root, msg["board"])
        fd = os.open(board, os.O_RDWR | os.O_CREAT, 0o644)
        try:  # one write: a reader's one pread sees the old counts or the new ones
            os.pwrite(fd, struct.pack(f"<{len(counts)}i", *counts), 0)
        finally:
            os.close(fd)
    elif "files" in msg:
        files = msg["files"]
        if not isinstance(files, dict):
            raise MirrorError("files: an object of path -> content")
        for path, obj in files.items():
            write_json_atomic(_under(root, path), obj)
    else:
        raise MirrorError(f"unknown message with keys {sorted(msg)[:5]}")


def mirror(root: Path, lines: Iterable[str]) -> int:
    """Apply every line; the number applied."""
    n = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except ValueError as err:
            raise MirrorError(f"line {n + 1}: not JSON: {err}") from None
        apply(root, msg)
        n += 1
    return n


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fogsdn.city.site_mirror")
    ap.add_argument("--root", type=Path, required=True,
                    help="the run's folder: every path written is under it")
    a = ap.parse_args(argv)
    root = Path(os.path.normpath(a.root))
    try:
        root.mkdir(parents=True, exist_ok=True)
        mirror(root, sys.stdin)
    except (MirrorError, OSError) as err:
        print(f"site_mirror: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
