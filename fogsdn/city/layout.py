"""Seed 003's city: fog nodes with slots, cell towers and mobile clients in a square
area, random-waypoint mobility and position-trace replay (pure, seeded).

Defaults are the seed's scale (29 fog nodes, 318 slots, a 1500 m square); as in the
seed, about half of the fog nodes stand at their tower. The position trace format
(`t_s,client,x_m,y_m`, replayed by linear interpolation) is in docs/coordinates.md.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

Point = tuple[float, float]


class LayoutError(ValueError):
    """A bad layout parameter or trace line; the message names it."""


@dataclass(frozen=True)
class FogSite:
    name: str
    position: Point
    slots: int


@dataclass(frozen=True)
class CityLayout:
    side_m: float
    towers: tuple[Point, ...]
    fog_nodes: tuple[FogSite, ...]

    @property
    def total_slots(self) -> int:
        return sum(n.slots for n in self.fog_nodes)


def split_slots(total: int, parts: int, rng: random.Random) -> list[int]:
    """`parts` random positive integers summing to `total`."""
    if parts < 1 or total < parts:
        raise LayoutError(f"slots: need total >= parts >= 1, got {total} over {parts}")
    cuts = sorted(rng.sample(range(1, total), parts - 1))
    edges = [0, *cuts, total]
    return [b - a for a, b in zip(edges, edges[1:], strict=False)]


def make_city(rng: random.Random, fog_nodes: int = 29, total_slots: int = 318,
              area_km2: float = 2.25, at_tower_fraction: float = 0.5) -> CityLayout:
    """Ranges are checked where the study file is read (`fogsdn.city.study_spec.CityStudy`)."""
    side = math.sqrt(area_km2) * 1000.0
    towers = tuple((rng.uniform(0, side), rng.uniform(0, side)) for _ in range(fog_nodes))
    slots = split_slots(total_slots, fog_nodes, rng)
    sites = []
    for i, tower in enumerate(towers):
        pos = tower if rng.random() < at_tower_fraction else (rng.uniform(0, side),
                                                              rng.uniform(0, side))
        sites.append(FogSite(f"fog{i}", pos, slots[i]))
    return CityLayout(side, towers, tuple(sites))


def random_positions(n: int, side_m: float, rng: random.Random) -> list[Point]:
    return [(rng.uniform(0, side_m), rng.uniform(0, side_m)) for _ in range(n)]


@dataclass(frozen=True)
class Waypoint:
    """A random-waypoint walker: where it is, where it goes, how fast, how long it rests."""

    position: Point
    target: Point
    speed_mps: float
    pause_left_s: float = 0.0


@dataclass(frozen=True)
class WaypointParams:
    """Ranges checked where the study file is read (`fogsdn.city.study_spec.MobilitySpec`)."""

    side_m: float
    speed_mps: tuple[float, float] = (0.5, 15.0)  # pedestrians to city traffic
    pause_s: tuple[float, float] = (0.0, 10.0)


def start_walker(position: Point, p: WaypointParams, rng: random.Random) -> Waypoint:
    target = (rng.uniform(0, p.side_m), rng.uniform(0, p.side_m))
    return Waypoint(position, target, rng.uniform(*p.speed_mps))


def advance(w: Waypoint, dt_s: float, p: WaypointParams, rng: random.Random) -> Waypoint:
    """The walker `dt_s` later: rests out its pause, walks straight to its target, then
    pauses and draws a new target and speed."""
    if dt_s < 0:
        raise LayoutError(f"dt_s: must be >= 0, got {dt_s}")
    while dt_s > 0:
        if w.pause_left_s > 0:
            rest = min(w.pause_left_s, dt_s)
            w = Waypoint(w.position, w.target, w.speed_mps, w.pause_left_s - rest)
            dt_s -= rest
            continue
        dist = math.dist(w.position, w.target)
        reach_s = dist / w.speed_mps
        if reach_s > dt_s:
            f = dt_s * w.speed_mps / dist
            pos = (w.position[0] + f * (w.target[0] - w.position[0]),
                   w.position[1] + f * (w.target[1] - w.position[1]))
            return Waypoint(pos, w.target, w.speed_mps, 0.0)
        dt_s -= reach_s
        w = Waypoint(w.target, (rng.uniform(0, p.side_m), rng.uniform(0, p.side_m)),
                     rng.uniform(*p.speed_mps), rng.uniform(*p.pause_s))
    return w


@dataclass(frozen=True)
class PositionTrace:
    """Fixes per client, sorted by time; `at` interpolates."""

    fixes: dict[str, tuple[tuple[float, Point], ...]]

    def clients(self) -> list[str]:
        return sorted(self.fixes)

    def at(self, client: str, t_s: float) -> Point:
        try:
            fixes = self.fixes[client]
        except KeyError:
            raise LayoutError(f"trace: no fixes for client {client!r}") from None
        i = bisect.bisect_right(fixes, t_s, key=lambda f: f[0])
        if i == 0:
            return fixes[0][1]
        if i == len(fixes):
            return fixes[-1][1]
        (t0, p0), (t1, p1) = fixes[i - 1], fixes[i]
        f = (t_s - t0) / (t1 - t0)
        return (p0[0] + f * (p1[0] - p0[0]), p0[1] + f * (p1[1] - p0[1]))


def parse_trace(lines: Iterable[str], side_m: float | None = None) -> PositionTrace:
    """Read a position trace (`t_s,client,x_m,y_m`); one-line errors name the line."""
    rows: dict[str, dict[float, Point]] = {}
    it = iter(lines)
    header = next(it, "").strip()
    if [h.strip() for h in header.split(",")] != ["t_s", "client", "x_m", "y_m"]:
        raise LayoutError("trace line 1: header must be 't_s,client,x_m,y_m'")
    for n, raw in enumerate(it, start=2):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = [x.strip() for x in line.split(",")]
        if len(parts) != 4:
            raise LayoutError(f"trace line {n}: expected 4 fields, got {len(parts)}")
        try:
            t, x, y = float(parts[0]), float(parts[2]), float(parts[3])
        except ValueError:
            raise LayoutError(f"trace line {n}: t_s, x_m and y_m must be numbers") from None
        if not all(math.isfinite(v) for v in (t, x, y)):
            raise LayoutError(f"trace line {n}: values must be finite")
        if not parts[1]:
            raise LayoutError(f"trace line {n}: empty client")
        if side_m is not None and not (0 <= x <= side_m and 0 <= y <= side_m):
            raise LayoutError(f"trace line {n}: position outside the {side_m:.0f} m area")
        per = rows.setdefault(parts[1], {})
        if t in per:
            raise LayoutError(f"trace line {n}: second fix for {parts[1]!r} at t={t}")
        per[t] = (x, y)
    if not rows:
        raise LayoutError("trace: no fixes")
    return PositionTrace({c: tuple(sorted(f.items())) for c, f in rows.items()})


def read_position_trace(path: Path, side_m: float | None = None) -> PositionTrace:
    """`parse_trace` of a file (the study's `mobility.trace`), every failure one
    LayoutError starting with the file: a missing or binary file too."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        return parse_trace(lines, side_m)
    except LayoutError as err:
        raise LayoutError(f"{path}: {err}") from None
    except UnicodeDecodeError as err:
        raise LayoutError(f"{path}: not UTF-8 text (byte {err.start})") from None
    except OSError as err:
        raise LayoutError(f"{path}: cannot read: {err.strerror or err}") from None
