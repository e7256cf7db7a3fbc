"""Fog-node selectors on hand-made contexts, and seed 003's study on a small city."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

import city_spread
import pytest
import yaml

from fogsdn.city.event_model import (
    CitySimulation,
    _SimulatedNet,
    draw_spread,
    run_study,
    spread_verdict,
)
from fogsdn.city.layout import parse_trace
from fogsdn.city.study_run import CityStudyRun, compares_engines, judgement_gap
from fogsdn.city.study_spec import CityStudy
from fogsdn.nodes.ncs.discovery import ClientParams, make_selector
from fogsdn.nodes.ncs.selection import (
    LoadAware,
    MeridianClosest,
    Optimal,
    ProbeAnswer,
    RandomChoice,
    SelectionContext,
    SelectionError,
    VivaldiNearest,
)

NODES = ["a", "b", "c", "d"]
SLOTS = {"a": 4, "b": 4, "c": 4, "d": 4}
RNG = random.Random(0)


def _ctx(**kw: object) -> SelectionContext:
    return SelectionContext(NODES, SLOTS, **kw)  # type: ignore[arg-type]


def test_optimal_takes_the_lowest_true_latency_even_if_full() -> None:
    lat = {"a": 5.0, "b": 2.0, "c": 3.0, "d": 9.0}
    assert Optimal().select(_ctx(true_latency_ms=lat), RNG) == "b"
    assert Optimal().select(_ctx(true_latency_ms=lat, excluded=frozenset({"b"})), RNG) == "c"
    with pytest.raises(SelectionError, match="optimal: the context lacks true_latency_ms"):
        Optimal().select(_ctx(), RNG)


def test_random_stays_within_allowed_and_is_seeded() -> None:
    ctx = _ctx(excluded=frozenset({"a", "b"}))
    picks = {RandomChoice().select(ctx, random.Random(i)) for i in range(30)}
    assert picks == {"c", "d"}
    assert RandomChoice().select(_ctx(excluded=frozenset(NODES)), RNG) is None


def test_vivaldi_takes_the_lowest_estimate() -> None:
    est = {"a": 1.0, "b": 2.0, "c": 0.5, "d": 9.0}
    assert VivaldiNearest().select(_ctx(estimate_ms=est), RNG) == "c"


def test_meridian_excludes_full_and_refused_nodes() -> None:
    seen: list[list[str]] = []

    def query(eligible: Callable[[str], bool]) -> str | None:
        ok = [n for n in NODES if eligible(n)]
        seen.append(ok)
        return ok[0] if ok else None

    free = {"a": 0, "b": 1, "c": 2, "d": 3}
    ctx = _ctx(free_slots=free, meridian=query, excluded=frozenset({"b"}))
    assert MeridianClosest().select(ctx, RNG) == "c"
    assert seen == [["c", "d"]]


class _Probe:
    def __init__(self, answers: dict[str, ProbeAnswer]) -> None:
        self.answers = answers
        self.calls: list[str] = []

    def __call__(self, n: str) -> ProbeAnswer:
        self.calls.append(n)
        return self.answers[n]


EST = {"a": 3.0, "b": 2.0, "c": 2.5, "d": 9.0}
GOSSIP = {"a": 0, "b": 2, "c": 2, "d": 2}


def test_load_aware_moves_only_when_the_summed_latency_drops() -> None:
    probe = _Probe({"a": ProbeAnswer(4.0, 0), "b": ProbeAnswer(3.8, 2),
                    "c": ProbeAnswer(2.0, 1), "d": ProbeAnswer(1.0, 3)})
    pick = LoadAware(bound_ms=1.0, shortlist=2).select(
        _ctx(current="a", estimate_ms=EST, free_slots=GOSSIP, probe=probe), RNG)
    assert pick == "c"  # b and c are shortlisted (d is beyond the bound); c is cheapest
    assert "d" not in probe.calls
    slow = _Probe({"a": ProbeAnswer(4.0, 0), "b": ProbeAnswer(3.8, 2),
                   "c": ProbeAnswer(3.7, 1)})
    pick = LoadAware(bound_ms=1.0, shortlist=2, hysteresis_ms=0.5).select(
        _ctx(current="a", estimate_ms=EST, free_slots=GOSSIP, probe=slow), RNG)
    assert pick == "a"  # 0.3 ms better is within the hysteresis: stay


def test_load_aware_counts_what_a_move_costs_the_others() -> None:
    """c answers fastest, but one more client there would slow its clients by 3 ms in
    all, while leaving a saves nothing: b is the better move overall."""
    probe = _Probe({"a": ProbeAnswer(6.0, 0, leave_gain_ms=0.0),
                    "b": ProbeAnswer(3.0, 2, join_cost_ms=0.2),
                    "c": ProbeAnswer(2.0, 1, join_cost_ms=3.0)})
    assert LoadAware(bound_ms=1.0, shortlist=2).select(
        _ctx(current="a", estimate_ms=EST, free_slots=GOSSIP, probe=probe), RNG) == "b"
    # leaving a crowded node saves its other clients 4 ms: worth moving to c after all
    probe.answers["a"] = ProbeAnswer(4.0, 0, leave_gain_ms=4.0)
    probe.answers["b"] = ProbeAnswer(3.0, 2, join_cost_ms=5.0)
    assert LoadAware(bound_ms=1.0, shortlist=2).select(
        _ctx(current="a", estimate_ms=EST, free_slots=GOSSIP, probe=probe), RNG) == "c"


def test_load_aware_never_moves_to_a_node_that_answered_full() -> None:
    gossip = {"a": 0, "b": 1, "c": 1, "d": 0}  # gossip says b and c have room
    probe = _Probe({"a": ProbeAnswer(4.0, 0), "b": ProbeAnswer(1.0, 0),
                    "c": ProbeAnswer(1.5, 0)})  # but both filled up since
    assert LoadAware().select(_ctx(current="a", estimate_ms=EST, free_slots=gossip,
                                   probe=probe), RNG) == "a"
    assert LoadAware().select(_ctx(estimate_ms=EST, free_slots=gossip, probe=probe),
                              RNG) is None


def test_make_selector_names_unknown() -> None:
    names = ("optimal", "random", "vivaldi", "meridian", "load_aware")
    built = {n: make_selector(n, ClientParams(bound_ms=1.5)) for n in names}
    assert isinstance(built["load_aware"], LoadAware) and built["load_aware"].bound_ms == 1.5
    with pytest.raises(SelectionError, match="unknown 'nearest'"):
        make_selector("nearest", ClientParams())
    with pytest.raises(SelectionError, match="bound_ms"):
        LoadAware(bound_ms=-1)


SMALL = CityStudy.model_validate({"study": "city", "name": "small", "seed": 3,
                                  "duration_model_s": 20.0, "fog_nodes": 6, "total_slots": 30,
                                  "area_km2": 0.5, "start_s": [3.0, 10.0]})


def _small(selector: str, ratio: float) -> tuple[CityStudy, str, float]:
    return SMALL, selector, ratio


def test_study_is_deterministic_and_accounts_every_message() -> None:
    a = CitySimulation(*_small("vivaldi", 0.6))
    row = a.run()
    assert row == run_study(*_small("vivaldi", 0.6))
    m = a.messages
    assert sum(m.sent.values()) == sum(m.received.values()) == m.total
    assert row["clients"] == 18
    assert row["delivered"] > 0
    # every delivered task is a task and a reply; refused tasks are lost ones
    assert m.by_kind["reply"] == row["delivered"]
    assert m.by_kind["task"] == row["delivered"] + row["client_lost"] * row["clients"]


def test_optimal_is_optimal_at_low_load() -> None:
    row = run_study(*_small("optimal", 0.2))
    assert row["optimal_rate"] == 1.0 and row["selection_rmse_ms"] == 0.0
    assert row["client_lost"] == 0


@pytest.mark.parametrize("selector", ["optimal", "random", "vivaldi", "meridian", "load_aware"])
def test_every_selector_runs_at_full_load(selector: str) -> None:
    row = run_study(*_small(selector, 1.0))
    assert row["clients"] == 30
    assert 0 <= row["optimal_rate"] <= 1
    assert row["mean_latency_ms"] > 0 and row["connection_error_ms"] >= 0
    assert 1 <= row["unique_per_step"] <= 6


def test_load_aware_loses_nothing_where_latency_minimisers_do() -> None:
    """At ratio 1 the nearest-first strategies keep hitting full nodes; ours confirms a
    free slot by probe before it moves, so it loses no task and is not slower."""
    rows = {s: run_study(*_small(s, 1.0)) for s in ("optimal", "vivaldi", "random",
                                                   "load_aware")}
    assert rows["load_aware"]["client_lost"] == 0
    for other in ("optimal", "vivaldi", "random"):
        assert rows[other]["client_lost"] > 1
    assert rows["load_aware"]["mean_latency_ms"] < rows["random"]["mean_latency_ms"]


def test_trace_replay_drives_positions() -> None:
    lines = ["t_s,client,x_m,y_m"] + [f"{t},p{i},{10 + t * 5},{20 + i}" for i in range(6)
                                      for t in (0, 10, 20)]
    trace = parse_trace(lines, side_m=800)
    study = CitySimulation(*_small("random", 0.2), trace=trace)
    study.run()
    assert [c.name for c in study.clients] == ["p0", "p1", "p2", "p3", "p4", "p5"]
    assert study.clients[0].position[0] > 10  # it moved along the trace
    with pytest.raises(SelectionError, match="trace: has 6 clients"):
        CitySimulation(*_small("random", 1.0), trace=trace)


def test_bad_study_config() -> None:
    with pytest.raises(SelectionError, match="ratio"):
        CitySimulation(SMALL, "random", 0)
    with pytest.raises(SelectionError, match="selector"):
        CitySimulation(SMALL, "nope", 0.5)


def test_vivaldi_nodes_learn_a_task_late_and_rank_by_last_rounds_view() -> None:
    """As live: a node folds a client's RTT in with the client's next task to it (it
    cannot time the trip itself), and the node asked ranks the others by coordinates as
    its last probe round carried them, its own as it is now."""
    sim = CitySimulation(*_small("vivaldi", 0.6))
    c = sim.clients[0]
    node = sim.names[0]
    c.node = node
    sim.load[node] = 1
    net = _SimulatedNet(sim, c, sim._static_from_client(c))
    before = sim.node_vivaldi[node].coord
    net.task(node)
    assert sim.node_vivaldi[node].coord == before  # nothing to fold in yet
    assert c.last_rtt[node] == pytest.approx(net.static[node] + sim.load_term(node))
    net.task(node)
    assert sim.node_vivaldi[node].coord != before  # the first task's RTT, now
    moved = sim.names[1]
    sim.node_vivaldi[moved].update("x", sim.node_vivaldi[node].coord, 40.0)
    view = sim.views[node][moved]
    assert view != sim.node_vivaldi[moved].coord
    own = c.vivaldi.coord if c.vivaldi is not None else None
    assert own is not None
    est = sim.context(c, net.static, frozenset(), asked=node).estimate_ms
    assert est is not None
    assert est[moved] == pytest.approx(own.distance_to(view))
    assert est[node] == pytest.approx(own.distance_to(sim.node_vivaldi[node].coord))
    sim._probe_round([node])  # its round: its view catches up
    assert sim.views[node][moved] == sim.node_vivaldi[moved].coord


def _small_study_file(tmp_path: Path) -> Path:
    """A small city study file whose full scale is SMALL's, optimal and random."""
    study = tmp_path / "small.yaml"
    study.write_text(yaml.safe_dump({
        "study": "city", "name": "small", "seed": 3, "duration_live_s": 20.0, "fog_nodes": 6,
        "total_slots": 30, "area_km2": 0.5, "start_s": [3.0, 10.0], "ratios": [0.6],
        "selectors": ["optimal", "random"],
        "full_scale": {"fog_nodes": 6, "total_slots": 30, "duration_model_s": 20.0,
                       "ratios": [0.6]}}))
    return study


