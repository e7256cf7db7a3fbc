"""Seed 003's study as the paper writes it, and as we run it (pure data).

Every modelling choice that separates the two is one typed switch of `StudyChoices`
(listed once, here, for the one-at-a-time `ablation`); a preset is one value of it.
Where the paper is silent, docs/coordinates.md states the value used and why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Literal, get_args, get_origin, get_type_hints

from fogsdn.city.study_spec import CityStudy
from fogsdn.measure.claim_stats import ablation, differing


class PresetError(ValueError):
    """An unknown preset or switch; the message names it."""


@dataclass(frozen=True)
class StudyChoices:
    """The switches, each tabulated with both presets' values in docs/coordinates.md (Seed
    003 as written). `duration_s`: simulated seconds per point; `task_deadline_ms`: a
    task answered later counts as lost; `baseline_discovery`: the omniscient baseline's
    query free, or counted as a query to every fog node and its answer; `optimal_ties`:
    a pick tying the best RTT counts as optimal or not; `tower_share`: the share of fog
    nodes standing at their tower; `probe_load`: whether the coordinate systems'
    measurements (probes, Meridian's rings, Vivaldi's samples) see a node's load term
    or only the network distance; `vivaldi_rounds`: the fog nodes' Vivaldi probe rounds
    all at once with one shared view, or each node at its own phase with its own view.
    Checked on construction (`PresetError` names the field)."""

    backhaul: bool
    propagation_ms_per_km: float
    optimal_reference: Literal["current", "static"]
    vivaldi: Literal["serf", "plain"]
    meridian_termination: Literal["wong", "seed"]
    duration_s: float
    task_deadline_ms: float
    baseline_discovery: Literal["free", "counted"]
    optimal_ties: Literal["counted", "uncounted"]
    tower_share: float
    probe_load: Literal["seen", "unseen"]
    vivaldi_rounds: Literal["staggered", "synchronous"]

    def __post_init__(self) -> None:
        hints = get_type_hints(StudyChoices)
        for f in fields(self):
            value, hint = getattr(self, f.name), hints[f.name]
            if get_origin(hint) is Literal:
                if value not in get_args(hint):
                    known = ", ".join(repr(a) for a in get_args(hint))
                    raise PresetError(f"{f.name}: must be one of {known}, got {value!r}")
            elif hint is bool:
                if not isinstance(value, bool):
                    raise PresetError(f"{f.name}: must be true or false, got {value!r}")
            elif isinstance(value, bool) or not isinstance(value, int | float) \
                    or not math.isfinite(value):
                raise PresetError(f"{f.name}: must be a finite number, got {value!r}")
            elif f.name == "tower_share" and not 0 <= value <= 1:
                raise PresetError(f"tower_share: must be in [0, 1], got {value!r}")
            elif f.name != "tower_share" and not value > 0:
                raise PresetError(f"{f.name}: must be > 0, got {value!r}")


# which selectors' rows a switch can change (None: all); the ablation reuses the other
# selectors' rows instead of running them again
SWITCH_AFFECTS: dict[str, frozenset[str] | None] = {
    "backhaul": None,
    "propagation_ms_per_km": None,
    "optimal_reference": None,  # the scores of every selector compare with the optimum
    "vivaldi": frozenset({"vivaldi", "load_aware"}),
    "meridian_termination": frozenset({"meridian"}),
    "duration_s": None,
    "task_deadline_ms": None,
    "baseline_discovery": frozenset({"optimal"}),  # only the baseline's queries
    "optimal_ties": None,
    "tower_share": None,
    # only what measures: the two coordinate systems and ours (which probes)
    "probe_load": frozenset({"vivaldi", "meridian", "load_aware"}),
    "vivaldi_rounds": frozenset({"vivaldi", "load_aware"}),  # who ranks by the views
}

PRESETS: dict[str, StudyChoices] = {
    "seed": StudyChoices(backhaul=False, propagation_ms_per_km=0.005,
                         optimal_reference="static", vivaldi="plain",
                         meridian_termination="seed", duration_s=600.0,
                         task_deadline_ms=50.0, baseline_discovery="counted",
                         optimal_ties="uncounted", tower_share=1.0, probe_load="unseen",
                         vivaldi_rounds="synchronous"),
    "ours": StudyChoices(backhaul=True, propagation_ms_per_km=1.0,
                         optimal_reference="current", vivaldi="serf",
                         meridian_termination="wong", duration_s=60.0,
                         task_deadline_ms=100.0, baseline_discovery="free",
                         optimal_ties="counted", tower_share=0.5, probe_load="seen",
                         vivaldi_rounds="staggered"),
}

SWITCHES: tuple[str, ...] = tuple(f.name for f in fields(StudyChoices))

# the seed's selectors (ours, load_aware, is not in the paper)
SEED_SELECTORS: tuple[str, ...] = ("optimal", "random", "vivaldi", "meridian")


def preset(name: str) -> StudyChoices:
    if name not in PRESETS:
        raise PresetError(f"preset: unknown {name!r} (known: {', '.join(PRESETS)})")
    return PRESETS[name]


def apply_choices(study: CityStudy, choices: StudyChoices, *, seed: int | None = None,
                  duration_s: float | None = None) -> CityStudy:
    """The full-scale study these choices run (`duration_s` caps the preset's point
    length for a bounded run; `seed` replaces the study's seed for a replication)."""
    full = study.at_full_scale()
    latency = dict(full.latency) | {"backhaul": choices.backhaul,
                                    "propagation_ms_per_km": choices.propagation_ms_per_km}
    length = choices.duration_s if duration_s is None else min(duration_s, choices.duration_s)
    return full.model_copy(update={
        "latency": latency, "optimal_reference": choices.optimal_reference,
        "vivaldi": choices.vivaldi, "meridian_termination": choices.meridian_termination,
        "duration_model_s": length, "timeout_ms": choices.task_deadline_ms,
        "baseline_discovery": choices.baseline_discovery,
        "optimal_ties": choices.optimal_ties, "tower_share": choices.tower_share,
        "probe_load": choices.probe_load, "vivaldi_rounds": choices.vivaldi_rounds,
        "seed": study.seed if seed is None else seed})


def row_key(choices: StudyChoices, selector: str) -> tuple[object, ...]:
    """The switches that can change `selector`'s rows: two configurations with equal keys
    give that selector the same rows (the ablation runs it once)."""
    return tuple(getattr(choices, s) for s in SWITCHES
                 if SWITCH_AFFECTS[s] is None or selector in (SWITCH_AFFECTS[s] or ()))


__all__ = ["PRESETS", "SEED_SELECTORS", "SWITCHES", "SWITCH_AFFECTS", "PresetError",
           "StudyChoices", "ablation", "apply_choices", "differing", "preset", "row_key"]
