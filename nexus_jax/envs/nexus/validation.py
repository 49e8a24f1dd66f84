"""Turn user overrides into validated NexusParams: bad values fail here, naming the field."""
from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp
import numpy as np

from nexus_jax.envs.nexus.constants import NUM_ARCHETYPES

_INT_FIELDS = {
    "isolation_window", "proposal_ttl", "work_immunity", "vault_delay", "signal_window",
    "shock_duration", "max_steps", "early_end_after", "reward_mode",
}
_STATIC_FIELDS = {"num_agents", "amount_grid", "ledger_size", "obs_ledger_events", "vault_queue_len"}
_PROBABILITIES = {"p_solar_flare", "p_grid_failure", "early_end_prob", "endowment_jitter"}
_RATES = {  # fractions of a quantity: must lie in [0, 1]
    "isolation_decay", "trust_alpha", "reject_trust_step", "public_betrayal_rate", "trust_decay",
    "shock_severity", "shock_max_fraction", "initial_trust",
    "npc_propose_rate", "npc_signal_rate", "npc_break_rate", "npc_reject_rate", "npc_accept_when_low",
    "npc_memory_decay", "npc_fm_discount",
}
_SEAT_FIELDS = ("archetypes", "behaviours")  # (N,) archetype ids, one per seat
# Per-archetype NPC tables (npc/archetypes.py): one value per Archetype.
NPC_TABLE_FIELDS = (
    "npc_accept_min_give", "npc_accept_jitter", "npc_accept_min_ratio", "npc_accept_when_low", "npc_offer_size",
    "npc_offer_ratio", "npc_propose_rate", "npc_signal_rate", "npc_signal_generosity", "npc_break_rate",
    "npc_reject_rate", "npc_trust_weight", "npc_mirror", "npc_cheat_sensitivity", "npc_fm_discount",
    "npc_need_weight", "npc_bond_weight", "npc_noise",
)
_AT_LEAST_ONE = {"proposal_ttl", "signal_window", "shock_duration", "max_steps", "vault_delay", "isolation_window"}


def _fail(field: str, msg: str):
    raise ValueError(f"NexusParams.{field}: {msg}")


def build_params(cls, overrides: dict[str, Any]):
    from nexus_jax.envs.nexus.params import REWARD_MODES, default_archetypes

    names = {f.name for f in dataclasses.fields(cls)}
    for k in overrides:
        if k not in names:
            _fail(k, f"unknown field (known: {sorted(names)})")
    values = {f.name: f.default for f in dataclasses.fields(cls)}
    values.update(overrides)

    n = values["num_agents"]
    if not isinstance(n, (int, np.integer)) or not 2 <= n <= 64:
        _fail("num_agents", f"must be an int in [2, 64], got {n!r}")
    grid = tuple(float(x) for x in values["amount_grid"])
    if len(grid) < 2 or grid[0] != 0.0 or any(b <= a for a, b in zip(grid, grid[1:])):
        _fail("amount_grid", f"must start at 0 and increase strictly, got {grid}")
    values["amount_grid"] = grid
    for f in ("ledger_size", "obs_ledger_events", "vault_queue_len"):
        if not isinstance(values[f], (int, np.integer)) or values[f] < 1:
            _fail(f, f"must be a positive int, got {values[f]!r}")
    if values["obs_ledger_events"] > values["ledger_size"]:
        _fail("obs_ledger_events", "must not exceed ledger_size")

    if isinstance(values["reward_mode"], str):
        if values["reward_mode"] not in REWARD_MODES:
            _fail("reward_mode", f"must be one of {sorted(REWARD_MODES)}, got {values['reward_mode']!r}")
        values["reward_mode"] = REWARD_MODES[values["reward_mode"]]
    if values["archetypes"] is None:
        values["archetypes"] = default_archetypes(n)
    if values["behaviours"] is None:
        values["behaviours"] = values["archetypes"]

    out = {}
    for name, v in values.items():
        if name in _STATIC_FIELDS:
            out[name] = v
            continue
        arr = np.asarray(v, dtype=np.int32 if name in _INT_FIELDS or name in _SEAT_FIELDS else np.float32)
        if name not in _SEAT_FIELDS and name in _INT_FIELDS and not np.all(arr == np.asarray(v)):
            _fail(name, f"must be an integer, got {v!r}")
        if not np.all(np.isfinite(arr)):
            _fail(name, f"must be finite, got {v!r}")
        if np.any(arr < 0):
            _fail(name, f"must be non-negative, got {v!r}")
        if name in _PROBABILITIES | _RATES and np.any(arr > 1):
            _fail(name, f"must lie in [0, 1], got {v!r}")
        if name in _AT_LEAST_ONE and np.any(arr < 1):
            _fail(name, f"must be >= 1, got {v!r}")
        out[name] = arr

    for f in _SEAT_FIELDS:
        if out[f].shape != (n,):
            _fail(f, f"must have one archetype per seat, shape ({n},), got {out[f].shape}")
        if np.any(out[f] >= NUM_ARCHETYPES):
            _fail(f, f"ids must be < {NUM_ARCHETYPES}")
    for f in ("endowment", "income"):
        if out[f].shape != (NUM_ARCHETYPES, 2):
            _fail(f, f"must have shape ({NUM_ARCHETYPES}, 2), got {out[f].shape}")
    for f in NPC_TABLE_FIELDS:
        if out[f].shape != (NUM_ARCHETYPES,):
            _fail(f, f"must have one value per archetype, shape ({NUM_ARCHETYPES},), got {out[f].shape}")
    if np.any(out["npc_offer_ratio"] <= 0):
        _fail("npc_offer_ratio", "must be > 0")
    if np.any(out["npc_accept_min_ratio"] <= 0):
        _fail("npc_accept_min_ratio", "must be > 0")
    if out["upkeep"].shape != (2,):
        _fail("upkeep", f"must have shape (2,), got {out['upkeep'].shape}")
    if np.any(out["p_solar_flare"] + out["p_grid_failure"] > 1):
        _fail("p_grid_failure", "p_solar_flare + p_grid_failure must not exceed 1")
    if np.any(out["vault_delay"] >= values["vault_queue_len"]):
        _fail("vault_delay", f"must be < vault_queue_len ({values['vault_queue_len']})")
    if np.any(out["reward_mode"] > 1):
        _fail("reward_mode", "must be 0 ('system') or 1 ('own')")
    if np.any(out["signal_trust_multiplier"] * out["trust_alpha"] > 1):
        _fail("signal_trust_multiplier", "signal_trust_multiplier * trust_alpha must not exceed 1")
    if np.any(out["betrayal_multiplier"] * out["trust_alpha"] > 1):
        _fail("betrayal_multiplier", "betrayal_multiplier * trust_alpha must not exceed 1")
    if np.any(out["shock_storm_factor"] * (out["p_solar_flare"] + out["p_grid_failure"]) > 1):
        _fail("shock_storm_factor", "shock_storm_factor * (p_solar_flare + p_grid_failure) must not exceed 1")
    if np.any(out["trust_volume_cap"] < 1):
        _fail("trust_volume_cap", "must be >= 1")
    if np.any(out["obs_scale"] <= 0):
        _fail("obs_scale", "must be > 0")

    return cls(**{k: (v if k in _STATIC_FIELDS else jnp.asarray(v)) for k, v in out.items()})
