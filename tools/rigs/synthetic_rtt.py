"""Synthetic RTT truth matrices (ms) for testing coordinate systems (pure): each shape
stresses something else, from exact low-dimensional embeddings to no geometry at all.
"""

from __future__ import annotations

import math
import random

Matrix = list[list[float]]


def line(n: int, spacing_ms: float) -> Matrix:
    return [[abs(i - j) * spacing_ms for j in range(n)] for i in range(n)]


def grid(side: int, spacing_ms: float) -> Matrix:
    """side x side nodes on a square lattice, Euclidean RTTs."""
    pts = [(i % side, i // side) for i in range(side * side)]
    return [[math.dist(p, q) * spacing_ms for q in pts] for p in pts]


def split(n: int, lan_ms: float, wan_ms: float) -> Matrix:
    """Two halves: `lan_ms` within a half, `wan_ms` across."""
    half = n // 2
    return [[0.0 if i == j else (lan_ms if (i < half) == (j < half) else wan_ms)
             for j in range(n)] for i in range(n)]


def height_circle(n: int, radius_ms: float, rng: random.Random,
                  access_ms: tuple[float, float] = (1.0, 20.0)) -> Matrix:
    """Hosts on a circle, each behind an access link of random length: RTT = chord plus
    both access links, exactly what a 2-D coordinate plus a height can express."""
    angles = [2 * math.pi * i / n for i in range(n)]
    access = [rng.uniform(*access_ms) for _ in range(n)]
    pts = [(radius_ms * math.cos(a), radius_ms * math.sin(a)) for a in angles]
    return [[0.0 if i == j else math.dist(pts[i], pts[j]) + access[i] + access[j]
             for j in range(n)] for i in range(n)]


def random_symmetric(n: int, mean_ms: float, deviation_ms: float, rng: random.Random) -> Matrix:
    """Independent uniform RTTs per pair: no geometry to find."""
    m = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            m[i][j] = m[j][i] = mean_ms + rng.uniform(-deviation_ms, deviation_ms)
    return m
