"""bench.compact_hedge: the scripted hedge through compact actions, and vault_shaping's return over whole episodes.

Small episodes (20 steps, 8 of them, default shocks): the compact hedge plays only valid actions,
vaults what it should, and `vault_shaping` (with and without a ramp) leaves every episode's return
as SPEC's reward gives it while moving the rewards in time.
"""
import jax.numpy as jnp
import numpy as np

import nexus_jax
from bench.compact_hedge import UNVAULT_C, UNVAULT_E, VAULT_C, VAULT_E, WAIT, compact_hedge, play

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
        rewards, invalid = play(env, hedge, EPISODES, seed=3)
        assert rewards.shape == (STEPS, EPISODES) and not invalid.any()
        out[tuple(kwargs.items())] = rewards
    plain, shaped, ramped = out.values()
    gain = shaped[0] - plain[0]  # VAULT 10 Energy: SPEC charges the utility it takes at once, the shaping does not
    assert (gain > -1e-4).all() and gain.mean() > 1.0
    for r in (shaped, ramped):
        np.testing.assert_allclose(r.sum(0), plain.sum(0), rtol=1e-4, atol=1e-3)
