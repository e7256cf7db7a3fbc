"""Public mobility traces (SUMO FCD, BonnMotion, the ONE) to the city study's position
trace: parsing, placing and clipping, resampling, client choice, bad input named, and a
converted trace driving the simulated city study."""

from __future__ import annotations

import gzip
import io
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from fogsdn.city.event_model import CitySimulation
from fogsdn.city.layout import LayoutError, parse_trace
from fogsdn.city.live_run import Mobility
from fogsdn.city.mobility_traces import (
    ConvertOptions,
    Fix,
    Placement,
    TraceError,
    clip_track,
    convert,
    csv_lines,
    metres_per_degree,
    read_bonnmotion,
    read_fixes,
    read_one,
    read_sumo_fcd,
    resample,
)
from fogsdn.city.study_run import CityStudyRun, run_city_point
from fogsdn.city.study_spec import load_city_study

DATA = ROOT / "tests" / "data"
FCD = DATA / "trace_sumo_fcd.xml"
BONN = DATA / "trace_bonnmotion.movements"
ONE = DATA / "trace_one.txt"
SCRIPT = ROOT / "scripts" / "convert_trace.py"
FCD_AREA = Placement(1500.0, anchor=(4000.0, 2000.0))  # the sample's network frame


def _fcd(**kw: object) -> list[Fix]:
    with FCD.open("rb") as f:
        return list(read_sumo_fcd(f, FCD.name, **kw))  # type: ignore[arg-type]


def _fcd_text(body: str) -> io.BytesIO:
    return io.BytesIO(f"<fcd-export>{body}</fcd-export>".encode())


# -- parsing -------------------------------------------------------------------------------
def test_sumo_fcd_reads_vehicles_and_persons_per_timestep() -> None:
    fixes = _fcd()
    assert {f.client for f in fixes} == {"v0", "v1", "v2", "v3", "v4", "p0", "p1"}
    assert fixes[0] == Fix(100.0, "v0", 4100.0, 2100.0)
    assert [f.t_s for f in fixes if f.client == "v3"] == [float(t) for t in range(103, 111)]
    p1 = [f for f in fixes if f.client == "p1"]
    assert p1[-1] == Fix(110.0, "p1", 4600.0, 2588.0)
    assert len(fixes) == 11 * 6 + 8
    only_people = _fcd(kinds=("person",))
    assert {f.client for f in only_people} == {"p0", "p1"}
    assert {f.client for f in _fcd(kinds=("container",))} == {"k0"}


def test_sumo_fcd_stops_after_the_window() -> None:
    with FCD.open("rb") as f:
        times = {fx.t_s for fx in read_sumo_fcd(f, FCD.name, until_s=102.5)}
    assert times == {100.0, 101.0, 102.0, 103.0}  # 103: the move out of the window
    body = '<timestep time="1"/><timestep time="2"/><timestep time="3"><vehicle/></timestep>'
    assert list(read_sumo_fcd(_fcd_text(body), "t.xml", until_s=1.5)) == []  # 3 never read


def test_bonnmotion_reads_one_node_per_line() -> None:
    fixes = list(read_bonnmotion(BONN.read_text().splitlines(), BONN.name))
    assert [f for f in fixes if f.client == "0"] == [
        Fix(0.0, "0", 10.0, 10.0), Fix(50.0, "0", 210.0, 10.0), Fix(80.0, "0", 210.0, 310.0),
        Fix(120.0, "0", 20.0, 310.0)]
    assert {f.client for f in fixes} == {"0", "1", "2", "3"}
    assert fixes[-3] == Fix(5.0, "3", 0.0, 390.0)


