#!/usr/bin/env python3
"""Reduce a NetLatency-Data RTT series to one compact matrix file (.npz).

    python scripts/convert_netlatency.py --frames DIR --prefix PlanetLabData_ --unit ms \
        --out tests/data/planetlab490.npz [--name "NetLatency-Data PlanetLab"]

The source (https://github.com/uofa-rzhu3/NetLatency-Data, MIT) keeps one N x N text
matrix per time frame, `PREFIX1` .. `PREFIXT`, 0 where nothing was measured. Per
directed pair the median over all frames, NaN where that median is 0, so one noisy
frame does not decide a pair. Output keys: `rtt_ms` (float32, row = source),
`rtt_sym_ms` (mean of both directions, or the one known), `description`. Seattle's
frames are in seconds (`--unit s`), PlanetLab's in ms (docs/reproduction.md).
"""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from pathlib import Path

import numpy as np

SCALE_TO_MS = {"ms": 1.0, "s": 1000.0}


def frame_files(folder: Path, prefix: str) -> list[Path]:
    """The frames `PREFIX<t>` in `folder`, in order of t."""
    pattern = re.compile(re.escape(prefix) + r"(\d+)$")
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := pattern.match(p.name))]
    return [p for _t, p in sorted(found)]


def median_matrix(frames: list[np.ndarray]) -> np.ndarray:
    """Per entry, the median over all frames (a 0 counts); NaN where it is not positive
    (missing in more than half the frames); the diagonal 0."""
    med = np.median(np.stack(frames).astype(float), axis=0)
    med[~(med > 0)] = np.nan
    np.fill_diagonal(med, 0.0)
    return med


def symmetric(rtt: np.ndarray) -> np.ndarray:
    """Mean of the two directions, or the one that is known."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # both unknown: NaN
        return np.nanmean(np.stack([rtt, rtt.T]), axis=0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=Path, required=True, help="folder holding the frames")
    ap.add_argument("--prefix", required=True, help="frame file name before its number")
    ap.add_argument("--unit", choices=sorted(SCALE_TO_MS), required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--name", default="NetLatency-Data", help="source name for description")
    args = ap.parse_args(argv)
    if not args.frames.is_dir():
        ap.error(f"--frames: no such folder {args.frames}")
    files = frame_files(args.frames, args.prefix)
    if not files:
        ap.error(f"--prefix: no file {args.prefix}<t> in {args.frames}")
    frames = [np.loadtxt(f) * SCALE_TO_MS[args.unit] for f in files]
    shapes = {f.shape for f in frames}
    shape = next(iter(shapes))
    if len(shapes) != 1 or len(shape) != 2 or shape[0] != shape[1]:
        ap.error(f"frames: need equal square matrices, got shapes {sorted(shapes)}")
    rtt = median_matrix(frames)
    sym = symmetric(rtt)
    n = rtt.shape[0]
    description = (f"{args.name}: per directed pair (row = source) median over {len(files)} "
                   f"frames of RTT in ms (source unit {args.unit}). NaN = median was 0 "
                   f"(missing in more than half the frames). rtt_sym_ms = mean of both directions.")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out, rtt_ms=rtt.astype(np.float32),
                        rtt_sym_ms=sym.astype(np.float32), description=np.array(description))
    unknown = int(np.isnan(rtt).sum())
    print(f"{args.out}: {n} hosts, {len(files)} frames, {unknown} unknown directed pairs, "
          f"{args.out.stat().st_size / 1e6:.2f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
