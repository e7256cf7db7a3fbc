"""Seed 003's switches for its misses (issue 38 item 4): the baseline's discovery, the
optimal-selection rate's ties, the towers' share; and the claims table's "decided by"."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from fogsdn.city.claims import CLAIMS, decided_by, deciding_switches
from fogsdn.city.claims_run import (
    NOT_RUN,
    ClaimsRun,
    claims_table,
    configurations,
    decided_counts,
    flipped_name,
    inert_switches,
    markdown,
    other_preset,
)
from fogsdn.city.event_model import CitySimulation
from fogsdn.city.layout import make_city
from fogsdn.city.presets import PRESETS, SWITCH_AFFECTS, PresetError, apply_choices, row_key
from fogsdn.city.study_spec import CityStudyError, load_city_study
from fogsdn.nodes.ncs.discovery import METRIC_COLUMNS, ClientTally, is_optimal, reference_node

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "city.yaml"
STUDY = load_city_study(SCENARIO)
OURS, SEED = PRESETS["ours"], PRESETS["seed"]


# -- the switches as data ----------------------------------------------------------------


def test_presets_set_the_new_switches_as_the_paper_and_as_today() -> None:
    assert (SEED.baseline_discovery, SEED.optimal_ties, SEED.tower_share) == \
        ("counted", "uncounted", 1.0)
    assert (OURS.baseline_discovery, OURS.optimal_ties, OURS.tower_share) == \
        ("free", "counted", 0.5)
    assert SWITCH_AFFECTS["baseline_discovery"] == frozenset({"optimal"})
    # the baseline's discovery cannot change another selector's rows: run once, shared
    counted = replace(OURS, baseline_discovery="counted")
    assert row_key(OURS, "random") == row_key(counted, "random")
    assert row_key(OURS, "optimal") != row_key(counted, "optimal")


@pytest.mark.parametrize(("change", "message"), [
    ({"baseline_discovery": "paid"}, "baseline_discovery: must be one of 'free', 'counted'"),
    ({"optimal_ties": True}, "optimal_ties: must be one of 'counted', 'uncounted'"),
    ({"tower_share": 1.5}, "tower_share: must be in [0, 1], got 1.5"),
    ({"tower_share": math.nan}, "tower_share: must be a finite number"),
    ({"backhaul": "yes"}, "backhaul: must be true or false"),
    ({"duration_s": 0.0}, "duration_s: must be > 0"),
])
def test_a_bad_switch_is_one_line_naming_the_field(change: dict[str, Any],
                                                   message: str) -> None:
    with pytest.raises(PresetError) as err:
        replace(OURS, **change)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


@pytest.mark.parametrize(("key", "value", "field"), [
    ("tower_share", 2.0, "tower_share"), ("baseline_discovery", "paid", "baseline_discovery"),
    ("optimal_ties", "some", "optimal_ties")])
def test_the_study_file_rejects_a_bad_switch_naming_it(key: str, value: object,
                                                       field: str) -> None:
    with pytest.raises(CityStudyError, match=rf"^{SCENARIO}: {field}: ") as err:
        load_city_study(SCENARIO, {key: value})
    assert "\n" not in str(err.value)


def test_the_live_run_refuses_a_counted_baseline_discovery() -> None:
    STUDY.check_live_choices()  # the defaults run live
    with pytest.raises(CityStudyError, match="^baseline_discovery: 'counted' is simulated"):
        STUDY.model_copy(update={"baseline_discovery": "counted"}).check_live_choices()


def test_apply_choices_carries_the_new_switches() -> None:
    st = apply_choices(STUDY, SEED, duration_s=5.0)
    assert (st.baseline_discovery, st.optimal_ties, st.tower_share) == \
        ("counted", "uncounted", 1.0)


def test_probe_load_is_the_papers_unseen_and_our_seen_and_the_live_run_refuses_unseen(
        ) -> None:
    assert (SEED.probe_load, OURS.probe_load) == ("unseen", "seen")
    assert SWITCH_AFFECTS["probe_load"] == frozenset({"vivaldi", "meridian", "load_aware"})
    unseen = replace(OURS, probe_load="unseen")
    assert row_key(OURS, "random") == row_key(unseen, "random")  # random measures nothing
    assert row_key(OURS, "meridian") != row_key(unseen, "meridian")
    assert apply_choices(STUDY, SEED, duration_s=5.0).probe_load == "unseen"
    with pytest.raises(CityStudyError, match="^probe_load: 'unseen' is simulated only"):
        STUDY.model_copy(update={"probe_load": "unseen"}).check_live_choices()


def test_vivaldi_rounds_are_a_simulators_synchronous_and_our_staggered(
        ) -> None:
    """The paper is silent on when nodes probe: the seed preset keeps a round-based
    simulator's (every node at once), ours the live daemons' (each at its own phase);
    only the selectors that rank by the nodes' views can change, and live refuses the
    first."""
    assert (SEED.vivaldi_rounds, OURS.vivaldi_rounds) == ("synchronous", "staggered")
    assert SWITCH_AFFECTS["vivaldi_rounds"] == frozenset({"vivaldi", "load_aware"})
    sync = replace(OURS, vivaldi_rounds="synchronous")
    assert row_key(OURS, "meridian") == row_key(sync, "meridian")
    assert row_key(OURS, "vivaldi") != row_key(sync, "vivaldi")
    assert apply_choices(STUDY, SEED, duration_s=5.0).vivaldi_rounds == "synchronous"
    assert STUDY.vivaldi_rounds == "staggered"  # a study file's default: what live does
    with pytest.raises(CityStudyError, match="^vivaldi_rounds: 'synchronous' is simulated"):
        STUDY.model_copy(update={"vivaldi_rounds": "synchronous"}).check_live_choices()
    with pytest.raises(PresetError, match="^vivaldi_rounds: must be one of"):
        replace(OURS, vivaldi_rounds="sometimes")


def test_staggered_nodes_round_at_their_own_phase_and_rank_by_their_own_view() -> None:
    """Staggered: a node's round refreshes its view alone, at a phase drawn once per city
    (the same for every selector), so two nodes asked at one instant rank by different
    snapshots; synchronous: every node's view is the one snapshot of the last round."""
    def sim(rounds: str, selector: str = "vivaldi") -> CitySimulation:
        return CitySimulation(apply_choices(STUDY, replace(OURS, vivaldi_rounds=rounds),
                                            duration_s=3.0), selector, 0.5)

    staggered = sim("staggered")
    phases = staggered.round_phase_s
    assert all(0.0 <= p < STUDY.node_probe_s for p in phases.values())
    assert len(set(phases.values())) == len(phases)
    assert sim("staggered", "load_aware").round_phase_s == phases
    a, b = staggered.names[0], staggered.names[1]
    staggered._probe_round([a])
    assert staggered.views[a][a] == staggered.node_vivaldi[a].coord
    assert staggered.views[b][a] != staggered.views[a][a]  # b has not rounded since
    staggered._probe_round([b])
    assert staggered.views[b][a] == staggered.views[a][a]
    synchronous = sim("synchronous")
    synchronous._probe_round(synchronous.names)
    assert all(v is synchronous.views[a] for v in synchronous.views.values())
    assert synchronous.run() != sim("staggered").run()  # the rows differ by it


