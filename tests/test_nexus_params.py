"""Params: invalid configs fail at construction naming the field; defaults match SPEC."""
import numpy as np
import pytest

from nexus_jax.envs.nexus.constants import Archetype
from nexus_jax.envs.nexus.params import NexusParams


@pytest.mark.parametrize("field, value", [
    ("num_agents", 1), ("num_agents", 65), ("num_agents", 2.5),
    ("wait_cost", -0.5), ("proposal_deposit", float("nan")),
    ("p_solar_flare", 1.5), ("p_grid_failure", -0.1), ("early_end_prob", 2.0),
    ("proposal_ttl", 0), ("signal_window", 0), ("max_steps", 0), ("vault_delay", 8),
    ("trust_alpha", 1.2), ("archetypes", (0, 1, 2)), ("archetypes", (0, 1, 2, 9)),
    ("behaviours", (0, 1, 2)), ("behaviours", (0, 1, 2, 9)),
    ("amount_grid", (1.0, 2.0)), ("amount_grid", (0.0, 5.0, 5.0)),
    ("reward_mode", "greedy"), ("upkeep", (1.0, 1.0, 1.0)), ("proposal_ttl", 2.5),
    ("obs_ledger_events", 40),
])
def test_invalid_field_fails_naming_it(field, value):
    with pytest.raises(ValueError, match=rf"NexusParams\.{field}"):
        NexusParams.create(**{field: value})


def test_unknown_field_is_named():
    with pytest.raises(ValueError, match="NexusParams.shock_probability: unknown field"):
        NexusParams.create(shock_probability=0.1)


def test_probabilities_must_not_sum_above_one():
    with pytest.raises(ValueError, match="p_grid_failure"):
        NexusParams.create(p_solar_flare=0.6, p_grid_failure=0.6)


def test_defaults_follow_spec():
    p = NexusParams.create()
    assert p.num_agents == 4 and p.amount_grid == (0, 1, 2, 5, 10, 20, 40)
    assert list(np.asarray(p.archetypes)) == [Archetype.LEARNER, Archetype.BULLY, Archetype.ALTRUIST,
                                              Archetype.TIT_FOR_TAT]
    assert float(p.wait_cost) == 0.5 and int(p.proposal_ttl) == 3 and float(p.trust_alpha) == pytest.approx(0.2)
    assert float(p.p_solar_flare) == pytest.approx(0.05) and float(p.p_grid_failure) == pytest.approx(0.10)
    assert int(p.max_steps) == 100 and int(p.reward_mode) == 0
    seven = NexusParams.create(num_agents=7)
    assert list(np.asarray(seven.archetypes)) == [0, 1, 2, 3, 1, 2, 3]  # archetypes repeat in order
    assert list(np.asarray(seven.behaviours)) == list(np.asarray(seven.archetypes))  # behaviours follow by default
    assert int(NexusParams.create(reward_mode="own").reward_mode) == 1