def test_one_reads_time_id_x_y_relative_to_the_header_minimum() -> None:
    fixes = list(read_one(ONE.read_text().splitlines(), ONE.name))
    assert fixes[:3] == [Fix(0.0, "a", 0.0, 0.0), Fix(0.0, "b", 600.0, 300.0),
                         Fix(0.0, "c", 300.0, 600.0)]
    assert [f for f in fixes if f.client == "c"][-1] == Fix(10.0, "c", 300.0, 300.0)
    # comments, blank lines and extra fields are skipped, as the ONE's reader does
    more = list(read_one(["# made by hand", "0 9 0 10 0 10", "", "1 n 2 3 extra"], "m.txt"))
    assert more == [Fix(1.0, "n", 2.0, 3.0)]


def test_a_repeated_fix_is_dropped_once() -> None:
    fixes = list(read_one(["0 9 0 10 0 10", "1 n 2 3", "1 n 2 3", "2 n 4 3"], "m.txt"))
    assert fixes == [Fix(1.0, "n", 2.0, 3.0), Fix(2.0, "n", 4.0, 3.0)]


# -- malformed input is named ------------------------------------------------------------------
@pytest.mark.parametrize(("body", "why"), [
    ('<timestep time="0"><vehicle id="v1" x="1" y="2"/></timestep>'
     '<timestep time="1"/><timestep time="2"><vehicle id="v1" y="2"/></timestep>',
     "trace.xml: timestep 3: vehicle 'v1' has no x"),
    ('<timestep time="0"><person id="p" x="1" y="zz"/></timestep>',
     "trace.xml: timestep 1: person 'p' y 'zz' is not a number"),
    ('<timestep time="0"><vehicle id="v" x="nan" y="1"/></timestep>',
     "trace.xml: timestep 1: vehicle 'v' x 'nan' is not finite"),
    ('<timestep><vehicle id="v" x="1" y="1"/></timestep>', "trace.xml: timestep 1: has no time"),
    ('<timestep time="5"/><timestep time="4"/>',
     "trace.xml: timestep 2: time 4 is before the previous timestep's 5"),
    ('<timestep time="0"><vehicle x="1" y="1"/></timestep>',
     "trace.xml: timestep 1: a vehicle has no id"),
    ('<timestep time="0"><vehicle id="v" x="1" y="1"/><vehicle id="v" x="2" y="1"/></timestep>',
     "trace.xml: timestep 1: vehicle 'v' at t=0 is not after its fix at t=0"),
    ('<timestep time="0"><vehicle id="v" x="1" y="1"></timestep>',
     "trace.xml: not well-formed XML: mismatched tag: line 1"),
])
def test_bad_fcd_is_named(body: str, why: str) -> None:
    with pytest.raises(TraceError) as err:
        list(read_sumo_fcd(_fcd_text(body), "trace.xml"))
    assert str(err.value).startswith(why), str(err.value)


def test_fcd_must_be_an_fcd_export() -> None:
    with pytest.raises(TraceError, match=r"f.xml: root element is <routes>, expected "
                                         r"<fcd-export>"):
        list(read_sumo_fcd(io.BytesIO(b"<routes/>"), "f.xml"))
    with pytest.raises(TraceError, match="f.xml: not well-formed XML: no element found"):
        list(read_sumo_fcd(io.BytesIO(b""), "f.xml"))
    with pytest.raises(TraceError, match="kinds must be among"):
        list(read_sumo_fcd(_fcd_text(""), "f.xml", kinds=("bicycle",)))


@pytest.mark.parametrize(("lines", "why"), [
    (["0 1 2 5 3"], "m.movements: line 1: 5 numbers, expected (t x y) triples"),
    (["0 1 2", "", "0 1 2 x 3 4"], "m.movements: line 3: field 4 'x' is not a number"),
    (["0 1 2 5 3 4 4 5 6"], "m.movements: line 1: node 0 at t=4 is not after its fix at t=5 "
                            "(field 7)"),
])
def test_bad_bonnmotion_is_named(lines: list[str], why: str) -> None:
    with pytest.raises(TraceError) as err:
        list(read_bonnmotion(lines, "m.movements"))
    assert str(err.value).startswith(why), str(err.value)


