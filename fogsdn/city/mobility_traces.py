"""Public mobility traces (SUMO FCD, BonnMotion, the ONE) to the city study's position
trace (`t_s,client,x_m,y_m`), placed in the study's square and clipped to it and to a
time window (docs/coordinates.md, Mobility from traces).

Pure: readers yield `Fix`es; `convert` makes tracks and `csv_lines` the CSV. Every
error is a `TraceError` naming the source and where in it. Clipping cuts a segment where
it crosses the border, so sparse waypoint traces lose nothing inside the square.
"""

from __future__ import annotations

import gzip
import math
import random
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal, NamedTuple, cast

from fogsdn.city.layout import LayoutError, parse_trace

Point = tuple[float, float]
Sample = tuple[float, float, float]  # t_s, x, y
TraceFormat = Literal["sumo-fcd", "bonnmotion", "one"]
FORMATS: tuple[TraceFormat, ...] = ("sumo-fcd", "bonnmotion", "one")
FCD_KINDS = ("vehicle", "person", "container")
WGS84_A_M, WGS84_E2 = 6_378_137.0, 0.006_694_379_990_14  # the ellipsoid GPS and SUMO use
# the largest |time| or |coordinate| a trace or an option may give (31 years of seconds, a
# million km): beyond it differences overflow to inf and NaN, and resampling never ends
MAX_ABS = 1e9
MAX_SIDE_M = 1e7  # the study's square: a city, not a continent
MAX_RESAMPLED = 10**7  # samples one client's resampled track may have


class TraceError(ValueError):
    """A bad trace or option; the one-line message names the source and the place."""


class Fix(NamedTuple):
    """One position of one client, in the source's time and coordinates."""

    t_s: float
    client: str
    x: float
    y: float


def _number(text: str | None, what: str) -> float:
    if text is None:
        raise TraceError(f"has no {what}")
    try:
        v = float(text)
    except ValueError:
        raise TraceError(f"{what} {text!r} is not a number") from None
    if not math.isfinite(v):
        raise TraceError(f"{what} {text!r} is not finite")
    if abs(v) > MAX_ABS:
        raise TraceError(f"{what} {text!r} is beyond ±{MAX_ABS:g}")
    return v


def _bounded(value: float | None, what: str, low: float = -MAX_ABS, high: float = MAX_ABS
             ) -> None:
    """An option's number: finite and within [low, high] (None: not given)."""
    if value is not None and not (math.isfinite(value) and low <= value <= high):
        raise TraceError(f"{what}: must be a number in [{low:g}, {high:g}], got {value}")


@contextmanager
def _place(where: str, sep: str = ": ") -> Iterator[None]:
    """A `TraceError` raised inside is raised again with `where` (source, line...) first."""
    try:
        yield
    except TraceError as err:
        raise TraceError(f"{where}{sep}{err}") from None


class _Order:
    """Each client's fixes must come in time order: a repeat of the same fix is dropped,
    anything else at or before the previous time is an error."""

    def __init__(self) -> None:
        self.last: dict[str, Fix] = {}

    def admit(self, fix: Fix, who: str, after: str = "") -> bool:
        """True for a new fix; the error names `who` (place and client), then `after`."""
        prev = self.last.get(fix.client)
        if prev is not None and fix.t_s <= prev.t_s:
            if fix == prev:
                return False
            raise TraceError(f"{who} at t={fix.t_s:g} is not after its fix at t={prev.t_s:g}"
                             + after)
        self.last[fix.client] = fix
        return True


