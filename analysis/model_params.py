"""Map a Scenario onto the exact chain's parameters, or say why it is outside the model."""

from __future__ import annotations

from analysis.ctmc import ModelError, ModelParams
from fogsdn.scenario import Role, Scenario

POLICY_TO_SCHEME: dict[str, str] = {"prioritized": "proposed", "nodiff": "nodiff",
                                    "basic": "basic"}


class OutsideModel(ValueError):
    """The scenario is valid but the CTMC does not describe it; the message says why."""


def model_params_from_scenario(scenario: Scenario) -> ModelParams:
    """The CTMC's parameters for `scenario`, or OutsideModel("reason").

    Exponential task sizes of mean m on a node of rate mu give exponential service
    of rate mu/m. With no OFN every policy sends everything to the FN: `basic`.
    """
    policy = scenario.policy.name
    if policy not in POLICY_TO_SCHEME:
        raise OutsideModel(f"policy {policy!r} is not one of the model's schemes "
                           f"({', '.join(POLICY_TO_SCHEME)})")
    if scenario.nodes_with(Role.CLOUD):
        raise OutsideModel("the scenario has a cloud node; the model has one FN and one OFN")
    fns, ofns = scenario.nodes_with(Role.FN), scenario.nodes_with(Role.OFN)
    if len(fns) != 1:
        raise OutsideModel(f"the model has exactly one FN, the scenario has {len(fns)}")
    if len(ofns) > 1:
        raise OutsideModel(f"the model has at most one OFN, the scenario has {len(ofns)}")
    size = scenario.workload.size
    if size.distribution != "exponential":
        raise OutsideModel(f"task sizes are {size.distribution}; the model needs exponential")
    fn = fns[0]
    ofn = ofns[0] if ofns else None
    scheme = POLICY_TO_SCHEME[policy] if ofn is not None else "basic"
    churn = scenario.churn
    try:
        return ModelParams(
            scheme=scheme,  # type: ignore[arg-type]
            lam_hp=scenario.workload.lambda_hp,
            lam_lp=scenario.workload.lambda_lp,
            mu_f=fn.mu / size.mean,
            mu_of=(ofn.mu / size.mean) if ofn is not None else 0.0,
            cap_f=fn.capacity,
            cap_o=ofn.capacity if ofn is not None else 0,
            eta=churn.eta,
            xi=churn.xi,
            alpha=scenario.policy.alpha,
            leave=churn.leave.value,  # type: ignore[arg-type]
            servers_f=fn.servers.value,  # type: ignore[arg-type]
            servers_o=(ofn.servers.value if ofn is not None else "single"),  # type: ignore[arg-type]
            deadline=scenario.deadline_ms,
            initial_available=churn.initial != "unavailable",
        )
    except ModelError as err:
        raise OutsideModel(str(err)) from None