@pytest.mark.parametrize("probe_load", ["seen", "unseen"])
def test_what_a_measurement_sees_of_a_loaded_node_follows_probe_load(probe_load: str) -> None:
    """Meridian's probes, the nodes' Vivaldi probes and a client's probe of a node carry
    the node's load term when it is seen, the network distance alone when not; a task's
    latency (the metric) carries it either way."""
    sim = CitySimulation(apply_choices(STUDY, replace(OURS, probe_load=probe_load),
                                       duration_s=5.0), "meridian", 0.5)
    a, b = sim.names[0], sim.names[1]
    sim.load[a] = sim.slots[a]  # full: its load term is the largest
    load = sim.load_term(a)
    assert load > 1.0
    client = sim.clients[0]
    static = sim._static_from_client(client)[a]
    seen = probe_load == "seen"
    assert sim._measure(client.name, a) == pytest.approx(static + (load if seen else 0.0))
    assert sim._measure(a, b) == pytest.approx(sim._node_static(a, b) + (load if seen else 0.0))
    assert sim.measured_load(a) == (load if seen else 0.0)


# -- the switches in the simulator (fixed seeds) ---------------------------------------------


def _run(choices: Any, selector: str, ratio: float = 0.1,
         duration_s: float = 8.0) -> tuple[dict[str, Any], CitySimulation]:
    sim = CitySimulation(apply_choices(STUDY, choices, duration_s=duration_s), selector, ratio)
    return sim.run(), sim