# -- readers ------------------------------------------------------------------------------
def read_sumo_fcd(source: IO[bytes] | str, name: str,
                  kinds: Iterable[str] = ("vehicle", "person"),
                  until_s: float = math.inf) -> Iterator[Fix]:
    """SUMO's `--fcd-output` (`<fcd-export><timestep time=..><vehicle id x y/>..`), streamed
    one timestep at a time. `kinds`: which of vehicle, person, container become clients;
    reading stops after the first timestep past `until_s` (the file is in time order)."""
    wanted = set(kinds)
    if not wanted or not wanted <= set(FCD_KINDS):
        raise TraceError(f"{name}: kinds must be among {', '.join(FCD_KINDS)}, got "
                         f"{sorted(wanted)}")
    order = _Order()
    root: ET.Element | None = None
    step, prev_t = 0, -math.inf
    try:
        for event, elem in ET.iterparse(source, events=("start", "end")):
            if root is None:
                root = elem
                if elem.tag != "fcd-export":
                    raise TraceError(f"{name}: root element is <{elem.tag}>, expected "
                                     "<fcd-export> (SUMO --fcd-output)")
                continue
            if event != "end" or elem.tag != "timestep":
                continue
            step += 1
            where = f"{name}: timestep {step}"
            with _place(where):
                t = _number(elem.get("time"), "time")
            if t < prev_t:
                raise TraceError(f"{where}: time {t:g} is before the previous timestep's "
                                 f"{prev_t:g}")
            prev_t = t
            for child in elem:
                if child.tag not in wanted:
                    continue
                cid = child.get("id")
                if not cid:
                    raise TraceError(f"{where}: a {child.tag} has no id")
                who = f"{where}: {child.tag} {cid!r}"
                with _place(who, " "):
                    fix = Fix(t, cid, _number(child.get("x"), "x"), _number(child.get("y"), "y"))
                if order.admit(fix, who):
                    yield fix
            root.clear()  # keep one timestep in memory, not the file
            if t > until_s:
                return
    except ET.ParseError as err:
        raise TraceError(f"{name}: not well-formed XML: {err}") from None
    if root is None:
        raise TraceError(f"{name}: empty file")


def _data_lines(lines: Iterable[str]) -> Iterator[tuple[int, list[str]]]:
    for n, raw in enumerate(lines, start=1):
        text = raw.strip()
        if text and not text.startswith("#"):
            yield n, text.split()


def read_bonnmotion(lines: Iterable[str], name: str) -> Iterator[Fix]:
    """BonnMotion's native `.movements` file: one line per node, `t1 x1 y1 t2 x2 y2 ...`
    (2D). Nodes are named by their line's order, from 0."""
    order = _Order()
    for node, (n, fields) in enumerate(_data_lines(lines)):
        where = f"{name}: line {n}"
        if len(fields) % 3:
            raise TraceError(f"{where}: {len(fields)} numbers, expected (t x y) triples "
                             "(3D or status files are not supported)")
        client = str(node)
        for i in range(0, len(fields), 3):
            with _place(where):
                t, x, y = (_number(fields[i + k], f"field {i + k + 1}") for k in range(3))
            fix = Fix(t, client, x, y)
            if order.admit(fix, f"{where}: node {client}", f" (field {i + 1})"):
                yield fix


def read_one(lines: Iterable[str], name: str) -> Iterator[Fix]:
    """The ONE simulator's external movement file: a header `minTime maxTime minX maxX minY
    maxY [minZ maxZ]`, then `time id x y [z]` lines sorted by time, inside the
    header's bounds.
    Positions are taken relative to (minX, minY), as the ONE does."""
    order = _Order()
    header: list[float] | None = None
    prev_t = -math.inf
    for n, fields in _data_lines(lines):
        where = f"{name}: line {n}"
        with _place(where):
            if header is None:
                if len(fields) not in (6, 8):
                    bonn = len(fields) > 8 and len(fields) % 3 == 0
                    raise TraceError(
                        "header needs minTime maxTime minX maxX minY maxY [minZ maxZ], got "
                        f"{len(fields)} fields" + (
                            ": this looks like a BonnMotion .movements file (t x y "
                            "triples); use --format bonnmotion" if bonn else ""))
                header = [_number(f, h) for f, h in zip(
                    fields, ("minTime", "maxTime", "minX", "maxX", "minY", "maxY"),
                    strict=False)]
                continue
            if len(fields) not in (4, 5):
                raise TraceError(f"expected 'time id x y [z]', got {len(fields)} fields")
            t = _number(fields[0], "time")
            if t < prev_t:
                raise TraceError(f"time {t:g} is before the previous line's {prev_t:g} (the "
                                 "file must be sorted by time)")
            prev_t = t
            x, y = _number(fields[2], "x"), _number(fields[3], "y")
            if not (header[0] <= t <= header[1] and header[2] <= x <= header[3]
                    and header[4] <= y <= header[5]):
                raise TraceError(f"time {t:g}, x {x:g}, y {y:g} outside the header's bounds "
                                 f"(time {header[0]:g}-{header[1]:g}, x {header[2]:g}-"
                                 f"{header[3]:g}, y {header[4]:g}-{header[5]:g})")
            fix = Fix(t, fields[1], x - header[2], y - header[4])
        if order.admit(fix, f"{where}: id {fix.client!r}"):
            yield fix
    if header is None:
        raise TraceError(f"{name}: empty file (no header line)")