@pytest.mark.parametrize(("lines", "why"), [
    ([], "m.txt: empty file (no header line)"),
    (["0 9 0 10 0"], "m.txt: line 1: header needs minTime maxTime minX maxX minY maxY [minZ "
                     "maxZ], got 5"),
    (["0 9 0 10 0 ten"], "m.txt: line 1: maxY 'ten' is not a number"),
    (["0 9 0 10 0 10", "1 a 2"], "m.txt: line 2: expected 'time id x y [z]', got 3 fields"),
    # a BonnMotion file given as ONE: its first line is (t x y) triples, not a header
    (["0 10 20 5 30 40 9 50 60", "0 1 1 5 2 2 9 3 3"],
     "m.txt: line 1: header needs minTime maxTime minX maxX minY maxY [minZ maxZ], got 9 "
     "fields: this looks like a BonnMotion .movements file"),
    (["0 9 0 10 0 10", "1 a 2 2 0 0 7"], "m.txt: line 2: expected 'time id x y [z]', got 7"),
    (["0 9 0 10 0 10", "1 a 20 2"], "m.txt: line 2: time 1, x 20, y 2 outside the header's"),
    (["0 9 0 10 0 10", "12 a 2 2"], "m.txt: line 2: time 12, x 2, y 2 outside the header's"),
    (["0 9 0 10 0 10", "2 a 2 2", "1 b 2 2"],
     "m.txt: line 3: time 1 is before the previous line's 2 (the file must be sorted by time)"),
    (["0 9 0 10 0 10", "1 a 2 2", "1 a 3 3"], "m.txt: line 3: id 'a' at t=1 is not after"),
    (["0 9 0 10 0 10", "1 a 2 y"], "m.txt: line 2: y 'y' is not a number"),
])
def test_bad_one_is_named(lines: list[str], why: str) -> None:
    with pytest.raises(TraceError) as err:
        list(read_one(lines, "m.txt"))
    assert str(err.value).startswith(why), str(err.value)


# -- placing, clipping, window ------------------------------------------------------------------
def test_placement_shifts_scales_centres_fits_and_projects() -> None:
    assert Placement(1500, anchor=(4000, 2000)).mapper()(4100, 2300) == (100, 300)
    assert Placement(1500, anchor=(10, 20), scale=2).mapper()(15, 20) == (10, 0)
    assert Placement(1000, anchor=(0, 0), anchor_is_center=True).mapper()(-100, 50) == (400, 550)
    shift = Placement(1000).mapper((5, 7, 50, 9))  # no anchor: the bounding box's corner
    assert shift(5, 7) == (0, 0)
    fit = Placement(1000, fit=True).mapper((0, 0, 500, 250))  # wider than high: x fills
    assert fit(0, 0) == (0, 250) and fit(500, 250) == (1000, 750)
    # at 45° N a degree is 78.847 km of longitude and 111.132 km of latitude (WGS84
    # tables); at the equator 111.319 and 110.574 km
    geo = Placement(1500, anchor=(13.40, 45.0), geo=True).mapper()
    assert geo(13.41, 45.01) == pytest.approx((788.47, 1111.32), abs=0.01)
    assert metres_per_degree(0.0) == pytest.approx((111_319.5, 110_574.3), abs=0.1)
    for bad, why in ((dict(side_m=0), "area"), (dict(scale=-1), "scale"),
                     (dict(fit=True, anchor=(0, 0)), "fit"), (dict(geo=True, scale=2), "scale")):
        with pytest.raises(TraceError, match=why):
            Placement(**bad)  # type: ignore[arg-type]