def test_draws_change_the_runs_choices_alone(tmp_path: Path) -> None:
    """A draw re-rolls the run's own choices: the same clients, walks and periods (the
    baseline, which makes none, is identical), other random picks; the spread script
    reads a study file and prints every selector's spread."""
    base = run_study(*_small("random", 0.6))
    assert run_study(*_small("random", 0.6), draw=0) == base
    other = run_study(*_small("random", 0.6), draw=1)
    assert other["delivered"] != base["delivered"] or other["client_lost"] != \
        base["client_lost"] or other["optimal_rate"] != base["optimal_rate"]
    assert run_study(*_small("optimal", 0.6), draw=3) == run_study(*_small("optimal", 0.6))
    spread = draw_spread(SMALL, "random", 0.6, 3)
    assert spread["optimal_rate"][1] > 0 and 0 < spread["optimal_rate"][0] < 1
    assert draw_spread(SMALL, "optimal", 0.6, 2)["client_lost"] == (0.0, 0.0)
    with pytest.raises(SelectionError, match="draws"):
        draw_spread(SMALL, "random", 0.6, 1)
    study = _small_study_file(tmp_path)
    out = tmp_path / "spread.json"
    assert city_spread.main(["--scenario", str(study), "--draws", "2", "--json", str(out)]) == 0
    got = json.loads(out.read_text())
    assert set(got["selectors"]) == {"optimal", "random"} and got["draws"] == 2
    assert city_spread.main(["--scenario", str(tmp_path / "none.yaml")]) == 2