# -- placing in the study's square ----------------------------------------------------------
@dataclass(frozen=True)
class Placement:
    """How source coordinates become metres in the study's [0, side_m]² square.

    `anchor` (a source point) lands at the square's lower-left corner, or at its centre
    with `anchor_is_center`; without one, the trace's bounding box's lower-left corner
    does. `fit` instead scales the bounding box uniformly to fill the square (centred).
    `scale` is metres per source unit; `geo` reads x, y as longitude, latitude in degrees
    (SUMO's `--fcd-output.geo`) and projects them about the anchor's latitude."""

    side_m: float = 1500.0
    anchor: Point | None = None
    anchor_is_center: bool = False
    scale: float = 1.0
    fit: bool = False
    geo: bool = False

    def __post_init__(self) -> None:
        if not (math.isfinite(self.side_m) and 0 < self.side_m <= MAX_SIDE_M):
            raise TraceError(f"area: side must be > 0 m and at most {MAX_SIDE_M:g} m, got "
                             f"{self.side_m}")
        _bounded(self.scale, "scale", 1 / MAX_ABS)
        for v in self.anchor or ():
            _bounded(v, "origin/center")
        if self.fit and self.anchor is not None:
            raise TraceError("fit: scales the whole trace into the area; it takes no "
                             "origin or center")
        if self.geo and self.scale != 1.0:
            raise TraceError("scale: geographic coordinates are projected to metres; "
                             "no scale applies")

    @property
    def needs_bounds(self) -> bool:
        return self.fit or self.anchor is None

    def mapper(self, bounds: tuple[float, float, float, float] | None = None
               ) -> Callable[[float, float], Point]:
        """The source-to-study map; `bounds` (min x, min y, max x, max y of the source)
        when `needs_bounds`."""
        if self.needs_bounds and bounds is None:
            raise TraceError("placement: needs the trace's bounds")
        if self.anchor is not None:
            ref = self.anchor
        else:
            assert bounds is not None
            ref = (bounds[0], bounds[1])
        kx, ky = metres_per_degree(ref[1]) if self.geo else (self.scale, self.scale)
        at = (self.side_m / 2, self.side_m / 2) if self.anchor_is_center else (0.0, 0.0)
        if self.fit:
            assert bounds is not None
            w, h = (bounds[2] - bounds[0]) * kx, (bounds[3] - bounds[1]) * ky
            f = self.side_m / max(w, h) if max(w, h) > 0 else 1.0
            kx, ky = kx * f, ky * f
            at = ((self.side_m - w * f) / 2, (self.side_m - h * f) / 2)
        return lambda x, y: (at[0] + (x - ref[0]) * kx, at[1] + (y - ref[1]) * ky)


def metres_per_degree(lat_deg: float) -> tuple[float, float]:
    """Metres per degree of longitude and of latitude at `lat_deg` on WGS84: the local
    (equirectangular) projection `--geo` uses, under 1 m off across a 1.5 km square."""
    phi = math.radians(lat_deg)
    w = 1.0 - WGS84_E2 * math.sin(phi) ** 2
    meridian = WGS84_A_M * (1.0 - WGS84_E2) / w ** 1.5
    normal = WGS84_A_M / math.sqrt(w)
    return normal * math.cos(phi) * math.pi / 180.0, meridian * math.pi / 180.0


def clip_segment(a: Sample, b: Sample, side_m: float, begin_s: float, end_s: float
                 ) -> tuple[float, float] | None:
    """The part u in [0, 1] of the straight move a -> b (time, x, y all linear in u) inside
    the square and the time window (Liang-Barsky), or None."""
    lo, hi = 0.0, 1.0
    for p0, d, low, high in ((a[0], b[0] - a[0], begin_s, end_s),
                             (a[1], b[1] - a[1], 0.0, side_m),
                             (a[2], b[2] - a[2], 0.0, side_m)):
        if d == 0:
            if not low <= p0 <= high:
                return None
            continue
        u0, u1 = (low - p0) / d, (high - p0) / d
        if u0 > u1:
            u0, u1 = u1, u0
        lo, hi = max(lo, u0), min(hi, u1)
        if lo > hi:
            return None
    return lo, hi


