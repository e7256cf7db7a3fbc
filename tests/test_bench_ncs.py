"""bench_ncs.py and the replay behind it: NaN pairs, scoring, the JSON keys, bad input."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

from rigs.ncs_accuracy import MatrixError, check_matrix, meridian_and_random, vivaldi_median_error

SEATTLE = Path(__file__).parent / "data" / "seattle99.npz"


def _plane(n: int, seed: int) -> np.ndarray:
    rng = random.Random(seed)
    pts = [(rng.uniform(0, 40), rng.uniform(0, 40)) for _ in range(n)]
    return np.array([[math.dist(p, q) + 2.0 for q in pts] for p in pts])


def test_vivaldi_replay_skips_unknown_pairs() -> None:
    m = _plane(20, 1)
    holes = m.copy()
    holes[0, 1:6] = np.nan
    holes[3, 4] = 0.0  # non-positive counts as unknown
    assert vivaldi_median_error(holes, 2, 300, seed=2) < 0.05


def test_meridian_beats_random_on_a_plane() -> None:
    mer, rnd = meridian_and_random(_plane(60, 3), servers=20, seed=4)
    assert mer.queries == 40
    assert mer.hit_rate > 2 * rnd.hit_rate
    assert mer.mean_extra_ms < rnd.mean_extra_ms / 3
    assert mer.probes_per_query is not None and mer.probes_per_query >= 1


@pytest.mark.parametrize("bad, why", [
    (np.zeros((3, 4)), "square"),
    (np.full((5, 5), np.nan), "no known RTT"),
    (np.ones((2, 2)), "at least 3"),
])
def test_bad_matrices_are_named(bad: np.ndarray, why: str) -> None:
    with pytest.raises(MatrixError, match=why):
        check_matrix(bad)


def test_servers_out_of_range() -> None:
    with pytest.raises(MatrixError, match="servers"):
        meridian_and_random(_plane(10, 1), servers=10, seed=1)


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_ncs.py"), *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_script_json_on_seattle() -> None:
    r = _script("--matrix", str(SEATTLE), "--key", "rtt_sym_ms", "--cycles", "30", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for key in ("vivaldi_2dh", "vivaldi_8dh"):
        assert 0 < out[key]["median_rel_error"] < 1
    assert set(out["meridian"]) >= {"hit_rate", "mean_extra_ms", "probes_per_query"}
    assert set(out["random"]) >= {"hit_rate", "mean_extra_ms"}
    assert out["meridian"]["mean_extra_ms"] < out["random"]["mean_extra_ms"]


def test_script_names_a_missing_key(tmp_path: Path) -> None:
    f = tmp_path / "m.npz"
    np.savez(f, other=_plane(5, 1))
    r = _script("--matrix", str(f))
    assert r.returncode == 2
    assert "--key: 'rtt_ms' not in m.npz (has other)" in r.stderr