def test_a_live_figure_holds_within_ten_percent_or_two_sd_whichever_is_wider() -> None:
    tight = spread_verdict("random", "optimal_rate", 0.039, 0.035, 0.001)  # 10 % is wider
    assert (tight.low, tight.high) == pytest.approx((0.0315, 0.0385)) and not tight.holds
    wide = spread_verdict("load_aware", "optimal_rate", 0.02, 0.035, 0.008)  # 2 sd wider
    assert (wide.low, wide.high) == pytest.approx((0.019, 0.051)) and wide.holds
    assert not spread_verdict("vivaldi", "optimal_rate", float("nan"), 0.5, 0.1).holds


def _live_run(folder: Path, rows: dict[str, dict[str, object]], **summary: object) -> Path:
    """A live city run's folder as the runner leaves it: summary.json and the rows."""
    folder.mkdir(exist_ok=True)
    doc = {"engine": "emulate", "study": "city", "crashed": False, "failure": None,
           "interrupted": False, "scale": {"fog_nodes": 6, "slots": 30, "clients": 18}}
    (folder / "summary.json").write_text(json.dumps(doc | summary))
    cols = ["selector", "ratio", "clients", "mean_latency_ms", "optimal_rate",
            "clients_reporting", "fogs_reporting"]
    lines = [",".join(cols)]
    for sel, fig in rows.items():
        row = {"ratio": 0.6, "clients": 18, "clients_reporting": 18, "fogs_reporting": 6} | fig
        lines.append(",".join([sel, *(str(row[c]) for c in cols[1:])]))
    (folder / "seed003-emulate.csv").write_text("\n".join(lines) + "\n")
    return folder