def _inside(s: Sample, side_m: float, begin_s: float, end_s: float) -> bool:
    return begin_s <= s[0] <= end_s and 0 <= s[1] <= side_m and 0 <= s[2] <= side_m


def _at(a: Sample, b: Sample, u: float) -> Sample:
    return (a[0] + u * (b[0] - a[0]), a[1] + u * (b[1] - a[1]), a[2] + u * (b[2] - a[2]))


def clip_track(piece: list[Sample], side_m: float, begin_s: float = -math.inf,
               end_s: float = math.inf) -> list[Sample]:
    """A client's consecutive samples cut to the square and the window: the samples inside
    plus the points where its path crosses the border."""
    if len(piece) == 1:
        return list(piece) if _inside(piece[0], side_m, begin_s, end_s) else []
    out: list[Sample] = []
    for a, b in zip(piece, piece[1:], strict=False):
        span = clip_segment(a, b, side_m, begin_s, end_s)
        if span is None:
            continue
        for u in span:
            s = _at(a, b, u) if 0 < u < 1 else (a if u == 0 else b)
            s = (s[0], min(max(s[1], 0.0), side_m), min(max(s[2], 0.0), side_m))
            if not out or s[0] > out[-1][0]:
                out.append(s)
    return out


# -- conversion -----------------------------------------------------------------------------
@dataclass(frozen=True)
class ConvertOptions:
    """What to keep: a window of source time [begin_s, end_s] (output time starts at
    begin_s, or at the first fix kept), `clients` of them (the first to appear, or a
    random sample with `seed`) among those present at least `min_span_s`, resampled to
    `step_s` if given, renamed `<rename>0..` (zero-padded, so sorted = chosen order)."""

    placement: Placement = Placement()
    begin_s: float | None = None
    end_s: float | None = None
    clients: int | None = None
    seed: int | None = None
    min_span_s: float = 0.0
    step_s: float | None = None
    rename: str | None = None

    def __post_init__(self) -> None:
        _bounded(self.begin_s, "begin")
        _bounded(self.end_s, "end")
        _bounded(self.min_span_s, "min span", 0.0)
        if self.begin_s is not None and self.end_s is not None and self.end_s <= self.begin_s:
            raise TraceError(f"window: end {self.end_s:g} s must be after begin "
                             f"{self.begin_s:g} s")
        if self.clients is not None and self.clients < 1:
            raise TraceError(f"clients: must be >= 1, got {self.clients}")
        if self.step_s is not None and not (math.isfinite(self.step_s) and self.step_s >= 0.001):
            raise TraceError(f"step: must be >= 0.001 s, got {self.step_s}")
        if self.rename is not None and not _csv_safe(self.rename, allow_empty=True):
            raise TraceError(f"rename: prefix {self.rename!r} cannot stand in a CSV field")


@dataclass(frozen=True)
class Converted:
    """The chosen clients' tracks in study time and metres, and what was dropped."""

    tracks: dict[str, list[Sample]]
    clients_read: int
    clients_in_area: int
    time_origin_s: float  # the source time that became t = 0


def _csv_safe(name: str, allow_empty: bool = False) -> bool:
    return (bool(name) or allow_empty) and name == name.strip() and not any(
        c in name for c in ",\r\n\"")


def _pieces(fixes: Iterable[Fix], to_study: Callable[[float, float], Point], side_m: float,
            begin_s: float, end_s: float, seen: set[str]) -> dict[str, list[list[Sample]]]:
    """Streamed: per client, the runs of consecutive samples whose moves touch the square
    and window (a run breaks where the client was away), so a large file is never held."""
    pieces: dict[str, list[list[Sample]]] = {}
    prev: dict[str, tuple[Sample, bool]] = {}  # last sample, and whether it was kept
    for f in fixes:
        seen.add(f.client)
        s = (f.t_s, *to_study(f.x, f.y))
        last = prev.get(f.client)
        if last is None:
            keep = _inside(s, side_m, begin_s, end_s)
            if keep:
                pieces.setdefault(f.client, []).append([s])
        else:
            keep = clip_segment(last[0], s, side_m, begin_s, end_s) is not None
            if keep:
                runs = pieces.setdefault(f.client, [])
                if last[1]:
                    runs[-1].append(s)
                else:
                    runs.append([last[0], s])
        prev[f.client] = (s, keep)
    return pieces


