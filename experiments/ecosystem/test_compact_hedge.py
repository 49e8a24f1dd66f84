"""experiments.ecosystem.compact_hedge / compact_payoff / obs_scale: the unmasked learner's diagnostics on nexus-v0.

The scripted hedge through compact actions, and vault_shaping's return over whole episodes; the
closed-loop compact policies of experiments.ecosystem.compact_payoff; experiments.ecosystem.obs_scale's per-block statistics.

Small episodes (20 steps, 8 of them, default shocks): the compact hedge plays only valid actions,
vaults what it should, and `vault_shaping` (with and without a ramp) leaves every episode's return
as SPEC's reward gives it while moving the rewards in time; the payoff policies pick only what the
mask allows; a keyed policy (an NPC heuristic in seat 0) leaves the env's keys as they were.
"""
import jax.numpy as jnp
import numpy as np

import nexus_jax
import pytest
from experiments.ecosystem.compact_hedge import UNVAULT_C, UNVAULT_E, VAULT_C, VAULT_E, WAIT, compact_hedge, play
from experiments.ecosystem.compact_payoff import WORK_E, first_valid, heuristic, heuristic_env, when_valid, work_surplus
from nexus_jax.envs.nexus import Archetype
from experiments.ecosystem.obs_scale import block_stats, first_layers, observations
from nexus_jax.envs.nexus import observation_layout

pytestmark = pytest.mark.slow  # a study's reproduction: the full tier (python -m pytest -m slow; CI runs it)

STEPS, EPISODES = 20, 8


def test_compact_hedge_schedule():
    act = compact_hedge(2, last_unvault=15)
    picks = [int(act(jnp.int32(t), None, None)) for t in range(STEPS)]
    assert picks[:4] == [VAULT_E, VAULT_E, VAULT_C, VAULT_C]
    assert picks[12:16] == [UNVAULT_E, UNVAULT_E, UNVAULT_C, UNVAULT_C]
    assert set(picks[4:12] + picks[16:]) == {WAIT}


def test_vault_shaping_keeps_every_episode_return():
    hedge = compact_hedge(2, last_unvault=15)
    out = {}
    for kwargs in ({}, {"vault_shaping": 1.0}, {"vault_shaping": 1.0, "vault_shaping_ramp": 5}):
        env = nexus_jax.make("nexus-v0", action_format="compact", max_steps=STEPS, **kwargs)
        rewards, invalid, picks = play(env, hedge, EPISODES, seed=3)
        assert (picks[:2] == VAULT_E).all()
        assert rewards.shape == (STEPS, EPISODES) and not invalid.any()
        out[tuple(kwargs.items())] = rewards
    plain, shaped, ramped = out.values()
    gain = shaped[0] - plain[0]  # VAULT 10 Energy: SPEC charges the utility it takes at once, the shaping does not
    assert (gain > -1e-4).all() and gain.mean() > 1.0
    for r in (shaped, ramped):
        np.testing.assert_allclose(r.sum(0), plain.sum(0), rtol=1e-4, atol=1e-3)


def test_payoff_policies_pick_only_allowed_actions():
    env = nexus_jax.make("nexus-v0", action_format="compact", max_steps=STEPS)
    accept_any = first_valid(env, list(range(1, env.default_params.num_agents)))  # ACCEPT k = 1..N-1
    for act in (when_valid(env, WORK_E), when_valid(env, 10), accept_any, work_surplus(env, 0.0)):
        rewards, invalid, picks = play(env, act, EPISODES, seed=3)
        assert rewards.shape == picks.shape == (STEPS, EPISODES) and not invalid.any()
        assert (picks != WAIT).any()
    _, _, picks = play(env, work_surplus(env, 1e6), EPISODES, seed=3)  # a gap no holding reaches: WAIT only
    assert (picks == WAIT).all()


def test_heuristic_in_seat_0_keeps_the_env_keys():
    env = heuristic_env("nexus-v0", int(Archetype.RECIPROCATOR), max_steps=STEPS)
    assert int(env.default_params.behaviours[0]) == int(Archetype.RECIPROCATOR)
    wait = play(env, lambda t, s, p: jnp.int32(0), EPISODES, seed=3)[0]
    wait_keyed = play(env, lambda t, s, p, k: jnp.int32(0), EPISODES, seed=3, keyed=True)[0]
    np.testing.assert_array_equal(wait_keyed, wait)  # the act keys are drawn beside the env's, not from them
    rewards, _, picks = play(env, heuristic(env), EPISODES, seed=3, keyed=True)
    again = play(env, heuristic(env), EPISODES, seed=3, keyed=True)[2]
    np.testing.assert_array_equal(picks, again)
    assert (picks != 0).mean() > 0.2 and not np.array_equal(rewards, wait)  # it trades, and that moves the rewards


def test_obs_scale_blocks_cover_the_observation():
    env = nexus_jax.make("nexus-v0", action_format="compact", max_steps=5)
    obs = observations(env, 4, seed=0)
    assert obs.shape == (5 * 4, env.observation_space(env.agents[0]).shape[0])
    blocks = block_stats(obs, observation_layout(env.default_params))
    assert sum(b["size"] for b in blocks.values()) == obs.shape[1]
    assert blocks["time"]["abs_max"] == (5 - 1) / 5  # step / max_steps over steps 0..4
    pre = first_layers(obs, env.action_space(env.agents[0]).n, seed=0)
    assert set(pre) == {"actor", "critic"} and 0 < pre["actor"]["abs_mean"] < 10