def test_counted_baseline_discovery_adds_a_query_and_answer_per_node_per_selection() -> None:
    free, free_sim = _run(OURS, "optimal")
    paid, paid_sim = _run(replace(OURS, baseline_discovery="counted"), "optimal")
    nodes, clients = len(paid_sim.names), len(paid_sim.clients)
    selections = sum(c.tally.selections for c in paid_sim.clients)
    assert selections == sum(c.tally.selections for c in free_sim.clients) > 0
    # the same walk: only the count moves, by exactly 2 N messages per query at the client
    added = (paid["client_messages"] - free["client_messages"]) * clients
    assert added == pytest.approx(2 * nodes * selections)
    assert paid_sim.messages.by_kind["discovery"] == 2 * nodes * selections
    for m in ("optimal_rate", "mean_latency_ms", "delivered", "client_lost"):
        assert paid[m] == free[m]
    assert paid["node_total"] > free["node_total"]


def test_counted_baseline_discovery_leaves_other_selectors_alone() -> None:
    counted = replace(OURS, baseline_discovery="counted")
    assert _run(counted, "random")[0] == _run(OURS, "random")[0]


def test_is_optimal_counts_ties_or_only_the_reference() -> None:
    rtt = {"b": 1.0, "a": 1.0, "c": 2.0}
    assert reference_node(rtt) == "a"  # the lowest RTT, the first name among equals
    assert is_optimal(rtt, "b", ties=True) and not is_optimal(rtt, "b", ties=False)
    assert is_optimal(rtt, "a", ties=True) and is_optimal(rtt, "a", ties=False)
    assert not is_optimal(rtt, "c", ties=True)
    rng = random.Random(3)
    for _ in range(200):  # uncounted ties never count a pick the counted rate would not
        r = {n: float(rng.randint(0, 3)) for n in "abcde"}
        pick = rng.choice("abcde")
        assert is_optimal(r, pick, ties=True) >= is_optimal(r, pick, ties=False)
    tally = ClientTally()
    tally.score(rtt, "b", 0.0, ties=False)
    tally.score(rtt, "b", 0.0)
    assert (tally.selections, tally.optimal_hits) == (2, 1)


@pytest.mark.parametrize("selector", ["random", "optimal", "vivaldi"])
def test_uncounted_ties_never_raise_the_optimal_rate(selector: str) -> None:
    # the seed preset's eq. 10: every node at a tower ties; the picks stay the same
    counted, _ = _run(replace(SEED, optimal_ties="counted"), selector, 0.5)
    uncounted, _ = _run(SEED, selector, 0.5)
    assert uncounted["optimal_rate"] <= counted["optimal_rate"]
    assert uncounted["client_messages"] == counted["client_messages"]
    if selector == "random":  # 29 nodes tie: counted, random is optimal every time
        assert counted["optimal_rate"] == 1.0 and uncounted["optimal_rate"] < 0.2


def test_tower_share_puts_every_node_at_a_tower_or_part_of_them() -> None:
    every = make_city(random.Random(5), at_tower_fraction=1.0)
    assert all(s.position == t for s, t in zip(every.fog_nodes, every.towers, strict=True))
    none = make_city(random.Random(5), at_tower_fraction=0.0)
    assert not any(s.position == t for s, t in zip(none.fog_nodes, none.towers, strict=True))
    # the default study's city is today's (the share 0.5 draws as before)
    st = apply_choices(STUDY, OURS)
    assert st.layout() == make_city(random.Random(f"city-{st.seed}"), st.fog_nodes,
                                    st.total_slots, st.area_km2)
    all_st = apply_choices(STUDY, replace(OURS, tower_share=1.0))
    lay = all_st.layout()
    assert all(s.position == t for s, t in zip(lay.fog_nodes, lay.towers, strict=True))
    assert [s.slots for s in lay.fog_nodes] == [s.slots for s in st.layout().fog_nodes]


# -- "decided by": pure, and the table builder on a fake run ---------------------------------


