"""Seed 003's presets, their switches in the simulator, the claims and the CLI."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import fields, replace
from pathlib import Path

import pytest

from fogsdn.city.claims import (
    CLAIMS,
    Claim,
    Results,
    Stat,
    deciding_choice,
    evaluate,
    interval,
)
from fogsdn.city.event_model import CitySimulation
from fogsdn.city.layout import CityLayout, FogSite
from fogsdn.city.presets import (
    PRESETS,
    SWITCH_AFFECTS,
    SWITCHES,
    PresetError,
    StudyChoices,
    ablation,
    apply_choices,
    differing,
    preset,
    row_key,
)
from fogsdn.city.study_spec import load_city_study
from fogsdn.nodes.ncs.meridian import MeridianConfig, next_step
from fogsdn.nodes.ncs.selection import Optimal
from fogsdn.nodes.ncs.vivaldi import Coordinate, VivaldiConfig, VivaldiNode, plain_config

ROOT = Path(__file__).resolve().parent.parent
STUDY = load_city_study(ROOT / "scenarios" / "city.yaml")


# -- presets ----------------------------------------------------------------------------


def test_presets_differ_in_exactly_the_declared_switches() -> None:
    seed, ours = PRESETS["seed"], PRESETS["ours"]
    assert SWITCHES == tuple(f.name for f in fields(StudyChoices))
    assert set(SWITCH_AFFECTS) == set(SWITCHES)
    assert differing(seed, ours) == list(SWITCHES)  # every switch is a real difference
    steps = ablation(ours, seed)
    assert list(steps) == list(SWITCHES)
    for switch, choices in steps.items():
        assert differing(ours, choices) == [switch]
        assert getattr(choices, switch) == getattr(seed, switch)


def test_seed_preset_is_the_papers_text() -> None:
    seed = preset("seed")
    assert seed.backhaul is False  # eq. 10 as printed
    assert seed.optimal_reference == "static"
    assert seed.vivaldi == "plain" and seed.meridian_termination == "seed"
    assert seed.duration_s == 600.0 and seed.task_deadline_ms == 50.0
    assert seed.tower_share == 1.0  # every node at its tower
    with pytest.raises(PresetError, match="known: seed, ours"):
        preset("paper")


def test_apply_choices_sets_every_switch_and_caps_the_duration() -> None:
    st = apply_choices(STUDY, PRESETS["seed"], seed=7, duration_s=30.0)
    assert st.params().backhaul is False
    assert st.params().propagation_ms_per_km == 0.005
    assert (st.optimal_reference, st.vivaldi, st.meridian_termination) == \
        ("static", "plain", "seed")
    assert st.duration_model_s == 30.0 and st.timeout_ms == 50.0 and st.seed == 7
    assert (st.fog_nodes, st.total_slots) == (29, 318)
    assert apply_choices(STUDY, PRESETS["seed"]).duration_model_s == 600.0


def test_row_key_ignores_switches_that_cannot_touch_a_selector() -> None:
    ours = PRESETS["ours"]
    other_vivaldi = replace(ours, vivaldi="plain")
    assert row_key(ours, "meridian") == row_key(other_vivaldi, "meridian")
    assert row_key(ours, "vivaldi") != row_key(other_vivaldi, "vivaldi")
    assert row_key(ours, "optimal") != row_key(replace(ours, backhaul=False), "optimal")


# -- the switches in the simulator ------------------------------------------------------

# two fog nodes standing at their towers 1 km apart; a client 100 m from tower 0
LAYOUT = CityLayout(1500.0, ((0.0, 0.0), (1000.0, 0.0)),
                    (FogSite("fogA", (0.0, 0.0), 4), FogSite("fogB", (1000.0, 0.0), 4)))


def _sim(choices: StudyChoices, selector: str = "optimal") -> CitySimulation:
    sim = CitySimulation(apply_choices(STUDY, choices, duration_s=5.0), selector, 0.01,
                         layout=LAYOUT)
    c = sim.clients[0]
    c.position, c.tower, c.tower_m = (100.0, 0.0), 0, 100.0
    return sim


def test_seed_preset_uses_the_literal_eq_10() -> None:
    sim = _sim(PRESETS["seed"])
    static = sim._static_from_client(sim.clients[0])
    # (d_client + d_node) * v + h c + E_network: 0.1 km * 0.005 + 1 + 0.5, no backhaul
    assert static == {"fogA": pytest.approx(1.5005), "fogB": pytest.approx(1.5005)}
    ours = _sim(PRESETS["ours"])
    back = ours._static_from_client(ours.clients[0])
    assert back["fogB"] - back["fogA"] == pytest.approx(1.0)  # 1 km backhaul at 1 ms/km


def test_load_agnostic_baseline_ignores_load() -> None:
    agnostic = _sim(replace(PRESETS["ours"], optimal_reference="static"))
    current = _sim(PRESETS["ours"])
    for sim in (agnostic, current):
        sim.load["fogA"] = 4  # the nearest node is full: its load term is E_qos and more
    c = agnostic.clients[0]
    pick = [Optimal().select(s.context(s.clients[0], s._static_from_client(c), frozenset()),
                             s.rng) for s in (agnostic, current)]
    assert pick == ["fogA", "fogB"]


def test_seed_preset_runs_plain_vivaldi_and_the_seeds_meridian() -> None:
    sim = _sim(PRESETS["seed"], "vivaldi")
    cfg = sim.node_vivaldi["fogA"].config
    assert cfg == plain_config(STUDY.vivaldi_dimensions)
    assert sim.node_vivaldi["fogA"].coord.error == 10.0
    mer = _sim(PRESETS["seed"], "meridian")
    assert mer.meridian is not None and mer.meridian.config.termination == "seed"
    assert _sim(PRESETS["ours"], "vivaldi").node_vivaldi["fogA"].config == \
        VivaldiConfig(dimensions=STUDY.vivaldi_dimensions)


def test_plain_vivaldi_has_no_filter_adjustment_or_gravity() -> None:
    cfg = plain_config(2)
    node = VivaldiNode(cfg)
    assert node.coord.error == 10.0
    peer = Coordinate((3.0, 4.0), 1.0, 0.01)
    node.update("p", peer, 1.0)
    node.update("p", peer, 100.0)  # with serf's filter the median of (1, 100) would rule
    assert node.coord.adjustment == 0.0
    plain_far, serf_far = VivaldiNode(cfg), VivaldiNode(VivaldiConfig(dimensions=2))
    for n in (plain_far, serf_far):
        n.coord = Coordinate((1e6, 0.0), 1.0, 0.01)
        n._apply_gravity()
    assert plain_far.coord.vec == (1e6, 0.0)
    assert serf_far.coord.vec[0] < 1e6 - 1.0  # serf pulls it toward the origin
    # without the filter the last sample moves it: error-weighted step toward 100 ms
    serf = VivaldiNode(VivaldiConfig(dimensions=2))
    serf.update("p", peer, 1.0)
    serf.update("p", peer, 100.0)
    assert node.coord.raw_distance_to(peer) > serf.coord.raw_distance_to(peer)


def test_meridian_seed_termination_moves_to_any_answer() -> None:
    answers = {"m1": 8.0, "m2": 9.0}  # closer than d = 10 but not within beta d = 5
    assert next_step(MeridianConfig(), 10.0, answers).forward is False
    step = next_step(MeridianConfig(termination="seed"), 10.0, answers)
    assert (step.nearest, step.forward) == ("m1", True)
    assert next_step(MeridianConfig(termination="seed"), 10.0, {}).forward is False


# -- claims on hand-made aggregates -----------------------------------------------------


def test_interval_is_the_student_t_95_interval() -> None:
    st = interval([1.0, 2.0, 3.0])
    assert st.mean == 2.0 and st.n == 3
    assert st.hi - st.mean == pytest.approx(4.303 / math.sqrt(3), rel=1e-4)
    assert interval([5.0]) == Stat(5.0, 5.0, 5.0, 1)


def _results(values: dict[tuple[str, float, str], float]) -> Results:
    return Results({k: Stat(v, v, v, 1) for k, v in values.items()})


def _claim(cid: str) -> Claim:
    return next(c for c in CLAIMS if c.id == cid)


def test_vivaldi_beats_meridian_holds_partly_or_fails() -> None:
    claim = _claim("6b-vivaldi-beats-meridian")
    m = "selection_rmse_ms"
    both = {("vivaldi", 0.1, m): 1.0, ("meridian", 0.1, m): 2.0,
            ("vivaldi", 1.0, m): 1.5, ("meridian", 1.0, m): 3.0}
    assert evaluate(claim, _results(both)) == "holds"
    assert evaluate(claim, _results(both | {("vivaldi", 1.0, m): 4.0})) == "partly"
    assert evaluate(claim, _results(both | {("vivaldi", 0.1, m): 9.0,
                                            ("vivaldi", 1.0, m): 4.0})) == "fails"


def test_baseline_optimal_rate_and_others_under_ten_percent() -> None:
    m = "optimal_rate"
    vals = {("optimal", 0.1, m): 1.0, ("optimal", 1.0, m): 1.0,
            ("random", 0.1, m): 0.05, ("random", 1.0, m): 0.04,
            ("vivaldi", 0.1, m): 0.3, ("vivaldi", 1.0, m): 0.08,
            ("meridian", 0.1, m): 0.09, ("meridian", 1.0, m): 0.02}
    assert evaluate(_claim("6a-baseline-100"), _results(vals)) == "holds"
    assert evaluate(_claim("6a-baseline-100"),
                    _results(vals | {("optimal", 1.0, m): 0.7})) == "partly"
    assert evaluate(_claim("6a-others-under-10"), _results(vals)) == "partly"
    assert evaluate(_claim("6a-others-under-10"),
                    _results(vals | {("vivaldi", 0.1, m): 0.01})) == "holds"


@pytest.mark.parametrize(("cid", "m"), [("4b-vivaldi-baseline-lose", "client_lost"),
                                        ("7a-baseline-vivaldi-higher", "mean_latency_ms")])
def test_baseline_and_vivaldi_above_meridian_and_random_at_every_ratio(cid: str, m: str) -> None:
    claim = _claim(cid)
    vals = {(s, r, m): v + r for s, v in (("optimal", 5.0), ("vivaldi", 4.0),
                                          ("meridian", 2.0), ("random", 3.0))
            for r in (0.1, 1.0)}
    assert evaluate(claim, _results(vals)) == "holds"
    # random above Vivaldi (not the baseline) at one ratio: the other seven hold
    assert evaluate(claim, _results(vals | {("random", 1.0, m): 5.5})) == "partly"
    low = {k: (0.0 if k[0] in ("optimal", "vivaldi") else v) for k, v in vals.items()}
    assert evaluate(claim, _results(low)) == "fails"


def test_growth_claim_needs_every_selector() -> None:
    m = "client_lost"
    vals = {(s, r, m): r for s in ("optimal", "random", "vivaldi", "meridian")
            for r in (0.1, 0.5, 1.0)}
    assert evaluate(_claim("4b-grow"), _results(vals)) == "holds"
    shrink = vals | {("random", 1.0, m): 0.0}
    assert evaluate(_claim("4b-grow"), _results(shrink)) == "partly"


def test_deciding_choice() -> None:
    assert deciding_choice("holds", "holds", {"a": "fails"}) is None
    assert deciding_choice("holds", "fails", {"a": "fails", "b": "holds"}) == "b"
    assert deciding_choice("holds", "fails", {"a": "partly", "b": "fails"}) == \
        "a (each moves it, none alone to the seed's outcome)"
    assert deciding_choice("holds", "fails", {"a": "fails"}) == \
        "no single switch (only their combination)"


# -- the CLI ----------------------------------------------------------------------------

TINY = """study: city
name: tiny
fog_nodes: 3
total_slots: 9
ratios: [0.5]
full_scale: {fog_nodes: 4, total_slots: 12, duration_model_s: 10, ratios: [0.5, 1.0]}
"""


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "reproduce_seed003.py"),
                           *args], capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                               "MPLBACKEND": "Agg"})


def test_cli_writes_the_claims_json(tmp_path: Path) -> None:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(TINY)
    out = tmp_path / "claims.json"
    r = _cli("--preset", "seed", "--engine", "simulate", "--json", str(out), "--scenario",
             str(scenario), "--ratios", "0.5,1.0", "--replications", "2",
             "--duration-cap", "12", "--figures", str(tmp_path / "fig"))
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert len(doc["claims"]) == len(CLAIMS)
    for c in doc["claims"]:
        assert {"figure", "claim", "verdict", "deciding_choice", "decided_by", "seed",
                "ours"} <= set(c)
        assert c["decided_by"] == c["seed"]["decided_by"]
        assert (c["decided_by"] is None) == (c["verdict"] == "reproduced")
        assert c["verdict"] in ("reproduced", "partly", "not")
        assert c["verdict"] == c["seed"]["verdict"]
        assert c["deciding_choice"] is None or isinstance(c["deciding_choice"], str)
        assert (c["deciding_choice"] is None) == (c["seed"]["outcome"] == c["ours"]["outcome"])
    assert doc["run"]["replications"] == 2 and doc["run"]["duration_cap_s"] == 12.0
    md = (tmp_path / "fig" / "seed003-claims.md").read_text()
    # the claims, what decides each preset's misses, then both ablations
    assert md.count("\n") == 4 * len(CLAIMS) + 17
    assert (tmp_path / "fig" / "seed003_fig6-simulate-seed.png").exists()


def test_cli_rejects_a_bad_preset_in_one_line(tmp_path: Path) -> None:
    r = _cli("--preset", "paper", "--json", str(tmp_path / "x.json"))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0
    assert "--preset: unknown 'paper'" in r.stderr
    assert not (tmp_path / "x.json").exists()


def test_cli_help_names_both_modes_and_a_bare_run_writes_no_tracked_file() -> None:
    r = _cli("--help")
    assert r.returncode == 0
    assert "--preset seed|ours" in r.stdout and "usage: sweep.py" in r.stdout
    assert "default results/seed003" in r.stdout
    src = (ROOT / "scripts" / "reproduce_seed003.py").read_text()
    assert '"results" / "seed003"' in src and '"docs" / "figures"' not in src