def test_clipping_cuts_a_sparse_path_where_it_crosses_the_border() -> None:
    # a straight move from outside to outside across the square: both crossings kept
    out = clip_track([(0.0, -100.0, 50.0), (10.0, 200.0, 50.0)], 100.0)
    assert out == [pytest.approx((10 / 3, 0.0, 50.0)), pytest.approx((20 / 3, 100.0, 50.0))]
    # and a time window cuts in time: x moves 30 m/s, so t in [2, 4] is x in [-40, 20]
    out = clip_track([(0.0, -100.0, 50.0), (10.0, 200.0, 50.0)], 100.0, 2.0, 4.0)
    assert out == [pytest.approx((10 / 3, 0.0, 50.0)), pytest.approx((4.0, 20.0, 50.0))]
    assert clip_track([(0.0, -5.0, -5.0), (1.0, -1.0, 200.0)], 100.0) == []
    assert clip_track([(3.0, 5.0, 5.0)], 100.0) == [(3.0, 5.0, 5.0)]


def test_convert_crops_to_the_area_and_keeps_the_exit_point() -> None:
    res = convert(_fcd(), ConvertOptions(FCD_AREA))
    assert res.clients_read == 7 and res.clients_in_area == 6  # v4 never enters
    assert list(res.tracks) == ["v0", "v1", "v2", "p0", "p1", "v3"]  # order of appearance
    assert res.time_origin_s == 100.0
    v2 = res.tracks["v2"]  # 10 m/s from x=1453 m: leaves the 1500 m square at t=4.7
    assert v2[0] == (0.0, 1453.0, 500.0)
    assert v2[-1] == pytest.approx((4.7, 1500.0, 500.0))
    assert len(v2) == 6
    assert res.tracks["v3"][0] == (3.0, 300.0, 300.0)  # appears late: its own first time
    lines = list(csv_lines(res.tracks))
    trace = parse_trace(lines, side_m=1500)  # the study's own reader takes it
    assert trace.at("v2", 9.0) == pytest.approx((1500.0, 500.0))  # stays where it left
    assert trace.at("v0", 2.5) == pytest.approx((125.0, 100.0))


def test_window_starts_the_output_clock_and_interpolates_the_edges() -> None:
    res = convert(_fcd(), ConvertOptions(FCD_AREA, begin_s=102.5, end_s=104.5))
    assert res.time_origin_s == 102.5
    assert res.tracks["v0"] == [pytest.approx(s) for s in
                                [(0.0, 125.0, 100.0), (0.5, 130.0, 100.0), (1.5, 140.0, 100.0),
                                 (2.0, 145.0, 100.0)]]
    with pytest.raises(TraceError, match="window: end 1 s must be after begin 2 s"):
        ConvertOptions(begin_s=2, end_s=1)
    with pytest.raises(TraceError, match="no client inside the 1500 m area in the window"):
        convert(_fcd(), ConvertOptions(FCD_AREA, begin_s=500))


def test_bonnmotion_fit_keeps_speeds_proportional() -> None:
    fixes = read_bonnmotion(BONN.read_text().splitlines(), BONN.name)
    res = convert(fixes, ConvertOptions(Placement(960.0, fit=True)))  # 480 m wide: x2
    assert res.tracks["0"][:2] == [(0.0, 20.0, 110.0), (50.0, 420.0, 110.0)]  # y centred
    assert res.tracks["3"][0] == (5.0, 0.0, 870.0)


# -- resampling and choosing clients ----------------------------------------------------------
def test_resample_interpolates_between_samples() -> None:
    track = [(0.3, 0.0, 0.0), (2.3, 20.0, 10.0), (5.0, 20.0, 37.0)]
    assert resample(track, 1.0) == [pytest.approx(s) for s in [
        (1.0, 7.0, 3.5), (2.0, 17.0, 8.5), (3.0, 20.0, 17.0), (4.0, 20.0, 27.0),
        (5.0, 20.0, 37.0)]]
    assert resample([(0.2, 1.0, 1.0), (0.7, 2.0, 2.0)], 1.0) == [(0.2, 1.0, 1.0)]
    res = convert(read_one(ONE.read_text().splitlines(), ONE.name),
                  ConvertOptions(Placement(1000.0, anchor=(0, 0)), step_s=3.0))
    assert [s[0] for s in res.tracks["c"]] == [0.0, 3.0, 6.0, 9.0]
    assert res.tracks["c"][1] == pytest.approx((3.0, 300.0, 510.0))
    with pytest.raises(TraceError, match="step"):
        ConvertOptions(step_s=0)