def test_decided_by_names_the_flips_that_change_the_verdict() -> None:
    assert decided_by("reproduced", {"a": "not"}) is None
    assert deciding_switches("not", {"a": "not", "b": "partly", "c": "reproduced"}) == ["b", "c"]
    assert decided_by("not", {"a": "not", "b": "partly"}) == "b → partly"
    assert decided_by("partly", {"a": "partly", "b": "partly"}, ["d"]) == \
        "none of the switches decides it (tried: a, b); not run: d"
    assert decided_by("not", {}) == "none of the switches decides it (tried: none)"


RATIOS = (0.1, 1.0)
SELECTORS = ("optimal", "random", "vivaldi", "meridian")


def _rows(changed: dict[tuple[str, str], float] | None = None) -> list[dict[str, Any]]:
    """A fake configuration's rows: every metric 1.0, `changed` by (selector, metric)."""
    changed = changed or {}
    return [{"selector": s, "ratio": r} | {m: changed.get((s, m), 1.0) for m in METRIC_COLUMNS}
            for s in SELECTORS for r in RATIOS]


def _fake_run(flip: str | None, base: str = "seed") -> dict[str, list[dict[str, Any]]]:
    """Every configuration's rows alike, except `base`+`flip`, where the baseline sends
    the most messages (Fig. 4a's 'baseline-most' claim then holds)."""
    rows = {name: _rows() for name in configurations()}
    if flip is not None:
        rows[flipped_name(base, flip)] = _rows({("optimal", "client_messages"): 5.0})
    return rows


def _entry(table: list[dict[str, Any]], cid: str) -> dict[str, Any]:
    return next(e for e in table if e["id"] == cid)


def test_configurations_flip_each_preset_toward_the_other() -> None:
    names = configurations()
    for base in PRESETS:
        other = PRESETS[other_preset(base)]
        for s in PRESETS[base].__dataclass_fields__:
            flipped = names[flipped_name(base, s)]
            assert getattr(flipped, s) == getattr(other, s)
    assert len(names) == 2 + 2 * len(PRESETS["ours"].__dataclass_fields__)
    capped = inert_switches(ClaimsRun(duration_cap_s=30.0))
    assert capped == {"seed": {"duration_s"}, "ours": {"duration_s"}}
    assert inert_switches(ClaimsRun(duration_cap_s=None)) == {"seed": set(), "ours": set()}


def test_a_flip_that_changes_a_verdict_is_named() -> None:
    table = claims_table(_fake_run("tower_share"), "seed")
    e = _entry(table, "4a-baseline-most")
    assert e["seed"]["verdict"] == "not"
    assert e["seed"]["flips"]["tower_share"] == "reproduced"
    assert e["seed"]["deciding"] == ["tower_share"]
    assert e["seed"]["decided_by"] == e["decided_by"] == "tower_share → reproduced"
    # ours' flips changed nothing: its row says so and names every switch tried
    assert e["ours"]["decided_by"] == \
        "none of the switches decides it (tried: " + ", ".join(e["ours"]["flips"]) + ")"
    assert decided_counts(table, "seed")["decided"] == 1
    assert decided_counts(table, "ours")["decided"] == 0


def test_no_flip_changes_it_the_row_says_so_and_names_what_was_tried() -> None:
    inert = {"seed": {"duration_s"}, "ours": {"duration_s"}}
    table = claims_table(_fake_run(None), "ours", inert)
    for e in table:
        for p in PRESETS:
            if e[p]["verdict"] == "reproduced":
                assert e[p]["decided_by"] is None
                continue
            assert e[p]["deciding"] == []
            assert e[p]["decided_by"].startswith("none of the switches decides it (tried: ")
            assert e[p]["decided_by"].endswith("; not run: duration_s")
            assert e[p]["flips"]["duration_s"] == NOT_RUN
            assert "tower_share" in e[p]["decided_by"]
    counts = decided_counts(table, "ours")
    assert counts["decided"] == 0
    assert counts["undecided"] == counts["not_fully_reproduced"] > 0
    md = markdown(table)
    assert md.count("\n") == 4 * len(CLAIMS) + 17  # claims, decided by, two ablations
    assert "| decided by |" in md and "Ablation: seed preset with one switch" in md