def _bounds(fixes: list[Fix]) -> tuple[float, float, float, float]:
    return (min(f.x for f in fixes), min(f.y for f in fixes),
            max(f.x for f in fixes), max(f.y for f in fixes))


def resample(track: list[Sample], step_s: float) -> list[Sample]:
    """The track at t = k·step within its first and last sample, interpolated linearly
    (a track shorter than one step keeps its first sample)."""
    first, last = track[0][0], track[-1][0]
    k0, k1 = math.ceil(first / step_s - 1e-9), math.floor(last / step_s + 1e-9)
    if k1 - k0 >= MAX_RESAMPLED:
        raise TraceError(f"step: {step_s:g} s over {last - first:g} s is more than "
                         f"{MAX_RESAMPLED:g} samples; give a larger step or a window")
    out: list[Sample] = []
    i = 0
    for k in range(k0, k1 + 1):
        t = round(k * step_s, 9)
        while i + 1 < len(track) and track[i + 1][0] < t:
            i += 1
        a = track[i]
        b = track[i + 1] if i + 1 < len(track) else a
        u = 0.0 if b[0] == a[0] else min(max((t - a[0]) / (b[0] - a[0]), 0.0), 1.0)
        s = _at(a, b, u)
        out.append((t, s[1], s[2]))
    return out or [track[0]]


def select_clients(tracks: dict[str, list[Sample]], n: int | None, seed: int | None,
                   min_span_s: float = 0.0) -> list[str]:
    """Those present at least `min_span_s`: the first n to appear, or n drawn with `seed`."""
    ok = [c for c, tr in tracks.items() if tr[-1][0] - tr[0][0] >= min_span_s]
    if n is None:
        return ok
    if n > len(ok):
        raise TraceError(f"clients: asked for {n}, the trace has {len(ok)} in the area and "
                         f"window" + (f" present >= {min_span_s:g} s" if min_span_s else ""))
    return random.Random(seed).sample(ok, n) if seed is not None else ok[:n]


def _degrees(fixes: Iterable[Fix]) -> Iterator[Fix]:
    """`--geo`'s fixes, each checked to be a longitude and a latitude."""
    for f in fixes:
        if not (-180.0 <= f.x <= 180.0 and -90.0 <= f.y <= 90.0):
            raise TraceError(f"geo: client {f.client} at t={f.t_s:g} is at x={f.x:g}, "
                             f"y={f.y:g}, not a longitude in [-180, 180] and a latitude in "
                             "[-90, 90]: these look like metres (e.g. UTM); drop --geo")
        yield f


def _not_degrees(bounds: tuple[float, float, float, float]) -> None:
    """Refuse metres that look like degrees: a whole trace within one unit of longitude
    and latitude ranges would be squashed into a metre of the study's square."""
    x0, y0, x1, y1 = bounds
    w, h = x1 - x0, y1 - y0
    if (-180.0 <= x0 <= x1 <= 180.0 and -90.0 <= y0 <= y1 <= 90.0
            and 0 < max(w, h) < 1.0):
        raise TraceError(f"trace: all its fixes lie within {w:.3g} x {h:.3g} units at about "
                         f"({x0:.4g}, {y0:.4g}): if these are longitude and latitude, give "
                         "--geo; if metres, give --scale or --fit")