def test_choose_clients_first_or_seeded_and_rename() -> None:
    first = convert(_fcd(), ConvertOptions(FCD_AREA, clients=3))
    assert list(first.tracks) == ["v0", "v1", "v2"]
    drawn = {tuple(convert(_fcd(), ConvertOptions(FCD_AREA, clients=3, seed=s)).tracks)
             for s in range(8)}
    assert len(drawn) > 1  # the seed matters
    again = convert(_fcd(), ConvertOptions(FCD_AREA, clients=3, seed=5))
    assert tuple(again.tracks) == tuple(
        convert(_fcd(), ConvertOptions(FCD_AREA, clients=3, seed=5)).tracks)
    long_only = convert(_fcd(), ConvertOptions(FCD_AREA, min_span_s=8.0))
    assert "v2" not in long_only.tracks and "v3" not in long_only.tracks
    renamed = convert(_fcd(), ConvertOptions(FCD_AREA, clients=3, seed=5, rename="c"))
    assert list(renamed.tracks) == ["c0", "c1", "c2"]
    assert [renamed.tracks[f"c{i}"] for i in range(3)] == [again.tracks[c] for c in again.tracks]
    with pytest.raises(TraceError, match="clients: asked for 9, the trace has 6"):
        convert(_fcd(), ConvertOptions(FCD_AREA, clients=9))


def test_an_id_that_breaks_the_csv_asks_for_rename() -> None:
    body = '<timestep time="0"><vehicle id="a,b" x="1" y="1"/></timestep>'
    fixes = read_sumo_fcd(_fcd_text(body), "t.xml")
    with pytest.raises(TraceError, match=r"client 'a,b': cannot stand in a CSV field; use "
                                         r"--rename"):
        convert(fixes, ConvertOptions(Placement(100.0, anchor=(0, 0))))
    fixes = read_sumo_fcd(_fcd_text(body), "t.xml")
    res = convert(fixes, ConvertOptions(Placement(100.0, anchor=(0, 0)), rename="c"))
    assert list(res.tracks) == ["c0"]


# -- the command line ------------------------------------------------------------------------
def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=60)


