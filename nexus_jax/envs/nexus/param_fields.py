"""Turn user overrides into validated NexusParams: bad values fail here, naming the field.

Every field is checked for kind, shape, finiteness and range (`nexus_jax.base.fields`) before
any array is made; then the cross-field rules (probabilities that must sum to at most 1, a
vault delay shorter than its queue) and the float32 bounds: holdings, observations and
rewards must stay finite for `max_steps` steps, so an `obs_scale` that would put inf in the
observation fails here rather than in the policy's loss.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp
import numpy as np

from nexus_jax.base.fields import INT32_MAX, Field, FieldError, check, finite_bound, static_grid, static_int
from nexus_jax.envs.nexus.constants import NUM_ACTION_TYPES, NUM_ARCHETYPES, Archetype

REWARD_MODES = {"system": 0, "own": 1}
REWARD_UTILITY = {"change": 0, "level": 1}
_DEFAULT_SEATS = (Archetype.LEARNER, Archetype.BULLY, Archetype.ALTRUIST, Archetype.TIT_FOR_TAT)


def default_archetypes(num_agents: int) -> tuple[int, ...]:
    """Seat 0 LEARNER, then BULLY, ALTRUIST, TIT_FOR_TAT repeating in that order [spec]."""
    cycle = _DEFAULT_SEATS[1:]
    return (int(Archetype.LEARNER),) + tuple(int(cycle[i % 3]) for i in range(num_agents - 1))


_FAIL = FieldError("NexusParams")
# The shape-giving fields (amount_grid: at least 2 levels, from 0, strictly increasing).
_STATIC_FIELDS = {"num_agents": Field("int", (), lo=2, hi=64), "amount_grid": Field("float", ("L",), lo=0.0),
                  "ledger_size": Field("int", (), lo=1), "obs_ledger_events": Field("int", (), lo=1),
                  "vault_queue_len": Field("int", (), lo=1), "signal_prepay": Field("int", (), lo=0, hi=1)}
_SEAT_FIELDS = ("archetypes", "behaviours")  # (N,) archetype ids, one per seat
# Per-archetype NPC tables (npc/archetypes.py): one value per Archetype.
NPC_TABLE_FIELDS = (
    "npc_accept_min_give", "npc_accept_jitter", "npc_accept_min_ratio", "npc_accept_when_low", "npc_offer_size",
    "npc_offer_ratio", "npc_propose_rate", "npc_signal_rate", "npc_signal_generosity", "npc_break_rate",
    "npc_signal_cap", "npc_honour_delay", "npc_min_trust", "npc_trust_volume",
    "npc_reject_rate", "npc_trust_weight", "npc_mirror", "npc_cheat_sensitivity", "npc_fm_discount",
    "npc_need_weight", "npc_bond_weight", "npc_noise",
)
_NPC_RATES = {"npc_propose_rate", "npc_signal_rate", "npc_break_rate", "npc_reject_rate", "npc_accept_when_low",
              "npc_fm_discount", "npc_min_trust"}
_NPC_POSITIVE = {"npc_offer_ratio", "npc_accept_min_ratio"}
_UNIT_SCALARS = {  # probabilities and fractions of a quantity: [0, 1]
    "endowment_jitter", "initial_trust", "isolation_decay", "trust_alpha", "reject_trust_step",
    "public_betrayal_rate", "trust_decay", "trust_fair_ratio", "shock_reach", "p_solar_flare", "p_grid_failure", "shock_severity",
    "shock_max_fraction", "early_end_prob", "npc_memory_decay", "vault_shaping",
}
_INT_SCALARS = {  # name -> lowest value
    "isolation_window": 1, "proposal_ttl": 1, "work_immunity": 0, "vault_delay": 1, "signal_window": 1,
    "shock_duration": 1, "max_steps": 1, "early_end_after": 0, "vault_shaping_ramp": 0,
}


def field_spec(name: str) -> Field:
    """What a field accepts; shapes name 'N' (seats), 'A' (archetypes) and 'L' (amount levels)."""
    if name in _STATIC_FIELDS:
        return _STATIC_FIELDS[name]
    if name in _SEAT_FIELDS:
        return Field("int", ("N",), lo=0, hi=NUM_ARCHETYPES - 1)
    if name == "behaviour_shuffle":
        return Field("int", ("N",), lo=0, hi=1)
    if name in ("endowment", "income"):
        return Field("float", ("A", 2), lo=0.0)
    if name == "upkeep":
        return Field("float", (2,), lo=0.0)
    if name == "wait_cost_types":
        return Field("float", (NUM_ACTION_TYPES,), lo=0.0)
    if name in NPC_TABLE_FIELDS:
        if name in _NPC_RATES:
            return Field("float", ("A",), lo=0.0, hi=1.0)
        return Field("float", ("A",), lo=0.0, lo_open=name in _NPC_POSITIVE)
    if name in _INT_SCALARS:
        return Field("int", (), lo=_INT_SCALARS[name])
    if name in ("reward_mode", "reward_utility", "npc_offer_by_need"):
        return Field("int", (), lo=0, hi=1)
    if name in _UNIT_SCALARS:
        return Field("float", (), lo=0.0, hi=1.0)
    if name == "trust_volume_cap":
        return Field("float", (), lo=1.0)
    if name == "obs_scale":
        return Field("float", (), lo=0.0, lo_open=True)
    return Field("float", (), lo=0.0)


def build_params(cls, overrides: dict[str, Any]):
    """-> cls(**validated values); raises TypeError/ValueError `NexusParams.<field>: ...` on the first bad field."""
    names = [f.name for f in dataclasses.fields(cls)]
    for k in overrides:
        if k not in names:
            _FAIL.value(k, f"unknown field (known: {sorted(names)})")
    values = {f.name: f.default for f in dataclasses.fields(cls)}
    values.update(overrides)

    grid = static_grid(_FAIL, "amount_grid", values["amount_grid"])
    statics = {f: static_int(_FAIL, f, values[f], spec.lo, spec.hi if spec.hi is not None else INT32_MAX)
               for f, spec in _STATIC_FIELDS.items() if f != "amount_grid"}
    statics["amount_grid"] = grid
    n = statics["num_agents"]
    if statics["obs_ledger_events"] > statics["ledger_size"]:
        _FAIL.value("obs_ledger_events", f"must not exceed ledger_size ({statics['ledger_size']}), "
                                         f"got {statics['obs_ledger_events']}")

    for field, modes in (("reward_mode", REWARD_MODES), ("reward_utility", REWARD_UTILITY)):
        mode = values[field]
        if isinstance(mode, str):
            if mode not in modes:
                _FAIL.value(field, f"expected one of {sorted(modes)} or 0/1, got {mode!r}")
            values[field] = modes[mode]
    if values["archetypes"] is None:
        values["archetypes"] = default_archetypes(n)
    if values["behaviours"] is None:
        values["behaviours"] = values["archetypes"]
    if values["behaviour_shuffle"] is None:
        values["behaviour_shuffle"] = (0,) * n

    dims = {"N": n, "A": NUM_ARCHETYPES}
    out = {name: check(_FAIL, name, values[name], field_spec(name), dims)
           for name in names if name not in _STATIC_FIELDS}
    _cross_field(out, statics)
    _float32_bounds(out, n)
    return cls(**statics, **{k: jnp.asarray(v) for k, v in out.items()})


def _cross_field(out: dict, statics: dict) -> None:
    """Rules between fields (each field alone is already in range)."""
    if out["p_solar_flare"] + out["p_grid_failure"] > 1:
        _FAIL.value("p_grid_failure", f"p_solar_flare + p_grid_failure must not exceed 1, got "
                                      f"{float(out['p_solar_flare']):g} + {float(out['p_grid_failure']):g}")
    if out["vault_delay"] >= statics["vault_queue_len"]:
        _FAIL.value("vault_delay", f"must be < vault_queue_len ({statics['vault_queue_len']}), "
                                   f"got {int(out['vault_delay'])}")
    for f in ("signal_trust_multiplier", "betrayal_multiplier"):
        if out[f] * out["trust_alpha"] > 1:
            _FAIL.value(f, f"{f} * trust_alpha must not exceed 1, got {float(out[f]):g} * "
                           f"{float(out['trust_alpha']):g}")
    if out["shock_storm_factor"] * (out["p_solar_flare"] + out["p_grid_failure"]) > 1:
        _FAIL.value("shock_storm_factor", "shock_storm_factor * (p_solar_flare + p_grid_failure) must not exceed 1, "
                                          f"got {float(out['shock_storm_factor']):g}")


def _float32_bounds(out: dict, n: int) -> None:
    """Holdings, observations and rewards must stay finite in float32 over a whole episode.

    The bound on every seat's holdings together: endowments (with jitter), then per step at
    most each seat's income and WORK gain, and collateral from trades (at most N per seat per
    step) and honoured signals. Observations divide holdings by `obs_scale`; rewards weigh
    changes of utility and collateral, both bounded by the holdings.
    """
    steps = float(out["max_steps"])
    terms = {
        "endowment": n * float(out["endowment"].max()) * (1.0 + float(out["endowment_jitter"])),
        "income": n * float(out["income"].max()) * steps,
        "work_gain": n * float(out["work_gain"]) * steps,
        "initial_collateral": n * float(out["initial_collateral"]),
        "trade_collateral_bonus": n * n * float(out["trade_collateral_bonus"]) * steps,
        "signal_honour_bonus": n * float(out["signal_honour_bonus"]) * steps,
    }
    holdings = sum(terms.values())
    worst = max(terms, key=terms.get)
    finite_bound(_FAIL, worst, holdings, f"the seats' holdings (largest term: {worst}, up to {_scalar(out[worst]):g})")
    scale = float(out["obs_scale"])
    finite_bound(_FAIL, "obs_scale", holdings / scale,
                 f"observations (holdings up to {holdings:.3g} / obs_scale {scale:g})")
    weights = {f: float(out[f]) * holdings for f in ("w_utility", "w_collateral")}
    weights["w_utility"] *= 1.0 + 2.0 * float(out["vault_shaping"])  # the shaping term moves at most 2x the holdings
    weights.update(w_resilience=float(out["w_resilience"]), invalid_penalty=float(out["invalid_penalty"]))
    worst = max(weights, key=weights.get)
    finite_bound(_FAIL, worst, sum(weights.values()), f"a step's reward (largest term: {worst}={float(out[worst]):g})")


def _scalar(arr: np.ndarray):
    return float(arr) if arr.ndim == 0 else float(arr.max())