def convert(fixes: Iterable[Fix], opts: ConvertOptions) -> Converted:
    """Fixes (any reader's) to the study's tracks, as `ConvertOptions` says."""
    p = opts.placement
    begin = opts.begin_s if opts.begin_s is not None else -math.inf
    end = opts.end_s if opts.end_s is not None else math.inf
    seen: set[str] = set()
    if p.geo:
        fixes = _degrees(fixes)
    if p.needs_bounds:
        held = list(fixes)  # the bounds need every fix first
        in_window = [f for f in held if begin <= f.t_s <= end]
        if not in_window:
            raise TraceError("trace: no fixes in the window" if held else "trace: no fixes")
        bounds = _bounds(in_window)
        if not p.geo and not p.fit and p.scale == 1.0:
            _not_degrees(bounds)
        pieces = _pieces(held, p.mapper(bounds), p.side_m, begin, end, seen)
    else:
        pieces = _pieces(fixes, p.mapper(), p.side_m, begin, end, seen)
    clipped: dict[str, list[Sample]] = {}
    for client, runs in pieces.items():
        track: list[Sample] = []
        for run in runs:
            for s in clip_track(run, p.side_m, begin, end):
                if not track or s[0] > track[-1][0]:
                    track.append(s)
        if track:
            clipped[client] = track
    if not clipped:
        raise TraceError(f"trace: no client inside the {p.side_m:g} m area"
                         + (" in the window" if opts.begin_s is not None
                            or opts.end_s is not None else ""))
    origin = opts.begin_s if opts.begin_s is not None else min(
        tr[0][0] for tr in clipped.values())
    chosen = select_clients(clipped, opts.clients, opts.seed, opts.min_span_s)
    if not chosen:
        raise TraceError(f"clients: none present >= {opts.min_span_s:g} s")
    width = len(str(len(chosen) - 1))
    out: dict[str, list[Sample]] = {}
    for i, client in enumerate(chosen):
        track = [(t - origin, x, y) for t, x, y in clipped[client]]
        if opts.step_s is not None:
            track = resample(track, opts.step_s)
        name = client if opts.rename is None else f"{opts.rename}{i:0{width}d}"
        if not _csv_safe(name):
            raise TraceError(f"client {name!r}: cannot stand in a CSV field; use --rename")
        out[name] = track
    return Converted(out, len(seen), len(clipped), origin)


def csv_lines(tracks: dict[str, list[Sample]]) -> Iterator[str]:
    """The position-trace CSV (fogsdn/city/layout.py): ms and cm resolution; a sample
    that rounds onto its predecessor's time is left out."""
    yield "t_s,client,x_m,y_m"
    for client, track in tracks.items():
        last = ""
        for t, x, y in track:
            if (ts := f"{t:.3f}") != last:
                last = ts
                yield f"{ts},{client},{x:.2f},{y:.2f}"


def read_fixes(fmt: TraceFormat, stream: IO[bytes], name: str,
               kinds: Iterable[str] = ("vehicle", "person"),
               until_s: float = math.inf) -> Iterator[Fix]:
    """The reader for `fmt` on an open binary stream (text formats are read as UTF-8);
    `until_s`: the window's end, where a time-ordered format can stop reading."""
    if fmt == "sumo-fcd":
        return read_sumo_fcd(stream, name, kinds, until_s)

    def text() -> Iterator[str]:
        for n, raw in enumerate(stream, start=1):
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError:
                raise TraceError(f"{name}: line {n}: not UTF-8 text") from None

    if fmt == "bonnmotion":
        return read_bonnmotion(text(), name)
    if fmt == "one":
        return read_one(text(), name)
    raise TraceError(f"format: unknown {fmt!r} (known: {', '.join(FORMATS)})")


def convert_file(fmt: TraceFormat, path: Path, opts: ConvertOptions,
                 kinds: Iterable[str] = ("vehicle", "person")) -> tuple[Converted, list[str]]:
    """The trace in `path` (read compressed when it ends in .gz) converted, and its CSV lines
    read back as the city study will: every failure one `TraceError` starting with the
    file's name (then the place in it, where there is one)."""
    name = path.name
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with cast(IO[bytes], opener(path, "rb")) as stream:
            until = opts.end_s if opts.end_s is not None else math.inf
            result = convert(read_fixes(fmt, stream, name, kinds, until), opts)
        lines = list(csv_lines(result.tracks))
        parse_trace(lines, side_m=opts.placement.side_m)
    except TraceError as err:
        text = str(err)
        raise TraceError(text if text.startswith(f"{name}:") else f"{name}: {text}") from None
    except LayoutError as err:  # ours: a conversion the study could not read back
        raise TraceError(f"{name}: converted, but the result is not a position trace: "
                         f"{err}") from None
    except (OSError, EOFError, zlib.error) as err:
        raise TraceError(f"{name}: cannot read: {err}") from None
    return result, lines