def test_cli_converts_gzip_and_names_bad_input(tmp_path: Path) -> None:
    gz = tmp_path / "fcd.xml.gz"
    gz.write_bytes(gzip.compress(FCD.read_bytes()))
    out = tmp_path / "walks.csv"
    r = _cli("--format", "sumo-fcd", str(gz), str(out), "--center", "4750", "2750",
             "--clients", "4", "--step-s", "0.5", "--rename", "c")
    assert r.returncode == 0, r.stderr
    assert "4 clients (6 of 7 in the area)" in r.stdout
    trace = parse_trace(out.read_text().splitlines(), side_m=1500)
    assert trace.clients() == ["c0", "c1", "c2", "c3"]
    assert trace.fixes["c0"][1] == (0.5, (105.0, 100.0))
    bad = tmp_path / "bad.xml"
    bad.write_text('<fcd-export><timestep time="0"/><timestep time="1">'
                   '<vehicle id="v1" y="3"/></timestep></fcd-export>')
    r = _cli("--format", "sumo-fcd", str(bad), str(tmp_path / "x.csv"))
    assert r.returncode == 1
    assert r.stderr.strip() == "convert_trace.py: bad.xml: timestep 2: vehicle 'v1' has no x"
    assert not (tmp_path / "x.csv").exists()
    r = _cli("--format", "gpx", str(bad), str(tmp_path / "x.csv"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--format" in r.stderr


# -- a converted trace drives the city study: the simulator, and the live runner's mobility ----
def test_converted_trace_drives_the_simulated_city_study(tmp_path: Path) -> None:
    with FCD.open("rb") as f:
        res = convert(read_fixes("sumo-fcd", f, FCD.name),
                      ConvertOptions(Placement(1000.0, anchor=(4000.0, 2000.0)), clients=4,
                                     step_s=1.0, rename="c"))
    (tmp_path / "walks.csv").write_text("\n".join(csv_lines(res.tracks)) + "\n")
    (tmp_path / "study.yaml").write_text(
        "study: city\nname: traced\nseed: 2\nfog_nodes: 3\ntotal_slots: 8\narea_km2: 1.0\n"
        "ratios: [0.5]\nselectors: [optimal]\nduration_live_s: 10\nstart_s: [0.5, 1.0]\n"
        "mobility:\n  kind: trace\n  trace: walks.csv\n")
    study = load_city_study(tmp_path / "study.yaml")
    [point] = CityStudyRun(study, tmp_path / "out", "simulate", live_scale=True).plan()
    assert point.trace is not None and point.trace.clients() == ["c0", "c1", "c2", "c3"]
    [row] = run_city_point(point, tmp_path / "out", None)
    assert row["clients"] == 4 and row["delivered"] > 0 and row["engine"] == "simulate"
    sim = CitySimulation(point.study, "optimal", 0.5, trace=point.trace)
    sim.run()
    for c in sim.clients:  # every client stands where the converted trace puts it
        assert c.last_move_s > 0
        assert c.position == point.trace.at(c.name, c.last_move_s)
    assert {c.name for c in sim.clients} == {"c0", "c1", "c2", "c3"}
    live = Mobility(study, study.layout(), 4)  # the live runner reads the same file
    assert live.positions(2.5, 0.1) == [point.trace.at(f"c{i}", 2.5) for i in range(4)]


def test_a_trace_outside_the_square_is_refused_by_the_simulated_study_as_live(
        tmp_path: Path) -> None:
    (tmp_path / "walks.csv").write_text("t_s,client,x_m,y_m\n0,a,10,10\n5,a,1200,10\n")
    (tmp_path / "study.yaml").write_text(
        "study: city\nname: out\nseed: 2\nfog_nodes: 3\ntotal_slots: 8\narea_km2: 1.0\n"
        "ratios: [0.5]\nselectors: [optimal]\nduration_live_s: 10\nstart_s: [0.5, 1.0]\n"
        "mobility:\n  kind: trace\n  trace: walks.csv\n")
    study = load_city_study(tmp_path / "study.yaml")
    with pytest.raises(LayoutError, match="trace line 3: position outside the 1000 m area"):
        CityStudyRun(study, tmp_path / "out", "simulate").plan()
    with pytest.raises(LayoutError, match="trace line 3: position outside the 1000 m area"):
        Mobility(study, study.layout(), 1)


def test_geo_refuses_metres_and_metres_refuse_to_look_like_degrees() -> None:
    utm = [Fix(0.0, "a", 500123.0, 5412345.0), Fix(1.0, "a", 500130.0, 5412350.0)]
    with pytest.raises(TraceError, match="not a longitude .* drop --geo"):
        convert(iter(utm), ConvertOptions(Placement(1500.0, geo=True)))
    lonlat = [Fix(0.0, "a", 7.1001, 50.7301), Fix(1.0, "a", 7.1050, 50.7330),
              Fix(0.0, "b", 7.1100, 50.7350)]
    with pytest.raises(TraceError, match="give --geo"):
        convert(iter(lonlat), ConvertOptions(Placement(1500.0)))
    # with --geo the same fixes are metres apart in the square
    res = convert(iter(lonlat), ConvertOptions(Placement(1500.0, geo=True)))
    assert set(res.tracks) == {"a", "b"}
    assert max(x for tr in res.tracks.values() for _, x, _ in tr) > 500.0