def test_the_spread_script_judges_a_live_run_and_refuses_one_that_is_no_measurement(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--live: each selector's latency and rate against the spread, exit 1 on a miss;
    a crashed run, another scale, a point whose clients did not all report or a broken
    number is refused in one line naming the file."""
    study = _small_study_file(tmp_path)
    spread = tmp_path / "spread.json"
    args = ["--scenario", str(study), "--draws", "3"]
    assert city_spread.main([*args, "--json", str(spread)]) == 0
    sims = json.loads(spread.read_text())["selectors"]
    means = {sel: {m: sims[sel][m]["mean"] for m in ("mean_latency_ms", "optimal_rate")}
             for sel in sims}
    run = _live_run(tmp_path / "run", means)
    judged = tmp_path / "judged.json"
    assert city_spread.main([*args, "--live", str(run), "--json", str(judged)]) == 0
    verdicts = json.loads(judged.read_text())["live"]["verdicts"]
    assert len(verdicts) == 4 and all(v["holds"] for v in verdicts)
    assert "MISSES" not in capsys.readouterr().out
    tripled = 3 * means["random"]["optimal_rate"]
    off = means | {"random": means["random"] | {"optimal_rate": tripled}}
    assert city_spread.main([*args, "--live", str(_live_run(tmp_path / "off", off))]) == 1
    out = capsys.readouterr().out
    assert out.count("MISSES") == 1 and "random optimal_rate" in " ".join(out.split())
    refused = {
        "crashed": _live_run(tmp_path / "crashed", means, crashed=True),
        "15 of 18 clients": _live_run(tmp_path / "partial", means | {
            "optimal": means["optimal"] | {"clients_reporting": 15}}),
        "had 8 fog nodes": _live_run(tmp_path / "other", means,
                                     scale={"fog_nodes": 8, "slots": 30, "clients": 18}),
        "ValueError": _live_run(tmp_path / "broken", means | {
            "random": means["random"] | {"optimal_rate": "abc"}}),
        "no summary.json": tmp_path / "nowhere",
        "no live row of random": _live_run(tmp_path / "one", {"optimal": means["optimal"]}),
    }
    for why, folder in refused.items():
        assert city_spread.main([*args, "--live", str(folder)]) == 2, why
        err = capsys.readouterr().err.strip()
        assert why in err and str(folder) in err and len(err.splitlines()) == 1, err



TIMED = SMALL.model_copy(update={"step_time": "messages"})


def test_a_timed_steps_join_and_leave_land_after_its_messages() -> None:
    """`step_time: messages`: a step's join lands halfway through its round trip after
    the messages before it, its leave on the join's reply; meanwhile other clients see
    the old loads, a join on its way holds its slot, and the step's own task meets the
    loads with its moves in. `instant` moves the loads at once, as before."""
    sim = CitySimulation(TIMED, "random", 0.6)
    c, other = sim.clients[0], sim.clients[1]
    old, new = sim.names[0], sim.names[1]
    c.node, sim.load[old] = old, 1
    net = _SimulatedNet(sim, c, sim._static_from_client(c), t=1.0)
    net.elapsed_ms = 10.0  # a view and probes before the join
    trip = net.static[new] + sim.load_term(new)
    assert net.join(new)
    net.leave(old)
    assert (sim.load[new], sim.load[old], sim.joining[new]) == (0, 1, 1)  # on their way
    lands = 1.0 + (10.0 + trip / 2) / 1000.0
    assert sim.load_at(new, lands - 1e-9) == 0 and sim.load_at(new, lands) == 1
    assert sim.load_at(old, 1.0 + (10.0 + trip) / 1000.0) == 0  # the leave, a reply later
    net.task(new)  # sent after the join's reply: our own move is in
    assert c.tally.latencies[-1] == pytest.approx(net.static[new] + sim.load_term(new, 1))
    assert (sim.load[new], sim.load[old]) == (0, 1)  # and out again: still on its way
    sim.slots[new] = 1  # the one slot is held by the join on its way
    assert not _SimulatedNet(sim, other, sim._static_from_client(other), t=1.001).join(new)
    sim._land_until(2.0)
    assert (sim.load[new], sim.load[old], sim.joining[new]) == (1, 0, 0)
    instant = CitySimulation(SMALL, "random", 0.6)
    assert _SimulatedNet(instant, instant.clients[0],
                         instant._static_from_client(instant.clients[0])).join(new)
    assert instant.load[new] == 1


def test_a_timed_steps_probe_sees_what_landed_by_the_time_it_is_sent() -> None:
    """A probe later in a timed step counts the joins that reached its node by then
    (live, each probe is answered from the node's members at that moment)."""
    sim = CitySimulation(TIMED, "load_aware", 0.6)
    c = sim.clients[0]
    node = sim.names[2]
    sim.load[node] = 2
    sim.land(1.005, node, +1)
    static = sim._static_from_client(c)
    at = {"t": 1.0}
    ctx = sim.context(c, static, frozenset(), sim.names[0], clock=lambda: at["t"])
    assert ctx.probe is not None
    early = ctx.probe(node)
    at["t"] = 1.01
    late = ctx.probe(node)
    assert early.free_slots - 1 == late.free_slots == sim.slots[node] - 3
    assert late.rtt_ms == pytest.approx(static[node] + sim.load_term(node, 1))
    assert late.join_cost_ms == pytest.approx(3 * (sim.load_term(node, 2)
                                                   - sim.load_term(node, 1)))
    assert sim.load[node] == 2  # nothing landed in the global state


def test_timed_steps_are_deterministic_and_race_as_live_steps_do() -> None:
    """A whole study with timed steps: the same row twice, and the omniscient baseline,
    whose joins now race those decided meanwhile, loses tasks it never loses at once
    (27 clients on 30 slots); a retry after a refusal sees what landed by then, so its
    picks stay optimal."""
    row = run_study(TIMED, "optimal", 0.9)
    assert row == run_study(TIMED, "optimal", 0.9)
    assert run_study(SMALL, "optimal", 0.9)["client_lost"] == 0
    assert row["client_lost"] > 0 and row["optimal_rate"] == 1.0


def test_a_live_run_of_a_comparison_file_is_judged_against_the_simulator(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file whose full scale is its live scale: the live study's end prints each
    selector's verdict and writes it beside the rows; a crashed run, a failed point or
    another span gets a line saying why there is none; other files get nothing."""
    doc = {"study": "city", "name": "cmp", "seed": 3, "fog_nodes": 6, "total_slots": 30,
           "area_km2": 0.5, "start_s": [0.5, 2.0], "ratios": [0.6], "duration_live_s": 30.0,
           "time_scale": 10, "selectors": ["optimal", "random"], "step_time": "messages",
           "full_scale": {"fog_nodes": 6, "total_slots": 30, "duration_model_s": 3.0,
                          "ratios": [0.6], "start_s": [0.5, 2.0]}}
    study = CityStudy.model_validate(doc)
    assert compares_engines(study) and judgement_gap(study) is None
    assert "spans 6 model s" in str(judgement_gap(study.model_copy(
        update={"duration_live_s": 60.0})))
    assert not compares_engines(SMALL)
    full = study.at_full_scale()
    rows = [run_study(full, sel, 0.6) | {"clients_reporting": 18, "fogs_reporting": 6}
            for sel in ("optimal", "random")]

    def finish(folder: str, failures: list[tuple[object, str]], **summary: object
               ) -> list[Path]:
        out = _live_run(tmp_path / folder, {}, **summary)
        return CityStudyRun(study, out, "emulate").finish(list(rows), failures)

    outputs = finish("run", [])
    verdict = tmp_path / "run" / "against-simulated.json"
    assert verdict in outputs
    got = json.loads(verdict.read_text())
    assert got["draws"] == 24 and len(got["verdicts"]) == 4
    assert {(v["selector"], v["metric"]) for v in got["verdicts"]} == {
        (s, m) for s in ("optimal", "random") for m in ("mean_latency_ms", "optimal_rate")}
    optimal_rate = next(v for v in got["verdicts"]
                        if (v["selector"], v["metric"]) == ("optimal", "optimal_rate"))
    assert optimal_rate["live"] == 1.0 and optimal_rate["holds"]
    printed = capsys.readouterr().out
    assert "against the simulator (24 draws" in printed and printed.count("live ") >= 4
    assert not any(p.name == "against-simulated.json" for p in finish("crash", [], crashed=True))
    assert "no verdict against the simulator" in capsys.readouterr().out
    finish("failed", [("live city", "boom")])
    assert "verdict" not in capsys.readouterr().out
